#!/usr/bin/env bash
# Runs every test on a fresh machine: installs what is missing (PostgreSQL, Chromium and
# its driver, the wasm toolchain), starts PostgreSQL, builds the web console, checks
# formatting and lints, builds the environment images, then runs the unit and integration
# tests (SQLite and PostgreSQL, real Docker containers, headless Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
ensure_debs chromium chromium-driver fonts-nanum docker-registry busybox-static openssh-client prometheus apache2-utils openssl redis-server
. scripts/postgres.sh
# Sessions run on the real Docker engine: its absence fails the run (never skips).
docker info >/dev/null || { echo "Docker engine unavailable: session tests need it" >&2; exit 1; }
scripts/images.sh
scripts/build-web.sh
scripts/cli.sh
# Two extra Docker engines as separate hosts over mutual TLS (several-hosts tests).
scripts/hosts.sh up 2
export BAI_TEST_WEB_DIR="$PWD/web/dist"
cargo fmt --all -- --check
# Licenses, bans and sources of the dependency graph (deny.toml).
command -v cargo-deny >/dev/null || cargo install cargo-deny --locked
cargo deny check licenses bans sources
# No dependency a crate does not use (offline: cargo-machete reads the sources).
command -v cargo-machete >/dev/null || cargo install cargo-machete --locked
cargo machete
# The book (docs/): mdBook renders it (no server or search built in), then every link of the
# book and README is checked offline.
command -v mdbook >/dev/null || cargo install mdbook --locked --version '^0.4' --no-default-features
mdbook build docs
scripts/check-docs.sh
# Layer 2 stays pure: no web, GraphQL or database crate in bai-core's dependency tree.
scripts/check-layers.sh
cargo clippy --all-targets -- -D warnings
cargo clippy -p web --target wasm32-unknown-unknown -- -D warnings
cargo clippy -p web-bindgen -- -D warnings
# The slowest integration tests, printed at the end whatever the outcome.
export BAI_TEST_TIMES="${TMPDIR:-/tmp}/bai-test-times.$$"
: > "$BAI_TEST_TIMES"
# It keeps the run's exit status: `sort | head` under pipefail would end in SIGPIPE (141),
# so the list is cut by sed, which reads its whole input.
slowest() {
  local rc=$?
  echo "slowest integration tests (seconds):"
  sort -rn "$BAI_TEST_TIMES" | sed -n '1,15p' || true
  rm -f "$BAI_TEST_TIMES"
  exit "$rc"
}
trap slowest EXIT
# The several-managers tests start `bai serve` processes of their own (and kill one).
cargo build -p bai
# bai's own container image (deploy/container.sh), from this build, for its test.
deploy/container.sh bai-test:ci "$CARGO_TARGET_DIR/debug/bai"
export BAI_TEST_CONTAINER_IMAGE=bai-test:ci
cargo test --workspace --exclude web --exclude web-bindgen
# Lablup's CLI test suite, alone on the machine: it allows each CLI command 5 seconds.
cargo test -p tests --test it -- --ignored --exact lablup::lablup_cli_integration_suite_passes
# Lablup's end-to-end tester (82 specs, the two hosts above), alone on the machine too: its
# specs need the machine's CPUs and several time out on their own clocks.
cargo test -p tests --test it -- --ignored --exact lablup::lablup_tester_specs_pass --nocapture
