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

use std::borrow::Cow;

use serde_json::Value;

/// What a masked value is shown as.
pub const MASK: &str = "***";

/// A secret reference could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(
        "`{field}` references environment variable `{name}`, which is not set (set it in the environment of the process that builds the pipeline)"
    )]
    EnvMissing { field: String, name: String },
    #[error("`{field}` references secrets file `{path}`, which cannot be read: {source}")]
    FileUnreadable {
        field: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{field}`: {problem}")]
    Malformed { field: String, problem: String },
    /// Not allowed by the server's `[secrets]` section or in this field.
    #[error("{0} (hint: {hint})", hint = .0.hint())]
    Denied(#[from] crate::secret_access::AccessError),
}

impl SecretError {
    pub fn code(&self) -> &'static str {
        match self {
            SecretError::EnvMissing { .. } => "secret_env_missing",
            SecretError::FileUnreadable { .. } => "secret_file_unreadable",
            SecretError::Malformed { .. } => "secret_reference_malformed",
            SecretError::Denied(e) => e.code(),
        }
    }
}

/// One parsed reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference<'a> {
    Env(&'a str),
    File(&'a str),
}

/// Whether `s` contains a secret reference (well-formed or not).
pub fn has_reference(s: &str) -> bool {
    s.contains("${env:") || s.contains("${file:")
}

/// Whether any string in `value` contains a secret reference.
pub fn holds_reference(value: &Value) -> bool {
    match value {
        Value::String(s) => has_reference(s),
        Value::Array(items) => items.iter().any(holds_reference),
        Value::Object(map) => map.values().any(holds_reference),
        _ => false,
    }
}

/// Splits `s` into literal text and references. `Err` names the first
/// malformed reference (unterminated, bad variable name, relative path).
fn pieces(s: &str) -> Result<Vec<Result<&str, Reference<'_>>>, String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(at) = find_reference(rest) {
        if at > 0 {
            out.push(Ok(&rest[..at]));
        }
        let body = &rest[at + 2..];
        let Some(end) = body.find('}') else {
            return Err(format!(
                "`{}` is not closed (write `${{env:NAME}}` or `${{file:/path}}`)",
                preview(&rest[at..])
            ));
        };
        let inner = &body[..end];
        let reference = if let Some(name) = inner.strip_prefix("env:") {
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!(
                    "`${{{inner}}}`: `{name}` is not an environment variable name (letters, digits, `_`)"
                ));
            }
            Reference::Env(name)
        } else if let Some(path) = inner.strip_prefix("file:") {
            if !path.starts_with('/') {
                return Err(format!(
                    "`${{{inner}}}`: the secrets file path must be absolute, e.g. `${{file:/run/secrets/token}}`"
                ));
            }
            Reference::File(path)
        } else {
            // `find_reference` only stops at `${env:` and `${file:`.
            return Err(format!("`${{{inner}}}` is not a secret reference"));
        };
        out.push(Err(reference));
        rest = &body[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Ok(rest));
    }
    Ok(out)
}

fn find_reference(s: &str) -> Option<usize> {
    match (s.find("${env:"), s.find("${file:")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn preview(s: &str) -> String {
    s.chars().take(24).collect()
}

/// The references in `s`, or why one is malformed. For validation: pure.
pub fn references(s: &str) -> Result<Vec<Reference<'_>>, String> {
    Ok(pieces(s)?.into_iter().filter_map(Result::err).collect())
}

/// Resolves every reference in every string of `value`, reading the
/// process environment and secrets files, with no placement or access
/// check: for values the operator wrote. Topology configs are resolved by
/// [`SecretAccess::resolve`](crate::secret_access::SecretAccess::resolve).
/// `field` names where `value` sits (e.g. `config`), for errors.
pub fn resolve(value: &Value, field: &str) -> Result<Value, SecretError> {
    resolve_with(value, field, &|r: &Reference<'_>| match r {
        Reference::Env(name) => std::env::var(name).map_err(|_| LookupError::Missing),
        Reference::File(path) => std::fs::read_to_string(path)
            .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
            .map_err(LookupError::Io),
    })
}

/// Why a lookup failed (for [`resolve_with`]).
#[derive(Debug)]
pub enum LookupError {
    Missing,
    Io(std::io::Error),
}

/// [`resolve`] with the lookup supplied (tests, embedders with a vault).
pub fn resolve_with(
    value: &Value,
    field: &str,
    lookup: &dyn Fn(&Reference<'_>) -> Result<String, LookupError>,
) -> Result<Value, SecretError> {
    Ok(match value {
        Value::String(s) if has_reference(s) => {
            let parts = pieces(s).map_err(|problem| SecretError::Malformed {
                field: field.to_string(),
                problem,
            })?;
            let mut out = String::new();
            for part in parts {
                match part {
                    Ok(text) => out.push_str(text),
                    Err(r) => match lookup(&r) {
                        Ok(v) => out.push_str(&v),
                        Err(LookupError::Missing) => {
                            let name = match r {
                                Reference::Env(n) | Reference::File(n) => n,
                            };
                            return Err(SecretError::EnvMissing {
                                field: field.to_string(),
                                name: name.to_string(),
                            });
                        }
                        Err(LookupError::Io(source)) => {
                            let path = match r {
                                Reference::Env(n) | Reference::File(n) => n,
                            };
                            return Err(SecretError::FileUnreadable {
                                field: field.to_string(),
                                path: path.to_string(),
                                source,
                            });
                        }
                    },
                }
            }
            Value::String(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| resolve_with(v, &format!("{field}[{i}]"), lookup))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), resolve_with(v, &format!("{field}.{k}"), lookup)?)))
                .collect::<Result<_, SecretError>>()?,
        ),
        other => other.clone(),
    })
}

/// Words that make a key secret-bearing wherever they appear in it
/// (`X-Internal-Token`, `clientSecret`, `DB_PASSWORD`, `dsn`).
const SECRET_WORDS: &[&str] = &[
    "token",
    "secret",
    "secrets",
    "password",
    "passwords",
    "passwd",
    "pwd",
    "passphrase",
    "passcode",
    "credential",
    "credentials",
    "dsn",
    "auth",
    "authorization",
    "cookie",
    "cookies",
    "apikey",
    "sig",
    "signature",
    "headers",
];

/// Spellings without separators that hold a secret word (`accesstoken`,
/// `APIKEY`); searched in the whole lower-cased key.
const SECRET_INFIXES: &[&str] = &[
    "secret",
    "password",
    "passwd",
    "apikey",
    "accesstoken",
    "authtoken",
    "privatekey",
    "accesskey",
    "secretkey",
    "credential",
];

/// Qualifiers that make `…_key` an ordinary identifier, not a secret:
/// `sort_key`, `cache_key`, `public_key`, `idempotency_key`, ...
const PLAIN_KEY_QUALIFIERS: &[&str] = &[
    "sort",
    "cache",
    "partition",
    "primary",
    "foreign",
    "group",
    "routing",
    "label",
    "lookup",
    "join",
    "map",
    "public",
    "idempotency",
    "dedup",
    "dedupe",
    "row",
    "index",
    "shard",
    "hash",
    "input",
    "output",
    "result",
    "field",
    "message",
    "object",
    "template",
    "cursor",
    "metadata",
];

/// Last words that make a key *about* a secret rather than hold one:
/// `api_key_env` (a variable's name), `token_limit`, `auth_type`,
/// `password_file` (a path), `token_url`.
const ABOUT_WORDS: &[&str] = &[
    "env", "name", "file", "path", "url", "endpoint", "limit", "limits", "count", "budget", "type",
    "length", "len", "ttl", "header", "field", "mode", "kind", "id", "ids", "format",
];

/// The words of a key in any case style: `clientSecret`, `Client-Secret`,
/// `CLIENT_SECRET`, `client.secret` all give `client`, `secret`.
fn key_words(key: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let chars: Vec<char> = key.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            continue;
        }
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        // A capital starts a word after a lower-case letter or digit
        // (`accessToken`), or ends an acronym (`APIKey`: `API`, `Key`).
        let starts = c.is_uppercase()
            && prev.is_some_and(|p| {
                p.is_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_uppercase() && next.is_some_and(char::is_lowercase))
            });
        if starts && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Whether a key names a secret-bearing value, in any case style:
/// `*token*`, `*secret*`, `*password*`, `pwd`, `dsn`, `*credential*`,
/// `auth`, `cookie`, `signature`, every header, and `key` as the last word
/// (`api_key`, `accessKey`, bare `key`) unless an ordinary qualifier
/// precedes it (`sort_key`, `public_key`). Plural counts are not secrets
/// (`max_tokens`), nor are keys about a secret (`api_key_env`, `token_limit`).
pub fn is_secret_key(key: &str) -> bool {
    let words = key_words(key);
    let Some(last) = words.last() else {
        return false;
    };
    if ABOUT_WORDS.contains(&last.as_str()) {
        return false;
    }
    if words.iter().any(|w| SECRET_WORDS.contains(&w.as_str())) {
        return true;
    }
    let joined: String = words.concat();
    if SECRET_INFIXES.iter().any(|s| joined.contains(s)) {
        return true;
    }
    if last == "key" || last == "keys" {
        let qualifier = words.len().checked_sub(2).map(|i| words[i].as_str());
        return !qualifier.is_some_and(|q| PLAIN_KEY_QUALIFIERS.contains(&q));
    }
    false
}

/// A node config as it may be shown: values under secret-bearing keys
/// (every header value, `api_key`, `token`, ...) masked unless they are a
/// reference (the reference names where the secret is, not the secret),
/// and URL userinfo stripped from every string.
pub fn mask_config(config: &Value) -> Value {
    mask(config, false)
}

fn mask(value: &Value, secret: bool) -> Value {
    match value {
        Value::String(s) if secret && !has_reference(s) => Value::String(MASK.into()),
        Value::String(s) => Value::String(mask_text(s).into_owned()),
        Value::Number(_) | Value::Bool(_) if secret => Value::String(MASK.into()),
        Value::Array(items) => Value::Array(items.iter().map(|v| mask(v, secret)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), mask(v, secret || is_secret_key(k))))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `url` without its userinfo: `https://user:pw@host/x` → `https://host/x`.
pub fn strip_userinfo(url: &str) -> Cow<'_, str> {
    mask_text(url)
}

/// `text` with the userinfo of every URL in it removed
/// (`scheme://user:password@host` → `scheme://host`) and the values of its
/// secret-named query parameters masked (`?api_key=…&page=2` →
/// `?api_key=***&page=2`, names as in [`is_secret_key`]).
pub fn mask_text(text: &str) -> Cow<'_, str> {
    let text = strip_all_userinfo(text);
    if !text.contains("://") || !text.contains('?') {
        return text;
    }
    match mask_queries(&text) {
        Some(masked) => Cow::Owned(masked),
        None => text,
    }
}

fn strip_all_userinfo(text: &str) -> Cow<'_, str> {
    if !text.contains("://") || !text.contains('@') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail.find(url_end).unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(i) => {
                out.push_str(&authority[i + 1..]);
                changed = true;
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// Where a URL's authority ends.
fn url_end(c: char) -> bool {
    matches!(c, '/' | '?' | '#' | '`' | '"' | '\'' | '<' | '>') || c.is_whitespace()
}

/// Where a URL's query ends.
fn query_end(c: char) -> bool {
    matches!(c, '#' | '`' | '"' | '\'' | '<' | '>') || c.is_whitespace()
}

/// The query parameters of every URL in `text`, secret-named values
/// masked; `None` when there was nothing to mask.
fn mask_queries(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let url_len = rest[at..].find(query_end).unwrap_or(rest.len() - at);
        let url = &rest[at..at + url_len];
        out.push_str(&rest[..at]);
        match url.split_once('?') {
            Some((before, query)) => {
                out.push_str(before);
                out.push('?');
                for (i, pair) in query.split('&').enumerate() {
                    if i > 0 {
                        out.push('&');
                    }
                    match pair.split_once('=') {
                        Some((name, value)) if is_secret_key(name) && !value.is_empty() => {
                            out.push_str(name);
                            out.push('=');
                            out.push_str(if has_reference(value) { value } else { MASK });
                            changed |= !has_reference(value);
                        }
                        _ => out.push_str(pair),
                    }
                }
            }
            None => out.push_str(url),
        }
        rest = &rest[at + url_len..];
    }
    out.push_str(rest);
    changed.then_some(out)
}

/// `text` (a topology source) with every secret-bearing value overwritten
/// by `*` of the same byte length, so spans into it stay valid: values
/// under secret keys (see [`mask_config`]) and URL userinfo. Used to render
/// diagnostics with snippets that quote no secret. When the text does not
/// parse, lines of the form `key: value` with a secret key are masked.
pub fn mask_source(text: &str, format: crate::Format) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let source = crate::Source::with_format("masked", text, format);
    match crate::parse::parse(&source) {
        Ok(value) => mask_spans(&value, false, &mut bytes),
        Err(_) => {
            let mut offset = 0;
            for line in text.split_inclusive('\n') {
                if let Some(colon) = line.find(':') {
                    let key = line[..colon]
                        .trim()
                        .trim_matches(['"', '\'', '-', ' ', '{', ',']);
                    if is_secret_key(key) {
                        star(
                            &mut bytes,
                            offset + colon + 1,
                            offset + line.trim_end().len(),
                        );
                    }
                }
                offset += line.len();
            }
        }
    }
    mask_userinfo_in_place(text, &mut bytes);
    // Only ASCII bytes were replaced, at char boundaries: still UTF-8.
    String::from_utf8(bytes).unwrap_or_default()
}

