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
# The linker keeps its relocations: the splitter (web-bindgen split) needs them to move the
# lazily loaded screens' code out of the first module (for the wasm target only).
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="-Clink-args=--emit-relocs" \
  cargo build -p web --target wasm32-unknown-unknown --profile wasm-release
# What web/dist was made from: when neither the module nor the recipe changed, the steps below
# (wasm-opt, wasm-bindgen, brotli at its highest level: 10 s) would make the same files again.
wasm="$CARGO_TARGET_DIR/wasm32-unknown-unknown/wasm-release/web.wasm"
stamp=$(cat "$wasm" web/index.html scripts/build-web.sh "$CARGO_TARGET_DIR/web-tool/web-bindgen" <(wasm-opt --version) | sha256sum | cut -c1-64)
# Every file is named by the hash of what made it (served with a one-year immutable cache): the
# loader of the lazily loaded parts must know the names before wasm-bindgen runs.
hash=${stamp:0:12}
# What a browser downloads (brotli): the first visit (login, Summary, Sessions) and each part
# loaded on first use.
report() {
  size() { stat -c %s "$1.br"; }
  first=0
  for f in index.html "web-$hash.js" "__wasm_split-$hash.js" "web_bg-$hash.wasm"; do
    first=$((first + $(size "web/dist/$f")))
  done
  printf 'first visit: %d KB (brotli: index.html, web.js, the loader, the first module)\n' $((first / 1000))
  for part in web/dist/split_*-"$hash".wasm; do
    printf 'on first use: %s %d KB\n' "$(basename "$part" "-$hash.wasm" | sed 's/^split_//')" $(($(size "$part") / 1000))
  done
  shared=0
  count=0
  for part in web/dist/chunk_*-"$hash".wasm; do
    [ -e "$part" ] || continue
    shared=$((shared + $(size "$part")))
    count=$((count + 1))
  done
  printf 'code two or more of them share: %d KB in %d files (each loaded with the first part that needs it)\n' $((shared / 1000)) "$count"
}
if [ -f web/dist/index.html ] && [ "$(cat web/dist.stamp 2>/dev/null)" = "$stamp" ]; then
  echo "web console in web/dist is up to date"
  report
  exit 0
fi
rm -rf web/dist.tmp web/dist.stamp
mkdir -p web/dist.tmp
# 1. The split, on rustc's output with its relocations: the first module, one module per lazily
#    loaded part of the console, and their loader.
"$CARGO_TARGET_DIR/web-tool/web-bindgen" split "$wasm" web/dist.tmp/split "$hash"
# 2. wasm-opt (Debian's binaryen) on each module, BEFORE wasm-bindgen: run after it, binaryen
#    108 turns wasm-bindgen's externref table into a funcref one and the page stays blank
#    (../shared/TOOLCHAIN.md, pitfall 1); before it, it sees plain modules and the browser tests
#    pass on the result.
opt() {
  wasm-opt -Oz --enable-bulk-memory --enable-mutable-globals --enable-sign-ext \
    --enable-nontrapping-float-to-int --enable-reference-types --enable-multivalue "$1" -o "$2"
}
opt web/dist.tmp/split/main.wasm web/dist.tmp/opt.wasm
for part in web/dist.tmp/split/*-"$hash".wasm; do
  opt "$part" "web/dist.tmp/$(basename "$part")"
done
mv web/dist.tmp/split/__wasm_split-"$hash".js web/dist.tmp/
rm -rf web/dist.tmp/split
# 3. wasm-bindgen on the first module.
"$CARGO_TARGET_DIR/web-tool/web-bindgen" web/dist.tmp/opt.wasm web/dist.tmp
rm web/dist.tmp/opt.wasm
# Precompressed copies (brotli, gzip) that the server hands to browsers asking for them.
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
report
