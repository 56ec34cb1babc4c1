#!/usr/bin/env bash
# Lablup's end-to-end tester (PyPI backend.ai-test 26.9.x, `backend.ai test run-test`)
# against a fresh `bai serve`, set up as a Backend.AI operator sets a site up for the suite:
# the storage host it names (`local:volume1`), a keypair policy allowing clusters of 4
# containers and enough folders, a `model` folder with a model definition, the remote
# hosts of `scripts/hosts.sh` in the resource group (multi-node specs), Lablup's web server
# for the `login` spec, and agents that offer three times their cores (`agent_cpu_overcommit`:
# the specs run two 2-container sessions at once, and replicas_successfully_scale three
# 3-container replicas of 1 core each across the two remote hosts, on a 2-core test machine). Runs each spec
# alone (a timeout each), then stops everything and removes the containers and volumes of
# this installation (label ai.backend.bai-instance=<its id>) on every engine.
#
#   tests/lablup-tester/run.sh                 # every spec
#   tests/lablup-tester/run.sh login purge_group_success
#
# Environment: BAI (the binary; copied first, so a rebuild mid-run changes nothing),
# SUITE (venv with backend.ai-test), CLI26 (venv with the official CLI, for `session
# destroy`), WEBSERVER_VENV (backend.ai-webserver 26.9.x), SPEC_TIMEOUT (seconds per spec,
# default 240), OUT (results directory), HOSTS (1, the default: the running hosts of
# scripts/hosts.sh join the default resource group; 0: none), PG_URL (PostgreSQL: a fresh
# database is made there and dropped after; unset: SQLite), MANAGERS (with
# PostgreSQL, how many `bai serve` share it, default 1; the tester talks to the first).
# Results: $OUT/results.tsv (spec, result, seconds, leftover sessions, first cause),
# $OUT/logs/<spec>.log, $OUT/work/test_output/*.log (the tester's tracebacks),
# $OUT/bai<N>.log, $OUT/webserver.log.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BAI=${BAI:-$HOME/.cache/bai-target/debug/bai}
SUITE=${SUITE:-$HOME/.cache/bai-cli/suite}
CLI26=${CLI26:-$HOME/.cache/bai-cli/venv26}
WEBSERVER_VENV=${WEBSERVER_VENV:-$HOME/.cache/bai-cli/webserver}
SPEC_TIMEOUT=${SPEC_TIMEOUT:-240}
OUT=${OUT:-$(mktemp -d /tmp/bai-lablup-tester.XXXXXX)}
HOSTS=${HOSTS:-1}
MANAGERS=${MANAGERS:-1}
ADMIN_EMAIL=admin@bai.local
ADMIN_PASSWORD=Admin-pass-1
mkdir -p "$OUT/logs" "$OUT/work" "$OUT/volume1" "$OUT/webserver"
echo "results in $OUT"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

cp "$BAI" "$OUT/bai"
PIDS=()
INSTANCE=
DB_NAME=
ENGINES='[]'

stop_all() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    done
    if [ -n "$INSTANCE" ]; then
        # This installation's containers and volumes, on this host's engine and each host's.
        while read -r -a h; do
            ids=$(docker "${h[@]}" ps -aq --filter "label=ai.backend.bai-instance=$INSTANCE")
            # shellcheck disable=SC2086
            [ -n "$ids" ] && { echo "removing containers left: $ids"; docker "${h[@]}" rm -f $ids > /dev/null; }
            vols=$(docker "${h[@]}" volume ls -q --filter "label=ai.backend.bai-instance=$INSTANCE")
            # shellcheck disable=SC2086
            [ -n "$vols" ] && docker "${h[@]}" volume rm -f $vols > /dev/null
        done < <(python3 -c '
import json, sys
print("-H unix:///var/run/docker.sock")
for e in json.loads(sys.argv[1]):
    print("-H", e["endpoint"], "--tlsverify", "--tlscacert", e["tls_ca"], "--tlscert", e["tls_cert"], "--tlskey", e["tls_key"])
' "$ENGINES")
    fi
    [ -n "$DB_NAME" ] && psql "$PG_URL" -qtAc "DROP DATABASE IF EXISTS $DB_NAME WITH (FORCE)" > /dev/null
    # Images the imagify/commit specs made (bai-tester-imagified) stay: `docker images`.
}
trap stop_all EXIT

