//! Integration tests for glassbox-trace.

#![allow(clippy::unwrap_used)]

mod sink;
mod usage_corpus;
