//! Node kinds and the explicit [`Registry`] the binary fills.
//!
//! A [`NodeKind`] is a [`KindSchema`] (pure config check, labels) that can
//! also [`build`](NodeKind::build) a runnable [`Node`] from a validated
//! topology entry. Kinds register explicitly, so the binary decides what
//! exists and tests register their own small kinds.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use glassbox_topology::{KindSchema, KindSet, Topology};

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

    pub fn get(&self, name: &str) -> Option<&Arc<dyn NodeKind>> {
        self.kinds.get(name)
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
