//! What can go wrong in a benchmark, as the binary needs to tell it apart:
//! bad input (a file, an option's value, a model that does not load), a
//! server that cannot be reached, and a failure while measuring.

/// A benchmark's error. `code()` is stable, for scripts and logs.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Bad input: an inputs file, an option's value, a model file, a
    /// server's refusal of the benchmark's requests.
    #[error("{0}")]
    Invalid(String),
    /// The server (or endpoint) under test cannot be reached.
    #[error("{0}")]
    Unavailable(String),
    /// The local model failed while measuring.
    #[error(transparent)]
    Model(#[from] glassbox_models::LlmError),
    /// Reading a streamed answer failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl BenchError {
    /// A stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            BenchError::Invalid(_) => "bench_invalid",
            BenchError::Unavailable(_) => "bench_unavailable",
            BenchError::Model(_) => "bench_model",
            BenchError::Io(_) => "bench_io",
        }
    }
}
