//! The request service's protocol-free parts: what every door (the HTTP
//! server, a cluster worker, the CLI) shares about admitting and running
//! requests, and why it refuses one ([`ServiceError`]).

pub mod error;

pub use error::{RateMeasure, ServiceError};
