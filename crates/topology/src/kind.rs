//! What the topology layer needs to know about node kinds.
//!
//! Kinds are registered explicitly by the binary (no linker magic). At this
//! layer a kind only checks its `config` — purely, without I/O — and declares
//! the labels it can emit, so that validation can reject a bare-label edge
//! condition that could never be true. Building a runnable node from the
//! validated config is the engine's business.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::decode::Cx;
use crate::value::Value;

/// Which labels a node of some kind can emit, given its config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Labels {
    /// The kind never emits labels; bare-label conditions on its edges are errors.
    None,
    /// Exactly these labels.
    Declared(Vec<String>),
    /// The kind emits labels it cannot list ahead of time.
    Dynamic,
}

/// A node kind as the validator sees it.
pub trait KindSchema: Send + Sync {
    /// The `type` string, e.g. `router`.
    fn name(&self) -> &'static str;

    /// One line for `--help` and error hints.
    fn summary(&self) -> &'static str;

    /// Checks `config` (which may be absent) and reports problems into `cx`.
    /// Must not do I/O: files and servers are checked when the node is built.
    fn check_config(&self, config: Option<&Value>, cx: &mut Cx<'_>);

    /// The labels a node with this (already checked) config can emit.
    fn labels(&self, config: &serde_json::Value) -> Labels {
        let _ = config;
        Labels::None
    }
}

/// The set of kinds a topology is validated against.
#[derive(Clone, Default)]
pub struct KindSet {
    kinds: BTreeMap<&'static str, Arc<dyn KindSchema>>,
}

impl fmt::Debug for KindSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.kinds.keys()).finish()
    }
}

impl KindSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a kind; a later kind with the same name replaces the earlier one.
    pub fn register(&mut self, kind: Arc<dyn KindSchema>) -> &mut Self {
        self.kinds.insert(kind.name(), kind);
        self
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn KindSchema>> {
        self.kinds.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.kinds.keys().copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn KindSchema>> {
        self.kinds.values()
    }
}
