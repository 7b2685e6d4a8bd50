# Helpers the benchmark scripts share; sourced, not run:
#   source "$(dirname "$0")/bench-lib.sh"
# Each script sets `profile` (PROFILE, default release) before calling
# `bench_bin`.

# bench_bin: sets `bin` to the glassbox to measure: BIN when given (and
# `profile` to its path), else a fresh cargo build of the profile.
bench_bin() {
  if [[ -n "${BIN:-}" ]]; then
    bin="$(realpath "$BIN")"
    profile="$BIN"
  else
    # What building needs (cmake, clang, protoc, ...), when missing.
    ./scripts/install-deps.sh >&2
    # shellcheck disable=SC2046 # profile_args is a list of words.
    cargo build -q --locked $(profile_args) -p glassbox-cli
    bin="$(realpath "$(profile_dir)")/glassbox"
  fi
}

# profile_args: cargo's flags for `profile` (release, dev or a custom one).
profile_args() {
  case "$profile" in
    release) echo --release ;;
    dev) ;;
    *) echo "--profile $profile" ;;
  esac
}

# profile_dir: the folder cargo writes `profile`'s binaries to. One target/
# (CARGO_TARGET_DIR when set) serves every script and the test suite: every
# selection of packages builds llama.cpp with the same features, so cargo
# never makes a second llama.cpp build beside the first
# (crates/models/tests/it/build_units.rs).
profile_dir() {
  local target="${CARGO_TARGET_DIR:-target}"
  case "$profile" in
    dev) echo "$target/debug" ;;
    *) echo "$target/$profile" ;;
  esac
}

# free_port: a TCP port free on 127.0.0.1 now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_for URL PID LOG NAME: until URL answers 2xx, or the process dies.
wait_for() {
  for _ in $(seq 1 600); do
    if curl -fsS "$1" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$2" 2>/dev/null; then
      echo "$4 exited; its log:" >&2
      tail -40 "$3" >&2
      exit 1
    fi
    sleep 0.2
  done
  echo "$4 did not become ready in 120 s; its log:" >&2
  tail -40 "$3" >&2
  exit 1
}

# machine_line: cores, memory, CPU model and load average, for the header.
machine_line() {
  echo "$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
}

# yaml_python DIR NAME: sets `py` to a python3 with PyYAML: the system one's,
# else a virtualenv of its own under DIR (made once, from PyPI). NAME goes in
# the error when neither works.
yaml_python() {
  py=python3
  python3 -c 'import yaml' 2>/dev/null && return 0
  local venv="$1/bench-python"
  if ! { [[ -x $venv/bin/python ]] && "$venv/bin/python" -c 'import yaml' 2>/dev/null; }; then
    python3 -m venv "$venv" && "$venv/bin/python" -m pip install --quiet --disable-pip-version-check pyyaml || {
      echo "$2: python3 with PyYAML is needed (pip install pyyaml; or apt-get install python3-venv for the script to make its own)" >&2
      exit 2
    }
  fi
  py="$venv/bin/python"
}

# The `chunk_prewarm` line (ADR 0013) for rag-chat's `llm` node: its frame
# puts before and after a chunk what the example's `prompt` template puts
# around a retrieved note; the chunk cache is sized to hold all 69 of the
# example's chunks (~23 KB a token, ~264 MB). For TOPOLOGY_SET
# (bench-rag.sh) and PREWARM=1 (rag-reuse-quality.sh).
RAG_PREWARM='chunk_prewarm: {index: kb.index, prompt: "Answer the question using only these notes.\n\nNote: {{ chunk.text }}\n\nQuestion: "}
chunk_cache_mib: 384'

# rag_setup DIR: the rag-chat benchmarks' inputs in DIR: questions.txt (one
# per line: QUESTIONS when set, else the example's product questions, then
# examples/rag-chat/questions-more.txt; at most SHORT_QUESTIONS of them when
# that is set) and topologies/kb with its index built by `bin`.
rag_setup() {
  mkdir -p "$1/topologies"
  if [[ -n "${QUESTIONS:-}" ]]; then
    grep -v '^\s*$' "$QUESTIONS" >"$1/questions.txt"
  else
    { sed '/^---$/,$d' examples/rag-chat/questions.txt; cat examples/rag-chat/questions-more.txt; } |
      grep -v '^\s*$' >"$1/questions.txt"
  fi
  if [[ -n "${SHORT_QUESTIONS:-}" ]]; then
    sed -i "$((SHORT_QUESTIONS + 1)),\$d" "$1/questions.txt"
  fi
  cp -r examples/rag-chat/kb "$1/topologies/"
  "$bin" index build "$1/topologies/kb" --out "$1/topologies/kb.index" >"$1/index.log" 2>&1 ||
    { cat "$1/index.log" >&2; exit 1; }
}

# One thread per physical core this shell may run on (the CPUs of its
# affinity mask grouped by package and core id), as llama.cpp's and
# glassbox's own defaults count them; the logical count where sysfs says
# nothing. The benches give both servers this many threads by default.
physical_cores() {
  python3 - <<'PY' 2>/dev/null || nproc
import os
cores = set()
for cpu in os.sched_getaffinity(0):
    top = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
    with open(top + "physical_package_id") as p, open(top + "core_id") as c:
        cores.add((p.read().strip(), c.read().strip()))
print(len(cores) or 1)
PY
}
