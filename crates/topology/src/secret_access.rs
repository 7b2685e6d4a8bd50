//! Where secret references may stand, what they may read, and where the
//! secrets they name may be sent (issue 33).
//!
//! A topology author is not trusted with the server's own secrets. So:
//!
//! - **placement**: a reference (`${env:NAME}`, `${file:/path}`) is resolved
//!   only in a field meant for a secret: a value under `headers`, a field
//!   whose name says it holds one (`api_key`, `token`, `password`, ...,
//!   see [`is_secret_key`]), a field its kind declares secret, or the
//!   userinfo of a URL (`https://user:${env:PW}@host`). Anywhere else (a
//!   template, a prompt, a body, a description) it would print the secret
//!   into text a caller gets back, so validation rejects it
//!   ([`secret_field`], [`in_userinfo_only`]) and the resolver refuses it too;
//! - **reading**: the server operator's [`SecretAccess`] lists the
//!   environment variables and directories references (and `api_key_env`)
//!   may read. The server's own keys ([`SERVER_OWN_ENV`]: `GLASSBOX_*`,
//!   the store's and etcd's passwords) are never readable, whatever the list says;
//! - **sending**: a credential may be bound to the hosts it belongs to
//!   (`[secrets.hosts]`); a node whose target host is not among them
//!   fails to build, so the credential never leaves for another host.
//!
//! Everything here is pure except [`SecretAccess::resolve`], which reads
//! the environment and files it allows.
//!
//! [`is_secret_key`]: crate::secret::is_secret_key

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

pub use crate::secret::AccessError;
use crate::secret::{LookupError, Reference, SecretError, is_secret_key, references, resolve_with};

/// Environment variables that hold the server's own credentials: never
/// readable by a topology. `*` at the end matches any suffix.
pub const SERVER_OWN_ENV: &[&str] = &[
    "GLASSBOX_*",
    "PGPASSWORD",
    "PGPASSFILE",
    "DATABASE_URL",
    "ETCDCTL_*",
];

/// Directories `${file:…}` may read by default: where Docker and
/// Kubernetes mount secrets.
pub const DEFAULT_DIRS: &[&str] = &["/run/secrets", "/var/run/secrets"];

/// What references may read and where credentials may go: the server
/// operator's `[secrets]` section. The default reads any variable except
/// the server's own and files under [`DEFAULT_DIRS`], and binds no
/// credential to hosts (each still goes only to its node's allowed hosts).
#[derive(Debug, Clone, PartialEq)]
pub struct SecretAccess {
    /// Variable names (`OPENAI_API_KEY`) or prefixes (`SEARCH_*`; `*`: any).
    pub env: Vec<String>,
    /// Directories (and their subdirectories) `${file:…}` may read.
    pub dirs: Vec<PathBuf>,
    /// Per credential (a variable name or a file path), the only hosts it
    /// may be sent to.
    pub hosts: BTreeMap<String, Vec<String>>,
}

impl Default for SecretAccess {
    fn default() -> Self {
        SecretAccess {
            env: vec!["*".into()],
            dirs: DEFAULT_DIRS.iter().map(PathBuf::from).collect(),
            hosts: BTreeMap::new(),
        }
    }
}

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

impl SecretAccess {
    /// Whether `field` may read environment variable `name`.
    pub fn check_env(&self, field: &str, name: &str) -> Result<(), AccessError> {
        if SERVER_OWN_ENV.iter().any(|p| matches(p, name)) {
            return Err(AccessError::ServerOwn {
                field: field.into(),
                name: name.into(),
            });
        }
        if !self.env.iter().any(|p| matches(p, name)) {
            return Err(AccessError::EnvNotAllowed {
                field: field.into(),
                name: name.into(),
            });
        }
        Ok(())
    }

