//! etcd as a trust boundary (issue 33): whoever can write to etcd must not
//! thereby receive prompts and the pool key. Three layers:
//!
//! - **the connection** ([`EtcdAuth`]): TLS to etcd (a CA to check its
//!   certificate, a client certificate and key for mutual TLS) and etcd's
//!   own user and password, so only the pool's processes reach the keys;
//! - **the record** ([`Trust::key`]): a worker signs its record with the
//!   pool key (`GLASSBOX_WORKER_KEY`, which every worker and coordinator
//!   already share): an HMAC-SHA256 over the record, stored beside it as
//!   `credential`. A coordinator with the key accepts no record without a
//!   valid credential, so a record written by anyone else never enters the
//!   pool and no call or probe (which carry the key) ever reaches it;
//! - **the address** ([`Trust::allow`]): coordinators may also refuse
//!   records whose address lies outside the operator's networks or hosts.
//!
//! The HMAC is over the record as this version serialises it (fields in
//! declaration order, labels sorted), so signer and verifier agree on the
//! bytes without a canonical-JSON scheme of their own.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use hmac::{KeyInit, Mac};
use serde_json::Value;

use crate::iprange::IpRange;
use crate::member::WorkerRecord;

/// The pool key's environment variable (shared by workers and coordinators).
pub const WORKER_KEY_ENV: &str = "GLASSBOX_WORKER_KEY";
/// Comma-separated networks (`10.0.0.0/8`) and host names worker
/// addresses must lie in, for coordinators.
pub const WORKER_ALLOW_ENV: &str = "GLASSBOX_WORKER_ALLOW";
/// The field of the stored record that holds its credential.
pub const CREDENTIAL_FIELD: &str = "credential";

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The pool key; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct PoolKey(Arc<[u8]>);

impl PoolKey {
    pub fn new(key: &[u8]) -> PoolKey {
        PoolKey(key.into())
    }
}

impl std::fmt::Debug for PoolKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PoolKey(***)")
    }
}

/// One entry of the address allow-list.
#[derive(Debug, Clone, PartialEq)]
pub enum AddressRule {
    /// An address or network: `10.0.0.0/8`, `fd00::/8`, `10.0.0.7`.
    Range(IpRange),
    /// A host name as written in the record's address.
    Host(String),
}

impl AddressRule {
    pub fn parse(s: &str) -> Option<AddressRule> {
        let s = s.trim();
        if s.is_empty() {
            return None;
        }
        if let Some(r) = IpRange::parse(s) {
            return Some(AddressRule::Range(r));
        }
        let host_like = s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
        (host_like && !s.contains('/')).then(|| AddressRule::Host(s.to_ascii_lowercase()))
    }
}

/// Which worker records a coordinator accepts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trust {
    /// With a key, a record needs a valid credential; without one, records
    /// are accepted unsigned (a pool without `GLASSBOX_WORKER_KEY`).
    pub key: Option<PoolKey>,
    /// Empty: any address.
    pub allow: Vec<AddressRule>,
}

/// How to connect to etcd beyond its endpoints.
#[derive(Clone, Default, PartialEq)]
pub struct EtcdAuth {
    /// etcd's user and password (`etcdctl user add`, `auth enable`).
    pub user: Option<(String, String)>,
    /// PEM file of the CA that signed etcd's certificate; with it,
    /// endpoints are `https://`.
    pub ca: Option<PathBuf>,
    /// PEM client certificate and key, for etcd's `--client-cert-auth`.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl std::fmt::Debug for EtcdAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdAuth")
            .field("user", &self.user.as_ref().map(|(u, _)| u))
            .field("ca", &self.ca)
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish()
    }
}

