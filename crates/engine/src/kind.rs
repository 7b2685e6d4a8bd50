//! Node kinds and the explicit [`Registry`] the binary fills.
//!
//! Kind authors implement one trait, [`TypedKind`]: `check` reads a node's
//! config once into the kind's own type (validation keeps that value in the
//! topology, so the typed configuration always exists for a valid
//! topology), and `build` takes that value and a [`BuildContext`] with the
//! shared resources. [`Registry::add`] registers a kind.
//!
//! Behind it, two erased forms hold kinds of different config types side by
//! side: the topology crate's `KindSchema` (what validation asks) and
//! [`NodeKind`] (what the pipeline builder asks). Both are implemented for
//! [`Typed`], the wrapper [`Registry::add`] puts around a kind, and
//! `NodeKind` only for it (it is sealed).
//!
//! A kind also answers for itself what serving needs to know about it
//! (does it stream text? guard output? embed?), so no caller decides a
//! kind's meaning from its name.
//!
//! The resources a build gets are typed: [`BuildContext`] carries the
//! topology, the secrets policy the engine resolves references with, and
//! `R`, a struct of the resources the registering crate's kinds share
//! (`glassbox_nodes::Resources`: model cache, outbound allowances, cluster
//! dispatcher, the registry for sub-pipelines). Nothing is looked up by
//! type at run time.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use glassbox_topology::secret_access::SecretAccess;
use glassbox_topology::{
    Checked, Cx, Diagnostic, KindSchema, KindSet, Labels, Topology, TypedConfig, Value,
};

use crate::error::BuildError;
use crate::node::Node;

mod sealed {
    /// Only [`Typed`](super::Typed) implements
    /// [`NodeKind`](super::NodeKind): kind authors write a
    /// [`TypedKind`](super::TypedKind).
    pub trait Sealed {}
}

/// A registered kind as the pipeline builder sees it: [`Typed`] around a
/// [`TypedKind`], whatever its config type. Sealed: implement
/// [`TypedKind`] instead.
pub trait NodeKind<R = ()>: KindSchema + sealed::Sealed {
    /// Builds a node from its validated topology entry (secret references
    /// in `node.config` already resolved). May do I/O (open files, load
    /// models).
    fn build(
        &self,
        node: &glassbox_topology::Node,
        cx: &BuildContext<R>,
    ) -> Result<Arc<dyn Node>, BuildError>;

    /// The typed config of a node whose secret references the pipeline
    /// builder has just resolved, on its copy: the kind's own check of the
    /// resolved config (validation typed the config as written, the
    /// references standing as text), problems as a build error.
    fn check_resolved(&self, config: &serde_json::Value) -> Result<TypedConfig, BuildError>;

    /// Whether its nodes generate text that may go to the caller token by
    /// token as it is produced (chat streaming).
    fn streams_text(&self) -> bool;

    /// Whether its nodes check upstream output before it leaves, so text
    /// generated before them must not stream out unchecked.
    fn guards_output(&self) -> bool;

    // Whether a kind embeds is [`KindSchema::embeds`]: validation needs it too
    // (a response cache's `similarity.embedding` must name an embedding node).
}

/// A node kind, written against its own config type: the one trait a kind
/// author implements (docs/kinds.md walks through adding one).
///
/// [`check`](TypedKind::check) reads `config` once, reporting problems with
/// their locations, into [`Config`](TypedKind::Config); validation keeps
/// that value in the topology and [`build`](TypedKind::build) takes it.
/// `R` is the resources struct of the registry the kind joins (`()` for
/// kinds that need none; `glassbox_nodes::Resources` for the built-in
/// ones). Register one with [`Registry::add`].
pub trait TypedKind<R = ()>: Send + Sync + 'static {
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
        cx: &BuildContext<R>,
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

/// A [`TypedKind`] in its erased forms: what [`Registry::add`] registers.
pub struct Typed<K, R = ()>(pub K, std::marker::PhantomData<fn(&R)>);

impl<K, R> Typed<K, R> {
    pub fn new(kind: K) -> Self {
        Typed(kind, std::marker::PhantomData)
    }
}

