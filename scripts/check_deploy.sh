#!/usr/bin/env bash
# Checks deploy/ (CTest deploy_check, label `deploy`):
#   - promtool check config on deploy/prometheus/prometheus*.yml, check rules on alerts.yml and
#     the rule unit tests in alerts_test.yml (promtool test rules);
#   - every JSON file parses; every YAML file parses; Kubernetes manifests are objects with
#     apiVersion, kind and metadata.name;
#   - every deepnet_* metric named in the alerts and dashboards is one the coordinator exports,
#     and the dashboards show every one of them;
#   - every DEEPNET_* variable set in the Kubernetes manifests is one the daemons read;
#   - `bash -n` on the Slurm scripts.
# With --schemas (CTest deploy_schema_check, labels `deploy;npm`; needs node and npm), instead:
#   - deploy/kubernetes is rendered (tests/deploy/npm/deploy_schemas.js: a small kustomize for the
#     fields kustomization.yaml uses, compared with `kubectl kustomize` where one with kustomize
#     >= 5 is installed) with throw-away token files, and every object is validated against the
#     Kubernetes API schemas (npm kubernetes-models) and, for unknown fields, its TypeScript API
#     types; every container has requests and limits, each worker workload one
#     PodDisruptionBudget, every image the tag project(VERSION) in CMakeLists.txt;
#   - the Grafana dashboards are validated against the JSON schema of @grafana/schema's Dashboard
#     type, and every panel's PromQL (template variables substituted) by `promtool check rules`.
#   The npm packages (pinned by tests/deploy/npm/package-lock.json) are installed with `npm ci`
#   into --npm-dir DIR once and reused while the lock file is unchanged.
#
#   scripts/check_deploy.sh [--lint PATH] [--deploy-dir DIR]   all checks on deploy/ (or DIR)
#   scripts/check_deploy.sh --lint PATH --self-test            the checks reject broken copies
#   scripts/check_deploy.sh --npm-dir DIR --npm-install        install the npm packages only
#   scripts/check_deploy.sh --npm-dir DIR --schemas [--self-test]   the schema checks (above)
#   scripts/check_deploy.sh --jobs-only --deepnet PATH         deploy/jobs/*.yaml pass
#                                                              `deepnet train --validate-config`
# --lint is the deploy_lint tool (tests/deploy); without it python3 (json, yaml) is used.
# Needs promtool (Debian package `prometheus`). Exit status 0 when everything passes.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPLOY="$ROOT/deploy"
LINT=""
DEEPNET=""
MODE=all
NPM_DIR=""
SCHEMAS=0
PART=all  # --part k8s|grafana: only that half of the schema checks (the self-test's broken copies)
NPM_SRC="$ROOT/tests/deploy/npm"

# The metrics deepnet-coordinator exports. MUST match coordinator/core/coordinator_metrics.cc (and the
# list in docs/OPERATIONS.md): a name here that the coordinator does not export makes alerts and
# panels silently empty.
METRICS=(
  deepnet_jobs                          # gauge {state}
  deepnet_jobs_pending                  # gauge {reason}
  deepnet_job_queue_wait_seconds        # histogram
  deepnet_job_time_to_running_seconds   # histogram
  deepnet_scheduler_decision_seconds    # histogram
  deepnet_workers                       # gauge {state}
  deepnet_worker_heartbeats_missed_total  # counter
  deepnet_job_restarts_total            # counter {cause}
  deepnet_jobs_submitted_total          # counter
  deepnet_job_step                      # gauge {job}
  deepnet_job_loss                      # gauge {job}
  deepnet_job_tokens_per_second         # gauge {job}
  deepnet_job_learning_rate             # gauge {job}
  deepnet_job_gradient_norm             # gauge {job}
  deepnet_job_update_norm               # gauge {job}
  deepnet_job_memory_bytes              # gauge {job}
  deepnet_job_gpu_memory_bytes          # gauge {job,kind}
  deepnet_job_guard_rollbacks_total     # counter {job}
  deepnet_job_plateau                   # gauge {job}
  deepnet_job_probe_step                # gauge {job}
  deepnet_job_f0_norm                   # gauge {job}
  deepnet_job_update_norm_relative      # gauge {job}
  deepnet_job_logits_update_norm        # gauge {job}
  deepnet_job_logits_update_norm_relative  # gauge {job}
  deepnet_job_diagnostics_step          # gauge {job}
  deepnet_job_layer_ln_input_norm       # gauge {job,stat}
  deepnet_job_layer_grad_norm           # gauge {job,stat}
)
HISTOGRAMS=(deepnet_job_queue_wait_seconds deepnet_job_time_to_running_seconds
            deepnet_scheduler_decision_seconds)

