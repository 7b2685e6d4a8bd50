//! What the built-in kinds share when they build, as one typed struct
//! ([`Resources`]) in the engine's [`BuildContext`](glassbox_engine::BuildContext):
//! the kinds sub-pipelines are built with, the operator's outbound
//! allowances and secrets policy, the model cache, and the cluster's
//! dispatcher. A kind reads the field it needs; nothing is looked up by
//! type, and a missing resource is a field left `None`, each with its
//! documented default.
//!
//! [`Registry`] and [`BuildContext`] name the engine's types for these
//! resources, so the kinds' folders write them without the parameter.

use std::sync::Arc;

use crate::cluster::Dispatcher;
use crate::model_cache::{self, ModelCache};
use crate::outbound::ServerAllow;

/// The engine's registry of kinds built with [`Resources`].
pub type Registry = glassbox_engine::Registry<Resources>;

/// The engine's build context with [`Resources`].
pub type BuildContext = glassbox_engine::BuildContext<Resources>;

/// The resources a pipeline of built-in kinds is built with.
#[derive(Debug, Clone, Default)]
pub struct Resources {
    /// The kinds sub-topologies are built with (an agent's tools); absent:
    /// the agent kind refuses topology tools.
    pub registry: Option<Registry>,
    /// Address ranges outbound calls may reach despite the deny list, and
    /// the secrets topologies may read; absent: no ranges, default secrets.
    pub outbound: Option<Arc<ServerAllow>>,
    /// Models and indexes to share; absent: the process-wide cache.
    pub models: Option<Arc<ModelCache>>,
    /// The cluster's dispatcher (`glassbox serve --cluster`): GPU-tagged
    /// model nodes are placed on its workers instead of running here.
    pub cluster: Option<Arc<Dispatcher>>,
}

impl Resources {
    /// The model cache to load into: the given one, else the process-wide.
    pub fn models(&self) -> Arc<ModelCache> {
        self.models.clone().unwrap_or_else(model_cache::global)
    }

    /// The outbound allowances, if the operator gave any.
    pub fn outbound(&self) -> Option<&ServerAllow> {
        self.outbound.as_deref()
    }
}
