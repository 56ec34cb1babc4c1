#!/usr/bin/env bash
# Installs Backend.AI's official clients (`backend.ai` CLI) and the fuzzer (schemathesis) from
# PyPI into virtualenvs outside the clone, for the compatibility and fuzz tests. Idempotent.
# - 23.9.10 on Python 3.11 (it reads yarl internals that yarl 1.10 changed, hence the pin);
# - the newest 26.9.x on Python 3.13 from pyenv;
# - Lablup's CLI test suite (backend.ai-test 26.9.x) with the client it pins;
# - Lablup's web servers (backend.ai-webserver 26.9.x, backend.ai-console-server 20.9.7);
# - aiosmtpd, the SMTP server of the mail tests.
set -euo pipefail
. "$(dirname "$0")/env.sh"

install_client() { # venv python pins
  local venv="$1" python="$2" want="$3"
  if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.bai-pins" 2>/dev/null)" = "$want" ]; then
    echo "present: $venv ($want)"
    return
  fi
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q $want
  echo "$want" > "$venv/.bai-pins"
  echo "installed: $venv ($want)"
}

ensure_debs python3-venv
install_client "${BAI_CLI_VENV:-$HOME/.cache/bai-cli/venv}" python3 "backend.ai-client==23.9.10 yarl<1.10"

# pyenv_python VERSION OVERRIDE WHY: the newest pyenv Python VERSION.x (or OVERRIDE), or exit.
pyenv_python() {
  local want="$1" py="$2" why="$3" root
  if [ -z "$py" ]; then
    root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
    py="$(ls -d "$root"/versions/"$want".*/bin/python3 2>/dev/null | sort -V | tail -1 || true)"
  fi
  [ -x "$py" ] || { echo "Python $want (pyenv) is missing: $why needs it" >&2; exit 1; }
  echo "$py"
}
PY313="$(pyenv_python 3.13 "${BAI_PYTHON313:-}" "the 26.9 client")"
install_client "${BAI_CLI26_VENV:-$HOME/.cache/bai-cli/venv26}" "$PY313" "backend.ai-client>=26.9,<26.10"

# Lablup's CLI test suite (`cli_integration` of PyPI backend.ai-test, 26.9.x) with the client and
# CLI it pins, in a venv of its own (its pins may differ from the newest client's).
install_client "${BAI_SUITE_VENV:-$HOME/.cache/bai-cli/suite}" "$PY313" "backend.ai-test>=26.9,<26.10"

# Lablup's web servers, for the consoles' journeys through them (with Redis from Debian):
# backend.ai-webserver 26.9.x (the Web UI 26) on Python 3.13, and backend.ai-console-server
# 20.9.7 (Console 21.02, the console the guides show) on Python 3.8, whose Jinja needs a
# markupsafe from before 2.1.
install_client "${BAI_WEBSERVER_VENV:-$HOME/.cache/bai-cli/webserver}" "$PY313" "backend.ai-webserver>=26.9,<26.10"
PY38="$(pyenv_python 3.8 "${BAI_PYTHON38:-}" "backend.ai-console-server 20.9.7")"
install_client "${BAI_CONSOLE_SERVER_VENV:-$HOME/.cache/bai-cli/console-server}" "$PY38" "backend.ai-console-server==20.9.7 markupsafe<2.1"

# aiosmtpd: the real SMTP server (tests/support/smtp_server.py) the mail tests send to.
install_client "${BAI_SMTP_VENV:-$HOME/.cache/bai-cli/smtp}" python3 "aiosmtpd==1.4.6"

# Schemathesis (GraphQL mode) for the live-API fuzz test.
FUZZ_VENV="${BAI_FUZZ_VENV:-$HOME/.cache/bai-cli/fuzz}"
FUZZ_PIN="schemathesis==4.32.5"
if [ -x "$FUZZ_VENV/bin/schemathesis" ] && [ "$(cat "$FUZZ_VENV/.bai-pins" 2>/dev/null)" = "$FUZZ_PIN" ]; then
  echo "schemathesis present: $FUZZ_VENV"
else
  rm -rf "$FUZZ_VENV"
  mkdir -p "$(dirname "$FUZZ_VENV")"
  python3 -m venv "$FUZZ_VENV"
  "$FUZZ_VENV/bin/pip" install -q "$FUZZ_PIN"
  echo "$FUZZ_PIN" > "$FUZZ_VENV/.bai-pins"
  echo "schemathesis installed: $FUZZ_VENV"
fi
