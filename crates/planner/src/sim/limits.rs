//! The engine's scheduling limits per replica, and their defaults.

use serde::Serialize;

use crate::error::PlannerError;

/// Tokens per KV-cache block (vLLM's default page size).
pub const BLOCK_TOKENS: u32 = 16;
/// Running sequences per replica when not given.
pub const MAX_RUNNING: u32 = 256;
/// Tokens one step may compute when not given.
pub const MAX_BATCHED_TOKENS: u32 = 2048;
/// The engine's scheduling limits, per replica.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Limits {
    pub max_running: u32,
    pub max_batched_tokens: u32,
    pub kv_blocks: u64,
    pub block_tokens: u32,
}

impl Limits {
    /// Limits for a KV cache of `kv_tokens` tokens, with the defaults.
    pub fn with_kv_tokens(kv_tokens: u64) -> Self {
        Self {
            max_running: MAX_RUNNING,
            max_batched_tokens: MAX_BATCHED_TOKENS,
            kv_blocks: kv_tokens / u64::from(BLOCK_TOKENS),
            block_tokens: BLOCK_TOKENS,
        }
    }

    pub fn validate(&self) -> Result<(), PlannerError> {
        if self.max_running == 0 || self.max_batched_tokens == 0 || self.block_tokens == 0 {
            return Err(PlannerError::invalid(
                "engine limits",
                format!(
                    "max running sequences, max batched tokens and block size must be at least 1, got {self:?}"
                ),
            ));
        }
        if self.kv_blocks == 0 {
            return Err(PlannerError::DoesNotFit {
                message: "no KV-cache blocks are left after the weights; use more GPUs per replica (--tp), a smaller format or less headroom".into(),
            });
        }
        Ok(())
    }
}
