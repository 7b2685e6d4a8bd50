//! Integration tests: a real `glassbox serve` (in-process) on an ephemeral
//! port, real HTTP, a temp SQLite store and a temp topologies directory.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod admission;
mod api;
mod auth;
mod budgets;
mod cluster;
mod connections;
mod dashboard;
mod durable;
mod fuzz;
mod gpus;
mod ingest;
mod keyless;
mod lifecycle;
mod limits;
mod openai;
mod openapi;
mod priorities;
mod redaction;
mod reload;
mod secrets;
mod support;
mod trace_diff;
mod versions;
mod wasm;
mod worker;
