//! Secret references (`${env:NAME}`, `${file:/abs/path}`) found in strings
//! and resolved in a copy of a node's config.

use serde_json::Value;

use super::error::SecretError;

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
