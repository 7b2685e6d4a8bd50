//! The response cache: a node with `cache:` serves a repeated request from
//! the output it gave earlier, instead of being called again.
//!
//! One [`NodeCache`] per cached node, shared by every request of the
//! pipeline (so a reload starts empty). A request's *key* is a SHA-256 of
//! the node's identity (kind, model, config) and its *resolved input*: what
//! the node says its answer depends on ([`Node::cache_input`], e.g. the
//! rendered prompt of an LLM), or else the request input and the outputs and
//! labels of every node upstream of it. Objects are hashed with their keys
//! sorted, so the order a client wrote its JSON in does not matter.
//!
//! Entries live for the policy's TTL and at most `max_entries` are kept,
//! least recently used first out (`hashlink`'s LRU). With `similarity`, a
//! request that misses exactly has its text embedded by the topology's
//! embedding node and compared (cosine, brute force over the bounded set)
//! with the cached ones; the most similar one at or above the threshold is
//! a hit.
//!
//! A hit is an attempt like any other (it has a span) that never calls the
//! node: its span is tagged `cache=hit`, costs nothing, and bills as a
//! zero-priced `cache_hit` line on the receipt; a [`Fact::Cached`] lets the
//! explanation say so in plain words. Times use tokio's clock, so tests with
//! a paused clock see TTLs expire.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use glassbox_topology::{CachePolicy, NodeId, Topology};
use glassbox_trace::Fact;
use hashlink::LruCache;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use crate::node::{Node, NodeCx};
use crate::output::NodeOutput;

/// The span tag that says what the cache did: [`HIT`], [`MISS`] or [`REFRESH`].
pub const TAG: &str = "cache";
/// Served from the cache: the node was not called.
pub const HIT: &str = "hit";
/// Not in the cache: the node was called and its output stored.
pub const MISS: &str = "miss";
/// A re-run asked for by a downstream node (an output guard): the cache is
/// not read, and the new output replaces the stored one.
pub const REFRESH: &str = "refresh";

/// A request's cache key.
pub(crate) type Key = [u8; 32];

/// How a hit matched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Match {
    Exact,
    Similar(f64),
}

/// A cached output found for a request.
#[derive(Clone)]
pub(crate) struct Hit {
    pub output: Arc<NodeOutput>,
    pub matched: Match,
    pub age: Duration,
    pub key: Key,
}

/// A request not in the cache: where its output will be stored.
#[derive(Clone)]
pub(crate) struct Miss {
    pub key: Key,
    /// The text's embedding, when the cache matches by similarity.
    pub vector: Option<Arc<[f32]>>,
}

/// What a lookup found.
#[derive(Clone)]
pub(crate) enum Probe {
    Hit(Hit),
    Miss(Miss),
}

struct Entry {
    output: Arc<NodeOutput>,
    stored: Instant,
    vector: Option<Arc<[f32]>>,
}

/// One node's cache.
pub(crate) struct NodeCache {
    policy: CachePolicy,
    /// Digest of the node's id, kind, model and config: a config change
    /// (and a reload) never serves an answer made under another config.
    identity: Key,
    /// Nodes whose outputs and labels feed the key when the node does not
    /// name its own input (topological order).
    ancestors: Vec<NodeId>,
    entries: Mutex<LruCache<Key, Entry>>,
}

impl NodeCache {
    /// The cache of node `n`, or `None` when it has no `cache:`.
    pub fn for_node(topology: &Topology, n: NodeId) -> Option<NodeCache> {
        let node = topology.node(n);
        let policy = node.cache.clone()?;
        let mut h = Sha256::new();
        write_str(&mut h, &node.id);
        write_str(&mut h, &node.kind);
        write_str(&mut h, node.resource.model.as_deref().unwrap_or(""));
        write_value(&mut h, &node.config);
        let capacity = policy.max_entries.max(1);
        Some(NodeCache {
            identity: digest(h),
            ancestors: ancestors(topology, n),
            entries: Mutex::new(LruCache::new(capacity)),
            policy,
        })
    }

