//! Scenario profiles (seed 001): what one unit of user work is.
//!
//! - **chat**: one request per task; the SLA is on TTFT, TPOT and E2E.
//! - **agent**: a task is a loop of calls (iterations drawn with a mean and
//!   capped); each call is sent when the previous one has finished (plus
//!   tool time) and its prompt carries the previous turns, so context grows.
//!   The E2E target applies to the whole task.
//! - **coding**: chat whose prompts share a cached prefix: the prefix-cache
//!   hit rate is the fraction of prompt tokens not computed again (they still
//!   occupy KV).
//! - **async** (long video, batch jobs): no one waits for a first token; a
//!   task must finish within a deadline after it arrives, queueing included.

use crate::error::PlannerError;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Profile {
    Chat,
    Agent {
        /// Mean calls per task (geometric), at least 1.
        mean_iterations: f64,
        /// Most calls per task.
        cap: u32,
        /// Tool time between calls, seconds.
        tool_s: f64,
        /// Tokens a tool result adds to the next prompt.
        tool_tokens: u64,
    },
    Coding {
        /// Fraction of prompt tokens served from the prefix cache, 0..1.
        prefix_hit: f64,
    },
    Async {
        /// A task must finish within this many seconds of arriving.
        deadline_s: f64,
    },
}

impl Profile {
    pub fn name(&self) -> &'static str {
        match self {
            Profile::Chat => "chat",
            Profile::Agent { .. } => "agent",
            Profile::Coding { .. } => "coding",
            Profile::Async { .. } => "async",
        }
    }

    pub fn validate(&self) -> Result<(), PlannerError> {
        match *self {
            Profile::Chat => Ok(()),
            Profile::Agent {
                mean_iterations,
                cap,
                tool_s,
                ..
            } => {
                if !(mean_iterations.is_finite() && mean_iterations >= 1.0) {
                    return Err(PlannerError::invalid(
                        "agent iterations",
                        format!("mean must be at least 1, got {mean_iterations}"),
                    ));
                }
                if cap == 0 {
                    return Err(PlannerError::invalid(
                        "agent iteration cap",
                        "must be at least 1",
                    ));
                }
                if !(tool_s.is_finite() && tool_s >= 0.0) {
                    return Err(PlannerError::invalid(
                        "agent tool time",
                        format!("must be 0 or more seconds, got {tool_s}"),
                    ));
                }
                Ok(())
            }
            Profile::Coding { prefix_hit } => {
                if (0.0..1.0).contains(&prefix_hit) {
                    Ok(())
                } else {
                    Err(PlannerError::invalid(
                        "prefix-cache hit rate",
                        format!("must be in [0, 1), got {prefix_hit}"),
                    ))
                }
            }
            Profile::Async { deadline_s } => {
                if deadline_s.is_finite() && deadline_s > 0.0 {
                    Ok(())
                } else {
                    Err(PlannerError::invalid(
                        "deadline",
                        format!("must be above 0 seconds, got {deadline_s}"),
                    ))
                }
            }
        }
    }

    /// Calls in one task: 1 + geometric with the profile's mean, capped.
    pub fn iterations(&self, rng: &mut fastrand::Rng) -> u32 {
        match *self {
            Profile::Agent {
                mean_iterations,
                cap,
                ..
            } if mean_iterations > 1.0 => {
                // P(k) = p (1 − p)^(k−1), mean 1/p.
                let p = 1.0 / mean_iterations;
                let u = 1.0 - rng.f64();
                let k = (u.ln() / (1.0 - p).ln()).ceil().max(1.0);
                (k.min(f64::from(cap))) as u32
            }
            _ => 1,
        }
    }

    /// Prompt tokens of call `i` (0-based) of a task whose first prompt has
    /// `prompt` tokens and whose calls generate `output` tokens each.
    pub fn prompt_of_call(&self, prompt: u64, output: u64, i: u32) -> u64 {
        match *self {
            Profile::Agent { tool_tokens, .. } => prompt + u64::from(i) * (output + tool_tokens),
            _ => prompt,
        }
    }

    /// Prompt tokens served from the prefix cache.
    pub fn cached_tokens(&self, prompt: u64) -> u64 {
        match *self {
            Profile::Coding { prefix_hit } => {
                ((prompt as f64 * prefix_hit).floor() as u64).min(prompt.saturating_sub(1))
            }
            _ => 0,
        }
    }

    /// Seconds between a call finishing and the task's next call.
    pub fn gap_s(&self) -> f64 {
        match *self {
            Profile::Agent { tool_s, .. } => tool_s,
            _ => 0.0,
        }
    }

    /// Whether TTFT matters (not for async work).
    pub fn has_ttft(&self) -> bool {
        !matches!(self, Profile::Async { .. })
    }

    pub fn deadline_s(&self) -> Option<f64> {
        match *self {
            Profile::Async { deadline_s } => Some(deadline_s),
            _ => None,
        }
    }
}
