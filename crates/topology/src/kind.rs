//! What the topology layer needs to know about node kinds.
//!
//! Kinds are registered explicitly by the binary (no linker magic). At this
//! layer a kind only checks its `config` — purely, without I/O — and declares
//! the labels it can emit, so that validation can reject a bare-label edge
//! condition that could never be true. Building a runnable node from the
//! validated config is the engine's business.
//!
//! A kind's [`check`](KindSchema::check) reads its config once, into a
//! [`TypedConfig`] that the validated [`Node`](crate::Node) carries to the
//! kind's build step: the config is parsed in one place, with one copy of
//! each list of allowed values, and build never re-reads raw JSON.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::decode::Cx;
pub use crate::typed_config::TypedConfig;
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

/// A node kind as the validator sees it. Kind authors do not implement
/// this: they write the engine's `TypedKind`, which the engine's registry
/// turns into a `KindSchema` (and the topology's examples and benches use
/// a minimal one of their own).
pub trait KindSchema: Send + Sync {
    /// The `type` string, e.g. `router`.
    fn name(&self) -> &'static str;

    /// One line for `--help` and error hints.
    fn summary(&self) -> &'static str;

    /// Whether its nodes turn text into a vector (`/v1/embeddings`, and the
    /// model a response cache's `similarity.embedding` may name).
    fn embeds(&self) -> bool {
        false
    }

    /// Top-level `config` fields that hold a credential beyond those any
    /// kind may use (`headers`, fields named like `api_key` or `password`,
    /// URL userinfo): the only other places a secret reference may stand
    /// ([`crate::secret_access`]).
    fn secret_fields(&self) -> &'static [&'static str] {
        &[]
    }

    /// Checks that need I/O, run by [`load_path`](crate::load_path) and
    /// [`load_source`](crate::load_source) once the pure checks found no
    /// error: that a file the config names is there and is what the config
    /// says (a custom step's component, its own schema for its settings).
    /// `config` is the node's spanned `config` and `cx` is at its path, so
    /// problems carry `file:line:column`. The default checks nothing.
    fn inspect(
        &self,
        node: &crate::Node,
        config: Option<&Value>,
        topology: &crate::Topology,
        cx: &mut Cx<'_>,
    ) {
        let _ = (node, config, topology, cx);
    }

    /// Checks `config` (which may be absent) once, reporting every problem
    /// into `cx`, and yields what later stages need from it: the labels a
    /// node can emit and the typed config its build step takes. Must not do
    /// I/O: files and servers are checked when the node is built (or by
    /// [`inspect`](KindSchema::inspect)).
    fn check(&self, config: Option<&Value>, cx: &mut Cx<'_>) -> Checked;
}

/// What a kind's [`check`](KindSchema::check) yields.
#[derive(Debug, Clone)]
pub struct Checked {
    pub labels: Labels,
    /// The config as the kind typed it, for its build step.
    pub config: Option<TypedConfig>,
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
