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
# native), llamafile off, OpenMP on (its default, and glassbox's), Release.
#
# That tree is a llama.cpp release near, not at, the commit llama-cpp-sys-2
# vendors. `--libs DIR` (the directory of a glassbox build's libllama.so.0
# and libggml*.so.0, e.g. target/release) makes it the same commit where it
# computes: the last line is then a wrapper that runs this llama-server
# (its HTTP server, scheduler, sampling and `common` code) on glassbox's own
# libllama and ggml, so both servers run the same graph, KV cache and CPU
# kernels (the two trees' headers differ only by added functions).
#
#   scripts/build-llama-server.sh [--libs DIR]
#   LLAMA_CPP_PYTHON=0.3.36  the llama-cpp-python release (default 0.3.36)
#   PEERS                    where it builds (default target-models/peers)
set -euo pipefail
cd "$(dirname "$0")/.."

version="${LLAMA_CPP_PYTHON:-0.3.36}"
peers="${PEERS:-target-models/peers}"
src="$peers/llama_cpp_python-$version/vendor/llama.cpp"
build="$src/build-glassbox"
bin="$build/bin/llama-server"
libs=""
if [[ ${1:-} == --libs ]]; then
  libs="$(realpath "${2:?--libs needs a directory}")"
  [[ -e "$libs/libllama.so.0" ]] || {
    echo "build-llama-server: no libllama.so.0 in $libs (build glassbox first)" >&2
    exit 2
  }
fi

# On glassbox's libraries: a directory of links, and a wrapper that uses it.
# The CPU kernels too: llama-server calls ggml_backend_load_all(), which
# picks the best-scoring variant among glassbox's libggml build folder, the
# executable's folder and the working directory. A preloaded shim
# (llama-peer-cpu.so) makes that call load from one folder instead: links
# to the variants glassbox ships (ggml-backends/), from which ggml's own
# scoring picks the one glassbox picks (AMX on an AMX Xeon). With
# GLASSBOX_CPU_VARIANT=NAME set where the peer runs, the folder holds that
# variant alone, as glassbox loads it: like with like either way.
wrap() {
  local dir lib wrapper
  dir="$(realpath "$build")/glassbox-libs"
  wrapper="$build/llama-server-on-glassbox-libs"
  mkdir -p "$dir"
  for lib in libllama.so.0 libggml.so.0 libggml-base.so.0; do
    ln -sfn "$libs/$lib" "$dir/$lib"
  done
  ln -sfn "$(realpath "$build/bin/libllama-common.so.0")" "$dir/libllama-common.so.0"
  rm -rf "$dir/cpu" "$dir/cpu-amx" "$dir"/cpu-only-*
  mkdir -p "$dir/cpu"
  local name
  for lib in "$libs"/ggml-backends/libggml-cpu-*.so; do
    [[ -e $lib ]] || continue
    name=$(basename "$lib" .so)
    name=${name#libggml-cpu-}
    mkdir -p "$dir/cpu-only-$name"
    ln -sfn "$lib" "$dir/cpu/$(basename "$lib")"
    ln -sfn "$lib" "$dir/cpu-only-$name/$(basename "$lib")"
  done
  printf '%s\n' '#include <stdlib.h>' 'void ggml_backend_load_all_from_path(const char *dir);' \
    'void ggml_backend_load_all(void) { ggml_backend_load_all_from_path(getenv("GLASSBOX_PEER_CPU")); }' \
    >"$dir/llama-peer-cpu.c"
  command -v cc >/dev/null || {
    echo "build-llama-server: cc is needed for the wrapper (scripts/install-deps.sh installs it)" >&2
    exit 2
  }
  cc -shared -fPIC -O2 -o "$dir/llama-peer-cpu.so" "$dir/llama-peer-cpu.c"
  {
    echo '#!/bin/sh'
    echo "# llama-server on glassbox's libllama, ggml and CPU kernels ($libs); scripts/build-llama-server.sh"
    echo "cpu='$dir/cpu'; [ -n \"\$GLASSBOX_CPU_VARIANT\" ] && [ -d '$dir/cpu-only-'\"\$GLASSBOX_CPU_VARIANT\" ] && cpu='$dir/cpu-only-'\"\$GLASSBOX_CPU_VARIANT\""
    echo "GLASSBOX_PEER_CPU=\"\$cpu\" LD_PRELOAD='$dir/llama-peer-cpu.so' LD_LIBRARY_PATH='$dir' exec '$(realpath "$bin")' \"\$@\""
  } >"$wrapper"
  chmod +x "$wrapper"
  realpath "$wrapper"
}

if [[ -x "$bin" ]]; then
  if [[ -n "$libs" ]]; then wrap; else realpath "$bin"; fi
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
  -DGGML_LLAMAFILE=OFF -DGGML_OPENMP=ON \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF >&2
cmake --build "$build" --target llama-server -j "$(nproc)" >&2
if [[ -n "$libs" ]]; then wrap; else realpath "$bin"; fi
