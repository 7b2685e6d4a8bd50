//! Integration tests for glassbox-ingest.

#![allow(clippy::unwrap_used)]

mod fixtures;
mod receive;
