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
//!
//! Membership and heartbeats live in etcd (a lease per worker: its keys
//! vanish when it stops refreshing); nothing here invents a protocol.

pub mod gpu;
pub mod member;
pub mod pool;

pub use gpu::{GpuSource, GpuStats, NvmlSource};
pub use member::{Gpu, Hardware, Load, Member, WorkerRecord};
pub use pool::Pool;