impl<K: fmt::Debug, R> fmt::Debug for Typed<K, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Typed").field(&self.0).finish()
    }
}

impl<K: TypedKind<R>, R: 'static> Typed<K, R> {
    /// See [`NodeKind::check_resolved`].
    fn check_typed(&self, config: &serde_json::Value) -> Result<K::Config, BuildError> {
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

    /// The node's typed config; validation kept it.
    fn typed<'a>(&self, node: &'a glassbox_topology::Node) -> Result<&'a K::Config, BuildError> {
        node.typed_config
            .as_ref()
            .and_then(TypedConfig::get::<K::Config>)
            .ok_or_else(|| {
                BuildError::config(format!(
                    "node `{}` was not validated against kind `{}` (its typed config is missing)",
                    node.id,
                    self.0.name()
                ))
            })
    }
}

impl<K, R> sealed::Sealed for Typed<K, R> {}

impl<K: TypedKind<R>, R: 'static> KindSchema for Typed<K, R> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn summary(&self) -> &'static str {
        self.0.summary()
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
        if let Some(typed) = node.typed_config.as_ref().and_then(TypedConfig::get) {
            self.0.inspect(typed, node, config, topology, cx);
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

impl<K: TypedKind<R>, R: 'static> NodeKind<R> for Typed<K, R> {
    fn build(
        &self,
        node: &glassbox_topology::Node,
        cx: &BuildContext<R>,
    ) -> Result<Arc<dyn Node>, BuildError> {
        self.0.build(self.typed(node)?, node, cx)
    }

    fn check_resolved(&self, config: &serde_json::Value) -> Result<TypedConfig, BuildError> {
        self.check_typed(config).map(TypedConfig::new)
    }

    fn streams_text(&self) -> bool {
        self.0.streams_text()
    }

    fn guards_output(&self) -> bool {
        self.0.guards_output()
    }
}

/// What a kind gets when building: the topology, the secrets policy the
/// engine resolved the node's references with, and `R`, the typed
/// resources the registering crate's kinds share (model handles, HTTP
/// allowances: `glassbox_nodes::Resources`).
#[derive(Clone)]
pub struct BuildContext<R = ()> {
    pub topology: Arc<Topology>,
    /// Which secrets references may read and where they may be sent (the
    /// server's `[secrets]`; the default otherwise).
    pub secrets: SecretAccess,
    pub resources: R,
}

impl<R> fmt::Debug for BuildContext<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuildContext")
            .field("topology", &self.topology.id)
            .finish_non_exhaustive()
    }
}

impl<R: Default> BuildContext<R> {
    /// A context with the default secrets policy and default resources.
    pub fn new(topology: Arc<Topology>) -> BuildContext<R> {
        BuildContext::with(topology, R::default())
    }
}

impl<R> BuildContext<R> {
    /// A context with the default secrets policy and these resources.
    pub fn with(topology: Arc<Topology>, resources: R) -> BuildContext<R> {
        BuildContext {
            topology,
            secrets: SecretAccess::default(),
            resources,
        }
    }
}

/// The node kinds a pipeline may use, for resources `R`.
pub struct Registry<R = ()> {
    kinds: BTreeMap<&'static str, Arc<dyn NodeKind<R>>>,
}

impl<R> Clone for Registry<R> {
    fn clone(&self) -> Self {
        Registry {
            kinds: self.kinds.clone(),
        }
    }
}

impl<R> Default for Registry<R> {
    fn default() -> Self {
        Registry {
            kinds: BTreeMap::new(),
        }
    }
}

impl<R> fmt::Debug for Registry<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.kinds.keys()).finish()
    }
}

impl<R: 'static> Registry<R> {
    pub fn new() -> Registry<R> {
        Registry::default()
    }

    /// Adds a [`TypedKind`]; a later kind with the same name replaces the
    /// earlier.
    pub fn add<K: TypedKind<R>>(&mut self, kind: K) -> &mut Self {
        let kind: Arc<dyn NodeKind<R>> = Arc::new(Typed::<K, R>::new(kind));
        self.kinds.insert(kind.name(), kind);
        self
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn NodeKind<R>>> {
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
