//! Every invalid fixture is rejected with the diagnostics in its snapshot;
//! every valid fixture and every example validates.

use glassbox_topology::{Report, TopologyError, load_source, parse};

use crate::support::{root, topology_files};

fn load(rel: &str) -> Result<glassbox_topology::Validated, TopologyError> {
    let bytes = std::fs::read(root().join(rel)).unwrap();
    let source = match parse::decode(rel, bytes, None) {
        Ok(s) => s,
        Err(d) => {
            let src = glassbox_topology::Source::new(rel, String::new());
            return Err(TopologyError::Invalid(Box::new(Report::new(src, vec![*d]))));
        }
    };
    load_source(source, &glassbox_nodes::builtin_kinds())
}

fn rel(path: &std::path::Path) -> String {
    path.strip_prefix(root())
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

#[test]
fn invalid_fixtures_match_their_snapshots() {
    let files = topology_files(&root().join("tests/fixtures/invalid"));
    assert!(
        files.len() >= 40,
        "expected at least 40 invalid fixtures, found {}",
        files.len()
    );
    for path in files {
        let rel = rel(&path);
        let report = match load(&rel) {
            Ok(v) => panic!(
                "{rel} should be invalid but validated: {:?}",
                v.report.diagnostics
            ),
            Err(TopologyError::Invalid(report)) => report,
            Err(other) => panic!("{rel}: unexpected error {other}"),
        };
        assert!(report.has_errors(), "{rel}");
        // Every diagnostic names where (line:column) unless it is about the whole file.
        for d in &report.diagnostics {
            assert!(
                !d.message.is_empty() && d.hint.is_some(),
                "{rel}: {d:?} lacks a message or hint"
            );
        }
        let name = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace('.', "_");
        insta::with_settings!({ snapshot_path => "snapshots/invalid", prepend_module_to_snapshot => false, description => rel.clone() }, {
            insta::assert_snapshot!(name, report.render(false));
        });
    }
}

#[test]
fn valid_fixtures_and_examples_validate() {
    let mut files = topology_files(&root().join("tests/fixtures/valid"));
    files.extend(topology_files(&root().join("examples")));
    assert!(
        files
            .iter()
            .any(|p| p.ends_with("examples/rag-chat-v3.json"))
    );
    for path in files {
        let rel = rel(&path);
        match load(&rel) {
            Ok(v) => assert_eq!(v.report.error_count(), 0, "{rel}"),
            Err(TopologyError::Invalid(r)) => panic!("{rel} is invalid:\n{}", r.render(false)),
            Err(e) => panic!("{rel}: {e}"),
        }
    }
}

/// The seed article's JSON loads unchanged, with the meaning it states.
#[test]
fn seed_rag_chat_v3_loads_unchanged() {
    let v = load("examples/rag-chat-v3.json").unwrap();
    let t = v.topology;
    assert_eq!(
        (t.id.as_str(), t.version.as_str()),
        ("rag-chat-v3", "3.2.1")
    );
    assert_eq!(t.nodes.len(), 6);
    assert_eq!(t.edges.len(), 6);
    let entries: Vec<&str> = t.entries().iter().map(|&n| t.node(n).id.as_str()).collect();
    assert_eq!(entries, ["route"]);
    let llm = t.node(t.node_id("llm").unwrap());
    assert_eq!(llm.resource.model.as_deref(), Some("chat-7b"));
    assert_eq!(
        llm.resource.prices.cost_per_call.unwrap().to_string(),
        "0.02"
    );
    let prompt = t.node_id("prompt").unwrap();
    assert_eq!(
        t.incoming(prompt).len(),
        2,
        "prompt joins the direct and the retrieval path"
    );
    let conditions: Vec<String> = t
        .edges
        .iter()
        .filter_map(|e| e.condition.as_ref().map(|c| c.to_string()))
        .collect();
    assert_eq!(conditions, ["need_retrieval", "direct_answer"]);
}

#[test]
fn json_diagnostics_carry_positions() {
    let err = load("tests/fixtures/invalid/json-unknown-field.json")
        .err()
        .unwrap();
    let TopologyError::Invalid(report) = err else {
        panic!()
    };
    let json = serde_json::to_value(report.to_json()).unwrap();
    assert_eq!(json[0]["code"], "unknown-field");
    assert_eq!(json[0]["line"], 5);
    assert_eq!(json[0]["column"], 37);
    assert_eq!(json[0]["path"], "nodes[0].retires");
    assert_eq!(json[0]["hint"], "did you mean `retries`?");
}
