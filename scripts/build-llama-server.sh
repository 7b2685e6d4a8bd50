#!/usr/bin/env bash
# Builds the serving benchmark's peer, llama.cpp's `llama-server`, and prints
# the binary's path on its last line (docs/BENCHMARKS.md, "Serving: glassbox
# vs llama-server"). Idempotent: a built binary is reused.
#
# The source is the llama.cpp tree vendored in the llama-cpp-python source
# package on PyPI (the only package registry this project may fetch from;
# llama-cpp-sys-2's crate ships llama.cpp without the server's sources). It
# is built with glassbox's ggml settings: CPU kernels picked at run time
# from every x86 variant (GGML_BACKEND_DL, GGML_CPU_ALL_VARIANTS, not
# native), llamafile and OpenMP off, Release.
#
#   scripts/build-llama-server.sh
#   LLAMA_CPP_PYTHON=0.3.36  the llama-cpp-python release (default 0.3.36)
#   PEERS                    where it builds (default target-models/peers)
set -euo pipefail
cd "$(dirname "$0")/.."

version="${LLAMA_CPP_PYTHON:-0.3.36}"
peers="${PEERS:-target-models/peers}"
src="$peers/llama_cpp_python-$version/vendor/llama.cpp"
build="$src/build-glassbox"
bin="$build/bin/llama-server"

if [[ -x "$bin" ]]; then
  realpath "$bin"
  exit 0
fi
for tool in cmake c++ python3; do
  command -v "$tool" >/dev/null || {
    echo "build-llama-server: $tool is needed (scripts/install-deps.sh installs it)" >&2
    exit 2
  }
done

mkdir -p "$peers"
archive="$peers/llama_cpp_python-$version.tar.gz"
if [[ ! -f "$archive" ]]; then
  echo "downloading llama-cpp-python $version (source package) from PyPI ..." >&2
  python3 -m pip download --quiet --no-deps --no-binary :all: \
    "llama-cpp-python==$version" -d "$peers" >&2
fi
if [[ ! -d "$src" ]]; then
  tar -xzf "$archive" -C "$peers"
fi

echo "building llama-server in $build (2 cores: about 20 minutes) ..." >&2
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON \
  -DGGML_LLAMAFILE=OFF -DGGML_OPENMP=OFF \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF >&2
cmake --build "$build" --target llama-server -j "$(nproc)" >&2
realpath "$bin"
