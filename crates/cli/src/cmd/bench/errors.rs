//! Exit codes for the bench commands' errors: a bad option is a usage
//! error (2); a library [`BenchError`] is bad input (78), an unreachable
//! server (69) or a failure while measuring (1).

use glassbox_bench::BenchError;

use crate::exit::{self, Coded};

/// A bad option: a usage error (exit 2).
pub fn usage(message: String) -> anyhow::Error {
    anyhow::Error::new(Coded {
        code: exit::USAGE,
        message,
    })
}

/// A benchmark's error with its exit code: bad input 78, a server that
/// cannot be reached 69, a failure while measuring 1.
pub fn bench_error(err: BenchError) -> anyhow::Error {
    match err {
        BenchError::Invalid(message) => Coded::invalid(message),
        BenchError::Unavailable(message) => anyhow::Error::new(Coded {
            code: exit::UNAVAILABLE,
            message,
        }),
        other => anyhow::Error::new(other),
    }
}
