#!/usr/bin/env bash
# Builds bai's environment images offline (no registry needed): a Debian bookworm root
# filesystem made with debootstrap, packages installed into it on the host, then
# `docker import`ed with Backend.AI's labels. Idempotent: an image whose tag exists is kept.
#
#   bai.local/stable/python:3.11-debian12   python3, pip, numpy, Jupyter Notebook, JupyterLab,
#                                           TensorBoard (+ tensorboardX), a web terminal
#                                           (shellinabox as the `ttyd` app), tmux, sshd
#   bai.local/stable/cpp:12-debian12        g++, make, tmux, sshd
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
ensure_debs debootstrap

PYTHON_TAG=bai.local/stable/python:3.11-debian12
CPP_TAG=bai.local/stable/cpp:12-debian12
MIRROR="${BAI_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
WORK="${BAI_IMAGE_WORK:-$HOME/.cache/bai-images}"

# Bumped whenever the recipe below changes, so cached images are rebuilt once.
REV=4
have() {
  [ "$(docker image inspect -f '{{index .Config.Labels "ai.backend.bai-image-rev"}}' "$1" 2>/dev/null)" = "$REV" ]
}
# `scripts/images.sh base`: only the shared base root filesystem (deploy/container.sh).
base="$WORK/base"
if [ "${1:-}" != base ] && have "$PYTHON_TAG" && have "$CPP_TAG"; then
  echo "environment images present: $PYTHON_TAG $CPP_TAG"
  exit 0
fi
mkdir -p "$WORK"

# The shared base: minimal bookworm with the session tooling and the non-root `work` user.
if [ ! -f "$base/.complete" ]; then
  rm -rf "$base"
  debootstrap --variant=minbase \
    --include=ca-certificates,tmux,openssh-server,procps,dumb-init,less,nano \
    bookworm "$base" "$MIRROR"
  chroot "$base" useradd --create-home --home-dir /home/work --uid 1000 --user-group --shell /bin/bash work
  # sshd is started per session with its own host key; none is baked into the image.
  rm -f "$base"/etc/ssh/ssh_host_*
  touch "$base/.complete"
fi
[ "${1:-}" = base ] && { echo "base root filesystem in $base"; exit 0; }

# build TAG PACKAGES LABEL... — with $OVERLAY (a directory copied over the root filesystem)
# and $POST (a script run in it after the packages) when set.
build() {
  local tag=$1 packages=$2
  shift 2
  have "$tag" && { echo "keeping $tag"; return; }
  docker image rm "$tag" >/dev/null 2>&1 || true
  local root="$WORK/rootfs-$(echo "$tag" | tr '/:' '__')"
  rm -rf "$root"
  cp -a "$base" "$root"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  if [ -n "$packages" ]; then
    # No package's daemon starts while it is installed (the chroot shares the host's network).
    printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
    chmod +x "$root/usr/sbin/policy-rc.d"
    # shellcheck disable=SC2086
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # shellcheck disable=SC2086
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages
  fi
  if [ -n "${OVERLAY:-}" ]; then cp -a "$OVERLAY/." "$root/"; fi
  if [ -n "${POST:-}" ]; then
    # Downloads in $POST trust what this host trusts (a site's TLS-inspecting proxy, say):
    # the host's CA bundle stands in for the image's while it runs, then the image's is back.
    local bundle="$root/etc/ssl/certs/ca-certificates.crt"
    cp "$bundle" "$root/tmp/image-ca.crt"
    cp /etc/ssl/certs/ca-certificates.crt "$bundle"
    chroot "$root" /bin/bash -euo pipefail -c "$POST"
    mv "$root/tmp/image-ca.crt" "$bundle"
  fi
  chroot "$root" apt-get clean
  rm -f "$root/usr/sbin/policy-rc.d"
  rm -rf "$root"/var/lib/apt/lists/* "$root/.complete"
  : > "$root/etc/resolv.conf"
  local changes=(--change 'USER work' --change 'WORKDIR /home/work' --change 'ENV HOME=/home/work'
                 --change 'ENV LANG=C.UTF-8' --change 'ENTRYPOINT ["/usr/bin/dumb-init", "--"]'
                 --change 'CMD ["/bin/bash"]')
  for l in "$@"; do changes+=(--change "LABEL ${l%%=*}=\"${l#*=}\""); done
  tar -C "$root" -c . | docker import "${changes[@]}" - "$tag"
  rm -rf "$root"
  echo "built $tag"
}

common=(
  'ai.backend.kernelspec=1'
  'ai.backend.base-distro=debian12'
  'ai.backend.resource.min.cpu=1'
  'ai.backend.resource.min.mem=256m'
  'ai.backend.features=batch query uid-match user-input'
  "ai.backend.bai-image-rev=$REV"
)
# The Python image's apps, the Backend.AI way: declared in `ai.backend.service-ports`, each
# started by its service definition (scripts/images/python/etc/backend.ai/service-defs/).
# JupyterLab and TensorBoard come from PyPI into a virtualenv of their own (/opt/bai-apps:
# they need newer Jupyter libraries than Debian's Notebook, which stays as it is); notebooks
# run on the system Python's kernel; tensorboardX lets that Python log scalars.
OVERLAY=scripts/images/python \
POST='python3 -m venv /opt/bai-apps
/opt/bai-apps/bin/pip install -q --no-cache-dir "jupyterlab>=4.2,<5" "tensorboard>=2.16,<3"
pip install -q --no-cache-dir --break-system-packages "tensorboardX>=2.6,<3"
rm -rf /opt/bai-apps/share/jupyter/kernels
chmod -R a+rX /opt/bai-apps /etc/backend.ai' \
build "$PYTHON_TAG" "python3 python-is-python3 python3-pip python3-venv python3-numpy jupyter-notebook python3-ipykernel shellinabox" \
  "${common[@]}" 'ai.backend.runtime-type=python' 'ai.backend.runtime-path=/usr/bin/python3' \
  'ai.backend.service-ports=jupyter:http:8080,jupyterlab:http:8090,tensorboard:http:6006,ttyd:http:7681'
build "$CPP_TAG" "g++ make libc6-dev" \
  "${common[@]}" 'ai.backend.runtime-type=cpp' 'ai.backend.runtime-path=/usr/bin/g++' \
  'ai.backend.service-ports='