    /// Whether `field` may read `path`: its real location (links followed,
    /// `..` resolved) must lie under an allowed directory. A file that does
    /// not exist is judged by its path as written.
    pub fn check_file(&self, field: &str, path: &str) -> Result<(), AccessError> {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path));
        let lexical_escape = Path::new(path)
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir));
        let inside = !lexical_escape
            && self.dirs.iter().any(|d| {
                let d = std::fs::canonicalize(d).unwrap_or_else(|_| d.clone());
                real.starts_with(&d)
            });
        if inside {
            Ok(())
        } else {
            Err(AccessError::FileNotAllowed {
                field: field.into(),
                path: path.into(),
                dirs: self
                    .dirs
                    .iter()
                    .map(|d| format!("`{}`", d.display()))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
    }

    /// Whether `credential` (a variable name or file path) may be sent to
    /// `host`. Unbound credentials may go to any host the node may reach.
    pub fn check_host(&self, field: &str, credential: &str, host: &str) -> Result<(), AccessError> {
        let Some(allowed) = self.hosts.get(credential) else {
            return Ok(());
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if allowed.iter().any(|a| {
            a.trim_start_matches('[')
                .trim_end_matches(']')
                .eq_ignore_ascii_case(host)
        }) {
            return Ok(());
        }
        Err(AccessError::HostNotAllowed {
            field: field.into(),
            credential: credential.into(),
            host: host.into(),
            allowed: allowed
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// Resolves the references of a node's `config`, each only where it
    /// may stand (`declared`: the fields the node's kind declares secret)
    /// and only from what this access allows; every credential bound to
    /// hosts must be bound to the node's target (`url` or `base_url`).
    pub fn resolve(&self, config: &Value, declared: &[&str]) -> Result<Value, SecretError> {
        let targets = target_hosts(config);
        self.check_value(config, "config", &[], declared, &targets)?;
        resolve_with(config, "config", &|r: &Reference<'_>| match r {
            Reference::Env(name) => std::env::var(name).map_err(|_| LookupError::Missing),
            Reference::File(path) => std::fs::read_to_string(path)
                .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
                .map_err(LookupError::Io),
        })
    }

    fn check_value(
        &self,
        value: &Value,
        field: &str,
        keys: &[&str],
        declared: &[&str],
        targets: &[String],
    ) -> Result<(), AccessError> {
        match value {
            Value::String(s) if crate::secret::has_reference(s) => {
                if !secret_field(keys, declared) && !in_userinfo_only(s) {
                    return Err(AccessError::Misplaced {
                        field: field.into(),
                    });
                }
                // Malformed references are reported by the resolver.
                for r in references(s).unwrap_or_default() {
                    let credential = match r {
                        Reference::Env(name) => {
                            self.check_env(field, name)?;
                            name
                        }
                        Reference::File(path) => {
                            self.check_file(field, path)?;
                            path
                        }
                    };
                    if self.hosts.contains_key(credential) && targets.is_empty() {
                        return Err(AccessError::HostNotAllowed {
                            field: field.into(),
                            credential: credential.into(),
                            host: "(no `url` or `base_url`)".into(),
                            allowed: self.hosts[credential].join(", "),
                        });
                    }
                    for host in targets {
                        self.check_host(field, credential, host)?;
                    }
                }
                Ok(())
            }
            Value::Array(items) => items.iter().enumerate().try_for_each(|(i, v)| {
                self.check_value(v, &format!("{field}[{i}]"), keys, declared, targets)
            }),
            Value::Object(map) => map.iter().try_for_each(|(k, v)| {
                let inner: Vec<&str> = keys
                    .iter()
                    .copied()
                    .chain(std::iter::once(k.as_str()))
                    .collect();
                self.check_value(v, &format!("{field}.{k}"), &inner, declared, targets)
            }),
            _ => Ok(()),
        }
    }
}

/// The hosts a node's config sends requests to: those of its `url` and
/// `base_url`.
pub fn target_hosts(config: &Value) -> Vec<String> {
    ["url", "base_url"]
        .iter()
        .filter_map(|k| config.get(*k)?.as_str())
        .filter_map(|u| url_host(u).map(str::to_ascii_lowercase))
        .collect()
}

/// The host of an `http(s)://` URL (userinfo, port and brackets removed).
pub fn url_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let end = authority_end(rest);
    let authority = &rest[..end];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split_once(']').map(|(h, _)| h)?
    } else {
        host_port.rsplit_once(':').map_or(host_port, |(h, _)| h)
    };
    (!host.is_empty()).then_some(host)
}

/// Where a URL's authority ends, skipping over `${…}` references (a file
/// reference holds `/`).
fn authority_end(rest: &str) -> usize {
    let bytes = rest.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' && bytes.get(i + 1) == Some(&b'{') {
            match rest[i..].find('}') {
                Some(close) => {
                    i += close + 1;
                    continue;
                }
                None => return rest.len(),
            }
        }
        if matches!(bytes[i], b'/' | b'?' | b'#') {
            return i;
        }
        i += 1;
    }
    rest.len()
}

/// Whether a field, given by its keys from the config's root (list
/// indices left out), is meant for a secret: under `headers`, named for a
/// secret, or declared secret by its kind (`declared`: top-level keys).
pub fn secret_field(keys: &[&str], declared: &[&str]) -> bool {
    keys.first().is_some_and(|k| declared.contains(k))
        || keys.iter().any(|k| k.eq_ignore_ascii_case("headers"))
        || keys.last().is_some_and(|k| is_secret_key(k))
}

/// Whether every reference in `s` sits in the userinfo of a URL
/// (`https://user:${env:PW}@host/…`), where it is a credential for that
/// URL's host and nothing else.
pub fn in_userinfo_only(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once("://") else {
        return false;
    };
    if scheme.contains("${") {
        return false;
    }
    let authority = &rest[..authority_end(rest)];
    let Some((userinfo, _)) = authority.rsplit_once('@') else {
        return false;
    };
    // Every reference must start and end inside the userinfo.
    let userinfo_end = scheme.len() + 3 + userinfo.len();
    let mut at = 0;
    while let Some(found) = s[at..].find("${") {
        let start = at + found;
        let Some(close) = s[start..].find('}') else {
            return false;
        };
        let end = start + close + 1;
        if start < scheme.len() + 3 || end > userinfo_end {
            return false;
        }
        at = end;
    }
    true
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn references_stand_only_in_secret_fields() {
        assert!(secret_field(&["headers", "Authorization"], &[]));
        assert!(secret_field(&["api_key"], &[]));
        assert!(secret_field(&["auth", "password"], &[]));
        assert!(secret_field(&["dsn"], &["dsn"]));
        assert!(!secret_field(&["template"], &[]));
        assert!(!secret_field(&["body", "text"], &[]));
        assert!(!secret_field(&["system_prompt"], &[]));
        assert!(in_userinfo_only("https://bob:${env:PW}@h.example/x"));
        assert!(in_userinfo_only(
            "https://${file:/run/secrets/u}@h.example/x"
        ));
        assert!(!in_userinfo_only("https://h.example/x?key=${env:PW}"));
        assert!(!in_userinfo_only("https://${env:HOST}/x"));
        assert!(!in_userinfo_only("key=${env:PW} https://a@b"));
    }

    #[test]
    fn the_servers_own_keys_are_never_readable() {
        let all = SecretAccess::default();
        for name in ["GLASSBOX_API_KEY", "GLASSBOX_WORKER_KEY", "PGPASSWORD"] {
            let e = all.check_env("config.headers.A", name).unwrap_err();
            assert_eq!(e.code(), "secret_server_own", "{name}");
        }
        assert!(all.check_env("f", "OPENAI_API_KEY").is_ok());
        let listed = SecretAccess {
            env: vec!["SEARCH_*".into(), "GLASSBOX_API_KEY".into()],
            ..SecretAccess::default()
        };
        assert!(listed.check_env("f", "SEARCH_TOKEN").is_ok());
        assert_eq!(
            listed.check_env("f", "OPENAI_API_KEY").unwrap_err().code(),
            "secret_env_not_allowed"
        );
        assert_eq!(
            listed
                .check_env("f", "GLASSBOX_API_KEY")
                .unwrap_err()
                .code(),
            "secret_server_own"
        );
    }

    #[test]
    fn files_are_read_only_under_allowed_directories() {
        let all = SecretAccess::default();
        for path in [
            "/etc/hostname",
            "/run/secrets/../../etc/passwd",
            "/proc/self/environ",
        ] {
            let e = all.check_file("f", path).unwrap_err();
            assert_eq!(e.code(), "secret_file_not_allowed", "{path}");
            assert!(e.to_string().contains("/run/secrets"), "{e}");
        }
        assert!(all.check_file("f", "/run/secrets/token").is_ok());
    }

    #[test]
    fn bound_credentials_go_only_to_their_hosts() {
        let access = SecretAccess {
            hosts: BTreeMap::from([("OPENAI_API_KEY".into(), vec!["api.openai.com".into()])]),
            ..SecretAccess::default()
        };
        let config =
            json!({"url": "https://evil.example/x", "headers": {"A": "${env:OPENAI_API_KEY}"}});
        let e = access.resolve(&config, &[]).unwrap_err();
        assert_eq!(e.code(), "secret_host_not_allowed", "{e}");
        assert!(e.to_string().contains("`evil.example`"), "{e}");
        assert!(
            access
                .check_host("f", "OPENAI_API_KEY", "API.openai.com")
                .is_ok()
        );
        assert!(access.check_host("f", "OTHER", "evil.example").is_ok());
        assert_eq!(url_host("http://u:${file:/run/x}@[::1]:80/p"), Some("::1"));
        assert_eq!(url_host("https://h.example:8443"), Some("h.example"));
    }

    #[test]
    fn misplaced_references_are_refused_before_anything_is_read() {
        let e = SecretAccess::default()
            .resolve(&json!({"template": "k=${env:HOME}"}), &[])
            .unwrap_err();
        assert_eq!(e.code(), "secret_misplaced", "{e}");
        assert!(e.to_string().contains("`config.template`"), "{e}");
    }
}
