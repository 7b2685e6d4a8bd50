//! What running a request returns: an [`Outcome`], always holding the
//! request's complete [`Trace`], and its output or error.

use std::sync::Arc;

use glassbox_trace::{RequestRecord, SpanRecord};
use serde_json::Value;

use crate::error::ExecError;

/// A request's trace: its record and every span, in the order they finished.
#[derive(Debug, Clone)]
pub struct Trace {
    pub record: Arc<RequestRecord>,
    pub spans: Vec<Arc<SpanRecord>>,
}

/// What running a request produced: always a complete trace, and the
/// output or the error.
#[derive(Debug)]
pub struct Outcome {
    pub trace: Trace,
    pub result: Result<Value, ExecError>,
}
