#!/usr/bin/env bash
# Builds the whole product, optimised (release; web console included), and runs `bai serve`
# on defaults:
# http://127.0.0.1:8090, data in ./data (SQLite). Extra arguments go to `bai serve`.
# Each phase says what it does and how long it took on a fresh 2-core machine (README), and
# ticks a clock while it runs; a second run finds everything built and starts in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
start=$SECONDS
# phase NAME FRESH-TIME COMMAND...: runs COMMAND with a clock ticking every 30 s.
phase() {
  local name=$1 fresh=$2 t0=$SECONDS
  shift 2
  printf '==> %s (fresh 2-core machine: %s; cached: seconds) [%s]\n' "$name" "$fresh" "$(date +%T)"
  (
    while sleep 30; do
      printf '    … %s: %d:%02d so far\n' "$name" $(((SECONDS - t0) / 60)) $(((SECONDS - t0) % 60))
    done
  ) &
  local ticker=$!
  local rc=0
  "$@" || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  [ "$rc" -eq 0 ] || { echo "==> $name failed (exit $rc)" >&2; exit "$rc"; }
  printf '==> %s: done in %d:%02d\n' "$name" $(((SECONDS - t0) / 60)) $(((SECONDS - t0) % 60))
}
# Remote engines (several hosts) get bai's probe image, made of a static busybox.
phase "packages (busybox-static)" "seconds" ensure_debs busybox-static
phase "environment images (debootstrap, Python and C++ images)" "1:16 measured" scripts/images.sh
phase "web console (wasm target, wasm-bindgen, size-optimised build)" "4:26 measured" scripts/build-web.sh
phase "server (release build of bai)" "11:09 measured" cargo build --release -p api --bin bai
printf '==> ready after %d:%02d; starting bai serve\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60))
exec "$CARGO_TARGET_DIR/release/bai" serve "$@"
