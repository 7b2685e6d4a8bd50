//! `docs/openapi.json` is generated; regenerate with
//! `cargo run -p glassbox-cli -- serve --openapi > docs/openapi.json`
//! (or run this test with `GLASSBOX_UPDATE_OPENAPI=1`).

#[test]
fn published_openapi_matches_the_code() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(glassbox_server::openapi::PUBLISHED_PATH);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = glassbox_server::openapi::json();
    if std::env::var_os("GLASSBOX_UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = if committed == generated {
        committed
    } else {
        std::fs::read_to_string(&path).unwrap_or_default()
    };
    assert!(
        committed == generated,
        "docs/openapi.json is stale: run `cargo run -p glassbox-cli -- serve --openapi > docs/openapi.json`"
    );
    let doc: serde_json::Value = serde_json::from_str(&committed).unwrap();
    for p in [
        "/v1/topologies/{id}/runs",
        "/v1/chat/completions",
        "/v1/embeddings",
        "/v1/models",
        "/v1/traces/{request_id}",
        "/v1/reports/{name}",
        "/v1/reports/compare",
        "/v1/topologies/{id}/versions",
        "/v1/topologies/{id}/split",
        "/v1/topologies/{id}/rollback",
        "/metrics",
    ] {
        assert!(doc["paths"][p].is_object(), "{p} is not documented");
    }
}
