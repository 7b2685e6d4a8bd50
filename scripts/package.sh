#!/usr/bin/env bash
# Lays out a release build as a folder that runs on any x86-64 Linux machine:
#   target/dist/glassbox-linux-x86_64/
#     glassbox                      the binary (run path $ORIGIN)
#     libllama.so.0 libggml*.so.0   llama.cpp's shared libraries
#     ggml-backends/                one CPU kernel library per x86-64 level; the
#                                   best one this CPU runs is loaded at start-up
# The build already lays these out in target/release (crates/models/build.rs);
# the AMX variant among them carries the build's tile-configuration fix and
# is the choice on AMX Xeons (docs/adr/0004-cpu-kernels.md, "AMX").
# The machine needs glibc, the C++ runtime and the OpenMP runtime
# (libstdc++6, libgomp1 on Debian), as the Dockerfile's runtime stage installs.
#
#   PROFILE  cargo profile (default release)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
profile="${PROFILE:-release}"

./scripts/install-deps.sh
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
# shellcheck disable=SC2046 # profile_args is a list of words.
cargo build --locked $(profile_args) -p glassbox-cli
target=${CARGO_TARGET_DIR:-target}
release=$(profile_dir)
out=$target/dist/glassbox-linux-x86_64
rm -rf "$out"
mkdir -p "$out"
cp "$release/glassbox" "$out/"
# The names the binary asks for (libllama.so.0, ...), as plain files.
for lib in "$release"/lib*.so.[0-9]*; do
  cp -L "$lib" "$out/"
done
if ! compgen -G "$release/ggml-backends/libggml-cpu-*.so" >/dev/null; then
  echo "error: no CPU kernel libraries in $release/ggml-backends" >&2
  exit 1
fi
cp -r "$release/ggml-backends" "$out/"
echo "packaged $(ls "$out/ggml-backends" | wc -l) CPU variants in $out"
echo "try: $out/glassbox doctor"
