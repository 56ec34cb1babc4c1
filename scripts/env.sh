# Sourced by the other scripts: shared build settings.
# Builds go to a cache outside the clone so fresh clones (and CI) reuse earlier work.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/bai-target}"
export PATH="$HOME/.cargo/bin:$PATH"
# Two cores: never more than two compile jobs.
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"

# Installs Debian packages that are missing (idempotent; needs root, as on these machines).
ensure_debs() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}
