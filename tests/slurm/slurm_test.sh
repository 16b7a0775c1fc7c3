#!/usr/bin/env bash
# ctest -L slurm: both deploy/slurm/*.sbatch scripts, unmodified, on a private single-node Slurm
# (tests/slurm/slurm_cluster.sh: munged + slurmctld + slurmd under a temporary folder, ports
# chosen at run time, removed afterwards). Only documented options and variables are given:
# sbatch --ntasks-per-node/--cpus-per-task/--time/--signal/--requeue/-o/-D, SBATCH_TIMELIMIT,
# SBATCH_SIGNAL, DEEPNET_BIN_DIR, DEEPNET_SRUN_MPI, DEEPNET_TRAINER_USER (the jobs run as root
# here), TMPDIR.
#
#   bash tests/slurm/slurm_test.sh SOURCE_DIR DEEPNET DEEPNET_WORKER DEEPNET_COORDINATOR DEEPNETCTL
#
# Checks, with jobs run side by side (the node claims 24 CPUs; each job takes 2):
#   standalone: trains and checkpoints under srun --mpi=none, pmi2 and pmix; backend mpi under
#     pmix trains, under pmi2 it is refused naming srun --mpi=pmix; scancel and the time limit
#     each end with a checkpoint and exit 143; --requeue resumes from the checkpoint; a bad job
#     file, a checkpoint folder that cannot be made, ranks killed with SIGKILL and a stop when no
#     checkpoint can be written each get their own message and exit status;
#   service: a job through the coordinator to SUCCEEDED; scancel and the time limit each end with
#     a checkpoint and exit 143; --requeue resumes from the checkpoint; a bad job file, a job the coordinator refuses, a job whose
#     trainers fail and a stop when no checkpoint can be written each get their own message.
# Exit 77 (ctest: skipped) when the cluster cannot be started, with the reason.
set -uo pipefail

