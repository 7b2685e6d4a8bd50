//! Node kinds and the explicit [`Registry`] the binary fills.
//!
//! A [`NodeKind`] is a [`KindSchema`] (pure config check, labels) that can
//! also [`build`](NodeKind::build) a runnable [`Node`] from a validated
//! topology entry. Kinds register explicitly, so the binary decides what
//! exists and tests register their own small kinds.
//!
//! A kind also answers for itself what serving needs to know about it
//! (does it stream text? guard output? embed?), so no caller decides a
//! kind's meaning from its name.
//!
//! Most kinds are written as a [`TypedKind`]: `check` reads the config once
//! into the kind's own type (validation keeps it in the topology) and
//! `build` takes that value. [`Registry::add`] registers one.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use glassbox_topology::{
    Checked, Cx, Diagnostic, KindSchema, KindSet, Labels, Topology, TypedConfig, Value,
};

use crate::error::BuildError;
use crate::node::Node;

/// A node kind that can build runnable nodes.
pub trait NodeKind: KindSchema {
    /// Builds a node from its validated topology entry. May do I/O (open
    /// files, load models); `cx` carries shared resources.
    fn build(
        &self,
        node: &glassbox_topology::Node,
        cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError>;

    /// Whether its nodes generate text that may go to the caller token by
    /// token as it is produced (chat streaming).
    fn streams_text(&self) -> bool {
        false
    }

    /// Whether its nodes check upstream output before it leaves, so text
    /// generated before them must not stream out unchecked.
    fn guards_output(&self) -> bool {
        false
    }

    // Whether a kind embeds is [`KindSchema::embeds`]: validation needs it too
    // (a response cache's `similarity.embedding` must name an embedding node).
}

/// A node kind written against its own config type.
///
/// [`check`](TypedKind::check) reads `config` once, reporting problems with
/// their locations, into [`Config`](TypedKind::Config); validation keeps
/// that value in the topology and [`build`](TypedKind::build) takes it.
/// Register one with [`Registry::add`].
pub trait TypedKind: Send + Sync + 'static {
    type Config: Send + Sync + 'static;

    /// The `type` string, e.g. `router`.
    fn name(&self) -> &'static str;

    /// One line for `--help` and error hints.
    fn summary(&self) -> &'static str;

    /// Reads `config` (which may be absent) into the typed value, reporting
    /// every problem into `cx`. Pure: no I/O. With problems reported, the
    /// value is a best effort and is never built.
    fn check(&self, config: Option<&Value>, cx: &mut Cx<'_>) -> Self::Config;

    /// The labels a node with this config can emit.
    fn labels(&self, config: &Self::Config) -> Labels {
        let _ = config;
        Labels::None
    }

    /// Builds a node from its checked config. May do I/O.
    fn build(
        &self,
        config: &Self::Config,
        node: &glassbox_topology::Node,
        cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError>;

    /// See [`KindSchema::inspect`]: checks of the typed config that need
    /// I/O, reported at the spanned `raw` config's locations.
    fn inspect(
        &self,
        config: &Self::Config,
        node: &glassbox_topology::Node,
        raw: Option<&Value>,
        topology: &Topology,
        cx: &mut Cx<'_>,
    ) {
        let _ = (config, node, raw, topology, cx);
    }

    /// See [`NodeKind::streams_text`].
    fn streams_text(&self) -> bool {
        false
    }

    /// See [`NodeKind::guards_output`].
    fn guards_output(&self) -> bool {
        false
    }

    /// See [`KindSchema::embeds`].
    fn embeds(&self) -> bool {
        false
    }

    /// See [`KindSchema::secret_fields`].
    fn secret_fields(&self) -> &'static [&'static str] {
        &[]
    }
}

/// A [`TypedKind`] as a [`NodeKind`]: what [`Registry::add`] registers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Typed<K>(pub K);

impl<K: TypedKind> Typed<K> {
    /// Types a config that validation did not keep typed (it held secret
    /// references, now resolved): the same check, problems as a build error.
    fn check_json(&self, config: &serde_json::Value) -> Result<K::Config, BuildError> {
        let value = Value::from_json(config);
        let mut diagnostics: Vec<Diagnostic> = Vec::new();
        let typed = {
            let mut cx = Cx::new(&mut diagnostics);
            let mut cx = cx.field("config");
            self.0.check(Some(&value), &mut cx)
        };
        let problems: Vec<String> = diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| format!("`{}`: {}", d.path, d.message))
            .collect();
        if problems.is_empty() {
            Ok(typed)
        } else {
            Err(BuildError::config(problems.join("; ")))
        }
    }
}