# Environment variables the daemons read (flags' fallbacks; docs/OPERATIONS.md). NCCL_* and
# other libraries' variables are not checked.
DAEMON_ENV=(
  DEEPNET_LISTEN DEEPNET_METRICS_LISTEN DEEPNET_DB DEEPNET_TOKENS_FILE DEEPNET_TLS_CERT
  DEEPNET_TLS_KEY DEEPNET_ADVERTISE_ADDRESS DEEPNET_LIMITS_FILE DEEPNET_AUDIT_LOG  # coordinator
  DEEPNET_STORAGE_ROOT                                                       # both
  DEEPNET_COORDINATOR DEEPNET_WORKER_NAME DEEPNET_SLOTS DEEPNET_WORK_DIR DEEPNET_TRAINER
  DEEPNET_TOKEN DEEPNET_TOKEN_FILE DEEPNET_CA_CERT DEEPNET_WORKER_LISTEN     # worker
  DEEPNET_TRAINER_USER DEEPNET_STOP_GRACE
)

while (($#)); do
  case $1 in
    --lint) LINT=$2; shift 2 ;;
    --deepnet) DEEPNET=$2; shift 2 ;;
    --deploy-dir) DEPLOY=$(cd "$2" && pwd); shift 2 ;;
    --self-test) MODE="self-test"; shift ;;
    --npm-dir) NPM_DIR=$(mkdir -p "$2" && cd "$2" && pwd); shift 2 ;;
    --npm-install) MODE="npm-install"; shift ;;
    --schemas) SCHEMAS=1; shift ;;
    --part) PART=$2; shift 2 ;;
    --jobs-only) MODE="jobs"; shift ;;
    *) echo "check_deploy: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

FAILURES=0
fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok:   $*"; }

# Runs "$@"; on failure prints its output and records `what`.
run_check() {
  local what=$1; shift
  local out
  if out=$("$@" 2>&1); then pass "$what"; else fail "$what"; printf '%s\n' "$out" | sed 's/^/      /'; fi
}

parse_json() {
  if [[ -n $LINT ]]; then "$LINT" json "$@"; return; fi
  local f rc=0
  for f in "$@"; do python3 -m json.tool "$f" >/dev/null || { echo "$f: JSON error"; rc=1; }; done
  return $rc
}
parse_yaml() {  # parse_yaml yaml|k8s FILE...
  local mode=$1; shift
  if [[ -n $LINT ]]; then "$LINT" "$mode" "$@"; return; fi
  python3 - "$mode" "$@" <<'PY'
import sys, yaml
bad = 0
for path in sys.argv[2:]:
    try:
        docs = list(yaml.safe_load_all(open(path)))
    except Exception as e:
        print(f"{path}: {e}"); bad = 1; continue
    if sys.argv[1] != "k8s":
        continue
    for i, doc in enumerate(docs, 1):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            print(f"{path}: document {i}: not a map"); bad = 1; continue
        for key in ("apiVersion", "kind"):
            if not doc.get(key):
                print(f"{path}: document {i}: missing {key}"); bad = 1
        if doc.get("kind") != "Kustomization" and not (doc.get("metadata") or {}).get("name"):
            print(f"{path}: document {i}: missing metadata.name"); bad = 1
sys.exit(bad)
PY
}

# deepnet_* tokens used in FILE..., one per line, with histogram suffixes removed.
metric_names() {
  local h
  grep -ohE '(^|[^A-Za-z0-9_])deepnet_[a-z0-9_]+' "$@" | sed -E 's/^[^d]//' |
    while read -r name; do
      for h in "${HISTOGRAMS[@]}"; do
        case $name in "${h}_bucket" | "${h}_sum" | "${h}_count") name=$h ;; esac
      done
      echo "$name"
    done | sort -u
}

