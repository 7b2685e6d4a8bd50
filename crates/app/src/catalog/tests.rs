//! Streaming modes and embedding detection on small topologies.

use super::*;

fn topology(nodes: &str, edges: &str) -> Topology {
    let text = format!("topology_id: t\nversion: 1.0.0\nnodes:\n{nodes}edges:\n{edges}");
    let source = glassbox_topology::Source::new("t.yaml", text);
    match glassbox_topology::load_source(source, &glassbox_nodes::builtin_kinds()) {
        Ok(v) => v.topology,
        Err(TopologyError::Invalid(r)) => panic!("{}", r.render(false)),
        Err(e) => panic!("{e}"),
    }
}

const LLM: &str = "  - id: llm\n    type: llm_inference\n    config: { backend: local, model: m.gguf, prompt: '{{ input.question }}' }\n";
const LLM2: &str = "  - id: llm2\n    type: llm_inference\n    config: { backend: local, model: m.gguf, prompt: '{{ outputs.llm.text }}' }\n";
const GUARD: &str = "  - id: check\n    type: output_guard\n    config: { blocklist: [x] }\n";
const TEMPLATE: &str =
    "  - id: t\n    type: template\n    config: { template_id: a, template: hi }\n";

#[test]
fn a_guard_after_an_llm_buffers_the_stream() {
    let t = topology(&format!("{LLM}{GUARD}"), "  - { from: llm, to: check }\n");
    assert_eq!(
        stream_mode(&t, &glassbox_nodes::registry()),
        StreamMode::Buffered {
            reason: "output_guard"
        }
    );
}

#[test]
fn the_last_llm_streams_live() {
    let t = topology(&format!("{LLM}{LLM2}"), "  - { from: llm, to: llm2 }\n");
    assert_eq!(
        stream_mode(&t, &glassbox_nodes::registry()),
        StreamMode::Live {
            nodes: vec!["llm2".into()]
        }
    );
}

#[test]
fn no_llm_is_buffered() {
    let t = topology(TEMPLATE, "  []\n");
    assert_eq!(
        stream_mode(&t, &glassbox_nodes::registry()),
        StreamMode::Buffered { reason: "no_llm" }
    );
}

#[test]
fn a_fallback_counts_as_running_after_its_node() {
    // The walk follows fallbacks: `llm` may be followed by `small`, so
    // `small` is the last text writer on that path.
    let small =
        "  - id: small\n    type: llm_inference\n    config: { backend: local, model: m.gguf }\n";
    let llm = LLM.replace("    config:", "    fallback: small\n    config:");
    let t = topology(&format!("{llm}{small}"), "  []\n");
    assert_eq!(
        stream_mode(&t, &glassbox_nodes::registry()),
        StreamMode::Live {
            nodes: vec!["small".into()]
        }
    );
}

#[test]
fn only_embedding_entries_serve_embeddings() {
    let registry = glassbox_nodes::registry();
    let embed = "  - id: e\n    type: embedding\n    config: { backend: local }\n";
    assert!(embeds(&topology(embed, "  []\n"), &registry));
    assert!(!embeds(&topology(TEMPLATE, "  []\n"), &registry));
    assert!(!embeds(
        &topology(&format!("{embed}{TEMPLATE}"), "  []\n"),
        &registry
    ));
}

/// A builder whose traces go nowhere (test-only: no store).
fn builder() -> Builder {
    Builder {
        registry: glassbox_nodes::registry(),
        sink_for: Box::new(|_: &str| {
            Arc::new(glassbox_engine::trace::NoopSink) as Arc<dyn TraceSink>
        }),
        on_scan: Box::new(|_| {}),
        summary_chars: 200,
        outbound: Arc::new(ServerAllow::default()),
        promoted: BTreeMap::new(),
        cluster: None,
    }
}

#[test]
fn a_directory_is_served_and_a_rescan_finds_it_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("topology_id: greet\nversion: 1.0.0\nnodes:\n{TEMPLATE}edges: []\n");
    let file = dir.path().join("greet.yaml");
    std::fs::write(&file, text).unwrap();
    let catalog = Catalog::new(dir.path().to_path_buf(), builder());
    let changes = catalog.rescan().unwrap();
    assert!(
        matches!(&changes[..], [Change::Loaded { id, file: f, .. }] if id == "greet" && *f == file),
        "{changes:?}"
    );
    assert_eq!(catalog.ids(), vec!["greet".to_string()]);
    assert!(
        catalog.rescan().unwrap().is_empty(),
        "a rescan finds it unchanged"
    );
    assert!(catalog.get("greet").is_some());
}
