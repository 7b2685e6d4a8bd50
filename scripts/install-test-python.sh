#!/usr/bin/env bash
# Creates .venv-test (gitignored) with the official `openai` Python client,
# which the server tests (crates/server/tests/it/openai.rs) run against a
# live `glassbox serve`, schemathesis, which fuzzes the live server from
# docs/openapi.json (crates/server/tests/it/fuzz.rs), and the OpenTelemetry
# SDK with its OTLP/HTTP exporter and the OpenInference instrumentations of
# the openai client and LangChain, whose traces the ingest test
# (crates/cli/tests/it/ingest.rs) sends to `glassbox serve`. Idempotent:
# does nothing when all are there.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-test
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import openai, schemathesis, opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http, openinference.instrumentation.openai, openinference.instrumentation.langchain, langchain_core' 2>/dev/null; then
  echo "openai client, schemathesis and the OpenTelemetry packages present in $venv"
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
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'openai>=1.40,<3' 'schemathesis>=3.30,<5' \
  'opentelemetry-sdk>=1.25,<2' 'opentelemetry-exporter-otlp-proto-http>=1.25,<2' \
  'openinference-instrumentation-openai>=0.1.20,<1' 'openinference-instrumentation-langchain>=0.1.30,<1' \
  'langchain-core>=0.3,<2'
echo "installed in $venv: openai $("$venv/bin/python" -c 'import openai; print(openai.__version__)'), schemathesis $("$venv/bin/st" --version 2>/dev/null | tail -1)"
