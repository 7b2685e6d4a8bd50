//! `glassbox versions` against a running `glassbox serve`, and `glassbox
//! report --compare` on stored traces.

use std::sync::Arc;

use serde_json::Value;

use crate::serve::{free_port, serve_with};
use crate::support::{assert_exit, glassbox, stderr, stdout};

fn greet(version: &str) -> String {
    format!(
        "topology_id: greet\nversion: {version}\nnodes:\n  - id: answer\n    type: template\n    config: {{ template_id: g, template: \"{version}\" }}\n"
    )
}

fn versions(url: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["versions"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--url", url]);
    glassbox(&all, None)
}

fn json(o: &std::process::Output) -> Value {
    assert_exit(o, 0);
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

#[test]
fn split_promote_and_rollback_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve_with(
        dir.path(),
        &[
            ("greet-a.yaml", &greet("1.0.0")),
            ("greet-b.yaml", &greet("1.1.0")),
        ],
    );
    let url = server.url.as_str();
    let v = json(&versions(url, &["list", "greet", "--format", "json"]));
    assert_eq!(v["promoted"], "1.0.0", "{v}");

    let o = versions(url, &["split", "greet", "1.0.0=80", "1.1.0=20"]);
    assert_exit(&o, 0);
    let table = stdout(&o);
    assert!(table.contains("split 1.1.0 20% / 1.0.0 80%"), "{table}");
    assert!(table.contains("1.0.0*"), "{table}");

    let v = json(&versions(
        url,
        &["promote", "greet", "1.1.0", "--format", "json"],
    ));
    assert_eq!(
        (v["promoted"].as_str(), v["rollback_to"].as_str()),
        (Some("1.1.0"), Some("1.0.0"))
    );
    let v = json(&versions(url, &["rollback", "greet", "--format", "json"]));
    assert_eq!(v["promoted"], "1.0.0");

    // The server's refusal, with its reason and hint: exit 78.
    let o = versions(url, &["split", "greet", "1.0.0=80"]);
    assert_exit(&o, 78);
    assert!(stderr(&o).contains("adds up to 80%"), "{}", stderr(&o));
    assert!(stderr(&o).contains("hint:"), "{}", stderr(&o));
    let o = versions(url, &["split", "greet", "1.0.0"]);
    assert_exit(&o, 2);
    // Nothing listening: exit 69.
    let o = versions(
        &format!("http://127.0.0.1:{}", free_port()),
        &["list", "greet"],
    );
    assert_exit(&o, 69);
    drop(server);
}

/// A store with `rag-chat` 1.0.0 and 1.1.0; 1.1.0's LLM is `slower` times
/// as slow.
fn store_with(dir: &std::path::Path, slower: u64) -> String {
    use glassbox_store::row::encode;
    use glassbox_store::synth::{SynthRequest, build};
    use glassbox_store::{RedactOptions, Redactor, SqliteStore, TraceStore};
    let path = dir.join("traces.db");
    let mut store = SqliteStore::open(&path).unwrap();
    let red = Redactor::new(&RedactOptions::default()).unwrap();
    let (mut rows, mut span_rows) = (Vec::new(), Vec::new());
    for i in 0..120u64 {
        let mut r = SynthRequest::new(i + 1, 1_796_040_000_000_000 + i);
        let b = i % 2 == 1;
        r.version = if b { "1.1.0" } else { "1.0.0" }.into();
        // The same spread of LLM times on both sides (by request pair).
        let base = 150_000 + (i / 2 % 30) * 3_000;
        r.llm_us = if b { base * slower } else { base };
        r.retrieval = i / 2 % 3 != 0;
        let (record, spans) = build(&r);
        let spans: Vec<_> = spans.into_iter().map(Arc::new).collect();
        let (row, s) = encode(&record, &spans, &red);
        rows.push(row);
        span_rows.extend(s);
    }
    store.write(&rows, &span_rows).unwrap();
    format!("sqlite://{}", path.display())
}

fn compare(store: &str) -> String {
    let o = glassbox(
        &[
            "report",
            "--store",
            store,
            "--topology",
            "rag-chat",
            "--compare",
            "1.0.0",
            "1.1.0",
        ],
        None,
    );
    assert_exit(&o, 0);
    stdout(&o)
}

fn marked_rows(table: &str) -> Vec<String> {
    table
        .lines()
        .filter(|l| l.trim_end().ends_with('*') && !l.contains("= larger than noise"))
        .map(str::to_string)
        .collect()
}

#[test]
fn report_compare_marks_a_slower_version_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let table = compare(&store_with(dir.path(), 2));
    assert!(table.starts_with("rag-chat  1.0.0 → 1.1.0"), "{table}");
    assert!(table.contains("Mann-Whitney U"), "{table}");
    let marked = marked_rows(&table);
    assert!(
        marked.iter().any(|l| l.contains("latency p50/p95/p99")),
        "{table}"
    );
    assert!(marked.iter().any(|l| l.contains("node llm ms")), "{table}");
    assert!(!marked.iter().any(|l| l.contains("path mix")), "{table}");
    assert!(!marked.iter().any(|l| l.contains("node prompt")), "{table}");

    // The same versions with the same LLM: nothing marked.
    let same = tempfile::tempdir().unwrap();
    let table = compare(&store_with(same.path(), 1));
    assert!(marked_rows(&table).is_empty(), "{table}");

    // Usage errors say what is missing.
    let o = glassbox(
        &[
            "report",
            "--store",
            "sqlite:///nonexistent/x.db",
            "--compare",
            "1.0.0",
            "1.1.0",
        ],
        None,
    );
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("needs `--topology ID`"),
        "{}",
        stderr(&o)
    );
}
