//! One module per subcommand.

pub mod agent_steps;
pub mod alerts;
pub mod bench;
pub mod calibrate;
pub mod common;
pub mod diff;
pub mod doctor;
pub mod explain;
pub mod graph;
pub mod index;
pub mod models;
pub mod plan;
pub mod report;
pub mod run;
pub mod schema;
pub mod serve;
pub mod store;
pub mod test;
pub mod trace;
pub mod trace_diff;
pub mod validate;
pub mod versions;
pub mod worker;
