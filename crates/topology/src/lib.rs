//! # glassbox-topology
//!
//! The topology format: a versioned JSON or YAML file declaring the nodes a
//! request *may* pass through and the edges between them. This crate parses
//! it with exact source locations, validates it in one pass that reports
//! every problem (with `file:line:column`, field path, message and hint), and
//! produces the immutable [`Topology`] the engine runs. It also publishes the
//! format's JSON Schema, draws topologies (Mermaid, DOT) and diffs versions.
//!
//! Stages, each with its own type: bytes → [`Source`] → [`Value`] (spanned
//! tree, [`parse`]) → [`TopologySpec`] ([`spec`]) → [`Topology`]
//! ([`validate`]). Nothing downstream accepts a raw spec.
//!
//! Node kinds are not known here: the binary passes a [`KindSet`] whose
//! entries check their own `config` and declare the labels they emit.
//!
//! This crate has no async runtime, HTTP or database in it, so every tool
//! (CLI, server, editor integrations) can link it cheaply.

pub mod condition;
pub mod decode;
pub mod diagnostic;
pub mod diff;
pub mod edge_spec;
pub mod kind;
pub mod model;
pub mod parse;
pub mod render;
pub mod schema;
pub mod secret;
pub mod secret_access;
pub mod source;
pub mod spec;
mod typed_config;
pub mod validate;
pub mod value;

pub use condition::{Condition, ConditionSyntaxError, EvalError, Expr};
pub use decode::{Cx, Obj, Spanned};
pub use diagnostic::{Code, Diagnostic, Report, Severity};
pub use kind::{Checked, KindSchema, KindSet, Labels, TypedConfig};
pub use model::{
    CachePolicy, Edge, EdgeId, Loop, LoopBound, Node, NodeId, Prices, Resource, ResourceKind,
    Similarity, Topology,
};
pub use source::{Format, Source, Span};
pub use spec::TopologySpec;
pub use validate::{TopologyError, Validated, load_path, load_source, validate};
pub use value::Value;
