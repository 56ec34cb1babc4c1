#!/usr/bin/env bash
# Lablup's end-to-end tester (PyPI backend.ai-test 26.9.x, `backend.ai test run-test`)
# against a fresh `bai serve`: SQLite in a temporary directory, a free port, the default
# Docker engine. Runs each spec alone (a timeout each), then stops bai and removes the
# containers and volumes of this installation (label ai.backend.bai-instance=<its id>).
#
#   tests/lablup-tester/run.sh                 # every spec
#   tests/lablup-tester/run.sh login purge_group_success
#
# Environment: BAI (the binary; copied first, so a rebuild mid-run changes nothing),
# SUITE (venv with backend.ai-test), CLI26 (venv with the official CLI, for `session
# destroy`), SPEC_TIMEOUT (seconds per spec, default 240), OUT (results directory).
# Results: $OUT/results.tsv (spec, result, seconds, first cause), $OUT/logs/<spec>.log,
# $OUT/work/test_output/*.log (the tester's tracebacks), $OUT/bai.log.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BAI=${BAI:-$HOME/.cache/bai-target/debug/bai}
SUITE=${SUITE:-$HOME/.cache/bai-cli/suite}
CLI26=${CLI26:-$HOME/.cache/bai-cli/venv26}
SPEC_TIMEOUT=${SPEC_TIMEOUT:-240}
OUT=${OUT:-$(mktemp -d /tmp/bai-lablup-tester.XXXXXX)}
ADMIN_EMAIL=admin@bai.local
ADMIN_PASSWORD=Admin-pass-1
mkdir -p "$OUT/logs" "$OUT/work" "$OUT/data"
echo "results in $OUT"

cp "$BAI" "$OUT/bai"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
EP="http://127.0.0.1:$PORT"
cat > "$OUT/bai.toml" <<EOF
listen = "127.0.0.1:$PORT"
data_dir = "$OUT/data"
web_dir = "$OUT/web"
admin_email = "$ADMIN_EMAIL"
admin_password = "$ADMIN_PASSWORD"
# The default keeps 1g back; 512m leaves more for sessions on a small host.
agent_reserved_mem = "512m"
EOF
"$OUT/bai" check-config --config "$OUT/bai.toml" || exit 1
"$OUT/bai" serve --config "$OUT/bai.toml" > "$OUT/bai.log" 2>&1 &
BAI_PID=$!
INSTANCE=

stop_bai() {
    if kill -0 "$BAI_PID" 2>/dev/null; then
        kill "$BAI_PID"
        for _ in $(seq 1 30); do kill -0 "$BAI_PID" 2>/dev/null || break; sleep 1; done
        kill -0 "$BAI_PID" 2>/dev/null && kill -9 "$BAI_PID"
    fi
    if [ -n "$INSTANCE" ]; then
        ids=$(docker ps -aq --filter "label=ai.backend.bai-instance=$INSTANCE")
        [ -n "$ids" ] && { echo "removing containers left: $ids"; docker rm -f $ids > /dev/null; }
        vols=$(docker volume ls -q --filter "label=ai.backend.bai-instance=$INSTANCE")
        [ -n "$vols" ] && docker volume rm -f $vols > /dev/null
    fi
    # Images the imagify/commit specs made (bai-tester-imagified) stay: `docker images`.
}
trap stop_bai EXIT

for _ in $(seq 1 120); do
    curl -sf "$EP/" > /dev/null && break
    kill -0 "$BAI_PID" 2>/dev/null || { echo "bai exited:"; tail -20 "$OUT/bai.log"; exit 1; }
    sleep 0.5
done
INSTANCE=$(sqlite3 "$OUT/data/bai.db" "select json_extract(value, '$') from system_settings where key='manager.instance_id'")
echo "bai $EP, instance $INSTANCE, pid $BAI_PID"

