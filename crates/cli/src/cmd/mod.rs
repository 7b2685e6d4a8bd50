//! One module per subcommand.

pub mod common;
pub mod diff;
pub mod graph;
pub mod plan;
pub mod run;
pub mod schema;
pub mod validate;
