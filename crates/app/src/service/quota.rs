//! Quotas, in one place for every door: a request's work is taken from its
//! key's token buckets ([`limiter`](super::limiter)) when its door states
//! the cost (the server's `Admission::charge`,
//! before it runs), and its real tokens are settled against that estimate
//! once it ends, whether it ran to its end, failed, or was streamed to a
//! client that went away. A request whose real cost exceeded its estimate
//! puts the key's bucket into debt, delaying its next requests.
//!
//! The guard in front of every route has already taken one unit of work
//! (one run) from the key; a charge takes the rest.

use std::sync::Arc;

use super::error::ServiceError;
use super::limiter::{Caller, RateLimiter, Work};
use super::usage::TokenUsage;

/// What a request costs, as its door estimates it before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    /// All of it, the unit the guard took included.
    pub work: Work,
    /// Which of its tokens settle the estimate once they are known.
    pub counted: Counted,
}

/// The tokens a request is finally charged for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Prompt and generated tokens of its model calls (runs, chats).
    Generated,
    /// Tokens its embedding nodes embedded (`/v1/embeddings`).
    Embedded,
}

impl Counted {
    fn of(self, usage: &TokenUsage) -> u64 {
        match self {
            Counted::Generated => usage.generated_total(),
            Counted::Embedded => usage.embedded,
        }
    }
}

/// A charge against one caller's buckets, settled once.
#[derive(Debug)]
pub struct Charge {
    limiter: Arc<RateLimiter>,
    caller: Caller,
    /// Tokens taken up front, to be set against the real ones.
    estimate: u64,
    counted: Counted,
}

impl Charge {
    /// No tokens taken yet: the request's tokens are counted once it ends
    /// (a run, whose tokens are known only afterwards).
    pub fn nothing_yet(limiter: Arc<RateLimiter>, caller: &Caller) -> Charge {
        Charge {
            limiter,
            caller: caller.clone(),
            estimate: 0,
            counted: Counted::Generated,
        }
    }

    /// Takes the rest of `cost` (the guard took one unit), or says which
    /// limit refused it; the tokens are then settled against the estimate.
    pub fn take(&mut self, cost: Cost) -> Result<(), ServiceError> {
        let more = Work {
            units: cost.work.units.saturating_sub(Work::ONE.units),
            tokens: cost.work.tokens,
        };
        if more.units > 0 || more.tokens > 0 {
            self.limiter.charge(&self.caller, more, cost.work)?;
        }
        self.estimate = cost.work.tokens;
        self.counted = cost.counted;
        Ok(())
    }

    /// Sets the request's real tokens against what was taken.
    pub fn settle(self, usage: &TokenUsage) {
        let used = self.counted.of(usage);
        self.limiter
            .settle(&self.caller, used.saturating_sub(self.estimate));
    }
}
