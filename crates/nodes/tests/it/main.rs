//! Integration tests for glassbox-nodes: the built-in runtimes inside real
//! pipelines (router, template, output_guard, http), and the model-backed
//! kinds' "not wired yet" build errors.

#![allow(clippy::unwrap_used)]

mod guard;
mod http;
mod moderation;
mod support;
