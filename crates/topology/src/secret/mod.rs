//! Secret references and masking.
//!
//! A topology never needs to hold a credential in clear: any string in a
//! node's `config` may reference one, `${env:NAME}` (an environment
//! variable of the process that builds the pipeline) or `${file:/abs/path}`
//! (the contents of a secrets file, trailing newline removed). References
//! are resolved by [`resolve`] when a node is *built*, on a copy handed to
//! the node kind; the topology (its spec, the API, traces) keeps the
//! reference as written, so the resolved value is never stored back.
//!
//! Values that carry secrets are shown masked: [`mask_config`] is what every
//! place that shows a node config (API, CLI) passes it through, and
//! [`mask_text`] strips URL userinfo (`https://user:password@host`) from
//! free text such as error messages. Both are pure, cheap and total (they
//! never fail on odd input), so they can sit on every path that shows data.
//!
//! Parts, bottom up: `error` (what can fail), `reference` (finding and
//! resolving references), `mask` (secret keys, masked values and text),
//! `source` (a masked topology source and report, over the parser).

mod error;
mod mask;
mod reference;
mod source;

pub use error::{AccessError, SecretError};
pub use mask::{MASK, is_secret_key, mask_config, mask_text, strip_userinfo};
pub use reference::{
    LookupError, Reference, has_reference, holds_reference, references, resolve, resolve_with,
};
pub use source::mask_source;

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use serde_json::json;

    use super::*;

    fn lookup(r: &Reference<'_>) -> Result<String, LookupError> {
        match r {
            Reference::Env("TOKEN") => Ok("s3cret".into()),
            Reference::File("/run/secrets/key") => Ok("k3y".into()),
            Reference::File(_) => Err(LookupError::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such file",
            ))),
            Reference::Env(_) => Err(LookupError::Missing),
        }
    }

    #[test]
    fn references_resolve_inside_strings_and_nested_values() {
        let config = json!({
            "url": "https://api.example.com/x",
            "headers": {"Authorization": "Bearer ${env:TOKEN}", "X-Key": "${file:/run/secrets/key}"},
            "n": 3
        });
        let out = resolve_with(&config, "config", &lookup).unwrap();
        assert_eq!(out["headers"]["Authorization"], "Bearer s3cret");
        assert_eq!(out["headers"]["X-Key"], "k3y");
        assert_eq!(out["n"], 3);
        // The input is untouched: nothing is stored back.
        assert_eq!(config["headers"]["Authorization"], "Bearer ${env:TOKEN}");
    }

    #[test]
    fn unresolvable_references_name_the_field_and_never_the_value() {
        let e = resolve_with(&json!({"h": {"a": "${env:NOPE}"}}), "config", &lookup).unwrap_err();
        assert_eq!(e.code(), "secret_env_missing");
        assert!(e.to_string().contains("`config.h.a`"), "{e}");
        assert!(e.to_string().contains("`NOPE`"), "{e}");
        let e = resolve_with(&json!("${file:/etc/none}"), "config", &lookup).unwrap_err();
        assert_eq!(e.code(), "secret_file_unreadable");
        let e = resolve_with(&json!("${env:1BAD}"), "config", &lookup).unwrap_err();
        assert_eq!(e.code(), "secret_reference_malformed");
        let e = resolve_with(&json!("${file:relative}"), "config", &lookup).unwrap_err();
        assert!(e.to_string().contains("absolute"), "{e}");
        let e = resolve_with(&json!("${env:OPEN"), "config", &lookup).unwrap_err();
        assert!(e.to_string().contains("not closed"), "{e}");
    }

    #[test]
    fn secret_bearing_values_are_masked_but_references_are_shown() {
        let config = json!({
            "url": "https://bob:hunter2@api.example.com/x",
            "headers": {"X-Internal-Token": "abc123", "Authorization": "Bearer ${env:TOKEN}"},
            "api_key": "sk-live",
            "api_key_env": "OPENAI_API_KEY",
            "max_tokens": 64,
            "model": "gpt"
        });
        let shown = mask_config(&config);
        assert_eq!(shown["url"], "https://api.example.com/x");
        assert_eq!(shown["headers"]["X-Internal-Token"], MASK);
        assert_eq!(shown["headers"]["Authorization"], "Bearer ${env:TOKEN}");
        assert_eq!(shown["api_key"], MASK);
        assert_eq!(shown["api_key_env"], "OPENAI_API_KEY");
        assert_eq!(shown["max_tokens"], 64);
        assert_eq!(shown["model"], "gpt");
    }

    #[test]
    fn sources_are_masked_in_place() {
        let text = "nodes:\n  - id: h\n    config:\n      url: \"http://bob:pw@h/x\"\n      headers: { X-Internal-Token: abc123, A: \"${env:T}\" }\n";
        let masked = mask_source(text, crate::Format::Yaml);
        assert_eq!(masked.len(), text.len());
        assert!(!masked.contains("abc123"), "{masked}");
        assert!(!masked.contains("bob:pw"), "{masked}");
        assert!(masked.contains("${env:T}"), "{masked}");
        assert!(masked.contains("X-Internal-Token: ******"), "{masked}");
        // Unparseable text: line heuristic.
        let masked = mask_source("token: abc\n[oops", crate::Format::Yaml);
        assert!(masked.starts_with("token: ***\n"), "{masked}");
    }

    #[test]
    fn userinfo_is_stripped_from_any_text() {
        assert_eq!(
            mask_text("GET http://u:p@localhost:8080/a?b=c@d: refused"),
            "GET http://localhost:8080/a?b=c@d: refused"
        );
        assert_eq!(
            mask_text("`https://a@b.com` and ftp://x@y"),
            "`https://b.com` and ftp://y"
        );
        assert_eq!(mask_text("mail me: a@b.com"), "mail me: a@b.com");
        assert!(matches!(mask_text("http://host/x"), Cow::Borrowed(_)));
        assert_eq!(strip_userinfo("http://:pw@h"), "http://h");
    }

    #[test]
    fn secret_keys_are_found_in_any_case_style() {
        for key in [
            "accessToken",
            "access_token",
            "ACCESS-TOKEN",
            "clientSecret",
            "privateKey",
            "PrivateKey",
            "APIKey",
            "apikey",
            "x-api-key",
            "pwd",
            "PWD",
            "dsn",
            "DB_DSN",
            "db.password",
            "userCredentials",
            "accesstoken",
            "key",
            "signingKey",
            "sig",
            "X-Internal-Token",
            "session_cookie",
        ] {
            assert!(is_secret_key(key), "{key} should be secret");
        }
        for key in [
            "max_tokens",
            "maxTokens",
            "cost_per_1k_tokens",
            "tokenizer",
            "api_key_env",
            "apiKeyEnv",
            "token_limit",
            "auth_type",
            "password_file",
            "sort_key",
            "cacheKey",
            "public_key",
            "idempotency-key",
            "keywords",
            "monkey",
            "model",
            "url",
            "",
        ] {
            assert!(!is_secret_key(key), "{key} should not be secret");
        }
    }

    #[test]
    fn secret_query_parameters_are_masked_in_any_text() {
        assert_eq!(
            mask_text("GET https://h/x?api_key=k1&sig=s2&page=2&accessToken=t3#frag"),
            "GET https://h/x?api_key=***&sig=***&page=2&accessToken=***#frag"
        );
        assert_eq!(
            mask_text("see http://u:p@h/a?token=abc and http://h/b?q=1"),
            "see http://h/a?token=*** and http://h/b?q=1"
        );
        // References name where a secret is, not the secret.
        assert_eq!(
            mask_text("https://h/?token=${env:T}"),
            "https://h/?token=${env:T}"
        );
        assert!(matches!(mask_text("https://h/?page=2"), Cow::Borrowed(_)));
        assert!(matches!(mask_text("what? no url"), Cow::Borrowed(_)));
    }
}
