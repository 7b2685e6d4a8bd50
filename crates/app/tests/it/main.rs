//! Integration tests for glassbox-app: a local run of real topology files,
//! with the real node kinds and a real SQLite trace store.

#![allow(clippy::unwrap_used)]

mod local;
mod regress;
