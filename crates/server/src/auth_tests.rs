//! Tests of keys and scopes.

use super::*;

#[test]
fn the_bearer_scheme_is_case_insensitive() {
    assert_eq!(bearer_token("Bearer k"), Some("k"));
    assert_eq!(bearer_token("BEARER k"), Some("k"));
    assert_eq!(bearer_token("bEaReR   k  "), Some("k"));
    assert_eq!(bearer_token("Basic k"), None);
    assert_eq!(bearer_token("Bearer "), None);
    assert_eq!(bearer_token("Bearerk"), None);
}

#[test]
fn scopes_and_missing_keys() {
    let mut c = Config::default();
    c.add_env_key("k1");
    c.keys.push(ApiKey {
        name: "reader".into(),
        sha256: sha256_hex("k2"),
        scopes: vec![Scope::Read],
        rate_limit: None,
        max_priority: None,
        max_run_time: None,
    });
    let keys = Keys::new(&c);
    let name = |h: &HeaderMap, s| keys.check(h, s).map(|c| c.name);
    let mut h = HeaderMap::new();
    assert_eq!(
        keys.check(&h, &[Scope::Run]).unwrap_err().status,
        StatusCode::UNAUTHORIZED
    );
    h.insert(header::AUTHORIZATION, "Bearer k2".parse().unwrap());
    assert_eq!(
        keys.check(&h, &[Scope::Run]).unwrap_err().status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(name(&h, &[Scope::Read]).unwrap(), "reader");
    h.insert(header::AUTHORIZATION, "Bearer k1".parse().unwrap());
    assert_eq!(name(&h, &[Scope::Run]).unwrap(), "env");
    h.insert(header::AUTHORIZATION, "BEARER k1".parse().unwrap());
    assert_eq!(name(&h, &[Scope::Run]).unwrap(), "env");
    h.insert(header::AUTHORIZATION, "Bearer nope".parse().unwrap());
    assert_eq!(
        keys.check(&h, &[Scope::Read]).unwrap_err().status,
        StatusCode::UNAUTHORIZED
    );
}
