//! The two phases of a generation step, which the roofline, the fitted
//! factors and the engines' overheads all tell apart.

use serde::{Deserialize, Serialize};

/// Prefill (prompt processing, compute-bound) or decode (one token per
/// sequence per step, bandwidth-bound at small batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Prefill,
    Decode,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prefill => "prefill",
            Self::Decode => "decode",
        }
    }
}
