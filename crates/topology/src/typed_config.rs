//! The typed form of a node's config, as its kind's check made it: an
//! opaque value that both the kinds and the validated model carry, kept
//! below both so neither imports the other for it.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// A node config as its kind's check typed it. Opaque at this layer: the
/// kind that made it gets its own type back with [`get`](TypedConfig::get).
#[derive(Clone)]
pub struct TypedConfig(Arc<dyn Any + Send + Sync>);

impl TypedConfig {
    pub fn new<T: Any + Send + Sync>(config: T) -> TypedConfig {
        TypedConfig(Arc::new(config))
    }

    /// The typed value, if it is a `T`.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.0.downcast_ref::<T>()
    }
}

impl fmt::Debug for TypedConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TypedConfig(..)")
    }
}