# The superadmin's keypair and a login token, as Lablup's web server gets them.
AUTH=$(curl -s -X POST "$EP/auth/authorize" -H 'content-type: application/json' \
    -d "{\"type\":\"keypair\",\"domain\":\"default\",\"username\":\"$ADMIN_EMAIL\",\"password\":\"$ADMIN_PASSWORD\"}")
AK=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["data"]["access_key"])' "$AUTH")
SK=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["data"]["secret_key"])' "$AUTH")
TOKEN=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["data"]["session_token"])' "$AUTH")

# What the suite needs of the keypair policy: clusters of 4 containers, room for folders.
curl -s -X POST "$EP/admin/gql" -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
    -d '{"query":"mutation { modify_keypair_resource_policy(name: \"default\", props: {max_containers_per_session: 4, max_concurrent_sessions: 30, max_vfolder_count: 100}) { ok msg } }"}'
echo

export BACKEND_ENDPOINT=$EP BACKEND_ENDPOINT_TYPE=api BACKEND_ACCESS_KEY=$AK BACKEND_SECRET_KEY=$SK
# The model folder the model-service specs serve (`model-vfolder-name`), with a model
# definition: what an operator prepares for them (bai serves no models yet).
cat > "$OUT/model-definition.yaml" <<'EOF2'
models:
  - name: tester-model
    model_path: /models
    service:
      start_command: ["python3", "-m", "http.server", "8000"]
      port: 8000
EOF2
"$CLI26/bin/backend.ai" vfolder create tester-model local --usage-mode model
(cd "$OUT" && "$CLI26/bin/backend.ai" vfolder upload tester-model model-definition.yaml)

sed -e "s#@ENDPOINT@#$EP#g" -e "s#@ACCESS_KEY@#$AK#" -e "s#@SECRET_KEY@#$SK#" \
    "$HERE/tester.toml.in" > "$OUT/tester.toml"

if [ $# -gt 0 ]; then
    SPECS="$*"
else
    # The keys run-test looks specs up by (`get-all-specs` prints each spec's `name`, and
    # one differs from its key: commit_interactive_session_success is
    # single_node_single_container_commit_interactive_session_success).
    SPECS=$("$SUITE/bin/python" -c 'from ai.backend.test.testcases.testspecs import ROOT_TEST_SPECS as R; print("\n".join(sorted(R)))')
fi

printf 'spec\tresult\tseconds\tleftover_sessions\tfirst_cause\n' > "$OUT/results.tsv"
for spec in $SPECS; do
    log="$OUT/logs/$spec.log"
    start=$(date +%s.%N)
    (cd "$OUT/work" && NO_COLOR=1 timeout -k 10 "$SPEC_TIMEOUT" \
        "$SUITE/bin/backend.ai" test run-test "$spec" -f "$OUT/tester.toml") > "$log" 2>&1
    rc=$?
    secs=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
    # Sessions a spec left behind (failed or timed out) would hold the 2 CPUs: destroy them.
    left=$(sqlite3 "$OUT/data/bai.db" "select lower(hex(id)) || ' ' || access_key from sessions where status not in ('TERMINATED', 'CANCELLED', 'ERROR')")
    nleft=0
    while read -r sid owner; do
        [ -z "$sid" ] && continue
        nleft=$((nleft + 1))
        echo "leftover session $sid (owner $owner): destroying" >> "$log"
        "$CLI26/bin/backend.ai" session destroy -f -o "$owner" "$sid" >> "$log" 2>&1
    done <<< "$left"
    IFS=$'\t' read -r result cause < <(python3 "$HERE/verdict.py" "$log" "$OUT/work" "$rc")
    printf '%s\t%s\t%s\t%s\t%s\n' "$spec" "$result" "$secs" "$nleft" "$cause" >> "$OUT/results.tsv"
    printf '%-90s %-8s %6ss  %s\n' "$spec" "$result" "$secs" "${cause:0:200}"
done

echo
python3 - "$OUT/results.tsv" <<'EOF'
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t", quoting=csv.QUOTE_NONE))
c = collections.Counter(r["result"] for r in rows)
print(f"{len(rows)} specs: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
EOF