check_metrics() {
  local rules=("$DEPLOY"/prometheus/alerts.yml)
  local dashboards=("$DEPLOY"/grafana/dashboards/*.json)
  local known name bad=0 missing=0
  known=$(printf '%s\n' "${METRICS[@]}" | sort -u)
  for name in $(metric_names "${rules[@]}" "${dashboards[@]}"); do
    if ! grep -qxF "$name" <<<"$known"; then
      echo "      unknown metric $name in: $(grep -lE "(^|[^A-Za-z0-9_])${name}([^a-z0-9_]|$)" \
        "${rules[@]}" "${dashboards[@]}" | tr '\n' ' ')"
      bad=1
    fi
  done
  ((bad)) && fail "metric names in alerts.yml and dashboards are the coordinator's" ||
    pass "metric names in alerts.yml and dashboards are the coordinator's"
  local used
  used=$(metric_names "${dashboards[@]}")
  for name in "${METRICS[@]}"; do
    grep -qxF "$name" <<<"$used" || { echo "      no dashboard panel uses $name"; missing=1; }
  done
  ((missing)) && fail "dashboards show every coordinator metric" ||
    pass "dashboards show every coordinator metric"
}

check_env_names() {
  local known name bad=0
  known=$(printf '%s\n' "${DAEMON_ENV[@]}")
  for name in $(grep -ohE '\bDEEPNET_[A-Z0-9_]+' "$DEPLOY"/kubernetes/*.yaml | sort -u); do
    grep -qxF "$name" <<<"$known" || { echo "      unknown variable $name"; bad=1; }
  done
  ((bad)) && fail "DEEPNET_* variables in the Kubernetes manifests are the daemons'" ||
    pass "DEEPNET_* variables in the Kubernetes manifests are the daemons'"
}

# promtool check config on the Kubernetes variant. Debian's promtool is built without the
# Kubernetes service discovery; then the kubernetes_sd_configs block is replaced by a static
# target so that the rest (relabelling, rule files) is still checked.
check_k8s_prometheus_config() {
  local config=$1 out tmp
  if out=$(promtool check config "$config" 2>&1); then pass "promtool check config $(basename "$config")"; return; fi
  if ! grep -q 'field kubernetes_sd_configs not found' <<<"$out"; then
    fail "promtool check config $(basename "$config")"; printf '%s\n' "$out" | sed 's/^/      /'; return
  fi
  tmp=$(mktemp -d)
  cp "$DEPLOY"/prometheus/alerts.yml "$tmp"/
  awk '/^    kubernetes_sd_configs:/ { print "    static_configs:"
                                        print "      - targets: [\"sd-placeholder:9464\"]"; skip = 1; next }
       skip && /^      / { next }
       { skip = 0; print }' "$config" > "$tmp/$(basename "$config")"
  run_check "promtool check config $(basename "$config") (this promtool has no Kubernetes SD: checked with a static target)" \
    promtool check config "$tmp/$(basename "$config")"
  rm -rf "$tmp"
}

check_all() {
  echo "== checking $DEPLOY"
  if ! command -v promtool >/dev/null; then
    fail "promtool not found (Debian package prometheus)"
  else
    run_check "promtool check rules alerts.yml" promtool check rules "$DEPLOY"/prometheus/alerts.yml
    run_check "promtool test rules alerts_test.yml" \
      bash -c 'cd "$1" && promtool test rules alerts_test.yml' _ "$DEPLOY"/prometheus
    run_check "promtool check config prometheus.yml" promtool check config "$DEPLOY"/prometheus/prometheus.yml
    check_k8s_prometheus_config "$DEPLOY"/prometheus/prometheus-kubernetes.yml
  fi
  if [[ -z $LINT ]] && ! python3 -c 'import yaml' 2>/dev/null; then
    fail "no YAML parser: pass --lint (tests/deploy/deploy_lint) or install python3-yaml"
  else
    local json=() yaml=() k8s=()
    mapfile -t json < <(find "$DEPLOY" -name '*.json' | sort)
    mapfile -t yaml < <(find "$DEPLOY" \( -name '*.yaml' -o -name '*.yml' \) -not -path "$DEPLOY/kubernetes/*" | sort)
    mapfile -t k8s < <(find "$DEPLOY/kubernetes" \( -name '*.yaml' -o -name '*.yml' \) | sort)
    ((${#json[@]})) && run_check "${#json[@]} JSON file(s) parse" parse_json "${json[@]}"
    ((${#yaml[@]})) && run_check "${#yaml[@]} YAML file(s) parse" parse_yaml yaml "${yaml[@]}"
    ((${#k8s[@]})) && run_check "${#k8s[@]} Kubernetes manifest(s) parse as objects" parse_yaml k8s "${k8s[@]}"
  fi
  check_metrics
  check_env_names
  local name undocumented=0
  for name in "${METRICS[@]}"; do
    grep -qF "\`$name\`" "$ROOT/docs/OPERATIONS.md" || { echo "      $name is not in docs/OPERATIONS.md"; undocumented=1; }
  done
  ((undocumented)) && fail "docs/OPERATIONS.md lists every coordinator metric" ||
    pass "docs/OPERATIONS.md lists every coordinator metric"
  local script
  for script in "$DEPLOY"/slurm/*; do
    run_check "bash -n $(basename "$script")" bash -n "$script"
  done
}

# Runs the checks on a copy of deploy/ broken by `mutation` (a shell snippet run in the copy) and
# expects the check whose name matches `expected` (a grep -E pattern) to fail, and where `detail`
# is given, a message line matching it (the file, object and reason).
expect_rejected() {
  local what=$1 expected=$2 mutation=$3 detail=${4:-} tmp out part=all
  if ((SCHEMAS)); then [[ $expected == Kubernetes* ]] && part=k8s || part=grafana; fi
  tmp=$(mktemp -d)
  cp -r "$DEPLOY" "$tmp/deploy"
  (cd "$tmp/deploy" && eval "$mutation")
  out=$(bash "${BASH_SOURCE[0]}" --deploy-dir "$tmp/deploy" ${LINT:+--lint "$LINT"} \
        ${NPM_DIR:+--npm-dir "$NPM_DIR"} $( ((SCHEMAS)) && echo --schemas --part $part) 2>&1)
  if grep -qE "^FAIL: .*($expected)" <<<"$out" && { [[ -z $detail ]] || grep -qE -- "$detail" <<<"$out"; }; then
    if [[ -n $detail ]]; then
      pass "rejects $what:$(grep -m1 -E -- "$detail" <<<"$out" | sed 's/^ */ /')"
    else
      pass "rejects $what: $(grep -m1 -E "^FAIL: .*($expected)" <<<"$out")"
    fi
  else
    fail "rejects $what (no failed check matching '$expected'${detail:+ with a line matching '$detail'})"
    printf '%s\n' "$out" | sed 's/^/      /'
  fi
  rm -rf "$tmp"
}

self_test() {
  # The unbroken tree passes first, or the rejections below would prove nothing.
  if bash "${BASH_SOURCE[0]}" --deploy-dir "$DEPLOY" ${LINT:+--lint "$LINT"} >/dev/null 2>&1; then
    pass "deploy/ passes"
  else
    fail "deploy/ itself fails the checks"
  fi
  expect_rejected "an unknown metric in alerts.yml" "metric names" \
    "sed -i 's/deepnet_job_tokens_per_second/deepnet_job_tokens_per_sec/g' prometheus/alerts.yml"
  expect_rejected "an unknown metric in a dashboard" "metric names" \
    "sed -i 's/deepnet_job_tokens_per_second/deepnet_job_tokens_per_sec/g' grafana/dashboards/deepnet.json"
  expect_rejected "a coordinator metric missing from the dashboards" "show every coordinator metric" \
    "sed -i 's/deepnet_job_memory_bytes/deepnet_job_learning_rate/g' grafana/dashboards/deepnet.json"
  expect_rejected "a bad PromQL expression" "check rules" \
    "sed -i 's/expr: up{job=\"deepnet-coordinator\"} == 0/expr: up{job=\"deepnet-coordinator\"} ==/' prometheus/alerts.yml"
  expect_rejected "an alert that no longer fires in its unit test" "test rules" \
    "sed -i 's/expr: sum(deepnet_workers{state=~\"(?i)lost\"}) > 0/expr: sum(deepnet_workers{state=~\"(?i)lost\"}) > 5/' prometheus/alerts.yml"
  expect_rejected "a bad scrape config" "check config prometheus.yml" \
    "sed -i 's/scrape_interval: 15s /scrape_interval: 15 seconds /' prometheus/prometheus.yml"
  expect_rejected "broken JSON" "JSON" "printf '{\"panels\": [}' > grafana/dashboards/broken.json"
  expect_rejected "broken YAML" "YAML" "printf 'a: [1, 2\nb: c\n' > jobs/broken.yaml"
  expect_rejected "a manifest without kind" "Kubernetes manifest" \
    "sed -i '/^kind: Namespace/d' kubernetes/namespace.yaml"
  expect_rejected "an unknown DEEPNET_ variable" "DEEPNET_" \
    "sed -i 's/DEEPNET_WORK_DIR/DEEPNET_WORKDIR/' kubernetes/worker-cpu.yaml"
  expect_rejected "a shell syntax error" "bash -n" \
    "printf 'if true; then\n' >> slurm/deepnet-standalone.sbatch"
}

# `npm ci` into $NPM_DIR from the committed lock file, unless the same lock was installed before.
npm_install() {
  [[ -n $NPM_DIR ]] || { echo "check_deploy: --npm-dir DIR is required" >&2; exit 2; }
  local tool
  for tool in node npm; do
    if ! command -v $tool >/dev/null; then
      # CTest counts exit 77 as skipped (SKIP_RETURN_CODE in tests/deploy/CMakeLists.txt).
      echo "skip: $tool not found: the schema checks need Node.js and npm (scripts/setup.sh installs them)"
      exit 77
    fi
  done
  if [[ -d $NPM_DIR/node_modules ]] && cmp -s "$NPM_SRC/package-lock.json" "$NPM_DIR/package-lock.json"; then
    return 0
  fi
  rm -rf "$NPM_DIR/node_modules" "$NPM_DIR"/grafana-dashboard.schema.json*
  cp "$NPM_SRC/package.json" "$NPM_SRC/package-lock.json" "$NPM_DIR"/
  local out start=$SECONDS
  if out=$(cd "$NPM_DIR" && npm ci --no-audit --no-fund --loglevel=error 2>&1); then
    pass "npm ci in $NPM_DIR ($((SECONDS - start)) s)"
  else
    rm -f "$NPM_DIR/package-lock.json"  # retried next time
    fail "npm ci in $NPM_DIR (packages from tests/deploy/npm/package-lock.json)"
    printf '%s\n' "$out" | sed 's/^/      /'
    return 1
  fi
}

schemas() { node "$NPM_SRC/deploy_schemas.js" --modules "$NPM_DIR" "$@"; }

check_schemas() {
  echo "== schema checks on $DEPLOY"
  npm_install || return
  local tmp
  tmp=$(mktemp -d)
  [[ $PART == grafana ]] || check_k8s_schemas "$tmp"
  [[ $PART == k8s ]] || check_grafana_schemas "$tmp"
  rm -rf "$tmp"
}

check_k8s_schemas() {
  local tmp=$1
  # Throw-away token files for the secretGenerator (real ones never enter git).
  cp -r "$DEPLOY/kubernetes" "$tmp/kubernetes"
  mkdir -p "$tmp/kubernetes/secrets"
  printf 'test-worker-token-0123456789 workers worker workers=deepnet-worker-*\n' > "$tmp/kubernetes/secrets/tokens"
  printf 'test-worker-token-0123456789\n' > "$tmp/kubernetes/secrets/worker-token"
  run_check "Kubernetes objects: API schemas, no unknown fields, requests/limits, PodDisruptionBudgets, image tags = project(VERSION)" \
    schemas k8s "$tmp/kubernetes" "$ROOT/CMakeLists.txt"
  local kustomize=""
  command -v kubectl >/dev/null &&
    kustomize=$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9][0-9.]*\).*/\1/p')
  if [[ ${kustomize%%.*} -ge 5 ]] 2>/dev/null; then
    if kubectl kustomize "$tmp/kubernetes" > "$tmp/kustomize.yaml" 2> "$tmp/kustomize.err"; then
      run_check "renderer agrees with kubectl kustomize (kustomize v$kustomize)" \
        schemas compare "$tmp/kubernetes" "$tmp/kustomize.yaml"
    else
      fail "kubectl kustomize deploy/kubernetes"; sed 's/^/      /' "$tmp/kustomize.err"
    fi
  else
    echo "skip: renderer vs kubectl kustomize (no kubectl with kustomize >= 5 here)"
  fi
}

