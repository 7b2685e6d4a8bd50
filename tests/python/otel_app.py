"""A small instrumented app whose traces go to `glassbox serve` over OTLP.

Run by crates/server/tests/it/ingest.rs with .venv-test's python
(scripts/install-test-python.sh). It is an ordinary app, instrumented the
ordinary way: the OpenTelemetry SDK with its OTLP/HTTP (protobuf)
exporter, OpenInference's instrumentation of the `openai` client and of
LangChain. The `openai` client calls Glassbox's own OpenAI-compatible
endpoint (a real local model); the LangChain part is a retriever, a
prompt, LangChain's fake chat model and a tool.

Environment: GLASSBOX_URL (http://host:port), GLASSBOX_API_KEY, CHAT_MODEL
(an LLM topology served there). Prints one line per request sent.
"""

import os

from openai import OpenAI
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from openinference.instrumentation.langchain import LangChainInstrumentor
from openinference.instrumentation.openai import OpenAIInstrumentor

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from langchain_core.tools import tool

base = os.environ["GLASSBOX_URL"]
key = os.environ["GLASSBOX_API_KEY"]

provider = TracerProvider(
    resource=Resource.create({"service.name": "shop-bot", "service.version": "1.4.0"})
)
provider.add_span_processor(
    BatchSpanProcessor(
        OTLPSpanExporter(
            endpoint=f"{base}/v1/traces", headers={"Authorization": f"Bearer {key}"}
        )
    )
)
trace.set_tracer_provider(provider)
OpenAIInstrumentor().instrument(tracer_provider=provider)
LangChainInstrumentor().instrument(tracer_provider=provider)
tracer = trace.get_tracer("shop-bot")


class Handbook(BaseRetriever):
    """Two documents about plans, with titles in their metadata."""

    def _get_relevant_documents(self, query, *, run_manager=None):
        return [
            Document(page_content="The pro plan is $20 a month.", metadata={"title": "Pricing"}),
            Document(page_content="Plans can be cancelled any time.", metadata={"title": "Plans FAQ"}),
        ]


@tool
def plan_price(plan: str) -> str:
    """The monthly price of a plan."""
    return {"pro": "$20", "team": "$50"}.get(plan, "unknown")


prompt = ChatPromptTemplate.from_messages(
    [("system", "Answer from the context:\n{context}"), ("human", "{question}")]
)
draft = (
    {
        "context": Handbook() | (lambda docs: "\n".join(d.page_content for d in docs)),
        "question": RunnablePassthrough(),
    }
    | prompt
    | FakeListChatModel(responses=["The pro plan costs $20 a month."])
    | StrOutputParser()
)
client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=600)

for question in ["What does the pro plan cost?", "Can I cancel the pro plan?"]:
    with tracer.start_as_current_span(
        "answer", attributes={"openinference.span.kind": "CHAIN", "input.value": question}
    ) as span:
        text = draft.invoke(question)
        price = plan_price.invoke({"plan": "pro"})
        reply = client.chat.completions.create(
            model=os.environ["CHAT_MODEL"],
            messages=[{"role": "user", "content": f"Say it kindly: {text} ({price})"}],
            temperature=0.2,
            max_tokens=8,
        )
        span.set_attribute("output.value", reply.choices[0].message.content or "")
        print(f"sent trace {span.get_span_context().trace_id:032x}", flush=True)

provider.force_flush()
provider.shutdown()