# bai's settings come from its file alone (its environment variables would override it).
for v in $(env | grep -o '^\(BAI_[A-Z_]*\|DATABASE_URL\)=' | grep -v '^BAI_HOSTS_DIR='); do unset "${v%=}"; done
if [ -n "${PG_URL:-}" ]; then
    DB_NAME="bai_t_tester_$$"
    psql "$PG_URL" -qtAc "CREATE DATABASE $DB_NAME" || exit 1
    DB_URL="${PG_URL%/*}/$DB_NAME"
    sql() { psql "$DB_URL" -qtA -F ' ' -c "$1"; }
    SESSION_ID="id::text"
else
    [ "$MANAGERS" = 1 ] || { echo "MANAGERS > 1 needs PG_URL (PostgreSQL)"; exit 1; }
    DB_URL=
    # Python's sqlite3 module: no sqlite3 program needed.
    sql() { python3 -c 'import sqlite3, sys
for row in sqlite3.connect(sys.argv[1]).execute(sys.argv[2]): print(*row)' "$OUT/data1/bai.db" "$1"; }
    SESSION_ID="lower(hex(id))"
fi
if [ "$HOSTS" = 1 ]; then
    # The hosts' engines join the resource group the suite uses and see the storage host
    # where this host does (they share its file system).
    BAI_ENGINES=
    eval "$("$ROOT/scripts/hosts.sh" env)"
    ENGINES=$(python3 -c '
import json, sys
engines = json.loads(sys.argv[1])
for e in engines:
    e["scaling_group"] = "default"
    e["storage"] = {"local:volume1": sys.argv[2]}
print(json.dumps(engines))' "$BAI_ENGINES" "$OUT/volume1")
    [ "$ENGINES" != "[]" ] || { echo "HOSTS=1, but no host of scripts/hosts.sh runs: scripts/hosts.sh up 2"; exit 1; }
fi

PORTS=()
for m in $(seq 1 "$MANAGERS"); do
    port=$(free_port)
    PORTS+=("$port")
    mkdir -p "$OUT/data$m"
    cat > "$OUT/bai$m.toml" <<EOF
listen = "127.0.0.1:$port"
data_dir = "$OUT/data$m"
web_dir = "$OUT/web"
admin_email = "$ADMIN_EMAIL"
admin_password = "$ADMIN_PASSWORD"
storage_hosts = ["local:volume1=$OUT/volume1"]
# The default keeps 1g back; 512m leaves more for sessions on a small host.
agent_reserved_mem = "512m"
# Two 2-container sessions at once on a 2-core machine (see the header).
agent_cpu_overcommit = 3
EOF
    [ -n "$DB_URL" ] && echo "database_url = \"$DB_URL\"" >> "$OUT/bai$m.toml"
    "$OUT/bai" check-config --config "$OUT/bai$m.toml" > /dev/null || exit 1
    BAI_ENGINES="$ENGINES" "$OUT/bai" serve --config "$OUT/bai$m.toml" > "$OUT/bai$m.log" 2>&1 &
    PIDS+=("$!")
    # The first makes the schema and the superadmin before the next starts.
    for _ in $(seq 1 240); do
        curl -sf "http://127.0.0.1:$port/" > /dev/null && break
        kill -0 "${PIDS[-1]}" 2>/dev/null || { echo "bai $m exited:"; tail -20 "$OUT/bai$m.log"; exit 1; }
        sleep 0.5
    done
done
EP="http://127.0.0.1:${PORTS[0]}"
INSTANCE=$(sql "select value from system_settings where key='manager.instance_id'" | tr -d '" ')
echo "bai $EP (managers: $MANAGERS, database: ${DB_URL:-SQLite}), instance $INSTANCE"

# Lablup's web server in front of bai (its sessions in Redis), for the `login` spec.
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no > "$OUT/redis.log" 2>&1 &
PIDS+=("$!")
WEB_PORT=$(free_port)
cat > "$OUT/webserver/webserver.toml" <<EOF
[service]
ip = "127.0.0.1"
port = $WEB_PORT
[security]
cookie-secure = false
[api]
endpoint = "$EP"
[session]
flush-on-startup = true
[session.redis]
addr = "127.0.0.1:$REDIS_PORT"
[webserver]
event-loop = "asyncio"
pid-file = "$OUT/webserver/webserver.pid"
ipc-base-path = "$OUT/webserver"
EOF
(cd "$OUT/webserver" && exec "$WEBSERVER_VENV/bin/backend.ai" web start-server -f webserver.toml) > "$OUT/webserver.log" 2>&1 &
PIDS+=("$!")
WEB="http://127.0.0.1:$WEB_PORT"
for _ in $(seq 1 120); do
    curl -sf "$WEB/config.toml" > /dev/null && break
    kill -0 "${PIDS[-1]}" 2>/dev/null || { echo "the web server exited:"; tail -20 "$OUT/webserver.log"; exit 1; }
    sleep 0.5
done

# The superadmin's keypair and a login token, as Lablup's web server gets them.
AUTH=$(curl -s -X POST "$EP/auth/authorize" -H 'content-type: application/json' \
    -d "{\"type\":\"keypair\",\"domain\":\"default\",\"username\":\"$ADMIN_EMAIL\",\"password\":\"$ADMIN_PASSWORD\"}")
AK=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["data"]["access_key"])' "$AUTH")
SK=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["data"]["secret_key"])' "$AUTH")
TOKEN=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["data"]["session_token"])' "$AUTH")

