//! Integration tests against real etcd processes on loopback
//! (`glassbox_cluster::etcd_temp`; scripts/install-etcd.sh installs etcd).
//! They fail, never skip, when etcd is missing, as the PostgreSQL tests do.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod membership;
mod trust;