    pub fn policy(&self) -> &CachePolicy {
        &self.policy
    }

    /// The request's key for this node.
    pub fn key(&self, node: &dyn Node, cx: &NodeCx) -> Key {
        let mut h = Sha256::new();
        h.update(self.identity);
        match node.cache_input(cx) {
            Some(own) => {
                h.update([0u8]);
                write_value(&mut h, &own);
            }
            None => {
                h.update([1u8]);
                write_value(&mut h, cx.input());
                for &a in &self.ancestors {
                    if let Some(out) = cx.req.output(a) {
                        write_str(&mut h, &cx.req.ids[a.0]);
                        write_value(&mut h, &out.value);
                        write_str(&mut h, out.label.as_deref().unwrap_or(""));
                    }
                }
            }
        }
        digest(h)
    }

    /// The entry stored under `key`, if it is still fresh.
    pub fn exact(&self, key: Key) -> Probe {
        let now = Instant::now();
        let mut entries = self.lock();
        let fresh = entries
            .peek(&key)
            .map(|e| now.saturating_duration_since(e.stored) < self.policy.ttl);
        match fresh {
            Some(true) => {
                let e = entries.get(&key).map(|e| (e.output.clone(), e.stored));
                if let Some((output, stored)) = e {
                    return Probe::Hit(Hit {
                        output,
                        matched: Match::Exact,
                        age: now.saturating_duration_since(stored),
                        key,
                    });
                }
            }
            Some(false) => {
                entries.remove(&key);
            }
            None => {}
        }
        Probe::Miss(Miss { key, vector: None })
    }

    /// The fresh entry most similar to `vector` at or above the threshold
    /// (expired entries met on the way are dropped).
    pub fn similar(&self, key: Key, vector: Arc<[f32]>) -> Probe {
        let Some(threshold) = self.policy.similarity.as_ref().map(|s| s.threshold) else {
            return Probe::Miss(Miss {
                key,
                vector: Some(vector),
            });
        };
        let now = Instant::now();
        let mut entries = self.lock();
        let mut expired = Vec::new();
        let mut best: Option<(Key, f64)> = None;
        for (k, e) in entries.iter() {
            if now.saturating_duration_since(e.stored) >= self.policy.ttl {
                expired.push(*k);
                continue;
            }
            let Some(v) = &e.vector else { continue };
            let s = cosine(&vector, v);
            if s >= threshold && best.is_none_or(|(_, b)| s > b) {
                best = Some((*k, s));
            }
        }
        for k in expired {
            entries.remove(&k);
        }
        if let Some((k, s)) = best
            && let Some(e) = entries.get(&k)
        {
            return Probe::Hit(Hit {
                output: e.output.clone(),
                matched: Match::Similar(s),
                age: now.saturating_duration_since(e.stored),
                key: k,
            });
        }
        Probe::Miss(Miss {
            key,
            vector: Some(vector),
        })
    }

    /// Stores a node's output under the key of its miss (the least recently
    /// used entry goes when the cache is full).
    /// A re-run's output replaces the stored one and keeps its embedding.
    pub fn store(&self, miss: &Miss, output: Arc<NodeOutput>) {
        let mut entries = self.lock();
        let vector = miss
            .vector
            .clone()
            .or_else(|| entries.peek(&miss.key).and_then(|e| e.vector.clone()));
        let entry = Entry {
            output,
            stored: Instant::now(),
            vector,
        };
        entries.insert(miss.key, entry);
    }

