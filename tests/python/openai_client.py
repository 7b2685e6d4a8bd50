"""Drives a running `glassbox serve` with the official `openai` client.

Run by crates/server/tests/it/openai.rs with .venv-test's python
(scripts/install-test-python.sh). Environment: GLASSBOX_BASE_URL (…/v1),
GLASSBOX_API_KEY, CHAT_MODEL (an LLM topology without an output guard),
GUARDED_MODEL (a topology with an output guard), EMBED_MODEL (an embedding
topology), TOOLS_MODEL (an LLM topology with room for a tool call). Exits
non-zero on the first failed check.
"""

import json
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

# Tools: a required call comes back as `tool_calls` (content None), with
# arguments that parse and follow the function's schema.
tools_model = os.environ["TOOLS_MODEL"]
weather = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 40},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}
ask = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
called = client.chat.completions.create(
    model=tools_model, messages=ask, tools=[weather], tool_choice="required"
)
choice = called.choices[0]
check(choice.finish_reason == "tool_calls", f"finish_reason tool_calls ({choice.finish_reason})")
check(choice.message.content is None, "a tool call has no content")
calls = choice.message.tool_calls
check(calls is not None and len(calls) == 1, f"one tool call ({calls})")
call = calls[0]
check(call.type == "function" and call.function.name == "get_weather", f"the named function ({call})")
args = json.loads(call.function.arguments)
check(isinstance(args.get("city"), str) and args["unit"] in ("celsius", "fahrenheit"), f"arguments follow the schema ({args})")
check(bool(call.id), "the call has an id")

# The same, streamed: the call arrives as a `tool_calls` delta.
stream = client.chat.completions.create(
    model=tools_model,
    messages=ask,
    tools=[weather],
    tool_choice={"type": "function", "function": {"name": "get_weather"}},
    stream=True,
)
streamed_calls, finish = {}, None
for chunk in stream:
    for c in chunk.choices:
        for d in c.delta.tool_calls or []:
            entry = streamed_calls.setdefault(d.index, {"name": "", "arguments": ""})
            if d.function and d.function.name:
                entry["name"] += d.function.name
            if d.function and d.function.arguments:
                entry["arguments"] += d.function.arguments
        if c.finish_reason:
            finish = c.finish_reason
check(finish == "tool_calls", f"streamed finish_reason tool_calls ({finish})")
check(list(streamed_calls) == [0] and streamed_calls[0]["name"] == "get_weather", f"streamed call ({streamed_calls})")
check(json.loads(streamed_calls[0]["arguments"]) == args, "streamed arguments equal the non-streamed ones")

# The tool's result goes back; with tool_choice none the model answers in words.
follow = ask + [
    choice.message.model_dump(exclude_none=True),
    {"role": "tool", "tool_call_id": call.id, "content": "18 degrees celsius, light rain"},
]
answer = client.chat.completions.create(
    model=tools_model, messages=follow, tools=[weather], tool_choice="none"
)
check(answer.choices[0].finish_reason == "stop", "an answer after the tool result")
check(bool(answer.choices[0].message.content), f"answer text ({answer.choices[0].message.content!r})")

# Structured output: response_format json_schema gives JSON of that schema.
city = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 40}, "country": {"type": "string", "maxLength": 40}},
    "required": ["name", "country"],
}
structured = client.chat.completions.create(
    model=tools_model,
    messages=[{"role": "user", "content": "Name a big city in Japan."}],
    response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": city}},
)
obj = json.loads(structured.choices[0].message.content)
check(isinstance(obj["name"], str) and isinstance(obj["country"], str), f"structured answer ({obj})")

# A bad schema is refused before anything runs, naming the keyword.
try:
    client.chat.completions.create(
        model=tools_model,
        messages=ask,
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "^a"}}},
    )
    check(False, "an unsupported keyword is refused")
except Exception as e:  # openai.BadRequestError
    check(getattr(e, "status_code", None) == 400 and "pattern" in str(e), f"400 naming `pattern` ({e})")

print("all openai client checks passed")
