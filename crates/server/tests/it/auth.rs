//! API keys, scopes, and loopback-only without keys.

use glassbox_server::config::sha256_hex;
use glassbox_server::{Config, Server, ServerOptions};
use glassbox_store::StoreUrl;

use crate::support::{MODERATION, TestServer};

fn keyed() -> TestServer {
    let config = Config::parse(&format!(
        r#"
        [[keys]]
        name = "reader"
        sha256 = "{}"
        scopes = ["read"]
        [[keys]]
        name = "runner"
        sha256 = "{}"
        scopes = ["run"]
        [[keys]]
        name = "ops"
        sha256 = "{}"
        scopes = ["admin"]
        "#,
        sha256_hex("read-key"),
        sha256_hex("run-key"),
        sha256_hex("admin-key"),
    ))
    .unwrap();
    TestServer::start(&[("moderation.yaml", MODERATION)], config)
}

#[test]
fn protected_endpoints_need_a_valid_key() {
    let s = keyed();
    for path in [
        "/v1/topologies",
        "/v1/topologies/moderation",
        "/v1/traces",
        "/v1/reports/summary",
        "/v1/models",
    ] {
        let r = s.get(path, None);
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "unauthorized"),
            "{path}"
        );
        let r = s.get(path, Some("wrong-key"));
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "unauthorized"),
            "{path}"
        );
    }
    for path in [
        "/v1/topologies/moderation/runs",
        "/v1/chat/completions",
        "/v1/embeddings",
        "/v1/admin/reload",
    ] {
        let r = s.post(path, None, "{}");
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "unauthorized"),
            "{path}"
        );
    }
    for path in ["/healthz", "/readyz", "/metrics", "/", "/assets/app.js"] {
        assert_eq!(s.get(path, None).status, 200, "{path} is public");
    }
}

#[test]
fn scopes_decide_what_a_key_may_do() {
    let s = keyed();
    let run = r#"{"question": "hi"}"#;
    let r = s.post("/v1/topologies/moderation/runs", Some("read-key"), run);
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden"));
    assert_eq!(
        s.post("/v1/topologies/moderation/runs", Some("run-key"), run)
            .status,
        200
    );
    assert_eq!(
        s.post("/v1/topologies/moderation/runs", Some("admin-key"), run)
            .status,
        200
    );

    let r = s.get("/v1/traces", Some("run-key"));
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden"));
    assert_eq!(s.get("/v1/traces", Some("read-key")).status, 200);
    assert_eq!(s.get("/v1/traces", Some("admin-key")).status, 200);

    assert_eq!(s.get("/v1/models", Some("run-key")).status, 200);
    assert_eq!(s.get("/v1/models", Some("read-key")).status, 200);

    let r = s.post("/v1/admin/reload", Some("read-key"), "");
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden"));
    assert_eq!(
        s.post("/v1/admin/reload", Some("admin-key"), "").status,
        200
    );
}

/// Issue 14, item 9: `BEARER KEY` was refused; the scheme is
/// case-insensitive (RFC 7235).
#[test]
fn the_bearer_scheme_is_case_insensitive() {
    let s = keyed();
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let auth = format!("{scheme} read-key");
        let r = s.get_with("/v1/topologies", &[("Authorization", &auth)]);
        assert_eq!(r.status, 200, "{scheme}: {}", r.text);
    }
    let r = s.get_with("/v1/topologies", &[("Authorization", "Basic read-key")]);
    assert_eq!((r.status, r.code().as_str()), (401, "unauthorized"));
}

#[test]
fn without_keys_the_server_listens_on_loopback_only_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("traces.db");
    let mut options = ServerOptions::new(dir.path().to_path_buf(), StoreUrl::Sqlite(store));
    options.host = Some("0.0.0.0".into());
    options.port = Some(0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(Server::bind(options)).unwrap();
    assert!(
        server.local_addr().ip().is_loopback(),
        "{}",
        server.local_addr()
    );
    assert!(
        server.notes().iter().any(|n| n.contains("127.0.0.1 only")),
        "{:?}",
        server.notes()
    );
}

#[test]
fn cors_is_off_by_default_and_allows_configured_origins() {
    let origin = "https://app.example.com";
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], Config::default());
    let r = s.get_with("/v1/topologies", &[("Origin", origin)]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), None);

    let config = Config::parse(&format!("cors_origins = [\"{origin}\"]")).unwrap();
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], config);
    let r = s.get_with("/v1/topologies", &[("Origin", origin)]);
    assert_eq!(r.header("access-control-allow-origin"), Some(origin));
    let r = s.get_with("/v1/topologies", &[("Origin", "https://evil.example")]);
    assert_eq!(r.header("access-control-allow-origin"), None);
}
