//! OTLP exports built in code: a RAG trace in OpenInference form and a
//! chat call in GenAI semantic-convention form.

use glassbox_ingest::proto::{
    AnyValue, ExportTraceServiceRequest, KeyValue, Resource, ResourceSpans, ScopeSpans, Span,
    Status, Value,
};

pub const T0: u64 = 1_764_000_000_000_000_000;

pub fn s(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(Value::String(v.into())),
        }),
    }
}

pub fn i(k: &str, v: i64) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(Value::Int(v)),
        }),
    }
}

pub fn f(k: &str, v: f64) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(Value::Double(v)),
        }),
    }
}

pub fn trace_id(n: u8) -> Vec<u8> {
    let mut id = vec![0xab; 16];
    id[15] = n;
    id
}

pub fn span(
    trace: u8,
    id: u8,
    parent: Option<u8>,
    name: &str,
    (start_ms, end_ms): (u64, u64),
    attributes: Vec<KeyValue>,
) -> Span {
    Span {
        trace_id: trace_id(trace),
        span_id: vec![0, 0, 0, 0, 0, 0, trace, id],
        parent_span_id: parent.map_or_else(Vec::new, |p| vec![0, 0, 0, 0, 0, 0, trace, p]),
        name: name.into(),
        kind: 1,
        start_time_unix_nano: T0 + start_ms * 1_000_000,
        end_time_unix_nano: T0 + end_ms * 1_000_000,
        attributes,
        events: Vec::new(),
        status: None,
    }
}

pub fn export(service: &str, version: Option<&str>, spans: Vec<Span>) -> ExportTraceServiceRequest {
    let mut attributes = vec![s("service.name", service)];
    if let Some(v) = version {
        attributes.push(s("service.version", v));
    }
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes }),
            scope_spans: vec![ScopeSpans { scope: None, spans }],
        }],
    }
}

/// A RAG request: chain → retriever (2 documents, titled) → LLM (with
/// cached and reasoning tokens, temperature) in OpenInference form.
pub fn rag(trace: u8) -> Vec<Span> {
    vec![
        span(
            trace,
            1,
            None,
            "rag",
            (0, 900),
            vec![
                s("openinference.span.kind", "CHAIN"),
                s("input.value", "what does the pro plan cost?"),
                s("output.value", "It costs 20 dollars."),
            ],
        ),
        span(
            trace,
            2,
            Some(1),
            "retrieve",
            (10, 110),
            vec![
                s("openinference.span.kind", "RETRIEVER"),
                s("retrieval.documents.0.document.id", "doc-7"),
                s("retrieval.documents.0.document.content", "Pro is $20."),
                s(
                    "retrieval.documents.0.document.metadata",
                    r#"{"title":"Pricing"}"#,
                ),
                f("retrieval.documents.0.document.score", 0.91),
                s("retrieval.documents.1.document.id", "doc-9"),
                s(
                    "retrieval.documents.1.document.metadata",
                    r#"{"title":"Plans FAQ"}"#,
                ),
            ],
        ),
        span(
            trace,
            3,
            Some(1),
            "ChatCompletion",
            (120, 880),
            vec![
                s("openinference.span.kind", "LLM"),
                s("llm.model_name", "gpt-4o-mini-2024-07-18"),
                s("llm.provider", "openai"),
                s(
                    "llm.invocation_parameters",
                    r#"{"temperature": 0.2, "max_tokens": 64}"#,
                ),
                i("llm.token_count.prompt", 2006),
                i("llm.token_count.completion", 300),
                i("llm.token_count.prompt_details.cache_read", 1920),
                i("llm.token_count.completion_details.reasoning", 100),
                s("llm.output_messages.0.message.role", "assistant"),
            ],
        ),
    ]
}

/// A GenAI semantic-convention chat call with no temperature recorded and
/// a tool execution.
pub fn genai(trace: u8) -> Vec<Span> {
    let mut tool = span(
        trace,
        3,
        Some(1),
        "execute_tool get_weather",
        (300, 320),
        vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "get_weather"),
            s("gen_ai.tool.call.arguments", r#"{"city":"Paris"}"#),
            s("gen_ai.tool.call.result", "18°C"),
        ],
    );
    tool.kind = 1;
    let mut chat = span(
        trace,
        2,
        Some(1),
        "chat claude-sonnet-4",
        (0, 290),
        vec![
            s("gen_ai.operation.name", "chat"),
            s("gen_ai.provider.name", "anthropic"),
            s("gen_ai.request.model", "claude-sonnet-4-20250514"),
            i("gen_ai.usage.input_tokens", 1909),
            i("gen_ai.usage.cache_read.input_tokens", 1700),
            i("gen_ai.usage.cache_creation.input_tokens", 188),
            i("gen_ai.usage.output_tokens", 393),
        ],
    );
    chat.kind = 3;
    let mut root = span(
        trace,
        1,
        None,
        "invoke_agent weather",
        (0, 400),
        vec![s("gen_ai.operation.name", "invoke_agent")],
    );
    root.status = Some(Status {
        message: String::new(),
        code: 1,
    });
    vec![root, chat, tool]
}

pub const PRICES: &str = r#"{
  "currency": "USD",
  "models": {
    "gpt-4o-mini": { "input": "0.15", "cached_input": "0.075", "output": "0.60" },
    "claude-sonnet-4": { "input": "3.00", "cached_input": "0.30", "cache_creation": "3.75", "output": "15.00" }
  }
}"#;