check_grafana_schemas() {
  local tmp=$1
  local dashboards=("$DEPLOY"/grafana/dashboards/*.json)
  run_check "Grafana: ${#dashboards[@]} dashboard(s) match @grafana/schema's Dashboard type" \
    schemas grafana "$tmp/panel_queries.json" "${dashboards[@]}"
  if [[ -s $tmp/panel_queries.json ]]; then
    run_check "promtool parses every dashboard panel's PromQL (check rules on the panel queries)" \
      promtool check rules "$tmp/panel_queries.json"
  fi
}

self_test_schemas() {
  npm_install || return
  if bash "${BASH_SOURCE[0]}" --deploy-dir "$DEPLOY" --npm-dir "$NPM_DIR" --schemas >/dev/null 2>&1; then
    pass "deploy/ passes the schema checks"
  else
    fail "deploy/ itself fails the schema checks"
  fi
  local k8s="Kubernetes objects"
  expect_rejected "a wrong field type (replicas: \"two\")" "$k8s" \
    "sed -i 's/^  replicas: 2$/  replicas: \"two\"/' kubernetes/worker-cpu.yaml" \
    'worker-cpu.yaml: StatefulSet/deepnet-worker-cpu: .*replicas'
  expect_rejected "an unknown field in a pod spec" "$k8s" \
    "sed -i 's/^      terminationGracePeriodSeconds: 30$/&\n      terminationGracePeriod: 30/' kubernetes/coordinator.yaml" \
    'coordinator.yaml: StatefulSet/deepnet-coordinator: .*terminationGracePeriod.* does not exist'
  expect_rejected "a missing required field (a Service port without port)" "$k8s" \
    "sed -i '/^      port: 9464$/d' kubernetes/coordinator.yaml" \
    'coordinator.yaml: Service/deepnet-coordinator: .*required property port'
  expect_rejected "a container without limits" "$k8s" \
    "sed -i '/limits: {cpu: \"4\", memory: 4Gi}/d' kubernetes/coordinator.yaml" \
    'coordinator.yaml: StatefulSet/deepnet-coordinator: container .coordinator. has no resources.limits.cpu'
  expect_rejected "workers without a PodDisruptionBudget" "$k8s" \
    "sed -i '/- disruption.yaml/d' kubernetes/kustomization.yaml" \
    'worker-gpu.yaml: DaemonSet/deepnet-worker-gpu: 0 PodDisruptionBudget'
  expect_rejected "an image tag that is not the project version" "$k8s" \
    "sed -i '0,/newTag:.*/s//newTag: \"latest\"/' kubernetes/kustomization.yaml" \
    'image .*deepnet:latest is not tagged with the project version'
  expect_rejected "a kustomization field the renderer does not implement" "$k8s" \
    "printf 'commonLabels:\n  team: ml\n' >> kubernetes/kustomization.yaml" \
    "field 'commonLabels' is not implemented"
  expect_rejected "an unknown panel field in a dashboard" "Grafana" \
    "sed -i '0,/\"gridPos\": {/s//\"gridPosition\": {}, &/' grafana/dashboards/deepnet.json" \
    'deepnet.json: /panels/0 .*additional properties .gridPosition'
  expect_rejected "a wrong type in a dashboard (gridPos.h a string)" "Grafana" \
    "sed -i '0,/\"h\": \([0-9]*\)/s//\"h\": \"\1\"/' grafana/dashboards/deepnet.json" \
    'deepnet.json: /panels/0/gridPos/h .*must be number'
  expect_rejected "a panel query that is not PromQL" "PromQL" \
    "sed -i '0,/\"expr\": \"sum(/s//\"expr\": \"sum((/' grafana/dashboards/deepnet.json" \
    'panel_2_A'
}

check_jobs() {
  [[ -x $DEEPNET ]] || { echo "check_deploy: --deepnet PATH is required with --jobs-only" >&2; exit 2; }
  local job out rc
  for job in "$DEPLOY"/jobs/*.yaml; do
    out=$("$DEEPNET" train --config "$job" --validate-config 2>&1)
    rc=$?
    if ((rc == 0)); then pass "deepnet train --validate-config $(basename "$job")"
    else fail "deepnet train --validate-config $(basename "$job")"; printf '%s\n' "$out" | sed 's/^/      /'; fi
  done
}

case $MODE/$SCHEMAS in
  all/0) check_all ;;
  self-test/0) self_test ;;
  all/1) check_schemas ;;
  self-test/1) self_test_schemas ;;
  npm-install/*) npm_install ;;
  jobs/*) check_jobs ;;
esac
if ((FAILURES)); then echo "check_deploy: $FAILURES check(s) failed"; exit 1; fi
echo "check_deploy: all checks passed"
