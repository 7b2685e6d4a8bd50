//! Documented exit codes (see `glassbox --help` and README.md).

/// Success.
pub const OK: u8 = 0;
/// A run failed (the pipeline returned an error).
pub const FAILED: u8 = 1;
/// The command line was wrong.
pub const USAGE: u8 = 2;
/// A service or download that the command needs could not be reached.
pub const UNAVAILABLE: u8 = 69;
/// Invalid configuration or input (sysexits `EX_CONFIG`).
pub const INVALID: u8 = 78;

/// An error that carries its own exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Coded {
    pub code: u8,
    pub message: String,
}

impl Coded {
    pub fn invalid(message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(Coded {
            code: INVALID,
            message: message.into(),
        })
    }
}

/// The exit code for an error: its own if it carries one, else `FAILED`.
pub fn code_for(err: &anyhow::Error) -> u8 {
    err.chain()
        .find_map(|e| e.downcast_ref::<Coded>().map(|c| c.code))
        .unwrap_or(FAILED)
}
