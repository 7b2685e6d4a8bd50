//! The worker pool behind `glassbox serve --cluster` and `glassbox worker`
//! (DESIGN.md, "Cluster"; docs/cluster.md).
//!
//! - [`member`]: what a worker says about itself (its record: address,
//!   hardware, models, node kinds, labels) and its load, in vLLM's terms;
//!   the etcd keys they live under.
//! - [`pool`]: the live view of the pool every coordinator keeps (filled
//!   from an etcd watch; filled by hand in tests).
//! - [`gpu`]: this machine's GPUs and their utilisation, memory,
//!   temperature and power, through NVML loaded at run time (none without
//!   a driver).
//! - [`etcd`]: membership itself: a worker's [`Registration`] under a lease,
//!   a coordinator's [`watch`] that keeps a [`Pool`] in step with etcd;
//!   [`etcd::trust`]: TLS and auth to etcd, signed worker records and the
//!   worker-address allow-list (etcd is a trust boundary).
//! - [`host`]: the machine a worker runs on (CPU, memory, host name).
//! - [`attach`]: an existing OpenAI-compatible server (vLLM, SGLang,
//!   llama.cpp's `llama-server`, another Glassbox) as a member: its
//!   Prometheus metrics read into a [`Load`].
//! - [`placement`]: which worker runs a GPU-tagged node call (hard
//!   filters, expected wait normalised by [`profile`]s, smooth weighted
//!   round robin from [`swrr`]), with the reasons for the trace;
//!   [`breaker`]: the circuit breaker per worker that failover and
//!   liveness probes feed; [`budget`]: the retry budget that caps
//!   failovers at a share of recent calls; [`capability`]: how strong a
//!   worker's hardware counts for each node kind.
//!
//! Membership and heartbeats live in etcd (a lease per worker: its keys
//! vanish when it stops refreshing); nothing here invents a protocol.

pub mod attach;
pub mod breaker;
pub mod budget;
pub mod capability;
pub mod etcd;
#[cfg(any(test, feature = "test-support"))]
pub mod etcd_temp;
pub mod gpu;
pub mod host;
pub mod iprange;
pub mod member;
pub mod placement;
pub mod pool;
pub mod profile;
pub mod swrr;

pub use breaker::{Breaker, BreakerSettings, BreakerState};
pub use budget::{BudgetSettings, RetryBudget, Spent};
pub use etcd::trust::{AddressRule, EtcdAuth, PoolKey, Trust};
pub use etcd::{
    EtcdError, EtcdOptions, Registration, RegistrationEvent, RegistrationOptions, Watch,
    WatchEvent, watch,
};
pub use gpu::{GpuSource, GpuStats, NvmlSource};
pub use iprange::IpRange;
pub use member::{Gpu, Hardware, Load, Member, WorkerRecord};
pub use placement::{Ask, Placement, Policy, Rule};
pub use pool::Pool;
pub use profile::Profiles;
pub use swrr::Swrr;