SRC=$(cd "${1:?usage: slurm_test.sh SOURCE_DIR DEEPNET DEEPNET_WORKER DEEPNET_COORDINATOR DEEPNETCTL}" && pwd)
BINS=("${@:2}")
((${#BINS[@]} == 4)) || { echo "usage: slurm_test.sh SOURCE_DIR DEEPNET DEEPNET_WORKER DEEPNET_COORDINATOR DEEPNETCTL" >&2; exit 2; }
STANDALONE=$SRC/deploy/slurm/deepnet-standalone.sbatch
SERVICE=$SRC/deploy/slurm/deepnet-service.sbatch
TINY=$SRC/tests/slurm/tiny-job.yaml
TRAINER_USER=deepnet-trainer

source "$SRC/tests/slurm/slurm_cluster.sh"

skip() { echo "SKIPPED: $*"; exit 77; }
id -u "$TRAINER_USER" >/dev/null 2>&1 ||
  skip "no account $TRAINER_USER for the service's trainers (scripts/setup.sh creates it)"

T=""
cleanup() {
  cd /   # this script works in $T, whose remaining processes slurm_cluster_stop kills
  slurm_cluster_stop ${T:+"$T"}
  if [[ -n $T ]]; then rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

START=$SECONDS
slurm_cluster_start 24 || skip "$SLURM_CLUSTER_ERROR"
echo "private Slurm $(sinfo --version | awk '{print $2}') up in $((SECONDS - START)) s ($SLURM_CLUSTER_DIR)"

# Folders the trainer account can reach: the test folder, with the service's checkpoints in a
# part that account owns.
T=$(mktemp -d "${TMPDIR:-/tmp}/deepnet-slurm-test.XXXXXX")
chmod 755 "$T"
mkdir -p "$T/bin" "$T/out" "$T/tmp" "$T/ck" "$T/svc"
chown "$TRAINER_USER" "$T/svc"
for b in "${BINS[@]}"; do ln -s "$(readlink -f "$b")" "$T/bin/$(basename "$b")"; done
export DEEPNET_BIN_DIR=$T/bin TMPDIR=$T/tmp DEEPNET_TRAINER_USER=$TRAINER_USER
cd "$T"   # sbatch's submit folder: what the scripts write beside their output stays in $T

FAILURES=0
pass() { echo "PASS [+$((SECONDS - START)) s] $*"; }
fail() { echo "FAIL [+$((SECONDS - START)) s] $*"; FAILURES=$((FAILURES + 1)); }

# A job file for the service: tests/slurm/tiny-job.yaml with its own checkpoint folder and step
# count (and checkpoints only at the end when EVERY is big).
service_job() {  # NAME MAX_STEPS EVERY
  sed -e "s|/tmp/deepnet-slurm-tiny/checkpoints|$T/svc/$1|" -e "s|max_steps: 40|max_steps: $2|" \
      -e "s|every_steps: 10|every_steps: $3|" "$TINY" > "$T/$1.yaml"
  echo "$T/$1.yaml"
}
# sbatch NAME [sbatch options] SCRIPT ARGS...: submits with output in $T/out/NAME.out, prints the
# job id.
submit() {
  local name=$1
  shift
  sbatch --parsable -D "$T" -o "$T/out/$name.out" "$@"
}
standalone() {  # NAME [sbatch options] -- ARGS after the job file
  local name=$1 opts=()
  shift
  while [[ $1 != -- ]]; do opts+=("$1"); shift; done
  shift
  submit "$name" --ntasks-per-node=2 "${opts[@]}" "$STANDALONE" "$TINY" \
    --set checkpoint.dir="$T/ck/$name" "$@"
}
service() {  # NAME JOB_FILE [sbatch options]
  local name=$1 job=$2
  shift 2
  submit "$name" --cpus-per-task=2 "$@" "$SERVICE" "$job"
}
field() { scontrol show job "$1" 2>/dev/null | grep -oE "\b$2=[^ ]+" | head -n 1 | cut -d= -f2; }
# Waits until the job has ended (any final state), at most $2 seconds.
wait_end() {
  local deadline=$((SECONDS + $2)) state
  while ((SECONDS < deadline)); do
    state=$(field "$1" JobState)
    case $state in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED | BOOT_FAIL | DEADLINE) return 0 ;;
    esac
    sleep 1
  done
  return 1
}
# Waits until the file has a line matching the regex, at most $3 seconds.
wait_line() {
  local deadline=$((SECONDS + $3))
  until grep -qE "$2" "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
}
# check NAME JOBID EXIT_REGEX MESSAGE_REGEX [CHECKPOINT_DIR]: the job ended with such an exit code,
# its output has the message and, when given, the folder has a completed checkpoint.
check() {
  local name=$1 id=$2 want=$3 msg=$4 ckdir=${5:-} out=$T/out/$1.out
  if ! wait_end "$id" 240; then fail "$name: job $id still $(field "$id" JobState) after 240 s"; return; fi
  local code
  code=$(field "$id" ExitCode)
  if ! [[ ${code%%:*} =~ ^($want)$ ]]; then
    fail "$name: job $id ended $(field "$id" JobState) with exit code $code, expected $want"
    echo "--- $out (last lines)"; tail -n 25 "$out"
    return
  fi
  if ! grep -qE "$msg" "$out"; then
    fail "$name: no line matching '$msg' in the output"; echo "--- $out"; tail -n 25 "$out"; return
  fi
  if [[ -n $ckdir && ! -s $ckdir/latest ]]; then fail "$name: no checkpoint in $ckdir"; return; fi
  pass "$name: exit ${code%%:*}, '$(grep -oE "$msg" "$out" | head -n 1)'${ckdir:+, checkpoint $(cat "$ckdir/latest")}"
}

# srun --mpi=pmix is what the trainer's PMIx path (comm/launch_env.cc) reads: PMIX_RANK without
# a size.
if out=$(srun --mpi=pmix -n 2 bash -c 'echo "$PMIX_RANK/${PMIX_SIZE:-unset}/$SLURM_NTASKS"' 2>&1 | sort | tr '\n' ' '); [[ $out == "0/unset/2 1/unset/2 " ]]; then
  pass "srun --mpi=pmix sets PMIX_RANK and no PMIx size (ranks: $out)"
else
  fail "srun --mpi=pmix: expected '0/unset/2 1/unset/2', got '$out'"
fi

# --- submissions, longest first -------------------------------------------------------------------
LONG=(--set train.max_steps=1000000 --set checkpoint.every_steps=1000000)
# Time limit: submitted as 10 minutes with the signal 45 s before the end; once the job trains,
# the limit is brought forward (time_limit_once_training below), so Slurm's own signal strikes
# while the trainers train, however long they took to start.
# (The standalone one through sbatch's input variables, the service's through options.)
S_TIME=$(SBATCH_TIMELIMIT=10 SBATCH_SIGNAL=B:TERM@45 standalone sa-timelimit -- "${LONG[@]}")
V_TIME=$(service sv-timelimit "$(service_job sv-timelimit 1000000 1000000)" --time=10 --signal=B:TERM@45)
S_CANCEL=$(standalone sa-scancel --time=10 -- "${LONG[@]}")
V_CANCEL=$(service sv-scancel "$(service_job sv-scancel 1000000 1000000)" --time=10)
S_REQUEUE=$(standalone sa-requeue --time=10 --requeue -- "${LONG[@]}")
V_REQUEUE=$(service sv-requeue "$(service_job sv-requeue 1000000 1000000)" --time=10 --requeue)
declare -A S_MPI
for mpi in none pmi2 pmix; do
  S_MPI[$mpi]=$(DEEPNET_SRUN_MPI=$mpi standalone "sa-mpi-$mpi" --time=10 -- --set train.max_steps=20)
done
S_MPIBACKEND=$(DEEPNET_SRUN_MPI=pmix standalone sa-backend-mpi-pmix --time=10 -- \
  --set train.max_steps=20 --set parallel.backend=mpi)
S_MPIREFUSED=$(DEEPNET_SRUN_MPI=pmi2 standalone sa-backend-mpi-pmi2 --time=10 -- \
  --set train.max_steps=20 --set parallel.backend=mpi)
V_OK=$(service sv-succeeded "$(service_job sv-succeeded 20 10)" --time=10)
S_BAD=$(standalone sa-bad-job --time=10 -- --set parallel.data_parallel=0)
# A checkpoint folder that cannot be created (below a file): the trainers refuse to start (2);
# the coordinator refuses the job (2).
touch "$T/not-a-folder"
S_FAIL=$(standalone sa-no-checkpoint-dir --time=10 -- --set checkpoint.dir="$T/not-a-folder/ck")
sed -e "s|/tmp/deepnet-slurm-tiny/checkpoints|$T/not-a-folder/ck|" "$TINY" > "$T/refused.yaml"
V_REFUSED=$(service sv-refused "$T/refused.yaml" --time=10)
# The ranks are killed (SIGKILL, as the OOM killer would) after a checkpoint.
S_KILLED=$(standalone sa-ranks-killed --time=10 -- --set train.max_steps=1000000)
printf 'name: bad\nparallel: {data_parallel: 0}\n' > "$T/bad-job.yaml"
V_BAD=$(service sv-bad-job "$T/bad-job.yaml" --time=10)
# A job whose trainers fail after the coordinator accepted it: the trainer account cannot write
# the checkpoint folder's parent (root's, mode 0755).
mkdir -p "$T/root-only"
sed -e "s|/tmp/deepnet-slurm-tiny/checkpoints|$T/root-only/ck|" "$TINY" > "$T/fails.yaml"
V_FAIL=$(service sv-job-fails "$T/fails.yaml" --time=10)
# Stopped when no checkpoint can be written any more (the folder is replaced by a file while
# training runs): the ending must say so, not "after a checkpoint".
S_NOCK=$(standalone sa-stop-no-checkpoint --time=10 -- "${LONG[@]}")
V_NOCK=$(service sv-stop-no-checkpoint "$(service_job sv-stop-no-checkpoint 1000000 1000000)" --time=10)
echo "submitted 21 jobs in $((SECONDS - START)) s"

# --- scancel, time limit and requeue once training runs ------------------------------------------
STEP_LINE='^\[train\] step [0-9]+/|^step [0-9]+/'
if wait_line "$T/out/sa-scancel.out" "$STEP_LINE" 120; then scancel "$S_CANCEL"; else fail "sa-scancel: never trained"; fi
if wait_line "$T/out/sv-scancel.out" "$STEP_LINE" 120; then scancel "$V_CANCEL"; else fail "sv-scancel: never trained"; fi
# break_checkpoints NAME JOBID CHECKPOINT_DIR: once NAME trains, its checkpoint folder becomes a
# file; then scancel.
break_checkpoints() {
  if wait_line "$T/out/$1.out" "$STEP_LINE" 120; then
    rm -rf "$3" && touch "$3"
    scancel "$2"
  else
    fail "$1: never trained"
  fi
}
# time_limit_once_training NAME JOBID: once NAME trains, its time limit becomes the first whole
# minute of run time at least 50 s away. The B:TERM@45 signal then comes at one of slurmctld's
# time-limit checks (every 30 s; they send it up to 30 s before it is due): while the trainers
# train, and at least 20 s before the end (measured: 32 s after the update, 63 s before the end).
# Before, a 1-minute limit could strike while a slow machine still started the trainers, and the
# job ended with no checkpoint (exit 3: a different, correct ending, which
# sv-stop-no-checkpoint and sa-stop-no-checkpoint test).
time_limit_once_training() {
  if wait_line "$T/out/$1.out" "$STEP_LINE" 120; then
    local run secs
    run=$(field "$2" RunTime)   # HH:MM:SS (under the 10 minutes submitted, so no days)
    secs=$(awk -F: '{ print $1 * 3600 + $2 * 60 + $3 }' <<<"$run")
    scontrol update JobId="$2" TimeLimit=$(((secs + 50 + 59) / 60)) ||
      fail "$1: could not move the time limit (run time '$run')"
  else
    fail "$1: never trained"
  fi
}
time_limit_once_training sa-timelimit "$S_TIME"
time_limit_once_training sv-timelimit "$V_TIME"
break_checkpoints sa-stop-no-checkpoint "$S_NOCK" "$T/ck/sa-stop-no-checkpoint"
break_checkpoints sv-stop-no-checkpoint "$V_NOCK" "$T/svc/sv-stop-no-checkpoint"
if wait_line "$T/out/sa-ranks-killed.out" '^\[checkpoint\] saved' 120; then
  scancel --signal=KILL "$S_KILLED.0"   # step 0 only: the batch shell reports the ending
else
  fail "sa-ranks-killed: no checkpoint written"
fi
# A requeued job waits (BeginTime, about 2 minutes) before it may start again: in the
# background, let it start as soon as it is PENDING.
release_when_pending() {
  local deadline=$((SECONDS + 120))
  until [[ $(field "$1" JobState) == PENDING ]] || ((SECONDS > deadline)); do sleep 1; done
  scontrol update JobId="$1" StartTime=now >/dev/null 2>&1
}
for rq in "sa-requeue $S_REQUEUE" "sv-requeue $V_REQUEUE"; do
  read -r name id <<<"$rq"
  if wait_line "$T/out/$name.out" "$STEP_LINE" 120; then
    scontrol requeue "$id"
    release_when_pending "$id" &
  else
    fail "$name: never trained"
  fi
done

check sa-mpi-none "${S_MPI[none]}" 0 'training finished' "$T/ck/sa-mpi-none"
check sa-mpi-pmi2 "${S_MPI[pmi2]}" 0 'training finished' "$T/ck/sa-mpi-pmi2"
check sa-mpi-pmix "${S_MPI[pmix]}" 0 'training finished' "$T/ck/sa-mpi-pmix"
check sa-backend-mpi-pmix "$S_MPIBACKEND" 0 'training finished' "$T/ck/sa-backend-mpi-pmix"
check sa-backend-mpi-pmi2 "$S_MPIREFUSED" 1 'needs srun --mpi=pmix'
check sa-bad-job "$S_BAD" 2 'bad job file .* nothing was started'
check sa-no-checkpoint-dir "$S_FAIL" 2 'bad configuration or launch'
check sa-ranks-killed "$S_KILLED" '[0-9]+' 'training failed with exit status [0-9]+ \(latest checkpoint: step_[0-9]+\)'
check sv-succeeded "$V_OK" 0 'job j-[0-9]+ SUCCEEDED' "$T/svc/sv-succeeded"
check sv-bad-job "$V_BAD" 2 'bad job file .* nothing was started'
check sv-refused "$V_REFUSED" 2 'the coordinator refused'
check sv-job-fails "$V_FAIL" 1 'job j-[0-9]+ did not succeed'
check sa-stop-no-checkpoint "$S_NOCK" '[0-9]+' 'stopped by SIGTERM but NO new checkpoint was written'
check sv-stop-no-checkpoint "$V_NOCK" '[0-9]+' 'stopped by SIGTERM but NO new checkpoint was written'
check sa-scancel "$S_CANCEL" 143 'stopped by SIGTERM after a checkpoint' "$T/ck/sa-scancel"
check sv-scancel "$V_CANCEL" 143 'stopped by SIGTERM after a checkpoint' "$T/svc/sv-scancel"
check sa-timelimit "$S_TIME" 143 'stopped by SIGTERM after a checkpoint' "$T/ck/sa-timelimit"
check sv-timelimit "$V_TIME" 143 'stopped by SIGTERM after a checkpoint' "$T/svc/sv-timelimit"

# --- requeue: the second run starts from the first run's checkpoint ------------------------------
# The first step line of the run after "restart 1" (the service's deepnetctl watch output).
first_step_after_restart() {
  awk '/restart 1/ { after = 1 } after && /^step [0-9]+\// { split($2, a, "/"); print a[1]; exit }' "$1"
}
check_requeue() {  # NAME JOBID
  local name=$1 id=$2 out=$T/out/$1.out first deadline resumed=""
  if ! wait_line "$out" 'stopped by SIGTERM after a checkpoint' 120; then
    fail "$name: no checkpoint on requeue"; tail -n 20 "$out"; return
  fi
  first=$(grep 'stopped by SIGTERM after a checkpoint' "$out" | grep -oE 'step_[0-9]+' | sed -n 1p)
  first=$((10#${first#step_}))
  deadline=$((SECONDS + 120))
  while ((SECONDS < deadline)); do
    if [[ $name == sa-* ]]; then
      # deepnet train's "[start] ... from step N to M"
      resumed=$(grep -oE 'from step [0-9]+ to' "$out" | sed -n 2p | awk '{print $3}')
    else
      resumed=$(first_step_after_restart "$out")
    fi
    [[ -z $resumed ]] || break
    sleep 1
  done
  # The service logs every 5 steps: its first line after a resume at step N is N+1..N+5.
  local ok=0
  if [[ -n $resumed ]]; then
    if [[ $name == sa-* ]]; then
      ((resumed == first)) && ok=1
    else
      ((resumed > first && resumed <= first + 5)) && ok=1
    fi
  fi
  if ((ok)); then
    pass "$name: stopped with a checkpoint at step $first; the requeued run (restart $(field "$id" Restarts)) went on from there (step $resumed)"
  else
    fail "$name: checkpoint at step $first, but the requeued run started at '${resumed:-nothing within 120 s}'"
    tail -n 20 "$out"
  fi
  scancel "$id"
  wait_end "$id" 90 || true
}
check_requeue sa-requeue "$S_REQUEUE"
check_requeue sv-requeue "$V_REQUEUE"

echo "$FAILURES failure(s); $((SECONDS - START)) s in all"
((FAILURES == 0))
