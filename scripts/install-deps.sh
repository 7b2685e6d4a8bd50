#!/usr/bin/env bash
# Install the system packages the local model runtime needs to build llama.cpp
# (through the `llama-cpp-2` crate): cmake, a C/C++ compiler and libclang for
# bindgen; and Debian's `chromium` for the dashboard's headless-browser tests
# (crates/server/tests/it/dashboard.rs), `qemu-user` for the portability tests
# (crates/cli/tests/it/portability.rs), `etcd-server` for the deployment and
# cluster tests (crates/cli/tests/it/deploy.rs, cluster.rs), and `protoc`
# (`protobuf-compiler`, with `libprotobuf-dev` for protobuf's own .proto files),
# which the `etcd-client` crate's build script runs on etcd's .proto files
# (ADR 0007). With GLASSBOX_DEPS=build (the Dockerfile's build stage) only what
# building needs: no chromium, no qemu-user, no etcd.
# Idempotent: installs only what is missing, and runs `apt-get update`
# at most once, only when something has to be installed.
set -euo pipefail

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v clang >/dev/null 2>&1 || missing+=(clang)
# bindgen loads libclang.so at build time; look for it where Debian puts it.
if ! compgen -G "/usr/lib/llvm-*/lib/libclang.so*" >/dev/null \
    && ! compgen -G "/usr/lib/*/libclang.so*" >/dev/null \
    && ! compgen -G "/usr/lib/*/libclang-*.so*" >/dev/null; then
  missing+=(libclang-dev)
fi
# Test-only tools are skipped when only building (GLASSBOX_DEPS=build).
tests=1
[[ ${GLASSBOX_DEPS:-} == build ]] && tests=0
# The dashboard tests drive headless Chromium at this path.
[[ $tests == 0 || -x /usr/bin/chromium ]] || missing+=(chromium)
# ccache: llama.cpp's CPU backend is compiled once per x86-64 level (14
# times); a rebuild with unchanged sources then takes seconds.
command -v ccache >/dev/null 2>&1 || missing+=(ccache)
# The portability tests run the binary on older CPU models under user-mode QEMU.
[[ $tests == 0 ]] || command -v qemu-x86_64 >/dev/null 2>&1 || missing+=(qemu-user)
# The deployment test checks the etcd flags in deploy/k8s against `etcd --help`.
[[ $tests == 0 ]] || command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
# The cluster tests cut a worker off in a network namespace (`ip netns`).
[[ $tests == 0 ]] || command -v ip >/dev/null 2>&1 || missing+=(iproute2)
# The benchmark scripts read the CLI's JSON with jq and poll servers with curl.
command -v jq >/dev/null 2>&1 || missing+=(jq)
command -v curl >/dev/null 2>&1 || missing+=(curl)
# etcd-client (cluster membership) compiles etcd's gRPC API with protoc at build
# time; etcd's .proto files import protobuf's own (descriptor.proto, struct.proto),
# which Debian ships in libprotobuf-dev.
command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
[[ -f /usr/include/google/protobuf/descriptor.proto ]] || missing+=(libprotobuf-dev)

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "build and test dependencies present (cmake, clang, libclang, ccache, protoc and its .proto files, jq, curl; for tests chromium, qemu-user, etcd, ip)"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: missing ${missing[*]} and apt-get is not available" >&2
  echo "hint: install cmake, clang, libclang and protoc (protobuf-compiler) with your system's package manager" >&2
  exit 69
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  sudo="sudo"
fi

echo "installing ${missing[*]} ..."
export DEBIAN_FRONTEND=noninteractive
# Update the package lists only when they have never been fetched.
if ! compgen -G "/var/lib/apt/lists/*_Packages" >/dev/null; then
  $sudo apt-get update
fi
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}"; then
  # Stale lists: refresh once and retry.
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
echo "build dependencies installed"
