#!/usr/bin/env bash
# Benchmarks of the local model runtimes against their Python peers, side by
# side on the same files, threads and data; prints a Markdown table.
#
#   LLM prompt tok/s, reuse off  glassbox (llama-cpp-2)  vs llama-cpp-python   target >= 0.9x
#   LLM decode tok/s, reuse off  glassbox (llama-cpp-2)  vs llama-cpp-python   target >= 1.0x
#   (the same with prefix cache / prompt lookup on, reported apart, no target)
#   embeddings/s (MiniLM)        glassbox (onnx runtime) vs sentence-transformers target >= 1.0x
#   search q/s at recall@10>=.95 glassbox (usearch)      vs hnswlib            target >= 0.8x
#   exact search q/s             glassbox (gemm gemv)    vs numpy BLAS         target >= 1.0x
#
# Every figure is checked against a physical bound (peak arithmetic or
# measured read bandwidth; crates/models/src/cpu/bound.rs): above it the
# report gives no verdict, since the figure did not measure the work it names.
#
#   BENCH_THREADS  threads for every engine (default 2)
#   BENCH_ROUNDS   LLM rounds, each one glassbox and one peer run in
#                  alternating order (default 5; the report gives medians)
#   BENCH_ONLY     run only one of: llm, embed, index
#   BENCH_N        vectors in the search benchmark (default 100000)
#   BENCH_FLASH_ATTN  on|off: flash attention in both LLM engines (default on,
#                  llama.cpp's own default; llama-cpp-python's is off)
#   BENCH_AVX2=1   the LLM pair without AVX-512 on a CPU that has it: glassbox
#                  on ggml's `haswell` kernels (GLASSBOX_CPU_VARIANT) and the
#                  peer on the llama.cpp its release vendors, built for AVX2
#                  (GGML_NATIVE off; AVX2, FMA, F16C, BMI2) into
#                  .venv-bench/llama-avx2-VERSION on first use (minutes) and
#                  loaded through LLAMA_CPP_LIB_PATH
#   PROFILE        cargo profile (default release)
#   SHORT=1        a smoke run that checks the script works
#                  (scripts/check-script-order.sh): 1 run of 16 tokens, 2,000
#                  vectors, no Python peers, no table; its figures mean nothing
#
# The peers live in .venv-bench (created on first run: llama-cpp-python builds
# llama.cpp from source, torch comes from PyPI; expect several minutes and GBs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
threads=${BENCH_THREADS:-2}
rounds=${BENCH_ROUNDS:-5}
only=${BENCH_ONLY:-}
short=${SHORT:-0}
if [[ $short == 1 ]]; then n=${BENCH_N:-2000}; else n=${BENCH_N:-100000}; fi
flash_attn=${BENCH_FLASH_ATTN:-on}
# On an AMX Xeon glassbox chooses ggml's AMX kernels, which the pip-built peer
# cannot run (its build has GCC's tile-configuration bug: it runs with ggml's
# extra buffers off, bench_models_peers.py). Like with like: the AVX-512
# kernels for both, unless GLASSBOX_CPU_VARIANT says otherwise.
if [[ -z ${GLASSBOX_CPU_VARIANT:-} ]] && grep -qw amx_int8 /proc/cpuinfo 2>/dev/null; then
  export GLASSBOX_CPU_VARIANT=zen4
  echo "bench-models: AMX CPU: glassbox on its zen4 (AVX-512) kernels, as the peer" >&2
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
out=$CARGO_TARGET_DIR/bench
mkdir -p "$out"
source scripts/bench-lib.sh
profile=${PROFILE:-release}

./scripts/install-deps.sh
if [[ $profile == release ]]; then ./scripts/fetch-models.sh --release; else ./scripts/fetch-models.sh; fi
echo "building the $profile examples ..." >&2
# shellcheck disable=SC2046 # profile_args is a list of words.
cargo build --locked $(profile_args) -p glassbox-models --examples --quiet
bin=$(profile_dir)/examples

if [[ $short == 1 ]]; then
  # Apart from the real runs' results: the report reads every result file in
  # $out, and a smoke run's figures would otherwise stand in its table as
  # measurements (with bounds measured on whatever else was running).
  out=$out/short
  mkdir -p "$out"
  echo "== SHORT=1: one small run of each glassbox benchmark, no peers" >&2
  [[ -z $only || $only == llm ]] && "$bin/bench_llm" --threads "$threads" --runs 1 --max-tokens 16 --out "$out"
  if [[ -z $only || $only == embed ]]; then
    printf '%s\n' "a short sentence to embed" "another one, a little longer than the first" \
      >"$out/sentences-short.txt"
    "$bin/bench_embed" --sentences "$out/sentences-short.txt" --batch 2 --threads "$threads" --out "$out"
  fi
  [[ -z $only || $only == index ]] && "$bin/bench_index" --n "$n" --threads "$threads" --out "$out"
  exit 0
