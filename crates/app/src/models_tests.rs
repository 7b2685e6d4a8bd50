//! Registration, lookup and the pipelines of a worker's models.

use super::*;

fn models() -> Models {
    let mut m = Models::new(LlmSettings {
        max_tokens: 256,
        threads: Some(4),
        ..LlmSettings::default()
    });
    m.register("small", ModelKind::Llm, "/m/s.gguf").unwrap();
    m.register("mini", ModelKind::Embedding, "all-minilm-l6-v2")
        .unwrap();
    m
}

#[test]
fn an_unknown_model_is_a_typed_error_naming_what_is_served() {
    let m = models();
    assert_eq!(m.get("small").unwrap().kind, ModelKind::Llm);
    let err = m.get("large").unwrap_err();
    assert_eq!(
        err,
        ModelError::Unknown {
            name: "large".into(),
            served: vec!["small".into(), "mini".into()],
        }
    );
    assert_eq!(
        err.to_string(),
        "this worker does not serve model `large`; it serves: small, mini"
    );
}

#[test]
fn empty_and_repeated_registrations_are_refused() {
    let mut m = models();
    assert_eq!(
        m.register("small", ModelKind::Embedding, "x").unwrap_err(),
        ModelError::Duplicate("small".into())
    );
    assert!(matches!(
        m.register("", ModelKind::Llm, "x"),
        Err(ModelError::Empty { .. })
    ));
    assert!(matches!(
        m.register("x", ModelKind::Llm, ""),
        Err(ModelError::Empty { .. })
    ));
    assert_eq!(m.names(), vec!["small", "mini"], "nothing refused was kept");
    assert_eq!(m.node_kinds(), vec!["embedding", "llm_inference"]);
}

#[test]
fn each_model_runs_on_a_valid_pipeline_named_after_it() {
    let m = models();
    let pipelines = m.pipelines();
    assert_eq!(pipelines.len(), 2);
    for (key, text) in &pipelines {
        let text = String::from_utf8(text.clone()).unwrap();
        let loaded = glassbox_topology::load_source(
            glassbox_topology::Source::new(key.display().to_string(), text.clone()),
            &glassbox_nodes::builtin_kinds(),
        );
        let loaded = match loaded {
            Ok(v) => v,
            Err(e) => panic!("{text}: {e}"),
        };
        let id = loaded.topology.spec.topology_id.value.clone();
        let model = m.get(&id).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let node = &v["nodes"][0];
        assert_eq!(node["type"], model.kind.node_kind());
        assert_eq!(node["config"]["model"], model.path.as_str());
        if model.kind == ModelKind::Llm {
            assert_eq!(node["config"]["threads"], 4);
            assert_eq!(node["config"]["max_tokens"], 256);
            assert!(node["config"].get("context_size").is_none());
        } else {
            assert_eq!(node["config"]["text"], "input.question");
        }
    }
}
