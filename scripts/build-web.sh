#!/usr/bin/env bash
# Builds the web console (Leptos → wasm32) into web/dist. Idempotent: installs the wasm
# target only when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
ensure_debs brotli binaryen
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
# wasm-bindgen's step after rustc, by its library (web/bindgen) at the version the console
# links: the CLI package would also build its test runner (three times the compile units).
bindgen=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
support=$(awk '/^name = "wasm-bindgen-cli-support"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
if [ "$bindgen" != "$support" ]; then
  echo "wasm-bindgen $bindgen but wasm-bindgen-cli-support $support in Cargo.lock: pin web/bindgen to =$bindgen" >&2
  exit 1
fi
# Its own profile (own lock folder): it builds beside the server's release build.
cargo build -p web-bindgen --profile web-tool
cargo build -p web --target wasm32-unknown-unknown --profile wasm-release
# What web/dist was made from: when neither the module nor the recipe changed, the steps below
# (wasm-opt, wasm-bindgen, brotli at its highest level: 10 s) would make the same files again.
wasm="$CARGO_TARGET_DIR/wasm32-unknown-unknown/wasm-release/web.wasm"
stamp=$(cat "$wasm" web/index.html scripts/build-web.sh "$CARGO_TARGET_DIR/web-tool/web-bindgen" <(wasm-opt --version) | sha256sum | cut -c1-64)
if [ -f web/dist/index.html ] && [ "$(cat web/dist.stamp 2>/dev/null)" = "$stamp" ]; then
  echo "web console in web/dist is up to date"
  exit 0
fi
rm -rf web/dist.tmp web/dist.stamp
mkdir -p web/dist.tmp
# wasm-opt (Debian's binaryen) runs on cargo's output, BEFORE wasm-bindgen: run after it,
# binaryen 108 turns wasm-bindgen's externref table into a funcref one and the page stays
# blank (../shared/TOOLCHAIN.md, pitfall 1); before it, it sees a plain module and the
# browser tests pass on the result.
wasm-opt -Oz --enable-bulk-memory --enable-mutable-globals --enable-sign-ext \
  --enable-nontrapping-float-to-int --enable-reference-types --enable-multivalue \
  "$wasm" -o web/dist.tmp/opt.wasm
"$CARGO_TARGET_DIR/web-tool/web-bindgen" web/dist.tmp/opt.wasm web/dist.tmp
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
echo "$stamp" > web/dist.stamp
echo "web console built in web/dist"
