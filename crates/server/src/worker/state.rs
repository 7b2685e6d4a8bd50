//! What a worker's handlers share ([`WorkerState`]): its own module so
//! that the routes and the server that builds them both import it, and
//! neither imports the other.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use glassbox_app::models::door::ModelDoor;

use crate::auth::{Keys, RateLimiter};
use crate::config::Config;
use crate::metrics::Metrics;

/// What the worker's handlers share.
#[derive(Clone)]
pub struct WorkerState {
    pub door: Arc<ModelDoor>,
    pub keys: Arc<Keys>,
    pub limiter: Arc<RateLimiter>,
    pub metrics: Arc<Metrics>,
    pub config: Arc<Config>,
    /// False until it serves, and again once it drains.
    pub ready: Arc<AtomicBool>,
}
