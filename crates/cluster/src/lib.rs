//! The worker pool behind `glassbox serve --cluster` and `glassbox worker`
//! (DESIGN.md, "Cluster"; docs/cluster.md).
//!
//! - [`member`]: what a worker says about itself (its record: address,
//!   hardware, models, node kinds, labels) and its load, in vLLM's terms;
//!   the etcd keys they live under.
//! - [`pool`]: the live view of the pool every coordinator keeps (filled
//!   from an etcd watch; filled by hand in tests).
//! - [`placement`]: which worker runs a GPU-tagged node call (hard
//!   filters, expected wait normalised by [`profile`]s, smooth weighted
//!   round robin from [`swrr`]), with the reasons for the trace;
//!   [`breaker`]: the circuit breaker per worker that failover and
//!   liveness probes feed.
//!
//! Membership and heartbeats live in etcd (a lease per worker: its keys
//! vanish when it stops refreshing); nothing here invents a protocol.

pub mod breaker;
pub mod member;
pub mod placement;
pub mod pool;
pub mod profile;
pub mod swrr;

pub use breaker::{Breaker, BreakerSettings, BreakerState};
pub use member::{Gpu, Hardware, Load, Member, WorkerRecord};
pub use placement::{Ask, Placement, Rule};
pub use pool::Pool;
pub use profile::Profiles;
pub use swrr::Swrr;
