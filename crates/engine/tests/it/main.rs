//! Integration tests for glassbox-engine: small test-only node kinds and
//! tokio's paused clock, so timeouts, retries and concurrency are
//! deterministic and fast. No assertion reads the wall clock.

#![allow(clippy::unwrap_used)]

mod cache;
mod failures;
mod layering;
mod loops;
mod paths;
mod receipts;
mod support;
