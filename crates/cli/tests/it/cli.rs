//! The binary's contract: exit codes, formats, help, generated artefacts.

use crate::support::{glassbox, root, stderr, stdout};

#[test]
fn validate_exit_codes() {
    let ok = glassbox(&["validate", "examples/rag-chat-v3.json"], None);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(stdout(&ok).contains("rag-chat-v3 v3.2.1, 6 nodes, 6 edges"));

    let bad = glassbox(&["validate", "tests/fixtures/invalid/cycle.yaml"], None);
    assert_eq!(bad.status.code(), Some(78));
    let out = stdout(&bad);
    assert!(
        out.contains("tests/fixtures/invalid/cycle.yaml:12:5"),
        "{out}"
    );
    assert!(out.contains("a → b → c → a"), "{out}");

    let missing = glassbox(&["validate", "no/such/file.yaml"], None);
    assert_eq!(missing.status.code(), Some(78));
    assert!(stderr(&missing).contains("cannot read `no/such/file.yaml`"));

    let usage = glassbox(&["validate", "--format", "xml", "x.yaml"], None);
    assert_eq!(usage.status.code(), Some(2));
    let usage = glassbox(&["no-such-command"], None);
    assert_eq!(usage.status.code(), Some(2));
}

/// A mistyped path or a zero count names the one argument at fault, with
/// the documented exit code (78 invalid input, 2 usage), before any model
/// loads or any request is sent.
#[test]
fn bad_paths_and_zero_counts_name_the_argument() {
    let index = glassbox(
        &[
            "index",
            "build",
            "no/such/folder",
            "--out",
            "no/such/out.index",
        ],
        None,
    );
    assert_eq!(index.status.code(), Some(78), "{}", stderr(&index));
    assert!(
        stderr(&index).contains("`no/such/folder` is not a folder"),
        "{}",
        stderr(&index)
    );
    let url = "http://127.0.0.1:9";
    let inputs = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("zero-counts.jsonl");
    std::fs::write(&inputs, "{\"question\": \"hi\"}\n").unwrap();
    let inputs = inputs.to_str().unwrap();
    let bench = ["bench", "--topology", "t", "--url", url, "--inputs", inputs];
    let chat = ["bench", "chat", "--url", url, "--model", "m", "-q", "hi"];
    for (base, flag) in [
        (&bench[..], "--max-in-flight"),
        (&bench[..], "--requests"),
        (&chat[..], "--concurrency"),
    ] {
        let args = [base, &[flag, "0"]].concat();
        let o = glassbox(&args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("`{flag}` is 0: it must be at least 1")),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn validate_json_lists_every_problem() {
    let out = glassbox(
        &[
            "validate",
            "--format",
            "json",
            "tests/fixtures/invalid/many-problems.yaml",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(78));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let diags = v[0]["diagnostics"].as_array().unwrap();
    let codes: Vec<&str> = diags.iter().map(|d| d["code"].as_str().unwrap()).collect();
    for code in [
        "unknown-kind",
        "bad-resource",
        "out-of-range",
        "duplicate-id",
        "unknown-node",
    ] {
        assert!(codes.contains(&code), "{code} missing from {codes:?}");
    }
    assert!(
        diags
            .iter()
            .all(|d| d["line"].is_u64() && d["column"].is_u64())
    );
    assert_eq!(v[0]["valid"], false);
}

#[test]
fn validate_reads_stdin_and_sniffs_json() {
    let text = std::fs::read_to_string(root().join("examples/rag-chat-v3.json")).unwrap();
    let ok = glassbox(&["validate", "-"], Some(&text));
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    let bad = glassbox(&["validate", "-"], Some("{\"topology_id\": \"x\",}"));
    assert_eq!(bad.status.code(), Some(78));
    assert!(stdout(&bad).contains("invalid JSON"), "{}", stdout(&bad));
    let yaml = glassbox(
        &["validate", "-"],
        Some("topology_id: x\nversion: 1\nnodes: [{id: a, type: template}]\n"),
    );
    assert_eq!(yaml.status.code(), Some(0), "{}", stdout(&yaml));
}

#[test]
fn graph_draws_conditions_resources_and_models() {
    let m = glassbox(&["graph", "examples/rag-chat-v3.json"], None);
    assert_eq!(m.status.code(), Some(0));
    let text = stdout(&m);
    assert!(text.starts_with("---\ntitle: rag-chat-v3 v3.2.1"), "{text}");
    assert!(
        text.contains("n_route -->|\"need_retrieval\"| n_embed"),
        "{text}"
    );
    assert!(text.contains("gpu · chat-7b"), "{text}");
    let d = glassbox(
        &["graph", "--format", "dot", "tests/fixtures/valid/full.yaml"],
        None,
    );
    let text = stdout(&d);
    assert!(
        text.contains("\"route\" -> \"embed\" [label=\"need_retrieval\"];"),
        "{text}"
    );
    assert!(
        text.contains("\"llm\" -> \"llm_small\" [label=\"fallback\", style=dashed];"),
        "{text}"
    );
    assert!(text.contains("size(outputs.retrieve.hits) > 0"), "{text}");
    let bad = glassbox(&["graph", "tests/fixtures/invalid/cycle.yaml"], None);
    assert_eq!(bad.status.code(), Some(78));
    assert!(stderr(&bad).contains("cycle"));
}

/// `docs/topology.schema.json` is generated; regenerate with
/// `cargo run -p glassbox-cli -- schema > docs/topology.schema.json`.
#[test]
fn published_schema_matches_the_code() {
    let out = glassbox(&["schema"], None);
    let committed =
        std::fs::read_to_string(root().join(glassbox_topology::schema::PUBLISHED_PATH)).unwrap();
    assert!(
        stdout(&out) == committed,
        "docs/topology.schema.json is stale: run `cargo run -p glassbox-cli -- schema > docs/topology.schema.json`"
    );
    let schema: serde_json::Value = serde_json::from_str(&committed).unwrap();
    assert_eq!(schema["properties"]["nodes"]["type"], "array");
}

#[test]
fn diff_reports_changes_and_prices() {
    let dir = std::env::temp_dir().join(format!("gb-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let old = std::fs::read_to_string(root().join("examples/rag-chat-v3.json")).unwrap();
    let new = old
        .replace("\"version\": \"3.2.1\"", "\"version\": \"3.3.0\"")
        .replace("\"cost_per_call\":0.02", "\"cost_per_call\":0.015")
        .replace(
            "{\"from\":\"llm\",\"to\":\"validate\"}",
            "{\"from\":\"llm\",\"to\":\"validate\",\"condition\":\"size(outputs.llm) > 0\"}",
        );
    assert_ne!(old, new);
    let new_path = dir.join("new.json");
    std::fs::write(&new_path, new).unwrap();
    let out = glassbox(
        &[
            "diff",
            "examples/rag-chat-v3.json",
            new_path.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("~ topology ·: version \"3.2.1\" → \"3.3.0\""),
        "{text}"
    );
    assert!(
        text.contains("~ node llm: resource.cost_per_call \"0.02\" → \"0.015\"  [price]"),
        "{text}"
    );
    assert!(
        text.contains("+ edge llm -> validate: condition = \"size(outputs.llm) > 0\""),
        "{text}"
    );
    let json = glassbox(
        &[
            "diff",
            "--format",
            "json",
            "--exit-code",
            "examples/rag-chat-v3.json",
            new_path.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(json.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(v["changes"].as_array().unwrap().len(), 3, "{v}");
    let same = glassbox(
        &[
            "diff",
            "--exit-code",
            "examples/rag-chat-v3.json",
            "examples/rag-chat-v3.json",
        ],
        None,
    );
    assert_eq!(same.status.code(), Some(0));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn every_subcommand_has_help() {
    let top = glassbox(&["--help"], None);
    assert_eq!(top.status.code(), Some(0));
    let text = stdout(&top);
    let commands: Vec<String> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 5, "{text}");
    for c in commands {
        let out = glassbox(&[&c, "--help"], None);
        assert_eq!(out.status.code(), Some(0), "{c} --help");
        assert!(stdout(&out).contains("Usage: glassbox"), "{c} --help");
    }
}
