#!/usr/bin/env bash
# A private single-node Slurm cluster for tests (sourced by tests/slurm/slurm_test.sh):
# munged + slurmctld + slurmd with their own key, socket, config, state, spool and logs under
# one temporary folder, on ports chosen at run time. Needs root (SlurmUser=root: the daemons and
# the jobs run as root here) and Debian's slurm-wlm + munge (scripts/setup.sh).
#
#   source tests/slurm/slurm_cluster.sh
#   slurm_cluster_start CPUS || skip "$SLURM_CLUSTER_ERROR"   # exports SLURM_CONF
#   ...sbatch/squeue/scontrol...
#   slurm_cluster_stop [DIR...]     # ends the jobs, kills the daemons and processes working in
#                                   # its folder or in DIR..., removes its folder
#
# No cgroups are needed: proctrack/linuxproc and task/none. The node advertises CPUS CPUs
# whatever the machine has (SlurmdParameters=config_overrides), so a 2-core runner takes
# several small jobs at once.

SLURM_CLUSTER_DIR=""
SLURM_CLUSTER_ERROR=""
SLURM_CLUSTER_PIDS=()

# A TCP port nothing listens on (a random one in 20000-59999, checked with ss).
slurm_cluster_free_port() {
  local port
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 40000))
    if ! ss -Htln "sport = :$port" 2>/dev/null | grep -q .; then echo "$port"; return 0; fi
  done
  return 1
}

slurm_cluster_fail() {
  SLURM_CLUSTER_ERROR=$1
  local f
  for f in munged.log slurmctld.log slurmd.log; do
    if [[ -s $SLURM_CLUSTER_DIR/$f ]]; then
      echo "--- $f (last lines)" >&2; tail -n 15 "$SLURM_CLUSTER_DIR/$f" >&2
    fi
  done
  return 1
}

# Waits up to $2 seconds for the command $1 to succeed.
slurm_cluster_wait() {
  local deadline=$((SECONDS + $2))
  until eval "$1" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

slurm_cluster_start() {
  local cpus=${1:-4}
  local prog
  for prog in munged slurmctld slurmd sbatch srun squeue scontrol scancel ss; do
    command -v "$prog" >/dev/null ||
      { SLURM_CLUSTER_ERROR="$prog is not installed (scripts/setup.sh installs slurm-wlm and munge)"; return 1; }
  done
  [[ $(id -u) -eq 0 ]] ||
    { SLURM_CLUSTER_ERROR="needs root: the private slurmd runs jobs as SlurmUser=root"; return 1; }

  SLURM_CLUSTER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/deepnet-slurm.XXXXXX")
  local d=$SLURM_CLUSTER_DIR
  mkdir -p "$d/state" "$d/spool" "$d/munge"
  chmod 700 "$d/munge"
  # munged checks that its key is private and its folders are not writable by others.
  head -c 1024 /dev/urandom > "$d/munge/munge.key"
  chmod 400 "$d/munge/munge.key"
  munged --force --key-file="$d/munge/munge.key" --socket="$d/munge/munge.sock" \
    --pid-file="$d/munge/munged.pid" --seed-file="$d/munge/munged.seed" \
    --log-file="$d/munged.log" ||
    { slurm_cluster_fail "munged did not start"; return 1; }
  SLURM_CLUSTER_PIDS+=("$(cat "$d/munge/munged.pid")")

  local ctld_port slurmd_port host
  ctld_port=$(slurm_cluster_free_port) && slurmd_port=$(slurm_cluster_free_port) ||
    { slurm_cluster_fail "no free TCP port"; return 1; }
  host=$(hostname -s)
  # The node's name is what jobs connect to (the service's coordinator address): this host's
  # name where it resolves, else localhost (slurmd -N; slurmctld must run under its own name).
  local node=$host
  getent hosts "$host" >/dev/null 2>&1 || node=localhost
  cat > "$d/slurm.conf" <<CONF
ClusterName=deepnettest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SlurmdParameters=config_overrides
ReturnToService=2
# The trainers' checkpoint on SIGTERM must fit between SIGTERM and SIGKILL.
KillWait=60
# srun/sbatch of the test poll often; let finished jobs go soon.
MinJobAge=300
SchedulerParameters=sched_interval=2
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  export SLURM_CONF=$d/slurm.conf
  slurmctld -f "$SLURM_CONF" -i ||   # -i: ignore (absent) saved state
    { slurm_cluster_fail "slurmctld did not start"; return 1; }
  slurm_cluster_wait "[[ -s $d/slurmctld.pid ]]" 10 &&
    SLURM_CLUSTER_PIDS+=("$(cat "$d/slurmctld.pid")")
  slurmd -f "$SLURM_CONF" -N "$node" ||
    { slurm_cluster_fail "slurmd did not start"; return 1; }
  slurm_cluster_wait "[[ -s $d/slurmd.pid ]]" 10 && SLURM_CLUSTER_PIDS+=("$(cat "$d/slurmd.pid")")
  slurm_cluster_wait "sinfo -h -N -o %t | grep -qx idle" 30 ||
    { slurm_cluster_fail "the node did not become idle within 30 s: $(sinfo -h -N -o '%t %E' 2>&1)"; return 1; }
  return 0
}

# Ends every job (scancel, then SIGKILL after 30 s), stops the daemons, kills what is left of
# this cluster's processes (slurmstepd and job processes lose their daemons otherwise): those
# whose working folder lies in the cluster's folder or in one of the folders given, then removes
# the cluster's folder.
slurm_cluster_stop() {
  local pid dir cwd
  [[ -n $SLURM_CLUSTER_DIR ]] || return 0
  if [[ -n ${SLURM_CONF:-} ]] && squeue -h >/dev/null 2>&1; then
    scancel --user="$(id -un)" >/dev/null 2>&1 || true
    if ! slurm_cluster_wait '! squeue -h | grep -q .' 30; then
      scancel --full --signal=KILL --user="$(id -un)" >/dev/null 2>&1 || true
      slurm_cluster_wait '! squeue -h | grep -q .' 10 || true
    fi
  fi
  for pid in "${SLURM_CLUSTER_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${SLURM_CLUSTER_PIDS[@]}"; do
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  SLURM_CLUSTER_PIDS=()
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    [[ $pid != "$$" && $pid != "$BASHPID" ]] || continue
    cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) || continue
    for dir in "$SLURM_CLUSTER_DIR" "$@"; do
      if [[ $cwd == "$dir" || $cwd == "$dir"/* || $cwd == "$dir (deleted)" ]]; then
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done
  done
  rm -rf "$SLURM_CLUSTER_DIR"
  SLURM_CLUSTER_DIR=""
}
