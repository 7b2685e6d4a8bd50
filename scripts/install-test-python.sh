#!/usr/bin/env bash
# Creates .venv-test (gitignored) with the official `openai` Python client,
# which the server tests (crates/server/tests/it/openai.rs) run against a
# live `glassbox serve`. Idempotent: does nothing when the client is there.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-test
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import openai' 2>/dev/null; then
  echo "openai client present in $venv ($("$venv/bin/python" -c 'import openai; print(openai.__version__)'))"
  exit 0
fi

py=$(command -v python3 || command -v python || true)
if [[ -z "$py" ]]; then
  echo "error: python3 is needed for the OpenAI client tests" >&2
  echo "hint: apt-get install python3 python3-venv" >&2
  exit 69
fi

rm -rf "$venv"
if ! "$py" -m venv "$venv"; then
  echo "error: cannot create a virtualenv" >&2
  echo "hint: apt-get install python3-venv" >&2
  exit 69
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'openai>=1.40,<3'
echo "openai client installed in $venv ($("$venv/bin/python" -c 'import openai; print(openai.__version__)'))"
