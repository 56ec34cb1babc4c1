#!/usr/bin/env bash
# Builds the web console (Leptos → wasm32) into web/dist. Idempotent: installs the wasm
# target and the wasm-bindgen CLI of the version pinned in Cargo.lock only when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
ensure_debs brotli binaryen
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
  # Not --locked: its lockfile pins a crate version this registry lacks (TOOLCHAIN.md).
  # In a target folder of its own: in $CARGO_TARGET_DIR it would wait for the server's
  # release build (scripts/run.sh runs both side by side) to release the folder's lock.
  # Unoptimised: on two cores it builds in 49 s instead of 2:28 (1:17 of CPU instead of
  # 4:16), and it then takes 1.2 s instead of 0.3 s on the console, with identical output.
  CARGO_PROFILE_RELEASE_OPT_LEVEL=0 env -u CARGO_TARGET_DIR cargo install wasm-bindgen-cli --version "$want"
fi
cargo build -p web --target wasm32-unknown-unknown --profile wasm-release
rm -rf web/dist.tmp
mkdir -p web/dist.tmp
# wasm-opt (Debian's binaryen) runs on cargo's output, BEFORE wasm-bindgen: run after it,
# binaryen 108 turns wasm-bindgen's externref table into a funcref one and the page stays
# blank (../shared/TOOLCHAIN.md, pitfall 1); before it, it sees a plain module and the
# browser tests pass on the result.
wasm-opt -Oz --enable-bulk-memory --enable-mutable-globals --enable-sign-ext \
  --enable-nontrapping-float-to-int --enable-reference-types --enable-multivalue \
  "$CARGO_TARGET_DIR/wasm32-unknown-unknown/wasm-release/web.wasm" -o web/dist.tmp/opt.wasm
wasm-bindgen --target web --no-typescript --out-dir web/dist.tmp --out-name web web/dist.tmp/opt.wasm
rm web/dist.tmp/opt.wasm
# Content-hashed names (served with a one-year immutable cache) and precompressed copies
# (brotli, gzip) that the server hands to browsers asking for them.
hash=$(cat web/dist.tmp/web.js web/dist.tmp/web_bg.wasm | sha256sum | cut -c1-12)
mv web/dist.tmp/web.js "web/dist.tmp/web-$hash.js"
mv web/dist.tmp/web_bg.wasm "web/dist.tmp/web_bg-$hash.wasm"
sed -e "s|/web.js|/web-$hash.js|" -e "s|/web_bg.wasm|/web_bg-$hash.wasm|" web/index.html > web/dist.tmp/index.html
for f in web/dist.tmp/*; do
  brotli -q 11 -k -f "$f"
  gzip -9 -k -f "$f"
done
rm -rf web/dist
mv web/dist.tmp web/dist
echo "web console built in web/dist"
