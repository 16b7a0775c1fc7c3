#!/usr/bin/env bash
# Control-plane benchmarks (docs/PERFORMANCE.md, "Control plane"), each against a real
# deepnet-coordinator (and for recovery, real deepnet-worker daemons and trainers) on loopback:
#   heartbeats - 1,000 simulated workers heartbeating every second for 30 s: heartbeat -> lease
#                latency, coordinator CPU and RSS, lost workers; reference: empty unary RPC
#   submit     - SubmitJob latency (500 sequential) and throughput (4 and 8 clients);
#                reference: the bare SqliteJobStore::Create in process
#   fanout     - StreamMetrics to 100 live watchers, 20 points/s for 20 s; reference: 1 watcher
#   recovery   - kill -9 of a trainer of a 2x2 job -> a step of attempt 2 (5 runs)
# Every benchmark runs RUNS times (recovery: RECOVERY_RUNS kills); tables show medians.
#   BUILD_DIR=build RUNS=3 bash bench/control_plane.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
RUNS=${RUNS:-3}
RECOVERY_RUNS=${RECOVERY_RUNS:-5}
OUT=${OUT:-$(mktemp -d /tmp/deepnet-control-plane-bench-XXXXXX)}
mkdir -p "$OUT"
BENCH="$BUILD_DIR/bench/deepnet_bench_control_plane"
export OPENBLAS_NUM_THREADS=1

for i in $(seq 1 "$RUNS"); do
  "$BENCH" heartbeats --workers 1000 --duration-s 30 > "$OUT/heartbeats-$i.json"
  "$BENCH" submit --jobs 500 --concurrency-a 4 --concurrency-b 8 > "$OUT/submit-$i.json"
  "$BENCH" fanout --watchers 100 --points-per-s 20 --duration-s 20 > "$OUT/fanout-$i.json"
  "$BENCH" fanout --watchers 1 --points-per-s 20 --duration-s 20 > "$OUT/fanout1-$i.json"
done
"$BENCH" recovery --runs "$RECOVERY_RUNS" > "$OUT/recovery.json"

python3 - "$OUT" "$RUNS" <<'PY'
import glob, json, os, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
med = statistics.median
def load(name):
    return [json.load(open(os.path.join(out, f"{name}-{i}.json"))) for i in range(1, runs + 1)]
def m(rows, *path):
    vals = []
    for r in rows:
        for p in path:
            r = r[p]
        vals.append(r)
    return med(vals)

hb = load("heartbeats")
print(f"### Heartbeats: {hb[0]['workers']} simulated workers, every {hb[0]['heartbeat_ms']} ms, "
      f"{hb[0]['duration_s']:.0f} s window (median of {runs} runs)\n")
print("| metric | value |\n|---|---:|")
for label, path, unit in [
        ("heartbeat -> lease p50", ("heartbeat_latency", "p50_ms"), "ms"),
        ("heartbeat -> lease p99", ("heartbeat_latency", "p99_ms"), "ms"),
        ("heartbeat -> lease max", ("heartbeat_latency", "max_ms"), "ms"),
        ("reference: empty unary RPC p50, idle coordinator", ("unary_idle", "p50_ms"), "ms"),
        ("reference: empty unary RPC p50, during the window", ("unary_loaded", "p50_ms"), "ms"),
        ("heartbeat p50 / idle unary p50", ("heartbeat_p50_over_unary_idle_p50",), "x"),
        ("coordinator CPU (% of one core)", ("coordinator_cpu_percent_of_core",), "%"),
        ("bench process CPU (% of one core)", ("bench_cpu_percent_of_core",), "%"),
        ("coordinator RSS idle", ("coordinator_rss_idle_bytes",), "MiB"),
        ("coordinator RSS with the workers", ("coordinator_rss_bytes",), "MiB"),
        ("registering all workers (4 threads)", ("register_all_s",), "s")]:
    v = m(hb, *path)
    if unit == "MiB":
        v /= 1 << 20
    print(f"| {label} | {v:.3g} {unit} |")
print(f"| heartbeats answered / sent in window | {m(hb, 'heartbeat_latency', 'n'):.0f} / {m(hb, 'heartbeats_expected'):.0f} |")
print(f"| workers lost; heartbeats missed in the window; missed in all (all runs, max) | "
      f"{max(r['gauges_after_window']['workers_lost'] for r in hb):.0f}; "
      f"{max(r['heartbeats_missed_in_window'] for r in hb):.0f}; "
      f"{max(r['gauges_after_window']['heartbeats_missed_total'] for r in hb):.0f} |")
