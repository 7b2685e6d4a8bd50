//! Integration tests of glassbox-store: one shared suite run against both
//! stores, the writer, crash safety, redaction, reports and OTLP export.

#![allow(clippy::unwrap_used)]

mod compare;
mod crash;
mod durable;
mod fixture;
mod otlp;
mod postgres;
mod sqlite;
mod suite;
mod writer;
