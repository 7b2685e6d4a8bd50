//! Integration tests of the `glassbox` binary and the topology tooling.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod bench;
mod calibrate;
mod cli;
mod cluster;
mod cluster_pool;
mod cluster_rag;
mod cluster_shed;
mod deploy;
mod doctor;
mod durable;
mod fixtures;
mod ingest;
mod plan;
mod portability;
mod props;
mod rag;
mod regress;
mod run;
mod serve;
mod support;
mod traces;
mod trust;
mod versions;
