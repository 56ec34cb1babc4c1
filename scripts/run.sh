#!/usr/bin/env bash
# Builds the whole product, optimised (release; web console included), and runs `bai serve`
# on defaults:
# http://127.0.0.1:8090, data in ./data (SQLite). Extra arguments go to `bai serve`.
#
# The three builds run side by side (each mostly waits on something the others do not: the
# Debian mirror, a single-threaded compile or link step), each says what it does and how long
# it took on a fresh 2-core machine (docs/src/build-speed.md), a clock ticks every 30 s, and
# each logs to $CARGO_TARGET_DIR/run-logs/. A second run finds everything built and starts in
# seconds.
# BAI_BUILD_TIMINGS=1 adds cargo's --timings report for the server build.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
start=$SECONDS
logs="$CARGO_TARGET_DIR/run-logs"
mkdir -p "$logs"
mmss() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

echo "==> Debian packages (busybox-static for remote engines' probe image, debootstrap, brotli, binaryen) [$(date +%T)]"
ensure_debs busybox-static debootstrap brotli binaryen

timings=()
[ "${BAI_BUILD_TIMINGS:-}" = 1 ] && timings=(--timings)
names=(images console server)
declare -A what=(
  [images]="environment images (debootstrap, Python and C++ images)"
  [console]="web console (wasm target, wasm-bindgen, size-optimised build)"
  [server]="server (release build of bai)"
)
# What each took on the fresh 2-core machine (docs/src/build-speed.md), all three side by side
# (the console, at the lowest priority, ends last).
declare -A fresh=([images]="2:26" [console]="10:55" [server]="8:48")
declare -A pid=() t0=() took=()
for n in "${names[@]}"; do
  printf '==> %s: started (fresh 2-core machine: %s; cached: seconds), log %s\n' \
    "${what[$n]}" "${fresh[$n]}" "$logs/$n.log"
done
t=$SECONDS
scripts/images.sh >"$logs/images.log" 2>&1 & pid[images]=$!
# The console at the lowest CPU priority: the server build is the longest chain, and the
# console fills what it leaves idle (rustc's front end of each crate runs on one core).
nice -n 19 scripts/build-web.sh >"$logs/console.log" 2>&1 & pid[console]=$!
cargo build --release -p bai "${timings[@]}" >"$logs/server.log" 2>&1 & pid[server]=$!
for n in "${names[@]}"; do t0[$n]=$t; done

fail() {
  echo "==> $1 failed (exit $2); the end of $logs/$1.log:" >&2
  tail -n 40 "$logs/$1.log" >&2
  for n in "${names[@]}"; do [ -z "${took[$n]:-}" ] && kill "${pid[$n]}" 2>/dev/null; done
  exit "$2"
}
last_tick=$SECONDS
while [ ${#took[@]} -lt ${#names[@]} ]; do
  sleep 1
  for n in "${names[@]}"; do
    [ -n "${took[$n]:-}" ] && continue
    kill -0 "${pid[$n]}" 2>/dev/null && continue
    rc=0
    wait "${pid[$n]}" || rc=$?
    [ "$rc" -eq 0 ] || fail "$n" "$rc"
    took[$n]=$((SECONDS - t0[$n]))
    printf '==> %s: done in %s\n' "${what[$n]}" "$(mmss "${took[$n]}")"
  done
  if [ $((SECONDS - last_tick)) -ge 30 ] && [ ${#took[@]} -lt ${#names[@]} ]; then
    last_tick=$SECONDS
    running=()
    for n in "${names[@]}"; do [ -z "${took[$n]:-}" ] && running+=("$n"); done
    printf '    … %s so far; still building: %s (tail -f %s/<name>.log)\n' \
      "$(mmss $((SECONDS - start)))" "${running[*]}" "$logs"
  fi
done
[ ${#timings[@]} -gt 0 ] && echo "==> cargo's timing report: $CARGO_TARGET_DIR/cargo-timings/cargo-timing.html"
echo "==> the book (user guide, administration, configuration…): $([ -f docs/book/index.html ] && echo docs/book/index.html || echo 'docs/src/SUMMARY.md; `mdbook build docs` renders it')"
printf '==> ready after %s; starting bai serve\n' "$(mmss $((SECONDS - start)))"
exec "$CARGO_TARGET_DIR/release/bai" serve "$@"
