//! `wasm`: the example steps (Rust and Python) built by
//! scripts/build-wasm-examples.sh, validated, run, routed, explained and
//! priced in real pipelines; bad steps failing with stable codes.

use std::path::PathBuf;
use std::sync::OnceLock;

use glassbox_engine::trace::{Lang, RequestStatus, SpanRecord, Unit};
use glassbox_engine::{ExecError, Pipeline, RunOptions};
use glassbox_topology::{Source, TopologyError};
use serde_json::{Value, json};

use crate::support::{build, try_build};

/// The example components, built once per test run (cached by the script).
fn components() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        let status = std::process::Command::new(root.join("scripts/build-wasm-examples.sh"))
            .status()
            .expect("running scripts/build-wasm-examples.sh");
        assert!(status.success(), "scripts/build-wasm-examples.sh failed");
        root.join("target/wasm-examples")
    })
}

fn sha256(path: &std::path::Path) -> String {
    use sha2::Digest;
    let bytes = std::fs::read(path).unwrap();
    sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `component: <path>, sha256: <hash>` for one example.
fn step(file: &str) -> String {
    let path = components().join(file);
    format!("component: {}, sha256: {}", path.display(), sha256(&path))
}

/// A topology: the step `clean` (with `extra` config), then `warn` on
/// `flagged` and `pass` on `clean`.
fn routed(file: &str, extra: &str) -> String {
    format!(
        r#"
topology_id: steps
version: "1"
nodes:
  - id: clean
    type: wasm
    resource: {{ type: cpu, cost_per_cpu_ms: 0.001 }}
    config: {{ {}, {extra} }}
  - {{ id: warn, type: template, config: {{ template: "flagged: {{{{ outputs.clean.text }}}}" }} }}
  - {{ id: pass, type: template, config: {{ template: "ok: {{{{ outputs.clean.text }}}}" }} }}
edges:
  - {{ from: clean, to: warn, condition: flagged }}
  - {{ from: clean, to: pass, condition: clean }}
"#,
        step(file)
    )
}

const WORDS: &str = "settings: { words: [secret, password] }";

fn span<'a>(spans: &'a [std::sync::Arc<SpanRecord>], node: &str) -> &'a SpanRecord {
    spans.iter().find(|s| &*s.node == node).unwrap()
}

#[tokio::test]
async fn a_rust_step_cleans_routes_explains_and_is_priced() {
    let p = build("steps.yaml", &routed("cleaner.wasm", WORDS));
    let out = p
        .run(
            json!({"question": "my Password is secret"}),
            RunOptions::default(),
        )
        .await;
    let r = &out.trace.record;
    assert_eq!(out.result.unwrap()["text"], "flagged: my *** is ***");
    assert_eq!(r.labels.get("clean").map(String::as_str), Some("flagged"));
    assert!(
        r.explanation
            .text
            .contains("the text cleaner masked 2 sensitive word(s)"),
        "{}",
        r.explanation.text
    );
    assert!(
        r.explanation.text.contains("classified as `flagged`"),
        "{}",
        r.explanation.text
    );
    let s = span(&out.trace.spans, "clean");
    assert_eq!(s.kind.as_ref(), "wasm");
    assert_eq!(
        s.tags.get("wasm.step").map(String::as_str),
        Some("text-cleaner 0.1.0")
    );
    let fuel: u64 = s.tags["wasm.fuel"].parse().unwrap();
    assert!(fuel > 0, "{fuel}");
    // Priced like any CPU node: by the CPU time the call measured.
    let line = r
        .receipt
        .lines
        .iter()
        .find(|l| &*l.node == "clean")
        .unwrap();
    assert_eq!(line.unit, Unit::CpuMs);
    assert!(line.quantity > Default::default(), "{line:?}");

    // The other branch, explained in Chinese.
    let opts = RunOptions {
        lang: Lang::Zh,
        ..RunOptions::default()
    };
    let out = p.run(json!({"question": "hello"}), opts).await;
    assert_eq!(out.result.unwrap()["text"], "ok: hello");
    let text = &out.trace.record.explanation.text;
    assert!(text.contains("文本清洗未发现敏感词"), "{text}");
}

