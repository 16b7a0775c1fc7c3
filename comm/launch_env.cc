#include "comm/launch_env.h"

#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace deepnet::comm {
namespace {

// The variables one launcher sets. Empty names are not read.
struct LauncherVars {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};

constexpr LauncherVars kLaunchers[] = {
    {"deepnet", "DEEPNET_RANK", "DEEPNET_WORLD_SIZE", "DEEPNET_LOCAL_RANK", "DEEPNET_LOCAL_SIZE"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"pmix", "PMIX_RANK", "", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", ""},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
};

class EnvReader {
 public:
  explicit EnvReader(const std::function<const char*(const char*)>& getenv) : getenv_(getenv) {}

  // nullopt when unset or empty.
  std::optional<std::string> Get(const char* name) const {
    if (name == nullptr || name[0] == '\0') return std::nullopt;
    const char* value = getenv_(name);
    if (value == nullptr || value[0] == '\0') return std::nullopt;
    return std::string(value);
  }

  // Reads a non-negative integer (positive when `positive`); InvalidArgument naming the variable.
  absl::StatusOr<std::optional<int>> GetInt(const char* name, bool positive) const {
    std::optional<std::string> text = Get(name);
    if (!text) return std::optional<int>();
    int value = 0;
    if (!absl::SimpleAtoi(*text, &value) || value < (positive ? 1 : 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable ", name, "=\"", *text, "\" is not a ",
                       positive ? "positive" : "non-negative", " integer"));
    }
    return std::optional<int>(value);
  }

 private:
  const std::function<const char*(const char*)>& getenv_;
};

// Tasks srun started on this node: SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE), a
// list such as "2(x3),1" (2 tasks on each of the first 3 nodes, then 1), at index SLURM_NODEID.
// nullopt when srun set neither; InvalidArgument naming the variable when it cannot be read.
absl::StatusOr<std::optional<int>> SlurmTasksOnThisNode(const EnvReader& reader) {
  const char* name = "SLURM_STEP_TASKS_PER_NODE";
  std::optional<std::string> list = reader.Get(name);
  if (!list) list = reader.Get(name = "SLURM_TASKS_PER_NODE");
  if (!list) return std::optional<int>();
  absl::StatusOr<std::optional<int>> node = reader.GetInt("SLURM_NODEID", /*positive=*/false);
  if (!node.ok()) return node.status();
  int index = node->value_or(0);
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("environment variable ", name, "=\"", *list,
                                                   "\" is not a list such as 2(x3),1"));
  };
  for (absl::string_view item : absl::StrSplit(*list, ',')) {
    int tasks = 0, repeat = 1;
    const size_t open = item.find("(x");
    if (open != absl::string_view::npos) {
      if (item.back() != ')' ||
          !absl::SimpleAtoi(item.substr(open + 2, item.size() - open - 3), &repeat) || repeat < 1) {
        return bad();
      }
      item = item.substr(0, open);
    }
    if (!absl::SimpleAtoi(item, &tasks) || tasks < 1) return bad();
    if (index < repeat) return std::optional<int>(tasks);
    index -= repeat;
  }
  return absl::InvalidArgumentError(absl::StrCat("environment variable SLURM_NODEID=",
                                                 node->value_or(0), " is beyond ", name, "=\"",
                                                 *list, "\""));
}

// Fills rank/size fields from one launcher's variables; env.launcher stays "none" when its rank
// variable is unset.
absl::Status ReadLauncher(const EnvReader& reader, const LauncherVars& vars, LaunchEnv& env) {
  absl::StatusOr<std::optional<int>> rank = reader.GetInt(vars.rank, /*positive=*/false);
  if (!rank.ok()) return rank.status();
  if (!rank->has_value()) return absl::OkStatus();

  std::string size_name = vars.size;
  absl::StatusOr<std::optional<int>> size = reader.GetInt(vars.size, /*positive=*/true);
  if (size.ok() && !size->has_value() && std::string(vars.launcher) == "pmix") {
    // PMIx itself does not export the job size; Open MPI and some launchers add it.
    // srun --mpi=pmix sets PMIX_RANK but no PMIx size variable; its own SLURM_NTASKS is there.
    for (const char* name :
         {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMIX_JOB_SIZE", "SLURM_STEP_NUM_TASKS",
          "SLURM_NTASKS"}) {
      size = reader.GetInt(name, /*positive=*/true);
      size_name = name;
      if (!size.ok() || size->has_value()) break;
    }
  }
  if (!size.ok()) return size.status();
  if (!size->has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", vars.rank, " is set but the world size (",
                     size_name.empty() ? "OMPI_COMM_WORLD_SIZE/PMIX_SIZE" : size_name, ") is not"));
  }
  if (**rank >= **size) {
    return absl::InvalidArgumentError(absl::StrCat("environment variable ", vars.rank, "=", **rank,
                                                   " is not below ", size_name, "=", **size));
  }
  env.launcher = vars.launcher;
  env.rank = **rank;
  env.world_size = **size;

  absl::StatusOr<std::optional<int>> local_size = reader.GetInt(vars.local_size, true);
  if (!local_size.ok()) return local_size.status();
  const std::string launcher = vars.launcher;
  if (!local_size->has_value() && (launcher == "slurm" || launcher == "pmix")) {
    // srun on several nodes: without this every rank would think it has the world to itself
    // (one node, Gloo bound to loopback).
    local_size = SlurmTasksOnThisNode(reader);
    if (!local_size.ok()) return local_size.status();
  }
  env.local_size = local_size->value_or(env.world_size);
  if (env.local_size > env.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("environment variable ", vars.local_size, "=",
                                                   env.local_size, " exceeds the world size ",
                                                   env.world_size));
  }
  absl::StatusOr<std::optional<int>> local_rank = reader.GetInt(vars.local_rank, false);
  if (!local_rank.ok()) return local_rank.status();
  if (!local_rank->has_value() && launcher == "pmix") {
    local_rank = reader.GetInt("SLURM_LOCALID", false);
    if (!local_rank.ok()) return local_rank.status();
  }
  // Without a local rank, assume one node when everything is local.
  env.local_rank = local_rank->value_or(env.local_size == env.world_size ? env.rank : 0);
  if (env.local_rank >= env.local_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", vars.local_rank, "=", env.local_rank,
                     " is not below the local size ", env.local_size,
                     local_size->has_value() ? absl::StrCat(" (", vars.local_size, ")") : ""));
  }
  return absl::OkStatus();
}