/// The credential of `record` under `key`: hex HMAC-SHA256.
pub fn credential(record: &WorkerRecord, key: &PoolKey) -> String {
    // HMAC takes keys of any length; were that to fail, the empty
    // credential matches no stored one (and is refused by `decode`).
    let Ok(mut mac) = <HmacSha256 as KeyInit>::new_from_slice(&key.0) else {
        return String::new();
    };
    mac.update(b"glassbox worker record v1\n");
    mac.update(&serde_json::to_vec(record).unwrap_or_default());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The bytes a worker stores: its record, with its credential when the
/// pool has a key.
pub fn encode(record: &WorkerRecord, key: Option<&PoolKey>) -> serde_json::Result<Vec<u8>> {
    let mut value = serde_json::to_value(record)?;
    if let (Some(key), Value::Object(map)) = (key, &mut value) {
        map.insert(CREDENTIAL_FIELD.into(), credential(record, key).into());
    }
    serde_json::to_vec(&value)
}

/// A stored record, if `trust` accepts it; otherwise why not (for the
/// coordinator's log: never the credential itself).
pub fn decode(bytes: &[u8], trust: &Trust) -> Result<WorkerRecord, String> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not a worker record: {e}"))?;
    let given = value
        .get(CREDENTIAL_FIELD)
        .and_then(Value::as_str)
        .map(str::to_owned);
    let record: WorkerRecord =
        serde_json::from_value(value).map_err(|e| format!("not a worker record: {e}"))?;
    if let Some(key) = &trust.key {
        let Some(given) = given else {
            return Err(format!(
                "worker `{}` at {} has no credential: this pool accepts only records signed with {WORKER_KEY_ENV}",
                record.id, record.address
            ));
        };
        let expected = credential(&record, key);
        // Compared in constant time: the expected value is secret-derived.
        let same = !expected.is_empty()
            && expected.len() == given.len()
            && expected
                .bytes()
                .zip(given.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        if !same {
            return Err(format!(
                "worker `{}` at {} has an invalid credential (signed with another {WORKER_KEY_ENV}, or altered)",
                record.id, record.address
            ));
        }
    }
    if !trust.allow.is_empty() && !address_allowed(&record.address, &trust.allow) {
        return Err(format!(
            "worker `{}` has address {}, outside the allowed worker addresses ({WORKER_ALLOW_ENV})",
            record.id, record.address
        ));
    }
    Ok(record)
}

/// Whether the host of `address` (`http://HOST:PORT`) matches a rule.
fn address_allowed(address: &str, allow: &[AddressRule]) -> bool {
    let rest = address.split_once("://").map_or(address, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return false;
    }
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    let ip = host.parse::<IpAddr>().ok();
    allow.iter().any(|rule| match (rule, ip) {
        (AddressRule::Range(r), Some(ip)) => r.contains(ip),
        (AddressRule::Host(h), _) => h.eq_ignore_ascii_case(host),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::Hardware;

    fn record(address: &str) -> WorkerRecord {
        WorkerRecord {
            id: "w-1".into(),
            address: address.into(),
            engine: "glassbox".into(),
            hardware: Hardware::default(),
            models: vec!["smollm2".into()],
            node_kinds: vec!["llm_inference".into()],
            labels: Default::default(),
            started_at: 7,
        }
    }

    #[test]
    fn only_records_signed_with_the_pool_key_are_accepted() {
        let key = PoolKey::new(b"pool-secret");
        let trust = Trust {
            key: Some(key.clone()),
            allow: vec![],
        };
        let signed = encode(&record("http://10.0.0.7:8090"), Some(&key)).unwrap();
        assert_eq!(
            decode(&signed, &trust).unwrap().address,
            "http://10.0.0.7:8090"
        );
        let unsigned = encode(&record("http://10.0.0.7:8090"), None).unwrap();
        assert!(
            decode(&unsigned, &trust)
                .unwrap_err()
                .contains("no credential")
        );
        let other = encode(&record("http://10.0.0.7:8090"), Some(&PoolKey::new(b"x"))).unwrap();
        assert!(
            decode(&other, &trust)
                .unwrap_err()
                .contains("invalid credential")
        );
        // A signed record with its address changed is refused.
        let text = String::from_utf8(signed)
            .unwrap()
            .replace("10.0.0.7", "6.6.6.6");
        assert!(
            decode(text.as_bytes(), &trust)
                .unwrap_err()
                .contains("invalid")
        );
        // Without a key, unsigned records are accepted.
        assert!(decode(&unsigned, &Trust::default()).is_ok());
        assert_eq!(format!("{key:?}"), "PoolKey(***)");
    }

    #[test]
    fn addresses_outside_the_allow_list_are_refused() {
        let trust = Trust {
            key: None,
            allow: ["10.0.0.0/8", "gpu-1.internal", "fd00::/8"]
                .iter()
                .filter_map(|s| AddressRule::parse(s))
                .collect(),
        };
        for ok in [
            "http://10.1.2.3:8090",
            "http://GPU-1.internal:80/",
            "http://[fd00::7]:1",
        ] {
            assert!(
                decode(&encode(&record(ok), None).unwrap(), &trust).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "http://11.0.0.1:8090",
            "http://gpu-2.internal:80",
            "http://x@10.0.0.1:1",
        ] {
            let e = decode(&encode(&record(bad), None).unwrap(), &trust).unwrap_err();
            assert!(e.contains(WORKER_ALLOW_ENV), "{bad}: {e}");
        }
        assert_eq!(AddressRule::parse("a/b"), None);
    }
}
