//! Integration tests of the `glassbox` binary and the topology tooling.

mod cli;
mod fixtures;
mod props;
mod support;
