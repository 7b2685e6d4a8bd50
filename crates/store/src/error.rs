//! The store's one error type, with stable machine codes.

/// Everything that can go wrong opening, writing or reading a trace store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The `--store` / `GLASSBOX_STORE` URL could not be understood.
    #[error("invalid store url `{url}`: {reason}")]
    BadUrl { url: String, reason: String },
    /// The store could not be opened or connected to.
    #[error("cannot open trace store `{url}`: {message}")]
    Open { url: String, message: String },
    /// The database was written by a newer Glassbox.
    #[error(
        "trace store schema version {found} is newer than this build knows ({known}) (hint: upgrade glassbox)"
    )]
    SchemaTooNew { found: u32, known: u32 },
    /// A SQLite call failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A PostgreSQL call failed.
    #[error("postgres: {}", pg_message(.0))]
    Postgres(#[from] postgres::Error),
    /// A stored column could not be decoded.
    #[error("corrupt stored value in `{field}`: {message}")]
    Decode {
        field: &'static str,
        message: String,
    },
    /// A redaction rule is not a valid regular expression.
    #[error("invalid redaction pattern `{pattern}`: {message}")]
    BadPattern { pattern: String, message: String },
    /// A redaction rule's name, or a built-in detector named to disable, is
    /// not usable.
    #[error("invalid redaction rule {rule}: {message}")]
    BadRedactRule { rule: String, message: String },
    /// The store's integrity check reported problems.
    #[error("integrity check failed: {0}")]
    Integrity(String),
    /// The writer thread is gone (it panicked or was closed).
    #[error("the trace writer has stopped")]
    WriterClosed,
    /// A request whose commit was awaited ended without its record reaching
    /// the writer.
    #[error("request `{request}` ended without sending its trace to the writer")]
    NotRecorded { request: glassbox_trace::RequestId },
    /// Some records could not be written; they are counted, not dropped silently.
    #[error("{failed} record(s) could not be written; last error: {last}")]
    WriteFailed { failed: u64, last: String },
    /// Exporting over OTLP failed.
    #[error("otlp export to `{endpoint}` failed: {message}")]
    Export { endpoint: String, message: String },
    /// Local file system trouble (creating the data directory, ...).
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    /// A stable identifier for metrics labels and JSON errors.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::BadUrl { .. } => "store_bad_url",
            StoreError::Open { .. } => "store_open",
            StoreError::SchemaTooNew { .. } => "store_schema_too_new",
            StoreError::Sqlite(_) => "store_sqlite",
            StoreError::Postgres(_) => "store_postgres",
            StoreError::Decode { .. } => "store_decode",
            StoreError::BadPattern { .. } => "store_bad_pattern",
            StoreError::BadRedactRule { .. } => "store_bad_redact_rule",
            StoreError::Integrity(_) => "store_integrity",
            StoreError::WriterClosed => "store_writer_closed",
            StoreError::NotRecorded { .. } => "store_not_recorded",
            StoreError::WriteFailed { .. } => "store_write_failed",
            StoreError::Export { .. } => "store_export",
            StoreError::Io { .. } => "store_io",
        }
    }

    pub(crate) fn decode(field: &'static str, err: impl std::fmt::Display) -> StoreError {
        StoreError::Decode {
            field,
            message: err.to_string(),
        }
    }
}

/// The server's own message when there is one ("db error" alone says nothing).
fn pg_message(err: &postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => match db.hint() {
            Some(hint) => format!("{} (hint: {hint})", db.message()),
            None => db.message().to_string(),
        },
        None => err.to_string(),
    }
}

/// Shorthand for store results.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
