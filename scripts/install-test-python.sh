#!/usr/bin/env bash
# Creates .venv-test (gitignored) with the official `openai` Python client,
# which the server tests (crates/server/tests/it/openai.rs) run against a
# live `glassbox serve`, and schemathesis, which fuzzes the live server from
# docs/openapi.json (crates/server/tests/it/fuzz.rs). Idempotent: does
# nothing when both are there.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-test
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import openai, schemathesis' 2>/dev/null; then
  echo "openai client and schemathesis present in $venv"
  exit 0
fi

py=$(command -v python3 || command -v python || true)
if [[ -z "$py" ]]; then
  echo "error: python3 is needed for the OpenAI client tests" >&2
  echo "hint: apt-get install python3 python3-venv" >&2
  exit 69
fi

if [[ ! -x "$venv/bin/python" ]] && ! "$py" -m venv "$venv"; then
  echo "error: cannot create a virtualenv" >&2
  echo "hint: apt-get install python3-venv" >&2
  exit 69
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'openai>=1.40,<3' 'schemathesis>=3.30,<5'
echo "installed in $venv: openai $("$venv/bin/python" -c 'import openai; print(openai.__version__)'), schemathesis $("$venv/bin/st" --version 2>/dev/null | tail -1)"
