//! The request service's protocol-free parts: what every door (the HTTP
//! server, a cluster worker, the CLI) shares about admitting and running
//! requests, and why it refuses one ([`ServiceError`]).

pub mod durable;
pub mod error;
pub mod finished;
pub mod limiter;
pub mod priority;
pub mod queue;
pub mod quota;
pub mod runtime;
pub mod usage;

pub use error::{RateMeasure, ServiceError};
pub use finished::{Finished, RunLimit};
pub use quota::{Cost, Counted};
pub use usage::TokenUsage;