# What the suite needs: clusters of 4 containers, room for folders and committed images in the keypair
# policy; every folder permission on its storage host for the policy, the domain and the
# project the suite uses (project folders, shares and invitations).
gql() {
    curl -s -X POST "$EP/admin/gql" -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' -d "$1"
    echo
}
HOST_PERMS=$(python3 -c '
import json
print(json.dumps({"local:volume1": ["create-vfolder", "modify-vfolder", "delete-vfolder", "mount-in-session", "upload-file", "download-file", "invite-others", "set-user-specific-permission"]}))')
body() { python3 -c 'import json, sys; print(json.dumps({"query": sys.argv[1], "variables": {"h": sys.argv[2], "g": sys.argv[3] if len(sys.argv) > 3 else None}}))' "$@"; }
gql "$(body 'mutation($h: JSONString) { modify_keypair_resource_policy(name: "default", props: {max_containers_per_session: 4, max_concurrent_sessions: 30, max_vfolder_count: 100, max_customized_image_count: 100, allowed_vfolder_hosts: $h}) { ok msg } }' "$HOST_PERMS")"
gql "$(body 'mutation($h: JSONString) { modify_domain(name: "default", props: {allowed_vfolder_hosts: $h}) { ok msg } }' "$HOST_PERMS")"
GROUP_ID=$(curl -s -X POST "$EP/admin/gql" -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
    -d '{"query":"{ groups(domain_name: \"default\") { id name } }"}' |
    python3 -c 'import json, sys; print(next(g["id"] for g in json.load(sys.stdin)["data"]["groups"] if g["name"] == "default"))')
gql "$(body 'mutation($h: JSONString, $g: UUID!) { modify_group(gid: $g, props: {allowed_vfolder_hosts: $h}) { ok msg } }' "$HOST_PERMS" "$GROUP_ID")"

export BACKEND_ENDPOINT=$EP BACKEND_ENDPOINT_TYPE=api BACKEND_ACCESS_KEY=$AK BACKEND_SECRET_KEY=$SK
# The model folder the model-service specs serve (`model-vfolder-name`), with a model
# definition: what an operator prepares for them. Its service is Python's HTTP server on the
# folder (the service's working directory), so `GET /health` finds the `health` file.
cat > "$OUT/model-definition.yaml" <<'EOF2'
models:
  - name: tester-model
    model_path: /models
    service:
      start_command: ["python3", "-m", "http.server", "8000"]
      port: 8000
EOF2
"$CLI26/bin/backend.ai" vfolder create tester-model local:volume1 --usage-mode model
echo ok > "$OUT/health"
(cd "$OUT" && "$CLI26/bin/backend.ai" vfolder upload tester-model model-definition.yaml health)

sed -e "s#@ENDPOINT@#$EP#g" -e "s#@LOGIN_ENDPOINT@#$WEB#g" -e "s#@ACCESS_KEY@#$AK#" -e "s#@SECRET_KEY@#$SK#" \
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
    # A deleted model service's replicas end in the background, as on Backend.AI: they are
    # not left behind unless the service is still being destroyed 20 s on.
    for _ in $(seq 40); do
        [ -z "$(sql "select id from endpoints where lifecycle_stage = 'destroying'")" ] && break
        sleep 0.5
    done
    # Sessions a spec left behind (failed or timed out) would hold the 2 CPUs: destroy them.
    left=$(sql "select $SESSION_ID, access_key from sessions where status not in ('TERMINATED', 'CANCELLED', 'ERROR')")
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