print(f"| sessions ended by the coordinator (all runs, max) | {max(r['sessions_ended_by_coordinator'] for r in hb)} |\n")

sj = load("submit")
print(f"### SubmitJob: {sj[0]['jobs']} jobs per row, {sj[0]['spec_bytes']}-byte spec, no workers "
      f"(median of {runs} runs)\n")
print("| measurement | p50 ms | p99 ms | jobs/s |\n|---|---:|---:|---:|")
print(f"| reference: SqliteJobStore::Create in process | {m(sj,'store_create_reference','p50_ms'):.3f} | {m(sj,'store_create_reference','p99_ms'):.3f} | |")
print(f"| reference: empty unary RPC | {m(sj,'unary_reference','p50_ms'):.3f} | {m(sj,'unary_reference','p99_ms'):.3f} | |")
for key, label in [("sequential", "SubmitJob, 1 client"), ("concurrent_a", f"SubmitJob, {sj[0]['concurrent_a']['clients']} clients"),
                   ("concurrent_b", f"SubmitJob, {sj[0]['concurrent_b']['clients']} clients")]:
    print(f"| {label} | {m(sj,key,'p50_ms'):.3f} | {m(sj,key,'p99_ms'):.3f} | {m(sj,key,'jobs_per_s'):.0f} |")
print(f"\nSubmitJob p50 / store Create p50: {m(sj,'submit_p50_over_store_create_p50'):.2f}x\n")

fo, f1 = load("fanout"), load("fanout1")
print(f"### StreamMetrics fan-out: {fo[0]['points']} points at {fo[0]['points_per_s']:.0f}/s "
      f"(median of {runs} runs)\n")
print("| watchers | delivery p50 ms | p99 ms | max ms | watchers with every point | missing | coordinator CPU % |\n|---:|---:|---:|---:|---:|---:|---:|")
for rows in (f1, fo):
    print(f"| {rows[0]['watchers']} | {m(rows,'delivery_latency','p50_ms'):.2f} | {m(rows,'delivery_latency','p99_ms'):.2f} | "
          f"{m(rows,'delivery_latency','max_ms'):.2f} | {min(r['watchers_with_every_point'] for r in rows)}/{rows[0]['watchers']} | "
          f"{max(r['points_missing'] for r in rows)} | {m(rows,'coordinator_cpu_percent_of_core'):.1f} |")
print(f"\n100-watcher p50 / 1-watcher p50: {m(fo,'delivery_latency','p50_ms') / m(f1,'delivery_latency','p50_ms'):.2f}x\n")

rc = [r for r in json.load(open(os.path.join(out, "recovery.json")))["runs"] if "error" not in r]
print(f"### Recovery: kill -9 of a trainer of a 2x2 job (median of {len(rc)} runs)\n")
print("| from the kill to | ms |\n|---|---:|")
for key, label in [("rank_exit_noticed", "RANK_EXITED event (exit noticed)"), ("recovering", "RECOVERING"),
                   ("starting_attempt_2", "STARTING, attempt 2 (old ranks stopped, placed again)"),
                   ("running_attempt_2", "RUNNING, attempt 2 (every rank spawned)"),
                   ("log_layout_last_rank", "trainer: world + engine built (\"layout\")"),
                   ("log_resume_last_rank", "trainer: checkpoint loaded (\"resume\")"),
                   ("log_step_last_rank", "trainer: first step printed"),
                   ("first_point_received", "first point of attempt 2 at a StreamMetrics client")]:
    vals = [r["timeline_ms_after_kill"][key] for r in rc if key in r["timeline_ms_after_kill"]]
    if vals:
        print(f"| {label} | {med(vals):.0f} |")
print(f"| checkpoint loading (\"layout\" -> \"resume\") | {med(r['checkpoint_load_ms'] for r in rc):.0f} |")
print(f"| **kill -> training again, excluding checkpoint loading** | **{med(r['kill_to_training_excluding_load_ms'] for r in rc):.0f}** |")
print(f"\nRuns (kill -> training again, ms): {[r['kill_to_training_ms'] for r in rc]}; "
      f"failed runs: {len(json.load(open(os.path.join(out, 'recovery.json')))['runs']) - len(rc)}")
print(f"\nRaw JSON: {out}")
PY
