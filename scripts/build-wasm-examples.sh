#!/usr/bin/env bash
# Builds the example custom steps into target/wasm-examples/ (gitignored):
#   cleaner.wasm   examples/wasm-cleaner (Rust, wit-bindgen, wasm32-wasip2)
#   redactor.wasm  examples/wasm-redactor (Python, componentize-py from PyPI)
# The tests of the `wasm` node kind run this (crates/nodes/tests/it/wasm.rs).
# Cached: cargo rebuilds the Rust step only when its sources change; the
# Python step is rebuilt only when app.py, the WIT or componentize-py change.
# Installs componentize-py into .venv-test when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

out=target/wasm-examples
componentize_version=0.25.1
mkdir -p "$out"

# Rust. rust-toolchain.toml lists the wasm32-wasip2 target, so rustup adds
# it on first use; older rustups need it added by hand.
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
cargo build --quiet --release --target wasm32-wasip2 \
  --manifest-path examples/wasm-cleaner/Cargo.toml --target-dir "$out/cargo"
cp -p "$out/cargo/wasm32-wasip2/release/glassbox_step_cleaner.wasm" "$out/cleaner.wasm"

# Python.
venv=.venv-test
if ! "$venv/bin/componentize-py" --version 2>/dev/null | grep -q "$componentize_version"; then
  if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv" || {
      echo "error: cannot create $venv" >&2
      echo "hint: apt-get install python3-venv" >&2
      exit 69
    }
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "componentize-py==$componentize_version"
fi
stamp=$(cat examples/wasm-redactor/app.py crates/nodes/wit/step.wit | sha256sum | cut -c1-64)-$componentize_version
if [[ ! -f "$out/redactor.wasm" || "$(cat "$out/redactor.stamp" 2>/dev/null)" != "$stamp" ]]; then
  (cd examples/wasm-redactor &&
    ../../"$venv"/bin/componentize-py -d ../../crates/nodes/wit -w step componentize app \
      -o "../../$out/redactor.wasm" >/dev/null)
  echo "$stamp" >"$out/redactor.stamp"
fi
echo "built: $out/cleaner.wasm $out/redactor.wasm"
