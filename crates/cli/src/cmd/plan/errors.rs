//! How planner failures become exit codes.

use glassbox_planner::PlannerError;

use crate::exit::{self, Coded};

/// Planner errors are problems with the input: exit 78 with the message.
pub(super) fn invalid(e: PlannerError) -> anyhow::Error {
    Coded::invalid(e.to_string())
}

pub(super) fn usage(message: &str) -> anyhow::Error {
    anyhow::Error::new(Coded {
        code: exit::USAGE,
        message: message.to_string(),
    })
}
