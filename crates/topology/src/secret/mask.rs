//! Masking: which keys carry secrets, and values and free text shown with
//! their secrets replaced. Pure and total: never fails on odd input.

use std::borrow::Cow;

use serde_json::Value;

use super::reference::has_reference;

/// What a masked value is shown as.
pub const MASK: &str = "***";

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
