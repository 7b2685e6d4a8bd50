#!/usr/bin/env python3
"""Writes crates/models/tests/data/minilm-reference.json: all-MiniLM-L6-v2
vectors computed by sentence-transformers (the model's reference
implementation) for a few sentences, so the test suite can check that our
candle embedder agrees with it without Python at test time.

Run with the benchmark venv: .venv-bench/bin/python scripts/make-embedding-reference.py
"""
import json
import os
from pathlib import Path

from sentence_transformers import SentenceTransformer

root = Path(__file__).resolve().parent.parent
models = Path(os.environ.get("GLASSBOX_MODELS", Path.home() / ".cache/glassbox/models"))
sentences = [
    "How much does the Lumen Kettle Pro cost in the United States?",
    "hello, how are you?",
    "Glassbox draws the path every request took through the topology.",
    "a",
    "Descaling: run the kettle with citric acid every 4 weeks; error E3 means the filter is clogged.",
    "Café crème, naïve façade — 価格はいくらですか？",
]
model = SentenceTransformer(str(models / "all-minilm-l6-v2"), device="cpu")
vectors = model.encode(sentences, normalize_embeddings=True)
out = {
    "source": "sentence-transformers "
    + __import__("sentence_transformers").__version__
    + ", all-minilm-l6-v2, normalize_embeddings=True",
    "sentences": sentences,
    "vectors": [[round(float(x), 7) for x in v] for v in vectors],
}
path = root / "crates/models/tests/data/minilm-reference.json"
path.write_text(json.dumps(out) + "\n")
print(f"wrote {path}")
