#!/usr/bin/env bash
# Every script the README and docs/ tell a user to run works after every
# other, on a fresh clone, sharing one target/. Runs, in a fresh clone of
# HEAD: the demo, each benchmark script in its short mode (SHORT=1: small
# sizes, no Python peers), the packaging script, then the demo again; each
# must exit 0. scripts/test.sh (so CI) runs it.
#
# The builds share the target/ of the checkout this runs from (or
# CARGO_TARGET_DIR), as a user's do. What broke here once: two selections of
# packages gave llama.cpp's -sys crate two hashes, so a second build of
# llama.cpp whose build script failed on the first one's links ("File
# exists"). crates/models/tests/it/build_units.rs checks the cause; this
# checks the scripts themselves, in order.
#
#   scripts/check-script-order.sh
#   PROFILE=release scripts/check-script-order.sh   # as a user runs them (a release build)
#   STEPS="demo bench-store" scripts/check-script-order.sh
#
# PROFILE: cargo profile every script builds (default dev, which reuses the
# test suite's dependency builds and so fits CI's time; the mechanism that
# broke is the same in every profile). Logs: target/script-order/STEP.log.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export PROFILE="${PROFILE:-dev}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
logs="$CARGO_TARGET_DIR/script-order"
steps="${STEPS:-demo bench-engine bench-wasm bench-store bench-server bench-otlp bench-models bench-constrained bench-serving bench-rag rag-reuse-quality bench-cluster bench-failover package demo}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
clone="$work/glassbox"
git clone -q --no-hardlinks "$root" "$clone"
mkdir -p "$logs"
echo "fresh clone of $(git -C "$clone" rev-parse --short HEAD) in $clone; target/ $CARGO_TARGET_DIR; profile $PROFILE"

failed=()
n=0
for step in $steps; do
  n=$((n + 1))
  log="$logs/$n-$step.log"
  started=$SECONDS
  rc=0
  (cd "$clone" && SHORT=1 timeout 1200 "./scripts/$step.sh") >"$log" 2>&1 </dev/null || rc=$?
  printf '  %-17s exit %-3s %4ss  %s\n' "$step" "$rc" "$((SECONDS - started))" "$log"
  if [[ $rc != 0 ]]; then
    failed+=("$step")
    tail -25 "$log" | sed 's/^/      | /'
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "script order check: ${#failed[@]} of $n steps failed: ${failed[*]}" >&2
  exit 1
fi
echo "script order check: all $n steps exited 0"
