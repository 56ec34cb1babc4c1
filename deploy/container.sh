#!/usr/bin/env bash
# Builds the container image of bai itself without pulling any image (no registry is needed):
# the Debian bookworm root filesystem scripts/images.sh makes with debootstrap, plus iptables
# (session isolation) and a static busybox (the probe image for remote engines) from Debian's
# mirror, plus bai and its web console. Needs root (chroot), as scripts/images.sh does.
#
#   deploy/container.sh [TAG [BINARY]]
#
# TAG defaults to bai:latest; BINARY to the release build (built here, with the console).
# Running it (see docs/src/operations.md, "Container image"):
#   docker run -d --name bai --network host --cap-add NET_ADMIN --cap-add NET_RAW \
#     -v /var/run/docker.sock:/var/run/docker.sock -v /var/lib/bai:/var/lib/bai bai:latest
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
tag="${1:-bai:latest}"
bin="${2:-}"
WORK="${BAI_IMAGE_WORK:-$HOME/.cache/bai-images}"
if [ -z "$bin" ]; then
  scripts/build-web.sh
  cargo build --release -p bai
  bin="$CARGO_TARGET_DIR/release/bai"
fi
[ -x "$bin" ] || { echo "no bai binary at $bin" >&2; exit 1; }
[ -f web/dist/index.html ] || scripts/build-web.sh
scripts/images.sh base
# The runtime root filesystem (base + iptables + busybox), kept between builds.
runtime="$WORK/bai-runtime"
# Made again when the base is newer (scripts/images.sh rebuilt it).
if [ ! -f "$runtime/.complete" ] || [ "$WORK/base/.complete" -nt "$runtime/.complete" ]; then
  rm -rf "$runtime"
  cp -a "$WORK/base" "$runtime"
  rm -f "$runtime/.complete"
  cp /etc/resolv.conf "$runtime/etc/resolv.conf"
  chroot "$runtime" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  chroot "$runtime" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iptables busybox-static
  chroot "$runtime" apt-get clean
  rm -rf "$runtime"/var/lib/apt/lists/*
  : > "$runtime/etc/resolv.conf"
  touch "$runtime/.complete"
fi
stage=$(mktemp -d "${TMPDIR:-/tmp}/bai-container.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
cp -a "$runtime" "$root"
rm -f "$root/.complete"
mkdir -p "$root/usr/share/bai" "$root/var/lib/bai"
# Symbols stay with the build; the image carries the program.
strip -o "$root/usr/local/bin/bai" "$bin"
chmod 0755 "$root/usr/local/bin/bai"
cp -a web/dist "$root/usr/share/bai/web"
version=$("$bin" --version | awk '{print $2}')
commit=$("$bin" --version | sed -n 's/.*commit \([0-9a-z]*\).*/\1/p')
tar -C "$root" -cf "$stage/bai.tar" .
docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV BAI_LISTEN=0.0.0.0:8090' \
  --change 'ENV BAI_DATA_DIR=/var/lib/bai' \
  --change 'ENV BAI_WEB_DIR=/usr/share/bai/web' \
  --change 'ENV BAI_PROBE_BUSYBOX=/bin/busybox' \
  --change 'VOLUME ["/var/lib/bai"]' \
  --change 'EXPOSE 8090' \
  --change 'WORKDIR /var/lib/bai' \
  --change 'ENTRYPOINT ["/usr/bin/dumb-init", "--", "/usr/local/bin/bai"]' \
  --change 'CMD ["serve"]' \
  --change "LABEL org.opencontainers.image.title=bai org.opencontainers.image.version=$version org.opencontainers.image.revision=$commit" \
  "$stage/bai.tar" "$tag" >/dev/null
echo "built $tag ($version, commit $commit)"
