#!/usr/bin/env bash
# Builds the whole product, optimised (release; web console included), and runs `bai serve`
# on defaults:
# http://127.0.0.1:8090, data in ./data (SQLite). Extra arguments go to `bai serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
# Remote engines (several hosts) get bai's probe image, made of a static busybox.
ensure_debs busybox-static
scripts/images.sh
scripts/build-web.sh
cargo build --release -p api --bin bai
exec "$CARGO_TARGET_DIR/release/bai" serve "$@"
