//! Registration, lookup and the files of a worker's models.

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
fn a_relative_path_is_inside_the_models_directory() {
    let m = models();
    assert_eq!(
        m.get("small").unwrap().location(),
        PathBuf::from("/m/s.gguf")
    );
    assert_eq!(
        m.get("mini").unwrap().location(),
        glassbox_models::models_dir().join("all-minilm-l6-v2")
    );
    assert_eq!(m.llm_settings().threads, Some(4));
}
