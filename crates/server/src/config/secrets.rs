//! The `[secrets]` section of the server config: which environment
//! variables and directories a topology's secret references (and
//! `api_key_env`) may read, and the hosts a credential may be sent to
//! (docs/security.md, "Secrets a topology may read").
//!
//! ```toml
//! [secrets]                    # every field optional
//! env = ["OPENAI_API_KEY", "SEARCH_*"]   # default ["*"]: any variable...
//! dirs = ["/run/secrets"]                # default /run/secrets, /var/run/secrets
//!
//! [secrets.hosts]              # a credential goes only to these hosts
//! OPENAI_API_KEY = ["api.openai.com"]
//! "/run/secrets/search" = ["search.example.com"]
//! ```
//!
//! ...except the server's own keys (`GLASSBOX_*`, `PGPASSWORD`,
//! `DATABASE_URL`, `ETCDCTL_*`), which no list can open: a topology author
//! must never be able to print or forward the server's admin key.

use std::collections::BTreeMap;
use std::path::PathBuf;

use glassbox_topology::secret_access::SecretAccess;
use serde::{Deserialize, Serialize};

/// `[secrets]` as written in the file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsSection {
    pub env: Option<Vec<String>>,
    pub dirs: Option<Vec<String>>,
    #[serde(default)]
    pub hosts: BTreeMap<String, Vec<String>>,
}

impl SecretsSection {
    /// The access it grants, or every problem found (each under
    /// `secrets.FIELD`).
    pub fn resolve(&self) -> Result<SecretAccess, Vec<String>> {
        let mut access = SecretAccess::default();
        let mut problems = Vec::new();
        if let Some(env) = &self.env {
            for (i, name) in env.iter().enumerate() {
                let bare = name.strip_suffix('*').unwrap_or(name);
                if bare.contains('*')
                    || !bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    problems.push(format!(
                        "secrets.env[{i}]: `{name}` is not a variable name or a prefix ending in `*` (write e.g. `OPENAI_API_KEY` or `SEARCH_*`)"
                    ));
                }
            }
            access.env = env.clone();
        }
        if let Some(dirs) = &self.dirs {
            for (i, dir) in dirs.iter().enumerate() {
                if !dir.starts_with('/') {
                    problems.push(format!(
                        "secrets.dirs[{i}]: `{dir}` is not an absolute path (write e.g. `/run/secrets`)"
                    ));
                }
            }
            access.dirs = dirs.iter().map(PathBuf::from).collect();
        }
        for (credential, hosts) in &self.hosts {
            if hosts.is_empty() {
                problems.push(format!(
                    "secrets.hosts.{credential}: the list is empty (name the hosts this credential may be sent to)"
                ));
            }
        }
        access.hosts = self.hosts.clone();
        if problems.is_empty() {
            Ok(access)
        } else {
            Err(problems)
        }
    }
}
