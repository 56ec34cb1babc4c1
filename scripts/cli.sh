#!/usr/bin/env bash
# Installs Backend.AI's official client (`backend.ai` CLI) from PyPI into a virtualenv outside
# the clone, for the compatibility tests. Idempotent. On Python 3.11 the newest client is
# 23.9.x; it reads yarl internals that yarl 1.10 changed, hence the pin.
set -euo pipefail
VENV="${BAI_CLI_VENV:-$HOME/.cache/bai-cli/venv}"
WANT="backend.ai-client==23.9.10 yarl<1.10"
if [ -x "$VENV/bin/backend.ai" ] && [ "$(cat "$VENV/.bai-pins" 2>/dev/null)" = "$WANT" ]; then
  echo "backend.ai client present: $VENV"
  exit 0
fi
. "$(dirname "$0")/env.sh"
ensure_debs python3-venv
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV"
# shellcheck disable=SC2086
"$VENV/bin/pip" install -q $WANT
echo "$WANT" > "$VENV/.bai-pins"
echo "backend.ai client installed: $VENV"
