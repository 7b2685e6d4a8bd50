//! Versions of one topology served side by side, and which one a request
//! gets: the promoted version, a traffic split for canaries, promotion and
//! rollback.
//!
//! A [`Lineup`] holds every loaded version of one topology id (one per
//! file; the file's `version` field names it). One of them is *promoted*:
//! with no split it takes every request. A split gives each version a whole
//! percentage of traffic; a request's *key* (the `X-Glassbox-Key` header,
//! the OpenAI `user` field, or `?key=` on a run) is hashed into one of 100
//! buckets, so one key always lands on the same version while the split
//! stands. Buckets are handed out canaries first (in version order) and the
//! promoted version last, so raising one canary's share only moves keys
//! onto it, never off it.
//!
//! Why a stable hash (SHA-256 of the topology id and the key) rather than
//! the standard library's hasher: bucket numbers are written into traces and
//! must mean the same after a restart or an upgrade of the toolchain.
//!
//! The state is the server's memory: after a restart the promoted version is
//! the one the config names (`[topologies.<id>] promoted = "…"`) or else the
//! first one loaded, and no split is set.

use std::collections::BTreeMap;
use std::sync::Arc;

use glassbox_trace::{VersionChoice, VersionShare};
use sha2::{Digest, Sha256};

use crate::served::Served;

/// Buckets a key is hashed into: split shares are whole percentages.
pub const BUCKETS: u32 = 100;

/// What went wrong changing a lineup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("no topology `{id}` is served")]
    UnknownTopology { id: String },
    #[error("topology `{id}` has no loaded version `{version}` (loaded: {loaded})")]
    UnknownVersion {
        id: String,
        version: String,
        loaded: String,
    },
    #[error("the split of `{id}` adds up to {total}%, not 100%")]
    SplitTotal { id: String, total: u32 },
    #[error("the split of `{id}` gives `{version}` {percent}%, more than 100%")]
    SplitShare {
        id: String,
        version: String,
        percent: u32,
    },
    #[error("topology `{id}` has no earlier promoted version to roll back to")]
    NothingToRollBack { id: String },
}

impl VersionError {
    /// The stable machine code (API `error.code`).
    pub fn code(&self) -> &'static str {
        match self {
            VersionError::UnknownTopology { .. } => "topology_not_found",
            VersionError::UnknownVersion { .. } => "version_not_found",
            VersionError::SplitTotal { .. } | VersionError::SplitShare { .. } => "bad_split",
            VersionError::NothingToRollBack { .. } => "nothing_to_roll_back",
        }
    }

    /// How to fix it.
    pub fn hint(&self) -> &'static str {
        match self {
            VersionError::UnknownTopology { .. } => "GET /v1/topologies lists the served ids",
            VersionError::UnknownVersion { .. } => {
                "add a file with that `version` to the topologies directory, or pick a loaded one (GET /v1/topologies/{id}/versions)"
            }
            VersionError::SplitTotal { .. } | VersionError::SplitShare { .. } => {
                "give whole percentages that add up to 100, e.g. {\"weights\": {\"1.0.0\": 90, \"1.1.0\": 10}}"
            }
            VersionError::NothingToRollBack { .. } => {
                "rollback returns to the version promoted before the current one; to stop a canary, set the split to the promoted version at 100"
            }
        }
    }
}

/// Where a request key came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// The `X-Glassbox-Key` header.
    Header,
    /// The OpenAI `user` field.
    User,
    /// `?key=` on a run.
    Query,
}

impl KeySource {
    pub fn as_str(self) -> &'static str {
        match self {
            KeySource::Header => "header",
            KeySource::User => "user",
            KeySource::Query => "query",
        }
    }
}

/// The key a request is routed by (same key, same version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestKey {
    pub value: String,
    pub from: KeySource,
}

/// The header a request key may come in (any API).
pub const KEY_HEADER: &str = "x-glassbox-key";

impl RequestKey {
    /// The request's key: the `X-Glassbox-Key` header's text, else the
    /// OpenAI `user` field, else `?key=`; empty values count as none.
    pub fn find(
        header: Option<&str>,
        user: Option<&str>,
        query: Option<&str>,
    ) -> Option<RequestKey> {
        let header = header.map(str::trim);
        [
            (header, KeySource::Header),
            (user, KeySource::User),
            (query, KeySource::Query),
        ]
        .into_iter()
        .find_map(|(v, from)| {
            let v = v.filter(|v| !v.is_empty())?;
            Some(RequestKey {
                value: v.to_string(),
                from,
            })
        })
    }
}

