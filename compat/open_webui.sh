#!/usr/bin/env bash
# Open WebUI in Chromium against cllm (issue 35's proof: tests/compat/test_open_webui.py).
#
# Installs what the check needs, unless it is there already, then runs it:
# - Chromium from Debian (apt-get; playwright's own browser builds are not downloaded);
# - Open WebUI (PyPI's open-webui) and playwright in a venv of their own, outside the repository
#   ($OPEN_WEBUI_VENV, default ~/.cache/cllm-open-webui/venv): Open WebUI pins torch,
#   transformers and a hundred other packages that must not meet cllm's.
# Measured on a shared 2-core machine: Chromium 84 s; Open WebUI and playwright 193-241 s and 7.5 GB
# (torch and its CUDA libraries are 5.3 GB of it); 1 s when already installed. The check takes ~1 minute.
#
# Usage: bash compat/open_webui.sh [--install-only]   (run from anywhere; cllm's .venv must exist)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${OPEN_WEBUI_VENV:-$HOME/.cache/cllm-open-webui/venv}"
OPEN_WEBUI=0.12.4
PLAYWRIGHT=1.65.2

if ! command -v chromium >/dev/null; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo -n"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi

installed() {
  "$VENV/bin/python" - <<EOF 2>/dev/null
from importlib.metadata import version
assert version("open-webui") == "$OPEN_WEBUI" and version("playwright") == "$PLAYWRIGHT"
EOF
}
# The test runs only where the marker says a whole install finished (a broken one would fail it).
if ! [ -f "$VENV/cllm-ready" ] || ! installed; then
  rm -f "$VENV/cllm-ready"
  python3 -m venv "$VENV"
  nice -n 19 "$VENV/bin/pip" install -q "open-webui==$OPEN_WEBUI" "playwright==$PLAYWRIGHT"
  installed
  touch "$VENV/cllm-ready"
fi

if [ "${1:-}" = "--install-only" ]; then exit 0; fi
export OPEN_WEBUI_VENV="$VENV"
exec .venv/bin/python -m pytest tests/compat/test_open_webui.py -m openwebui -v
