//! OTLP export against a real receiver: `oteltap` (PyPI), an OTLP/HTTP
//! protobuf receiver that decodes with the official opentelemetry-proto
//! types and prints every span it receives as NDJSON. Installed by
//! `scripts/install-otlp-receiver.sh`; the test fails (never skips) when it
//! is missing.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use glassbox_store::StoredTrace;
use glassbox_store::otlp::{self, OtlpExporter, Protocol};
use glassbox_store::synth::{SynthRequest, build};
use serde_json::Value;

use crate::suite::T0;

fn receiver_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("GLASSBOX_OTELTAP") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let venv = home.join(".cache/glassbox/oteltap/bin/oteltap");
    if venv.is_file() {
        return venv;
    }
    PathBuf::from("oteltap")
}

struct Receiver(Child);

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn traces() -> Vec<StoredTrace> {
    let mut a = SynthRequest::new(1, T0);
    a.fallback = true;
    let mut b = SynthRequest::new(2, T0 + 1000);
    b.retrieval = false;
    b.failed = true;
    [a, b]
        .iter()
        .map(|r| {
            let (record, spans) = build(r);
            StoredTrace { record, spans }
        })
        .collect()
}

/// `{"key": ..., "value": {...}}` lists in either casing → key → value text.
fn attributes(span: &Value) -> Vec<(String, String)> {
    span["attributes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|kv| {
                    let v = &kv["value"];
                    let text = [
                        "stringValue",
                        "string_value",
                        "intValue",
                        "int_value",
                        "doubleValue",
                        "double_value",
                        "boolValue",
                        "bool_value",
                    ]
                    .iter()
                    .find_map(|k| v.get(*k))
                    .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
                    .unwrap_or_default();
                    (kv["key"].as_str().unwrap_or_default().to_string(), text)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn attr<'a>(attrs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[test]
fn exports_genai_spans_to_a_real_otlp_receiver() {
    let bin = receiver_bin();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(&bin)
        .args(["--port", &port.to_string()])
        .env("PYTHONUNBUFFERED", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start the OTLP receiver `{}`: {e} (hint: run scripts/install-otlp-receiver.sh or set GLASSBOX_OTELTAP)",
                bin.display()
            )
        });
    let mut receiver = Receiver(child);
    let stdout = receiver.0.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    // Wait (bounded) for the receiver to listen, then export.
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the OTLP receiver never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let traces = traces();
    let want: usize = traces.iter().map(|t| t.spans.len() + 1).sum();
    OtlpExporter::new(
        &format!("http://127.0.0.1:{port}"),
        "glassbox-test",
        Protocol::HttpProtobuf,
    )
    .export(&traces)
    .unwrap();

    let mut spans: Vec<Value> = Vec::new();
    let mut other = Vec::new();
    while spans.len() < want {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => match serde_json::from_str::<Value>(&line) {
                Ok(v) if v.get("name").is_some() && v.get("attributes").is_some() => spans.push(v),
                Ok(v) if v.get("span").is_some() => spans.push(v["span"].clone()),
                _ => other.push(line),
            },
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                panic!(
                    "got {} of {want} spans; other output: {other:?}",
                    spans.len()
                )
            }
        }
    }
    let names: Vec<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(
        names
            .iter()
            .filter(|n| **n == "invoke_workflow rag-chat")
            .count(),
        2,
        "{names:?}"
    );
    let root = spans
        .iter()
        .find(|s| s["name"] == "invoke_workflow rag-chat")
        .unwrap();
    let ra = attributes(root);
    assert_eq!(attr(&ra, "gen_ai.operation.name"), Some("invoke_workflow"));
    assert_eq!(attr(&ra, "glassbox.topology.version"), Some("3.2.1"));
    assert!(attr(&ra, "glassbox.cost").is_some(), "{ra:?}");

    let chat = spans
        .iter()
        .find(|s| {
            s["name"] == "chat chat-7b"
                && attr(&attributes(s), "gen_ai.usage.output_tokens").is_some()
        })
        .unwrap_or_else(|| panic!("no model span with token usage in {names:?}"));
    let ca = attributes(chat);
    assert_eq!(attr(&ca, "gen_ai.operation.name"), Some("chat"));
    assert_eq!(attr(&ca, "gen_ai.request.model"), Some("chat-7b"));
    assert_eq!(attr(&ca, "gen_ai.usage.output_tokens"), Some("128"));
    assert_eq!(attr(&ca, "gen_ai.request.temperature"), Some("0.2"));
    assert_eq!(attr(&ca, "glassbox.cost.currency"), Some("USD"));
    // Every span of a request shares its trace id: the request id.
    let trace_ids: std::collections::BTreeSet<String> = spans
        .iter()
        .map(|s| {
            s.get("traceId")
                .or_else(|| s.get("trace_id"))
                .map(Value::to_string)
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(trace_ids.len(), 2, "{trace_ids:?}");
    drop(receiver);
}

#[test]
fn json_encoding_follows_the_otlp_shape() {
    let traces = traces();
    let (ct, body) = otlp::encode(&traces, "svc", Protocol::HttpJson);
    assert_eq!(ct, "application/json");
    let v: Value = serde_json::from_slice(&body).unwrap();
    let spans = &v["resourceSpans"][0]["scopeSpans"][0]["spans"];
    assert_eq!(spans[0]["name"], "invoke_workflow rag-chat");
    assert_eq!(spans[0]["traceId"].as_str().unwrap().len(), 32);
    assert_eq!(spans[1]["parentSpanId"], spans[0]["spanId"]);
    let failed = &v["resourceSpans"][1]["scopeSpans"][0]["spans"][0];
    assert_eq!(failed["status"]["code"], 2);
    let (ct, pb) = otlp::encode(&traces, "svc", Protocol::HttpProtobuf);
    assert_eq!(ct, "application/x-protobuf");
    assert_eq!(pb[0], 0x0a, "field 1, length-delimited");
}