// The variables deepnet-worker sets besides the ranks.
absl::Status ReadControlPlane(const EnvReader& reader, LaunchEnv& env) {
  env.rendezvous = reader.Get("DEEPNET_RENDEZVOUS").value_or("");
  env.control_job_id = reader.Get("DEEPNET_JOB_ID").value_or("");
  env.control_job_uid = reader.Get("DEEPNET_JOB_UID").value_or("");
  absl::StatusOr<std::optional<int>> attempt = reader.GetInt("DEEPNET_ATTEMPT", /*positive=*/true);
  if (!attempt.ok()) return attempt.status();
  env.attempt = attempt->value_or(0);
  if (!env.rendezvous.empty() && (env.control_job_id.empty() || env.attempt == 0)) {
    return absl::InvalidArgumentError(
        "environment variable DEEPNET_RENDEZVOUS is set without DEEPNET_JOB_ID and "
        "DEEPNET_ATTEMPT (its scope)");
  }
  env.token = reader.Get("DEEPNET_TOKEN").value_or("");
  env.ca_cert_file = reader.Get("DEEPNET_CA_CERT").value_or("");
  env.tls_server_name = reader.Get("DEEPNET_TLS_SERVER_NAME").value_or("");
  env.advertise_address = reader.Get("DEEPNET_ADVERTISE_ADDRESS").value_or("");
  absl::StatusOr<std::optional<int>> device = reader.GetInt("DEEPNET_CUDA_DEVICE", false);
  if (!device.ok()) return device.status();
  env.cuda_device = device->value_or(-1);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LaunchEnv> DetectLaunchEnv(const std::function<const char*(const char*)>& getenv) {
  EnvReader reader(getenv);
  LaunchEnv env;
  for (const LauncherVars& vars : kLaunchers) {
    if (absl::Status s = ReadLauncher(reader, vars, env); !s.ok()) return s;
    if (env.launcher != "none") break;
  }

  std::optional<std::string> addr = reader.Get("MASTER_ADDR");
  absl::StatusOr<std::optional<int>> port = reader.GetInt("MASTER_PORT", /*positive=*/true);
  if (!port.ok()) return port.status();
  if (addr.has_value() != port->has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", addr ? "MASTER_ADDR" : "MASTER_PORT",
                     " is set without ", addr ? "MASTER_PORT" : "MASTER_ADDR"));
  }
  if (addr) {
    if (**port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable MASTER_PORT=", **port, " is not a TCP port"));
    }
    env.master_addr = *addr;
    env.master_port = **port;
  }

  if (absl::Status s = ReadControlPlane(reader, env); !s.ok()) return s;
  if (!env.control_job_id.empty()) {
    env.job_id = absl::StrCat("deepnet-", env.control_job_id, ".", env.attempt);
  } else if (std::optional<std::string> id = reader.Get("OMPI_MCA_ess_base_jobid")) {
    env.job_id = "ompi-" + *id;
  } else if (std::optional<std::string> ns = reader.Get("PMIX_NAMESPACE")) {
    env.job_id = "pmix-" + *ns;
  } else if (std::optional<std::string> job = reader.Get("SLURM_JOB_ID")) {
    env.job_id = absl::StrCat("slurm-", *job, ".", reader.Get("SLURM_STEP_ID").value_or("0"));
  }
  return env;
}

absl::StatusOr<int> SelectCudaDevice(const LaunchEnv& env, int visible_devices) {
  if (visible_devices < 1) {
    return absl::InvalidArgumentError(
        "runtime.device is cuda but no CUDA device is visible (check CUDA_VISIBLE_DEVICES and "
        "the driver)");
  }
  if (env.cuda_device >= 0) {
    if (env.cuda_device >= visible_devices) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable DEEPNET_CUDA_DEVICE=", env.cuda_device,
                       " is not below the ", visible_devices, " visible CUDA device(s)"));
    }
    return env.cuda_device;
  }
  return env.local_rank % visible_devices;
}

}  // namespace deepnet::comm
