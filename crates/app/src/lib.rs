//! # glassbox-app
//!
//! The application layer between the crates that do the work (topology,
//! engine, nodes, store) and the doors people use (the `glassbox` CLI, the
//! HTTP server, a cluster worker). It speaks no protocol: it takes and
//! returns domain values and domain errors ([`LocalError`]), and each door
//! translates them (exit codes in the CLI, statuses in the server).
//!
//! - [`calibration`]: the calibration beside a topology file (`glassbox
//!   calibrate` wrote it), the prices it sets and what makes it doubtful,
//!   for every door that runs a topology from a file;
//! - [`catalog`], [`served`], [`versions`], [`calibrated`]: the topologies
//!   a server serves, kept in step with their directory, the versions of each served side by side and which one a
//!   request gets, and the check of a calibration against the first
//!   request's models;
//! - [`local`]: a topology run where it is, in-process ([`Local`]): loaded
//!   and validated once, priced from its calibration, recorded in the trace
//!   store (or nowhere), on a runtime of its own. `glassbox run`, `test`,
//!   `test --replay` and `calibrate` run through it;
//! - [`models`]: the models a cluster worker serves, registered by name
//!   and kind, looked up with a typed error, run through the request
//!   service like every other request;
//! - [`regress`]: regression cases of a topology, read and checked
//!   (`glassbox test`);
//! - [`service`]: the request service's protocol-free parts, and its
//!   domain errors ([`ServiceError`]), which each door translates.
//!
//! Why a crate of its own: the setup of a run (calibration lookup, where
//! traces go, the runtime, what a failure means) was written out in each
//! command and again in the server; here it is written once, below the
//! doors, with nothing of HTTP or the command line in it.

pub mod calibrate;
pub mod calibrated;
pub mod calibration;
pub mod catalog;
pub mod console;
pub mod doctor;
pub mod local;
pub mod models;
pub mod regress;
pub mod served;
pub mod service;
pub mod versions;

pub use local::{Local, LocalError, LocalOptions, Record};
pub use service::ServiceError;
