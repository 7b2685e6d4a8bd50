//! The bounds one topology file must stay within, and the diagnostics for
//! input that is empty or nested past them.

use crate::diagnostic::{Code, Diagnostic};
use crate::source::Span;

/// Limits on what one topology file may contain.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_bytes: usize,
    pub max_depth: usize,
    /// Values in the tree, counting each alias expansion in full.
    pub max_values: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 16 << 20,
            max_depth: 64,
            max_values: 1_000_000,
        }
    }
}

pub(super) fn empty() -> Diagnostic {
    Diagnostic::error(Code::Empty, None, "file is empty")
        .hint("a topology needs at least `topology_id`, `version` and `nodes`")
}

pub(super) fn too_deep(span: Span, limits: Limits) -> Diagnostic {
    Diagnostic::error(
        Code::TooDeep,
        span,
        format!("nesting is deeper than the limit of {}", limits.max_depth),
    )
    .hint("topologies are shallow; this looks like generated or corrupted input")
}