fn mask_spans(value: &crate::Value, secret: bool, bytes: &mut [u8]) {
    use crate::value::Kind;
    match &value.kind {
        Kind::Str(s) if secret && !has_reference(s) => {
            star(bytes, value.span.start, value.span.end);
        }
        Kind::Number(_) | Kind::Bool(_) if secret => star(bytes, value.span.start, value.span.end),
        Kind::Seq(items) => items.iter().for_each(|v| mask_spans(v, secret, bytes)),
        Kind::Map(map) => {
            for (k, v) in &map.entries {
                mask_spans(v, secret || is_secret_key(&k.name), bytes);
            }
        }
        _ => {}
    }
}

/// Overwrites the non-quote, non-space bytes of `start..end` with `*`,
/// whole characters only.
fn star(bytes: &mut [u8], start: usize, end: usize) {
    let end = end.min(bytes.len());
    let mut i = start;
    while i < end {
        let b = bytes[i];
        let width = match b {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xff => 4,
            _ => 1,
        };
        if width == 1 && matches!(b, b'"' | b'\'' | b' ' | b'\n' | b'\r') {
            i += 1;
            continue;
        }
        bytes[i..(i + width).min(end)].fill(b'*');
        i += width;
    }
}

fn mask_userinfo_in_place(text: &str, bytes: &mut [u8]) {
    let mut from = 0;
    while let Some(at) = text[from..].find("://") {
        let start = from + at + 3;
        let end = text[start..]
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '`' | '"' | '\'' | '<' | '>') || c.is_whitespace()
            })
            .map_or(text.len(), |e| start + e);
        if let Some(i) = text[start..end].rfind('@') {
            star(bytes, start, start + i);
        }
        from = end.max(start);
    }
}

#[cfg(test)]
mod tests {
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
