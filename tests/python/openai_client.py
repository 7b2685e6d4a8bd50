"""Drives a running `glassbox serve` with the official `openai` client.

Run by crates/server/tests/it/openai.rs with .venv-test's python
(scripts/install-test-python.sh). Environment: GLASSBOX_BASE_URL (…/v1),
GLASSBOX_API_KEY, CHAT_MODEL (an LLM topology without an output guard),
GUARDED_MODEL (a topology with an output guard), EMBED_MODEL (an embedding
topology). Exits non-zero on the first failed check.
"""

import os
import sys

from openai import OpenAI

client = OpenAI(
    base_url=os.environ["GLASSBOX_BASE_URL"],
    api_key=os.environ["GLASSBOX_API_KEY"],
    max_retries=0,
    timeout=600,
)
chat_model = os.environ["CHAT_MODEL"]
guarded_model = os.environ["GUARDED_MODEL"]
embed_model = os.environ["EMBED_MODEL"]
messages = [
    {"role": "system", "content": "ignored: the topology sets its own system prompt"},
    {"role": "user", "content": "What is a kettle?"},
]


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


# Models: the served topologies.
ids = sorted(m.id for m in client.models.list())
check(chat_model in ids and embed_model in ids, f"models list the topologies ({ids})")

# A chat, with the request id header.
raw = client.chat.completions.with_raw_response.create(model=chat_model, messages=messages)
check(bool(raw.headers.get("x-request-id")), "x-request-id header")
completion = raw.parse()
text = completion.choices[0].message.content
check(completion.object == "chat.completion", "chat.completion object")
check(bool(text and text.strip()), f"chat answer is non-empty ({text!r})")
u = completion.usage
check(u.prompt_tokens > 0 and u.completion_tokens > 0, f"usage is filled ({u})")
check(u.total_tokens == u.prompt_tokens + u.completion_tokens, "usage adds up")

# The same chat, streamed: several chunks, the same text, usage at the end.
stream = client.chat.completions.create(
    model=chat_model,
    messages=messages,
    stream=True,
    stream_options={"include_usage": True},
)
pieces, usage, finish = [], None, None
for chunk in stream:
    check(chunk.object == "chat.completion.chunk", "chunk object")
    if chunk.usage is not None:
        usage = chunk.usage
    for choice in chunk.choices:
        if choice.delta.content:
            pieces.append(choice.delta.content)
        if choice.finish_reason:
            finish = choice.finish_reason
streamed = "".join(pieces)
check(len(pieces) > 1, f"tokens arrive as generated ({len(pieces)} chunks)")
check(streamed == text, f"streamed text equals the non-streamed answer ({streamed!r})")
check(finish == "stop", "finish_reason stop")
check(usage is not None and usage.completion_tokens == u.completion_tokens, f"stream usage ({usage})")

# A guarded topology streams its checked output only.
stream = client.chat.completions.create(
    model=guarded_model,
    messages=[{"role": "user", "content": "write to me at bob@example.com"}],
    stream=True,
)
guarded = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
check(guarded == "Sorry, I can't repeat that.", f"guarded stream ({guarded!r})")

# Embeddings (the client asks for base64 by default and decodes it).
emb = client.embeddings.create(model=embed_model, input=["hello world", "descaling the kettle"])
check(len(emb.data) == 2, "two embeddings")
vec = emb.data[0].embedding
check(len(vec) == 384, f"MiniLM dimension ({len(vec)})")
norm = sum(x * x for x in vec) ** 0.5
check(abs(norm - 1.0) < 1e-3, f"unit length ({norm})")
check(emb.usage.prompt_tokens > 0, f"embedding usage ({emb.usage})")
floats = client.embeddings.create(model=embed_model, input="hello world", encoding_format="float")
check(
    max(abs(a - b) for a, b in zip(floats.data[0].embedding, vec)) < 1e-6,
    "float and base64 encodings agree",
)

print("all openai client checks passed")
