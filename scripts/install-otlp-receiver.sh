#!/usr/bin/env bash
# Install the OTLP receiver the trace-store export test sends to: `oteltap`
# (PyPI), an embeddable OTLP/HTTP protobuf receiver (native Rust core, decodes
# with the official opentelemetry-proto types) that prints what it receives
# as NDJSON. Installed into a virtualenv under ~/.cache/glassbox/oteltap;
# idempotent (does nothing when it is already there).
set -euo pipefail

dest="${GLASSBOX_TOOLS_DIR:-$HOME/.cache/glassbox}/oteltap"
if [[ -x "$dest/bin/oteltap" ]]; then
  echo "oteltap present ($dest/bin/oteltap)"
  exit 0
fi

if ! command -v python3 >/dev/null 2>&1; then
  echo "error: python3 is needed to install the OTLP receiver (oteltap)" >&2
  exit 69
fi
if ! python3 -m venv --help >/dev/null 2>&1; then
  echo "installing python3-venv ..."
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update && $sudo apt-get install -y --no-install-recommends python3-venv
fi

echo "installing oteltap into $dest ..."
python3 -m venv "$dest"
"$dest/bin/pip" install --quiet --disable-pip-version-check "oteltap==1.0.0"
echo "oteltap installed ($dest/bin/oteltap)"
