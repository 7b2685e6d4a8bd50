//! Who this worker is and its membership of the pool: its id, labels and
//! etcd options (from the flags), its registration under a lease, and the
//! exit codes of what can go wrong there. Shared by both kinds of worker.

use std::collections::BTreeMap;
use std::time::Duration;

use glassbox_cluster::{EtcdError, EtcdOptions, RegistrationEvent, RegistrationOptions};

use super::args::Args;
use crate::exit::{self, Coded};

/// What both kinds of worker share: where etcd is, who this worker is.
#[derive(Debug)]
pub(super) struct Common {
    pub(super) registration: RegistrationOptions,
    pub(super) id: String,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) started_at: u64,
}

impl Common {
    pub(super) fn from_args(args: &Args) -> anyhow::Result<Common> {
        let endpoints = EtcdOptions::parse_endpoints(&args.etcd).map_err(etcd_error)?;
        // The pool key signs this worker's record; TLS and user from the
        // environment too (docs/cluster.md, "Securing the cluster").
        let mut etcd = EtcdOptions::new(endpoints).with_env().map_err(etcd_error)?;
        etcd.prefix = args.etcd_prefix.clone();
        let mut registration = RegistrationOptions::new(etcd);
        if args.lease_ttl == 0 {
            return Err(usage("`--lease-ttl` must be at least 1 second"));
        }
        registration.ttl = Duration::from_secs(args.lease_ttl);
        let started_at = glassbox_cluster::member::now_secs();
        let id = match &args.id {
            Some(id) => check_id(id)?,
            None => format!(
                "{}-{}-{started_at}",
                glassbox_cluster::host::hostname(),
                std::process::id()
            ),
        };
        let labels = parse_labels(&args.labels)?;
        Ok(Common {
            registration,
            id,
            labels,
            started_at,
        })
    }

    /// Registers `record` in etcd; its load from `load`.
    pub(super) fn register(
        &self,
        record: glassbox_cluster::WorkerRecord,
        load: impl FnMut() -> glassbox_cluster::Load + Send + 'static,
    ) -> anyhow::Result<glassbox_cluster::Registration> {
        let id = record.id.clone();
        glassbox_cluster::Registration::start(
            self.registration.clone(),
            record,
            load,
            move |event| crate::out::status(&format!("glassbox worker: {}", describe(&id, &event))),
        )
        .map_err(etcd_error)
    }
}

fn describe(id: &str, event: &RegistrationEvent) -> String {
    match event {
        RegistrationEvent::Registered {
            lease,
            again: false,
        } => {
            format!("registered `{id}` in etcd (lease {lease:x})")
        }
        RegistrationEvent::Registered { lease, again: true } => {
            format!("registered `{id}` again (new lease {lease:x})")
        }
        RegistrationEvent::Interrupted { error } => {
            format!("{error}; retrying")
        }
        RegistrationEvent::LeaseLost { lease } => format!(
            "lease {lease:x} expired while etcd was out of reach: out of the pool until etcd answers"
        ),
        RegistrationEvent::Revoked { lease } => {
            format!("left the pool (lease {lease:x} revoked)")
        }
    }
}

/// Ids become etcd keys and URL path segments: keep them plain.
fn check_id(id: &str) -> anyhow::Result<String> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(id.to_owned())
    } else {
        Err(usage(format!(
            "`--id {id}` is not a usable worker id (use 1-128 letters, digits, `-`, `_`, `.`)"
        )))
    }
}

fn parse_labels(labels: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for l in labels {
        match l.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                out.insert(k.trim().to_owned(), v.trim().to_owned());
            }
            _ => {
                return Err(usage(format!(
                    "`--label {l}` is not KEY=VALUE (for example `--label zone=a`)"
                )));
            }
        }
    }
    Ok(out)
}

pub(super) fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Coded {
        code: exit::USAGE,
        message: message.into(),
    })
}

fn etcd_error(err: EtcdError) -> anyhow::Error {
    let code = if err.is_usage() {
        exit::USAGE
    } else {
        exit::UNAVAILABLE
    };
    anyhow::Error::new(Coded {
        code,
        message: format!("{err} [{}]", err.code()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_ids_are_checked() {
        let labels = parse_labels(&["zone=a".into(), "tier = spot".into()]).unwrap();
        assert_eq!(labels["zone"], "a");
        assert_eq!(labels["tier"], "spot");
        let err = parse_labels(&["zone".into()]).unwrap_err();
        assert_eq!(exit::code_for(&err), exit::USAGE);
        assert!(err.to_string().contains("KEY=VALUE"));
        assert_eq!(check_id("gpu-7.a_1").unwrap(), "gpu-7.a_1");
        for bad in ["", "a/b", "a b"] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
    }
}
