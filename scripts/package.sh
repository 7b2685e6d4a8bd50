#!/usr/bin/env bash
# Lays out a release build as a folder that runs on any x86-64 Linux machine:
#   target/dist/glassbox-linux-x86_64/
#     glassbox                  the binary (run path $ORIGIN)
#     libllama.so libggml*.so   llama.cpp's shared libraries
#     ggml-backends/            one CPU kernel library per x86-64 level; the
#                               best one this CPU runs is loaded at start-up
# The AMX variant is left out (never loaded; docs/adr/0004-cpu-kernels.md).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cargo build --release --locked -p glassbox-cli
target=${CARGO_TARGET_DIR:-target}
out=$target/dist/glassbox-linux-x86_64
rm -rf "$out"
mkdir -p "$out/ggml-backends"
cp "$target/release/glassbox" "$out/"
cp -L "$target"/release/libllama*.so* "$target"/release/libggml*.so* "$out/" 2>/dev/null || true
# The variants the build made (llama-cpp-sys-2's OUT_DIR/backends).
backends=$(ls -d "$target"/release/build/llama-cpp-sys-2-*/out/backends 2>/dev/null | while read -r d; do
  compgen -G "$d/libggml-cpu-*.so" >/dev/null && echo "$d"; done | head -n1)
if [[ -z $backends ]]; then
  echo "error: no libggml-cpu-*.so under $target/release/build/llama-cpp-sys-2-*/out/backends" >&2
  exit 1
fi
for f in "$backends"/libggml-cpu-*.so; do
  [[ $f == *sapphirerapids* ]] && continue
  cp "$f" "$out/ggml-backends/"
done
"$out/glassbox" doctor --format json >/dev/null 2>&1 || true
echo "packaged $(ls "$out/ggml-backends" | wc -l) CPU variants in $out"
echo "try: $out/glassbox doctor"