    /// The text a similarity lookup compares: `similarity.text`, else
    /// `input.question` (or a plain string input).
    pub fn text(&self, cx: &NodeCx) -> Option<String> {
        let sim = self.policy.similarity.as_ref()?;
        match &sim.text {
            Some(expr) => expr
                .evaluate_string(cx.input(), &cx.outputs_json(), &cx.labels_json())
                .ok(),
            None => cx
                .input()
                .get("question")
                .and_then(Value::as_str)
                .or_else(|| cx.input().as_str())
                .map(str::to_string),
        }
        .filter(|t| !t.trim().is_empty())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<Key, Entry>> {
        // Plain data behind the lock stays valid if a holder panicked.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

impl Hit {
    /// The output a hit stands in with: the stored one, its facts led by
    /// what the cache did, its tags saying so, and no tokens (nothing ran).
    pub fn output(&self) -> NodeOutput {
        let stored = &*self.output;
        let (matched, similarity) = match self.matched {
            Match::Exact => ("exact", None),
            Match::Similar(s) => ("similar", Some(round3(s))),
        };
        let age_ms = u64::try_from(self.age.as_millis()).unwrap_or(u64::MAX);
        let mut facts = Vec::with_capacity(stored.facts.len() + 1);
        facts.push(Fact::Cached {
            matched: matched.to_string(),
            similarity,
            age_ms,
        });
        facts.extend(stored.facts.iter().cloned());
        let mut tags = stored.tags.clone();
        tags.insert(TAG.into(), HIT.into());
        tags.insert("cache_match".into(), matched.into());
        if let Some(s) = similarity {
            tags.insert("cache_similarity".into(), format!("{s:.3}"));
        }
        tags.insert("cache_age_ms".into(), age_ms.to_string());
        tags.insert("cache_key".into(), short(&self.key));
        NodeOutput {
            value: stored.value.clone(),
            label: stored.label.clone(),
            facts,
            tags,
            tokens: Default::default(),
            // Nothing ran: no steps.
            steps: Default::default(),
        }
    }
}

/// The first 16 hex digits of a key, for span tags.
pub(crate) fn short(key: &Key) -> String {
    key.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn digest(h: Sha256) -> Key {
    let mut key = [0u8; 32];
    key.copy_from_slice(&h.finalize());
    key
}

/// Cosine similarity (0 for empty or mismatched vectors).
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// Every node whose output can reach `n` (along edges, and into the node a
/// fallback replaces), in topological order.
fn ancestors(topology: &Topology, n: NodeId) -> Vec<NodeId> {
    let mut seen = vec![false; topology.nodes.len()];
    let mut stack = vec![n];
    while let Some(m) = stack.pop() {
        for &e in topology.incoming(m) {
            let from = topology.edge(e).from;
            if !seen[from.0] {
                seen[from.0] = true;
                stack.push(from);
            }
        }
        // A fallback runs with the inputs of the node it replaces.
        for (i, node) in topology.nodes.iter().enumerate() {
            if node.fallback == Some(m) && !seen[i] {
                seen[i] = true;
                stack.push(NodeId(i));
            }
        }
    }
    topology
        .topological_order()
        .iter()
        .copied()
        .filter(|a| seen[a.0] && *a != n)
        .collect()
}

fn write_str(h: &mut Sha256, s: &str) {
    h.update((s.len() as u64).to_le_bytes());
    h.update(s.as_bytes());
}

/// Feeds a JSON value into the hash unambiguously (a type byte, lengths
/// before contents), object keys sorted.
fn write_value(h: &mut Sha256, v: &Value) {
    match v {
        Value::Null => h.update([0u8]),
        Value::Bool(b) => h.update([1u8, u8::from(*b)]),
        Value::Number(n) => {
            h.update([2u8]);
            write_str(h, &n.to_string());
        }
        Value::String(s) => {
            h.update([3u8]);
            write_str(h, s);
        }
        Value::Array(items) => {
            h.update([4u8]);
            h.update((items.len() as u64).to_le_bytes());
            for item in items {
                write_value(h, item);
            }
        }
        Value::Object(map) => {
            h.update([5u8]);
            h.update((map.len() as u64).to_le_bytes());
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            for k in keys {
                write_str(h, k);
                write_value(h, &map[k]);
            }
        }
    }
}

#[cfg(test)]
mod tests;
