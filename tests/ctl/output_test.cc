#include "ctl/output.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <sstream>

#include "absl/time/time.h"
#include "ctl/exit_codes.h"
#include "ctl/format.h"
#include "ctl/progress.h"
#include "ctl/worker_table.h"
#include "tests/ctl/fake_job_service.h"

namespace deepnet::ctl {
namespace {

using google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using testing::MakeJob;
using ::testing::Not;

TEST(CtlExitCodesTest, MapsEveryStatusClass) {
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::OK), 0);
  for (auto code : {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::FAILED_PRECONDITION,
                    grpc::StatusCode::ALREADY_EXISTS, grpc::StatusCode::OUT_OF_RANGE}) {
    EXPECT_EQ(ExitCodeFor(code), 3) << code;
  }
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::NOT_FOUND), 4);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::UNAUTHENTICATED), 5);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::PERMISSION_DENIED), 5);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::UNAVAILABLE), 6);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::DEADLINE_EXCEEDED), 6);
  for (auto code : {grpc::StatusCode::INTERNAL, grpc::StatusCode::UNKNOWN,
                    grpc::StatusCode::UNIMPLEMENTED, grpc::StatusCode::RESOURCE_EXHAUSTED,
                    grpc::StatusCode::CANCELLED, grpc::StatusCode::DATA_LOSS}) {
    EXPECT_EQ(ExitCodeFor(code), 7) << code;
  }
}

TEST(CtlFormatTest, DurationsAndSizesAreHumanReadable) {
  EXPECT_EQ(FormatDuration(-5), "0s");
  EXPECT_EQ(FormatDuration(45), "45s");
  EXPECT_EQ(FormatDuration(185), "3m05s");
  EXPECT_EQ(FormatDuration(2 * 3600 + 3 * 60 + 9), "2h03m");
  EXPECT_EQ(FormatDuration(4 * 86400 + 7 * 3600), "4d07h");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 30), "3.0 GiB");
  EXPECT_EQ(FormatCount(950), "950");
  EXPECT_EQ(FormatCount(12345), "12.3k");
  EXPECT_EQ(FormatCount(4.56e6), "4.56M");
}

