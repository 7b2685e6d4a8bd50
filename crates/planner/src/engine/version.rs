//! Engine versions as `--engine vllm@0.5` gives them.

use crate::error::PlannerError;

/// An engine version, `major.minor[.patch]` (a leading `v` allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(u32, u32, u32);

impl Version {
    pub const fn new(major: u32, minor: u32) -> Self {
        Self(major, minor, 0)
    }

    /// Parses `v`, naming the whole engine text `given` in the error.
    pub(super) fn parse(v: &str, given: &str) -> Result<Self, PlannerError> {
        let bad = || {
            PlannerError::invalid(
                "engine version",
                format!(
                    "`{given}`: the version must be numbers like `0.5` or `0.5.3` after `@` \
                     (hint: `--engine vllm@0.5`)"
                ),
            )
        };
        let v = v.strip_prefix('v').unwrap_or(v);
        let parts: Vec<&str> = v.split('.').collect();
        if parts.is_empty() || parts.len() > 3 {
            return Err(bad());
        }
        let mut n = [0u32; 3];
        for (slot, p) in n.iter_mut().zip(&parts) {
            *slot = p.parse().map_err(|_| bad())?;
        }
        Ok(Self(n[0], n[1], n[2]))
    }
}

/// A llama.cpp build number as its releases name them, `b6327` (or `6327`),
/// naming the whole engine text `given` in the error.
pub(super) fn parse_build(v: &str, given: &str) -> Result<u32, PlannerError> {
    v.strip_prefix('b').unwrap_or(v).parse().map_err(|_| {
        PlannerError::invalid(
            "engine version",
            format!(
                "`{given}`: a llama.cpp version is its build number, like `b6327` \
                 (hint: `--engine llama.cpp@b2800` for a build of May 2024)"
            ),
        )
    })
}
