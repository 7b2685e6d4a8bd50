//! `glassbox doctor` on this machine: every check passes with the real
//! models, and a missing piece fails its check with what to do about it.

use crate::support::{assert_exit, glassbox, models_turn, stdout};

#[test]
fn doctor_passes_here_and_names_the_kernels() {
    let _turn = models_turn();
    let tmp = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", tmp.path().join("t.db").display());
    let out = glassbox(&["doctor", "--store", &store], None);
    assert_exit(&out, 0);
    let text = stdout(&out);
    for line in [
        "[ok  ] cpu kernels",
        "kernels: ggml-cpu-",
        "quantised weights: ",
        "[ok  ] models",
        "[ok  ] generation",
        "[ok  ] embedding",
        "[ok  ] trace store",
        "all 5 checks passed",
    ] {
        assert!(text.contains(line), "missing {line:?}:\n{text}");
    }
    // The AMX variant only on a CPU with AMX (and, as the generation check
    // passing shows, a library built with the tile-configuration fix).
    if text.contains("kernels: ggml-cpu-sapphirerapids") {
        let features = text
            .lines()
            .find(|l| l.contains("features: "))
            .unwrap_or("");
        assert!(features.contains("AMX-INT8"), "{text}");
    }
}

#[test]
fn doctor_fails_missing_models_and_an_unusable_variant_with_hints() {
    let tmp = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", tmp.path().join("t.db").display());
    let models = tmp.path().join("no-models");
    let out = glassbox(
        &[
            "doctor",
            "--store",
            &store,
            "--models",
            models.to_str().unwrap(),
            "--format",
            "json",
        ],
        None,
    );
    assert_exit(&out, 1);
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["ok"], false);
    let checks = report["checks"].as_array().unwrap();
    let by_name = |n: &str| checks.iter().find(|c| c["name"] == n).unwrap();
    assert_eq!(by_name("models")["status"], "fail");
    assert!(
        by_name("models")["hint"]
            .as_str()
            .unwrap()
            .contains("glassbox models fetch")
    );
    assert_eq!(by_name("trace store")["status"], "ok");
}
