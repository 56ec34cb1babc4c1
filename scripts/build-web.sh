#!/usr/bin/env bash
# Builds the web console (Leptos → wasm32) into web/dist. Idempotent: installs the wasm
# target and the wasm-bindgen CLI of the version pinned in Cargo.lock only when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
  # Not --locked: its lockfile pins a crate version this registry lacks (TOOLCHAIN.md).
  cargo install wasm-bindgen-cli --version "$want"
fi
cargo build -p web --target wasm32-unknown-unknown --profile wasm-release
rm -rf web/dist.tmp
mkdir -p web/dist.tmp
wasm-bindgen --target web --no-typescript --out-dir web/dist.tmp \
  "$CARGO_TARGET_DIR/wasm32-unknown-unknown/wasm-release/web.wasm"
cp web/index.html web/dist.tmp/index.html
rm -rf web/dist
mv web/dist.tmp web/dist
echo "web console built in web/dist"