#[tokio::test]
async fn a_python_step_runs_end_to_end() {
    let topology = format!(
        r#"
topology_id: py
version: "1"
nodes:
  - id: redact
    type: wasm
    config: {{ {}, settings: {{ mask: "<x>" }} }}
  - {{ id: answer, type: template, config: {{ template: "{{{{ outputs.redact.text }}}}" }} }}
edges:
  - {{ from: redact, to: answer, condition: pii }}
"#,
        step("redactor.wasm")
    );
    let p = build("py.yaml", &topology);
    let out = p
        .run(
            json!({"question": "mail bob@example.com or call +1 555 123 4567"}),
            RunOptions {
                lang: Lang::Zh,
                ..RunOptions::default()
            },
        )
        .await;
    let r = &out.trace.record;
    assert_eq!(out.result.unwrap()["text"], "mail <x> or call <x>");
    assert_eq!(r.labels.get("redact").map(String::as_str), Some("pii"));
    assert!(
        r.explanation
            .text
            .contains("隐私清理移除了 1 个邮箱地址和 1 个电话号码"),
        "{}",
        r.explanation.text
    );
}

fn invalid(text: &str) -> String {
    let registry = glassbox_nodes::registry();
    match glassbox_topology::load_source(Source::new("steps.yaml", text), &registry.kind_set()) {
        Err(TopologyError::Invalid(report)) => report.render(false),
        Ok(_) => panic!("valid:\n{text}"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn validation_checks_settings_against_the_steps_schema_with_locations() {
    let text = routed(
        "cleaner.wasm",
        "settings: { words: [secret, \"\"], colour: red }",
    );
    let report = invalid(&text);
    // Line 8 holds the node's config; each violation at its own column.
    assert!(
        report.contains("`settings.words[1]`: 0 characters, fewer than 1"),
        "{report}"
    );
    assert!(
        report.contains("`settings`: property `colour` is not allowed"),
        "{report}"
    );
    assert!(report.contains("steps.yaml:8:"), "{report}");
    assert!(
        report.contains("nodes[0].config.settings.words[1]"),
        "{report}"
    );
}

#[test]
fn validation_checks_the_hash_the_file_and_the_labels() {
    let text = routed("cleaner.wasm", WORDS);
    let hash = sha256(&components().join("cleaner.wasm"));
    let report = invalid(&text.replace(&hash, &"a".repeat(64)));
    // The message wraps wherever the component's path (the checkout's
    // directory) ends; read it with the wrapping and the gutter taken out.
    let flat = report
        .split_whitespace()
        .filter(|w| *w != "│")
        .collect::<Vec<_>>()
        .join(" ");
    assert!(flat.contains("has SHA-256"), "{report}");
    assert!(report.contains("nodes[0].config.sha256"), "{report}");

    let report = invalid(&text.replace("cleaner.wasm", "missing.wasm"));
    assert!(report.contains("cannot read component"), "{report}");

    let report = invalid(&text.replace("condition: flagged", "condition: flaged"));
    assert!(
        report.contains("edge condition `flaged` is not a label step `text-cleaner 0.1.0` emits"),
        "{report}"
    );
    assert!(report.contains("did you mean `flagged`?"), "{report}");
}

/// A pipeline whose step misbehaves as told, with `limits`.
fn misbehaving(how: &str, limits: &str) -> Pipeline {
    build(
        "bad.yaml",
        &routed(
            "cleaner.wasm",
            &format!("settings: {{ words: [x], misbehave: {how} }}, limits: {{ {limits} }}"),
        ),
    )
}

async fn failure(p: &Pipeline) -> (String, SpanRecord) {
    let out = p.run(json!({"question": "q"}), RunOptions::default()).await;
    let err = out.result.unwrap_err();
    assert!(matches!(err, ExecError::NodeFailed { .. }), "{err}");
    assert_eq!(out.trace.record.status, RequestStatus::Failed);
    let span = span(&out.trace.spans, "clean").clone();
    (err.to_string(), span)
}

#[tokio::test]
async fn bad_steps_fail_with_stable_codes_and_their_traces_kept() {
    let cases = [
        ("trap", "", "wasm_trap", "trapped"),
        (
            "spin",
            "fuel: 20000000",
            "wasm_fuel",
            "used all its fuel (20000000",
        ),
        (
            "grow",
            "memory_mb: 16",
            "wasm_memory",
            "more than its 16 MiB",
        ),
        ("bad_json", "", "wasm_bad_json", "not JSON"),
        (
            "bad_output",
            "",
            "wasm_output_schema",
            "breaks its own output schema: output",
        ),
        (
            "bad_label",
            "",
            "wasm_bad_label",
            "label `maybe`, which it does not declare",
        ),
        ("fail", "", "wasm_failed", "failed: asked to fail"),
    ];
    for (how, limits, code, says) in cases {
        let p = misbehaving(how, limits);
        let (message, span) = failure(&p).await;
        let error = span.error.as_ref().unwrap();
        assert_eq!(error.code, code, "{how}: {message}");
        assert!(message.contains(says), "{how}: {message}");
        assert!(message.contains("text-cleaner 0.1.0"), "{how}: {message}");
    }
}

#[tokio::test]
async fn a_step_that_fails_leaves_the_pipeline_serving() {
    let p = misbehaving("trap", "");
    failure(&p).await;
    let good = build("steps.yaml", &routed("cleaner.wasm", WORDS));
    for _ in 0..3 {
        let (_, span) = failure(&p).await;
        assert_eq!(span.error.unwrap().code, "wasm_trap");
        let out = good
            .run(json!({"question": "fine"}), RunOptions::default())
            .await;
        assert_eq!(out.result.unwrap()["text"], "ok: fine");
    }
}

#[tokio::test]
async fn a_step_that_never_ends_is_stopped_by_the_node_timeout() {
    let text = routed(
        "cleaner.wasm",
        "settings: { words: [x], misbehave: spin }, limits: { fuel: 1000000000000 }",
    )
    .replace(
        "    resource: { type: cpu, cost_per_cpu_ms: 0.001 }",
        "    timeout_ms: 300",
    );
    let p = build("spin.yaml", &text);
    let out = p.run(json!({"question": "q"}), RunOptions::default()).await;
    let err = out.result.unwrap_err();
    assert!(matches!(err, ExecError::NodeTimeout { .. }), "{err}");
    // The interrupted call ended: the same pipeline answers again at once.
    let out = p.run(json!({"question": "q"}), RunOptions::default()).await;
    assert!(matches!(out.result, Err(ExecError::NodeTimeout { .. })));
}

async fn probe(grant: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/hello.txt"), "hi").unwrap();
    let text = routed(
        "cleaner.wasm",
        &format!("settings: {{ words: [x], misbehave: probe }}{grant}"),
    );
    let file = dir.path().join("probe.yaml");
    let registry = glassbox_nodes::registry();
    let v = glassbox_topology::load_source(
        Source::new(file.to_str().unwrap(), &text),
        &registry.kind_set(),
    )
    .unwrap();
    let topology = std::sync::Arc::new(v.topology);
    let cx = glassbox_engine::BuildContext::new(topology.clone());
    let p = Pipeline::build(topology, &registry, &cx, Default::default()).unwrap();
    let out = p.run(json!({"question": "q"}), RunOptions::default()).await;
    let text = out.result.unwrap()["text"].as_str().unwrap().to_string();
    let text = text.trim_start_matches("ok: ").replace("&quot;", "\"");
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn nothing_is_granted_unless_the_topology_says_so() {
    let seen = probe("").await;
    assert_eq!(seen["env"], json!([]), "{seen}");
    assert_eq!(seen["clock"], 0, "{seen}");
    assert_eq!(seen["data"], Value::Null, "{seen}");
    assert_eq!(seen["root"], false, "{seen}");

    let seen = probe(
        ", grant: { clock: true, env: { GREETING: hello }, dirs: [{ path: data, guest: /data }] }",
    )
    .await;
    assert_eq!(seen["env"], json!(["GREETING"]), "{seen}");
    assert!(
        seen["clock"].as_u64().is_some_and(|c| c > 1_700_000_000),
        "{seen}"
    );
    assert_eq!(seen["data"], "hi", "{seen}");
}

#[test]
fn a_topology_cannot_grant_the_network() {
    let report = invalid(&routed("cleaner.wasm", "grant: { network: true }"));
    assert!(report.contains("cannot be granted the network"), "{report}");
}

#[test]
fn a_step_is_known_to_validate() {
    assert!(try_build("x.yaml", &routed("cleaner.wasm", WORDS)).is_ok());
}