TEST(CtlFormatTest, TimestampIsLocalIso8601ThatReadsBackAsTheSameInstant) {
  google::protobuf::Timestamp time;
  EXPECT_EQ(FormatTimestamp(time), "-");
  time.set_seconds(1'790'000'123);
  const std::string text = FormatTimestamp(time);
  EXPECT_THAT(text,
              ::testing::MatchesRegex(
                  "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[+-][0-9]{2}:[0-9]{2}"));
  absl::Time parsed;
  std::string error;
  ASSERT_TRUE(absl::ParseTime("%Y-%m-%dT%H:%M:%S%Ez", text, &parsed, &error)) << error;
  EXPECT_EQ(absl::ToUnixSeconds(parsed), 1'790'000'123);
}

TEST(CtlFormatTest, ParsesJobStatesInAnyCase) {
  EXPECT_EQ(ParseJobState("running"), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(ParseJobState("Queued"), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(ParseJobState("JOB_STATE_CANCELLED"), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(ParseJobState("job_state_failed"), v1::JOB_STATE_FAILED);
  EXPECT_EQ(ParseJobState("unspecified"), std::nullopt);
  EXPECT_EQ(ParseJobState("runing"), std::nullopt);
  EXPECT_EQ(StateName(v1::JOB_STATE_RECOVERING), "RECOVERING");
  EXPECT_EQ(CauseName(v1::RECOVERY_CAUSE_WORKER_LOST), "worker lost");
}

TEST(CtlOutputTest, JsonParsesBackToTheSameMessage) {
  const v1::Job job = MakeJob("j-7", v1::JOB_STATE_RUNNING);
  for (bool pretty : {true, false}) {
    const std::string json = ToJson(job, pretty);
    EXPECT_THAT(json, HasSubstr("\"job_id\""));  // Proto field names.
    EXPECT_THAT(json, HasSubstr("JOB_STATE_RUNNING"));
    EXPECT_THAT(json, HasSubstr("\"restarts\""));  // Default values are printed too.
    v1::Job parsed;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;
    EXPECT_TRUE(MessageDifferencer::Equals(parsed, job)) << parsed.DebugString();
  }
}

TEST(CtlOutputTest, YamlHasTheJsonStructureAndKeepsStringsStrings) {
  v1::Job job = MakeJob("j-7", v1::JOB_STATE_RUNNING);
  (*job.mutable_spec()->mutable_labels())["flag"] = "true";
  job.set_message("line one: \"quoted\"");
  std::ostringstream out;
  PrintStructured(job, OutputFormat::kYaml, out);
  const YAML::Node root = YAML::Load(out.str());
  EXPECT_EQ(root["job_id"].as<std::string>(), "j-7");
  EXPECT_EQ(root["state"].as<std::string>(), "JOB_STATE_RUNNING");
  EXPECT_EQ(root["attempt"].as<int>(), 1);
  EXPECT_EQ(root["step"].as<std::string>(), "40");  // int64 is a string in the JSON mapping.
  EXPECT_EQ(root["message"].as<std::string>(), job.message());
  EXPECT_EQ(root["spec"]["config_yaml"].as<std::string>(), job.spec().config_yaml());
  EXPECT_EQ(root["spec"]["labels"]["run"].as<std::string>(), "123");
  EXPECT_EQ(root["spec"]["labels"]["run"].Tag(), "!");  // Quoted, so it reads as a string.
  EXPECT_EQ(root["spec"]["labels"]["flag"].Tag(), "!");
  EXPECT_EQ(root["placement"][0]["worker_id"].as<std::string>(), "w-1");
  EXPECT_TRUE(root["create_time"].IsScalar());
  EXPECT_EQ(root["create_time"].as<std::string>(), ToJson(job.create_time(), false).substr(1, 20));
}

TEST(CtlOutputTest, TablesShowJobsCheckpointsAndMetrics) {
  const v1::Job running = MakeJob("j-1", v1::JOB_STATE_RUNNING);
  v1::Job recovering = MakeJob("j-2", v1::JOB_STATE_RECOVERING);
  recovering.set_recovery_cause(v1::RECOVERY_CAUSE_HANG);
  std::ostringstream table;
  PrintJobTable({&running, &recovering}, 1'790'000'100 + 185, table);
  EXPECT_THAT(table.str(), HasSubstr("JOB ID"));
  EXPECT_THAT(table.str(), HasSubstr("RECOVERING (hang)"));
  EXPECT_THAT(table.str(), HasSubstr("40/100"));
  EXPECT_THAT(table.str(), HasSubstr("3m05s"));
  EXPECT_THAT(table.str(), HasSubstr(FormatTimestamp(running.create_time())));

  std::ostringstream detail;
  PrintJobDetail(running, 1'790'000'200, detail);
  EXPECT_THAT(detail.str(), HasSubstr("2 stages x 2 replicas (cpu)"));
  EXPECT_THAT(detail.str(), HasSubstr("run=123, team=mt"));
  EXPECT_THAT(detail.str(), HasSubstr("w-1"));
  EXPECT_THAT(detail.str(), ::testing::Not(HasSubstr("Memory/rank:")));  // no estimate
  v1::Job estimated = running;
  estimated.set_memory_per_rank_bytes(int64_t{3} << 30);
  estimated.set_memory_biggest_part("activations");
  std::ostringstream with_memory;
  PrintJobDetail(estimated, 1'790'000'200, with_memory);
  EXPECT_THAT(with_memory.str(), HasSubstr("3.0 GiB estimated (biggest part: activations)"));

  v1::ListCheckpointsResponse checkpoints;
  auto* c = checkpoints.add_checkpoints();
  c->set_step(500);
  c->set_path("/ckpt/step_0000500");
  c->set_size_bytes(3 << 20);
  c->set_latest(true);
  std::ostringstream ckpt;
  PrintCheckpointTable(checkpoints, ckpt);
  EXPECT_THAT(ckpt.str(), HasSubstr("/ckpt/step_0000500"));
  EXPECT_THAT(ckpt.str(), HasSubstr("3.0 MiB"));

  const std::string row = MetricRow(testing::Point(120, 2.5));
  EXPECT_THAT(row, HasSubstr("120"));
  EXPECT_THAT(row, HasSubstr("2.5000"));
  EXPECT_THAT(row, HasSubstr("12.3k"));
  EXPECT_EQ(MetricHeaderRow().find("LOSS") + 4, row.find("2.5000") + 6);  // Right-aligned.
  v1::MetricPoint gpu = testing::Point(121, 2.5);
  gpu.set_gpu_allocated_bytes(int64_t{3} << 30);
  gpu.set_gpu_reserved_bytes(int64_t{5} << 30);
  gpu.set_gpu_peak_allocated_bytes(int64_t{4} << 30);
  const std::string gpu_row = MetricRow(gpu);
  EXPECT_THAT(MetricHeaderRow(), HasSubstr("GPU_PEAK"));
  EXPECT_THAT(gpu_row, HasSubstr("3.0 GiB"));
  EXPECT_THAT(gpu_row, HasSubstr("5.0 GiB"));
  EXPECT_EQ(MetricHeaderRow().find("GPU_PEAK") + 8, gpu_row.find("4.0 GiB") + 7);
}

TEST(CtlOutputTest, WorkerTableSummarisesDevicesAndHidesOtherUsersJobs) {
  v1::Worker gpu = testing::MakeWorker("gpu-1", 3, 0);
  gpu.set_state(v1::WORKER_STATE_DRAINING);
  for (int i = 0; i < 3; ++i) {
    v1::SlotStatus* slot = gpu.mutable_slots(i);
    slot->set_kind(v1::DEVICE_KIND_CUDA);
    slot->set_device_index(i);
    slot->set_device_name("NVIDIA H100");
  }
  EXPECT_EQ(DeviceSummary(gpu), "cuda x3 (NVIDIA H100)");
  EXPECT_EQ(JobSummary(gpu), "-");
  // Slot 0: job-1 rank 0 (visible); slots 1, 2: used by jobs the caller may not see.
  v1::Worker mixed = testing::MakeWorker("cpu-1", 4, 1);
  mixed.mutable_slots(1)->set_used(true);
  mixed.mutable_slots(2)->set_used(true);
  mixed.mutable_slots(3)->mutable_task()->set_job_id("job-2");
  mixed.mutable_slots(3)->mutable_task()->set_rank(5);
  mixed.mutable_slots(3)->set_used(true);
  EXPECT_EQ(JobSummary(mixed), "job-1 (rank 0), job-2 (rank 5), 2 hidden");
  EXPECT_EQ(DeviceSummary(mixed), "cpu x4");

  v1::ListWorkersResponse response;
  *response.add_workers() = gpu;
  v1::Worker lost = testing::MakeWorker("old", 2, 0);
  lost.set_state(v1::WORKER_STATE_LOST);
  lost.set_slots_free(0);
  lost.mutable_last_heartbeat_age()->set_seconds(185);
  lost.set_memory_bytes(0);
  *response.add_workers() = lost;
  std::ostringstream table;
  PrintWorkerTable(response, table);
  EXPECT_THAT(table.str(), HasSubstr("DRAINING"));
  EXPECT_THAT(table.str(), HasSubstr("cuda x3 (NVIDIA H100)"));
  EXPECT_THAT(table.str(), ::testing::MatchesRegex("(.|\n)*old +LOST +0 +0 +2 +cpu x2 +8 +- +"
                                                   "3m05s ago +-\n"));
  EXPECT_EQ(WorkerStateName(v1::WORKER_STATE_LOST), "LOST");
  EXPECT_EQ(PendingCodeName(v1::PENDING_CODE_BEHIND_JOB), "behind_job");
  EXPECT_EQ(PendingCodeName(v1::PENDING_CODE_UNSPECIFIED), "");
}

TEST(CtlProgressTest, RendersBarStepLossThroughputLrStateAndAttempt) {
  ProgressView view;
  view.state = v1::JOB_STATE_RUNNING;
  view.attempt = 2;
  view.step = 500;
  view.max_steps = 1000;
  view.has_metrics = true;
  view.loss = 2.3412;
  view.tokens_per_s = 12345;
  view.lr = 3e-4;
  const std::string line = RenderProgressLine(view, 120);
  EXPECT_EQ(line,
            "[###############---------------]  50%  step 500/1000  loss 2.3412  12.3k tok/s  "
            "lr 3.00e-04  RUNNING  attempt 2");
  EXPECT_LE(line.size(), 120u);
}

TEST(CtlProgressTest, NarrowTerminalShrinksBarThenDropsLeastImportantFields) {
  ProgressView view;
  view.state = v1::JOB_STATE_RECOVERING;
  view.recovery_cause = v1::RECOVERY_CAUSE_RANK_EXIT;
  view.attempt = 3;
  view.step = 1000;
  view.max_steps = 1000;
  view.has_metrics = true;
  view.loss = 1.5;
  view.tokens_per_s = 99;
  view.lr = 1e-3;
  for (int width : {100, 80, 60, 40, 20}) {
    const std::string line = RenderProgressLine(view, width);
    EXPECT_LE(static_cast<int>(line.size()), width) << line;
    EXPECT_THAT(line, HasSubstr("100%")) << line;
    if (width >= 40) {
      EXPECT_THAT(line, HasSubstr("RECOVERING (rank exit)")) << line;
    }
  }
  // On 80 columns a short bar stays; the learning rate and throughput make room for it.
  const std::string narrow = RenderProgressLine(view, 80);
  EXPECT_THAT(narrow, HasSubstr("[##########"));
  EXPECT_THAT(narrow, Not(HasSubstr("lr ")));
  EXPECT_THAT(narrow, HasSubstr("step 1000/1000  loss 1.5000"));
}

TEST(CtlProgressTest, WithoutMaxStepsOrMetricsShowsStepAndState) {
  ProgressView view;
  view.state = v1::JOB_STATE_QUEUED;
  EXPECT_EQ(RenderProgressLine(view, 80), "step 0  QUEUED");
  view.max_steps = 10;
  view.step = 5;
  EXPECT_EQ(RenderProgressLine(view, 80, /*with_bar=*/false), "step 5/10  QUEUED");
}

TEST(CtlProgressTest, ViewFollowsSnapshotEventsAndPoints) {
  ProgressView view;
  ApplyJob(MakeJob("j", v1::JOB_STATE_STARTING), &view);
  EXPECT_EQ(view.max_steps, 100);
  EXPECT_EQ(view.step, 40);
  v1::JobEvent event =
      testing::StateChange(3, v1::JOB_STATE_RUNNING, v1::JOB_STATE_RECOVERING).event();
  event.set_recovery_cause(v1::RECOVERY_CAUSE_HANG);
  event.set_attempt(2);
  ApplyEvent(event, &view);
  EXPECT_EQ(view.state, v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(view.recovery_cause, v1::RECOVERY_CAUSE_HANG);
  EXPECT_EQ(view.attempt, 2);
  ApplyPoint(testing::Point(30, 3.0), &view);  // A restart repeats steps from its checkpoint.
  EXPECT_EQ(view.step, 30);
  EXPECT_TRUE(view.has_metrics);
}

TEST(CtlProgressTest, DescribesEveryEventType) {
  v1::JobEvent event;
  event.set_type(v1::JOB_EVENT_TYPE_STATE_CHANGED);
  event.set_from_state(v1::JOB_STATE_RUNNING);
  event.set_to_state(v1::JOB_STATE_RECOVERING);
  event.set_recovery_cause(v1::RECOVERY_CAUSE_RANK_EXIT);
  event.set_message("rank 3 exited");
  EXPECT_EQ(DescribeEvent(event), "state RUNNING -> RECOVERING (rank exit): rank 3 exited");
  event.Clear();
  event.set_type(v1::JOB_EVENT_TYPE_RANK_EXITED);
  event.set_rank(3);
  event.set_signal(9);
  event.set_worker_id("w-2");
  EXPECT_EQ(DescribeEvent(event), "rank 3 killed by signal 9 on worker w-2");
  event.set_signal(0);
  event.set_exit_code(1);
  EXPECT_EQ(DescribeEvent(event), "rank 3 exited with code 1 on worker w-2");
  // A stopped rank: the coordinator's first line says what it left behind, then its stderr.
  event.set_exit_code(143);
  event.set_message("stopped with its state in the checkpoint of step 40\nstderr tail");
  EXPECT_EQ(DescribeEvent(event),
            "rank 3 exited with code 143 on worker w-2: stopped with its state in the checkpoint "
            "of step 40\nstderr tail");
  event.Clear();
  event.set_type(v1::JOB_EVENT_TYPE_CHECKPOINT_SAVED);
  event.set_checkpoint_step(400);
  event.mutable_time()->set_seconds(1'790'000'000);
  EXPECT_EQ(DescribeEvent(event), FormatTimestamp(event.time()) + "  checkpoint saved at step 400");
  event.Clear();
  event.set_type(v1::JOB_EVENT_TYPE_PLACED);
  event.set_attempt(2);
  EXPECT_EQ(DescribeEvent(event), "attempt 2 placed");
  event.set_type(v1::JOB_EVENT_TYPE_WORKER_LOST);
  event.set_worker_id("w-9");
  EXPECT_EQ(DescribeEvent(event), "worker w-9 lost");
  event.set_type(v1::JOB_EVENT_TYPE_CANCEL_REQUESTED);
  event.set_worker_id("");
  event.set_message("user asked");
  EXPECT_EQ(DescribeEvent(event), "cancellation requested: user asked");
  event.set_type(v1::JOB_EVENT_TYPE_HANG_DETECTED);
  event.set_message("");
  EXPECT_EQ(DescribeEvent(event), "no progress within the hang timeout");
}

}  // namespace
}  // namespace deepnet::ctl