/// The bucket (0 to 99) of `key` for topology `id`: stable across
/// processes, restarts and toolchains.
pub fn bucket(id: &str, key: &str) -> u32 {
    let mut h = Sha256::new();
    h.update(id.as_bytes());
    h.update([0u8]);
    h.update(key.as_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    // 2^64 is not a multiple of 100, but only 16 of its values fall in the
    // uneven remainder: no skew worth a rejection loop.
    (u64::from_be_bytes(first) % u64::from(BUCKETS)) as u32
}

/// The version a request gets.
#[derive(Debug, Clone)]
pub struct Chosen {
    pub served: Arc<Served>,
    /// Why, for the trace; `None` when only one version is loaded (the
    /// trace's version says it all).
    pub why: Option<VersionChoice>,
}

/// Every loaded version of one topology id and how traffic is shared.
#[derive(Debug, Clone)]
pub struct Lineup {
    versions: BTreeMap<String, Arc<Served>>,
    promoted: String,
    /// Percent per version (adds up to 100), in bucket order; empty: no split.
    split: Vec<(String, u32)>,
    /// Versions promoted before the current one, the latest last.
    previous: Vec<String>,
    /// Promoted, rolled back or split through the API since loading.
    changed: bool,
}

impl Lineup {
    /// A lineup of one version, promoted.
    pub fn new(served: Arc<Served>) -> Lineup {
        let version = served.topology.version.clone();
        Lineup {
            versions: BTreeMap::from([(version.clone(), served)]),
            promoted: version,
            split: Vec::new(),
            previous: Vec::new(),
            changed: false,
        }
    }

    /// Whether an operator has promoted, rolled back or split this lineup.
    pub fn ever_changed(&self) -> bool {
        self.changed
    }

    /// Promotes `version` as the config asks at start: no history, no split.
    pub fn promote_at_start(&mut self, version: &str) {
        if self.versions.contains_key(version) {
            self.promoted = version.to_string();
            self.split.clear();
        }
    }

    /// The promoted version (always loaded: every removal re-promotes, so
    /// `None` only for an emptied lineup, which the catalog drops).
    pub fn promoted(&self) -> Option<&Arc<Served>> {
        self.versions.get(&self.promoted)
    }

    pub fn promoted_version(&self) -> &str {
        &self.promoted
    }

    pub fn get(&self, version: &str) -> Option<&Arc<Served>> {
        self.versions.get(version)
    }

    /// Loaded versions, in version order.
    pub fn versions(&self) -> impl Iterator<Item = (&str, &Arc<Served>)> {
        self.versions.iter().map(|(v, s)| (v.as_str(), s))
    }

    /// The split in force (bucket order); empty: all on the promoted one.
    pub fn split(&self) -> &[(String, u32)] {
        &self.split
    }

    /// The version rollback would return to.
    pub fn rollback_target(&self) -> Option<&str> {
        self.previous.last().map(String::as_str)
    }

    /// The share of traffic `version` gets now, in percent.
    pub fn percent(&self, version: &str) -> u32 {
        if self.split.is_empty() {
            return if version == self.promoted { 100 } else { 0 };
        }
        self.split
            .iter()
            .find(|(v, _)| v == version)
            .map_or(0, |(_, p)| *p)
    }

    /// Adds (or replaces) the version `served` carries. A new version takes
    /// no traffic until a split or a promotion gives it some.
    pub fn insert(&mut self, served: Arc<Served>) {
        self.versions
            .insert(served.topology.version.clone(), served);
    }

    /// The file that serves `version` now changes to `served` (another
    /// version number): it keeps its place (promoted, share, history).
    pub fn rename(&mut self, old: &str, served: Arc<Served>) {
        let new = served.topology.version.clone();
        self.versions.remove(old);
        self.versions.insert(new.clone(), served);
        if self.promoted == old {
            self.promoted = new.clone();
        }
        for (v, _) in &mut self.split {
            if v == old {
                *v = new.clone();
            }
        }
        for v in &mut self.previous {
            if v == old {
                *v = new.clone();
            }
        }
    }

    /// Drops `version`; false when none is left (the id is unloaded). Its
    /// share goes to the promoted version; if it was the promoted one, the
    /// latest earlier promoted version still loaded takes its place, else
    /// the lowest version left, and the split is cleared.
    pub fn remove(&mut self, version: &str) -> bool {
        self.versions.remove(version);
        if self.versions.is_empty() {
            return false;
        }
        self.previous.retain(|v| v != version);
        if self.promoted == version {
            self.promoted = match self.previous.pop() {
                Some(v) => v,
                None => self.versions.keys().next().cloned().unwrap_or_default(),
            };
            self.split.clear();
            return true;
        }
        if let Some(i) = self.split.iter().position(|(v, _)| v == version) {
            let (_, share) = self.split.remove(i);
            match self.split.iter_mut().find(|(v, _)| *v == self.promoted) {
                Some((_, p)) => *p += share,
                None => self.split.push((self.promoted.clone(), share)),
            }
        }
        self.tidy();
        true
    }

    /// Makes `version` the promoted one and sends it all traffic.
    pub fn promote(&mut self, id: &str, version: &str) -> Result<(), VersionError> {
        self.check(id, version)?;
        self.changed = true;
        if self.promoted != version {
            let old = std::mem::replace(&mut self.promoted, version.to_string());
            self.previous.retain(|v| v != version && *v != old);
            self.previous.push(old);
        }
        self.split.clear();
        Ok(())
    }

    /// Returns all traffic to the version promoted before the current one.
    pub fn rollback(&mut self, id: &str) -> Result<String, VersionError> {
        let back = self
            .previous
            .pop()
            .ok_or_else(|| VersionError::NothingToRollBack { id: id.into() })?;
        self.changed = true;
        self.promoted = back.clone();
        self.split.clear();
        Ok(back)
    }

    /// Sets the split: whole percentages per loaded version, adding up to
    /// 100 (versions left out get none).
    pub fn set_split(
        &mut self,
        id: &str,
        weights: &BTreeMap<String, u32>,
    ) -> Result<(), VersionError> {
        for (version, &percent) in weights {
            self.check(id, version)?;
            if percent > 100 {
                return Err(VersionError::SplitShare {
                    id: id.into(),
                    version: version.clone(),
                    percent,
                });
            }
        }
        let total: u32 = weights.values().sum();
        if total != 100 {
            return Err(VersionError::SplitTotal {
                id: id.into(),
                total,
            });
        }
        // Canaries first (in version order), the promoted version last.
        let mut split: Vec<(String, u32)> = weights
            .iter()
            .filter(|(v, p)| **p > 0 && **v != self.promoted)
            .map(|(v, p)| (v.clone(), *p))
            .collect();
        if let Some(&p) = weights.get(&self.promoted).filter(|p| **p > 0) {
            split.push((self.promoted.clone(), p));
        }
        self.split = split;
        self.changed = true;
        self.tidy();
        Ok(())
    }

    /// A split that sends everything to the promoted version is no split.
    fn tidy(&mut self) {
        if self.split.iter().all(|(v, _)| *v == self.promoted) {
            self.split.clear();
        }
    }

    fn check(&self, id: &str, version: &str) -> Result<(), VersionError> {
        if self.versions.contains_key(version) {
            return Ok(());
        }
        Err(VersionError::UnknownVersion {
            id: id.into(),
            version: version.into(),
            loaded: self
                .versions
                .keys()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// The version a request gets, and why. Without a key the bucket is
    /// drawn from `fallback` (e.g. the request id), so it is not sticky.
    pub fn choose(&self, id: &str, key: Option<&RequestKey>, fallback: &str) -> Option<Chosen> {
        let (served, why) = self.pick(id, key, fallback)?;
        let why = (self.versions.len() > 1).then_some(why);
        Some(Chosen { served, why })
    }

    fn pick(
        &self,
        id: &str,
        key: Option<&RequestKey>,
        fallback: &str,
    ) -> Option<(Arc<Served>, VersionChoice)> {
        if self.split.is_empty() {
            return Some((
                self.promoted()?.clone(),
                VersionChoice {
                    version: self.promoted.clone(),
                    role: "promoted".into(),
                    split: Vec::new(),
                    bucket: None,
                    key_from: None,
                },
            ));
        }
        let b = bucket(id, key.map_or(fallback, |k| k.value.as_str()));
        let mut upto = 0;
        let mut chosen = self.promoted.as_str();
        for (v, p) in &self.split {
            upto += p;
            if b < upto {
                chosen = v;
                break;
            }
        }
        let served = self.versions.get(chosen).or(self.promoted())?.clone();
        let choice = VersionChoice {
            version: served.topology.version.clone(),
            role: if served.topology.version == self.promoted {
                "promoted".into()
            } else {
                "canary".into()
            },
            split: self
                .split
                .iter()
                .map(|(v, p)| VersionShare {
                    version: v.clone(),
                    percent: *p,
                })
                .collect(),
            bucket: Some(b),
            key_from: key.map(|k| k.from.as_str().to_string()),
        };
        Some((served, choice))
    }
}

#[cfg(test)]
mod tests;