fi

venv=$root/.venv-bench
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
py=$venv/bin/python
# Only the peers of the parts that run (torch, for embed, is GBs).
case $only in
  llm) mods=llama_cpp pkgs=(llama-cpp-python) ;;
  embed) mods=sentence_transformers pkgs=(sentence-transformers) ;;
  index) mods="hnswlib, numpy" pkgs=(hnswlib numpy) ;;
  *) mods="llama_cpp, sentence_transformers, hnswlib, numpy"
     pkgs=(llama-cpp-python sentence-transformers hnswlib numpy) ;;
esac
if ! "$py" -c "import $mods" 2>/dev/null; then
  echo "installing the Python peers into .venv-bench (first run only) ..." >&2
  "$py" -m pip install --quiet --upgrade pip
  "$py" -m pip install --quiet "${pkgs[@]}"
fi
peers="$py $root/scripts/bench_models_peers.py"
if [[ ${BENCH_AVX2:-0} == 1 && ( -z $only || $only == llm ) ]]; then
  export GLASSBOX_CPU_VARIANT=haswell
  version=$("$py" -c 'import llama_cpp; print(llama_cpp.__version__)')
  avx2=$venv/llama-avx2-$version
  if [[ ! -e $avx2/lib/libllama.so ]]; then
    src=$venv/src
    mkdir -p "$src"
    if [[ ! -d $src/llama_cpp_python-$version ]]; then
      echo "downloading llama-cpp-python $version (source package) from PyPI ..." >&2
      "$py" -m pip download --quiet --no-deps --no-binary :all: \
        "llama-cpp-python==$version" -d "$src"
      tar -xzf "$src/llama_cpp_python-$version.tar.gz" -C "$src"
    fi
    echo "building the peer's llama.cpp for AVX2 into $avx2 (first run only) ..." >&2
    build=$src/build-avx2-$version
    cmake -S "$src/llama_cpp_python-$version/vendor/llama.cpp" -B "$build" \
      -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_RPATH='$ORIGIN' \
      -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
      -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_OPENMP=ON -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
      -DLLAMA_CURL=OFF >&2
    # The library alone (the tree's apps need files its source package lacks).
    cmake --build "$build" --target llama -j "$(nproc)" >&2
    mkdir -p "$avx2/lib"
    cp -a "$build"/bin/libllama.so* "$build"/bin/libggml*.so* "$avx2/lib/"
  fi
  export LLAMA_CPP_LIB_PATH=$avx2/lib
  echo "bench-models: BENCH_AVX2=1: glassbox on its haswell kernels, the peer on $avx2" >&2
fi
# One thread per engine unless asked otherwise, BLAS included.
export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
export RAYON_NUM_THREADS=$threads

if [[ -z $only || $only == llm ]]; then
  # Rounds of one glassbox run and one peer run, in alternating order, so
  # both see the same minutes of a shared machine; the report takes the
  # median of the rounds and prints each round with its load average.
  echo "== LLM: $rounds rounds, glassbox and llama-cpp-python interleaved" >&2
  rm -rf "$out/llm"
  for round in $(seq 1 "$rounds"); do
    dir=$out/llm/round-$round
    mkdir -p "$dir"
    # Later rounds measure reuse off only; the reuse-on rows come from round 1.
    reuse=on
    (( round > 1 )) && reuse=off
    ours=("$bin/bench_llm" --threads "$threads" --flash-attn "$flash_attn" --reuse "$reuse" --out "$dir")
    cut -d' ' -f1-3 /proc/loadavg >"$dir/load-before"
    if (( round % 2 )); then
      "${ours[@]}"
      $peers llm "$dir" "$threads" "$flash_attn" "$reuse"
    else
      cp "$out/llm/round-1/llm-prompts.json" "$dir/"
      $peers llm "$dir" "$threads" "$flash_attn" "$reuse"
      "${ours[@]}"
    fi
    cut -d' ' -f1-3 /proc/loadavg >"$dir/load-after"
  done
fi
if [[ -z $only || $only == embed ]]; then
  echo "== embeddings" >&2
  $peers sentences "$out"
  "$bin/bench_embed" --sentences "$out/sentences.txt" --batch 32 --threads "$threads" --out "$out"
  $peers embed "$out" 32 "$threads"
fi
if [[ -z $only || $only == index ]]; then
  echo "== vector search" >&2
  "$bin/bench_index" --n "$n" --threads "$threads" --out "$out"
  $peers index "$out" "$threads"
fi
echo
echo "Machine: $(nproc) cores $(uname -m), $(free -g | awk '/Mem:/{print $2}') GiB RAM; threads per engine: $threads"
$peers report "$out"