impl<K: TypedKind> KindSchema for Typed<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn summary(&self) -> &'static str {
        self.0.summary()
    }

    fn check_config(&self, config: Option<&Value>, cx: &mut Cx<'_>) {
        self.0.check(config, cx);
    }

    fn labels(&self, config: &serde_json::Value) -> Labels {
        let value = Value::from_json(config);
        let mut ignored = Vec::new();
        let typed = self.0.check(Some(&value), &mut Cx::new(&mut ignored));
        self.0.labels(&typed)
    }

    fn embeds(&self) -> bool {
        self.0.embeds()
    }

    fn secret_fields(&self) -> &'static [&'static str] {
        self.0.secret_fields()
    }

    fn inspect(
        &self,
        node: &glassbox_topology::Node,
        config: Option<&Value>,
        topology: &Topology,
        cx: &mut Cx<'_>,
    ) {
        match node.typed_config.as_ref().and_then(TypedConfig::get) {
            Some(typed) => self.0.inspect(typed, node, config, topology, cx),
            // Not kept typed (it holds secret references): type it again,
            // its problems were reported by validation already.
            None => {
                let mut ignored = Vec::new();
                let typed = self.0.check(config, &mut Cx::new(&mut ignored));
                self.0.inspect(&typed, node, config, topology, cx);
            }
        }
    }

    fn check(&self, config: Option<&Value>, cx: &mut Cx<'_>) -> Checked {
        let typed = self.0.check(config, cx);
        Checked {
            labels: self.0.labels(&typed),
            config: Some(TypedConfig::new(typed)),
        }
    }
}

impl<K: TypedKind> NodeKind for Typed<K> {
    fn build(
        &self,
        node: &glassbox_topology::Node,
        cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        match node.typed_config.as_ref().and_then(TypedConfig::get) {
            Some(config) => self.0.build(config, node, cx),
            None => self.0.build(&self.check_json(&node.config)?, node, cx),
        }
    }

    fn streams_text(&self) -> bool {
        self.0.streams_text()
    }

    fn guards_output(&self) -> bool {
        self.0.guards_output()
    }
}

/// What a kind gets when building: the topology and shared resources
/// (model handles, HTTP agents) that the binary put in, looked up by type.
#[derive(Clone)]
pub struct BuildContext {
    pub topology: Arc<Topology>,
    extensions: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl fmt::Debug for BuildContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuildContext")
            .field("topology", &self.topology.id)
            .field("extensions", &self.extensions.len())
            .finish()
    }
}

impl BuildContext {
    pub fn new(topology: Arc<Topology>) -> BuildContext {
        BuildContext {
            topology,
            extensions: HashMap::new(),
        }
    }

    /// Adds a shared resource; one per type.
    pub fn insert<T: Any + Send + Sync>(&mut self, value: Arc<T>) -> &mut Self {
        self.extensions.insert(TypeId::of::<T>(), value);
        self
    }

    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.extensions
            .get(&TypeId::of::<T>())
            .cloned()
            .and_then(|a| a.downcast::<T>().ok())
    }
}

/// The node kinds a pipeline may use.
#[derive(Clone, Default)]
pub struct Registry {
    kinds: BTreeMap<&'static str, Arc<dyn NodeKind>>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.kinds.keys()).finish()
    }
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Adds a kind; a later kind with the same name replaces the earlier.
    pub fn register(&mut self, kind: Arc<dyn NodeKind>) -> &mut Self {
        self.kinds.insert(kind.name(), kind);
        self
    }

    /// Adds a [`TypedKind`].
    pub fn add<K: TypedKind>(&mut self, kind: K) -> &mut Self {
        self.register(Arc::new(Typed(kind)))
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn NodeKind>> {
        self.kinds.get(name)
    }

    /// Whether the kind named `name` streams text (false when unknown).
    pub fn streams_text(&self, name: &str) -> bool {
        self.get(name).is_some_and(|k| k.streams_text())
    }

    /// Whether the kind named `name` guards output (false when unknown).
    pub fn guards_output(&self, name: &str) -> bool {
        self.get(name).is_some_and(|k| k.guards_output())
    }

    /// Whether the kind named `name` embeds text (false when unknown).
    pub fn embeds(&self, name: &str) -> bool {
        self.get(name).is_some_and(|k| k.embeds())
    }

    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.kinds.keys().copied()
    }

    /// The same kinds as a [`KindSet`], for validating topologies.
    pub fn kind_set(&self) -> KindSet {
        let mut set = KindSet::new();
        for kind in self.kinds.values() {
            let schema: Arc<dyn KindSchema> = kind.clone();
            set.register(schema);
        }
        set
    }
}
