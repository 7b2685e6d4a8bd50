//! # glassbox-store
//!
//! Where traces live after a request ends: a [`TraceStore`] trait with two
//! backends, [`SqliteStore`] (the default: one file under the user's data
//! directory, WAL mode, zero set-up) and [`PostgresStore`] (several servers
//! sharing traces), a [`StoreWriter`] that takes records off the request path,
//! [`report`]s over millions of requests, and [`otlp`] export.
//!
//! Main entry points:
//! - [`open`]`(url)` → a [`StoreWriter`]: a [`glassbox_trace::TraceSink`] to
//!   hand to the engine; call [`StoreWriter::flush`] / [`StoreWriter::close`]
//!   at the end (drop also closes).
//! - [`StoreWriter::durable`]`(id)` before a request runs → a [`Durable`]
//!   ticket that completes once the transaction holding that request has
//!   committed; tickets share commits (group commit). `glassbox serve`
//!   answers only after its ticket.
//! - [`open_store`]`(url)` → a `Box<dyn TraceStore>` for reading (`trace
//!   list/show`, `explain`, `report`).
//! - [`drift::evaluate`]: drift alerts (route shifts, P99 regressions,
//!   cost jumps) of the last window against a baseline, with the evidence.
//! - [`StoreUrl::resolve`]: `--store URL`, else `GLASSBOX_STORE`, else
//!   `$XDG_DATA_HOME/glassbox/traces.db` (`~/.local/share/glassbox/traces.db`).
//!
//! Why this shape:
//! - One writer thread owns the connection and commits in batches: the
//!   engine only pushes onto a bounded queue, so a slow disk shows up as
//!   back-pressure, never as a slower request path or a silent drop.
//! - A request and its spans commit together, so a crash never leaves half a
//!   request, and every request reported committed survives SIGKILL.
//! - The schema is plain SQL migrations in `migrations/{sqlite,postgres}`,
//!   recorded in a `schema_version` table; both backends share row structs
//!   ([`row`]) and one report aggregator, so they answer identically.
//! - Test helpers (`synth`: synthetic requests; `pg_temp`: a throwaway
//!   PostgreSQL server) exist only with the `test-support` feature, which
//!   dev-dependencies enable; the `glassbox` binary is built without them.
//! - Summaries are redacted (keys and tokens, payment cards, national ids,
//!   IBANs, e-mail addresses, phone numbers, plus configured rules; checksums
//!   weed out look-alikes) and truncated before they reach the disk.

pub mod compare;
pub mod drift;
pub mod error;
pub mod otlp;
#[cfg(any(test, feature = "test-support"))]
pub mod pg_temp;
pub mod postgres;
pub mod query;
pub mod redact;
pub mod report;
pub mod row;
pub mod sqlite;
pub mod stats;
#[cfg(any(test, feature = "test-support"))]
pub mod synth;
pub mod time;
pub mod writer;

use std::path::PathBuf;

pub use error::{Result, StoreError};
pub use postgres::PostgresStore;
pub use query::{
    Filter, FilterError, FilterInput, ListQuery, RequestFacts, RequestSummary, STATUSES, Sort,
    SpanFacts, StoredTrace, TraceStore,
};
pub use redact::{RedactOptions, RedactRule, Redactor};
pub use report::{GroupBy, Report, ReportOptions};
pub use sqlite::SqliteStore;
pub use writer::{Durable, Encoded, StoreWriter, WriterOptions, WriterStats};

/// The environment variable naming the store when `--store` is not given.
pub const STORE_ENV: &str = "GLASSBOX_STORE";

/// Where traces are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    Sqlite(PathBuf),
    /// A `postgres://` or `postgresql://` connection URL.
    Postgres(String),
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreUrl::Sqlite(p) => write!(f, "sqlite://{}", p.display()),
            StoreUrl::Postgres(u) => f.write_str(&postgres::redact_password(u)),
        }
    }
}

impl StoreUrl {
    /// Parses `sqlite:///abs/path`, `sqlite://rel/path`, `sqlite:path`,
    /// `postgres://...`, `postgresql://...`, or a bare file path.
    pub fn parse(url: &str) -> Result<StoreUrl> {
        let bad = |reason: &str| StoreError::BadUrl {
            url: postgres::redact_password(url),
            reason: reason.to_string(),
        };
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(StoreUrl::Postgres(url.to_string()));
        }
        let path = if let Some(rest) = url.strip_prefix("sqlite://") {
            rest
        } else if let Some(rest) = url.strip_prefix("sqlite:") {
            rest
        } else if url.contains("://") {
            return Err(bad(
                "unknown scheme (expected `sqlite:///path` or `postgres://...`)",
            ));
        } else {
            url
        };
        if path.is_empty() {
            return Err(bad("no file path (expected `sqlite:///path/to/traces.db`)"));
        }
        Ok(StoreUrl::Sqlite(PathBuf::from(path)))
    }

    /// `--store` if given, else `$GLASSBOX_STORE`, else the default file.
    pub fn resolve(arg: Option<&str>) -> Result<StoreUrl> {
        if let Some(a) = arg.filter(|a| !a.is_empty()) {
            return StoreUrl::parse(a);
        }
        if let Ok(env) = std::env::var(STORE_ENV)
            && !env.is_empty()
        {
            return StoreUrl::parse(&env);
        }
        Ok(StoreUrl::Sqlite(default_sqlite_path()?))
    }
}

/// `$XDG_DATA_HOME/glassbox/traces.db`, else `$HOME/.local/share/glassbox/traces.db`.
pub fn default_sqlite_path() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".local").join("share"),
            None => {
                return Err(StoreError::BadUrl {
                    url: String::new(),
                    reason: "neither XDG_DATA_HOME nor HOME is set (hint: pass `--store sqlite:///path/traces.db`)".into(),
                });
            }
        },
    };
    Ok(base.join("glassbox").join("traces.db"))
}

/// Opens the store for reading or direct writes.
pub fn open_store(url: &StoreUrl) -> Result<Box<dyn TraceStore>> {
    Ok(match url {
        StoreUrl::Sqlite(path) => Box::new(SqliteStore::open(path)?),
        StoreUrl::Postgres(u) => Box::new(PostgresStore::connect(u)?),
    })
}

/// Opens the store named by `url` (or `GLASSBOX_STORE`, or the default file)
/// and starts its writer with default options: the sink for `glassbox run`.
pub fn open(url: Option<&str>) -> Result<StoreWriter> {
    open_with(&StoreUrl::resolve(url)?, WriterOptions::default())
}

/// [`open`] with explicit options.
pub fn open_with(url: &StoreUrl, options: WriterOptions) -> Result<StoreWriter> {
    let store: Box<dyn TraceStore> = match url {
        StoreUrl::Sqlite(path) => Box::new(SqliteStore::open(path)?.with_background_checkpoints()?),
        StoreUrl::Postgres(_) => open_store(url)?,
    };
    StoreWriter::spawn(store, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        assert_eq!(
            StoreUrl::parse("sqlite:///tmp/t.db").unwrap(),
            StoreUrl::Sqlite("/tmp/t.db".into())
        );
        assert_eq!(
            StoreUrl::parse("sqlite:t.db").unwrap(),
            StoreUrl::Sqlite("t.db".into())
        );
        assert_eq!(
            StoreUrl::parse("./x/traces.db").unwrap(),
            StoreUrl::Sqlite("./x/traces.db".into())
        );
        assert!(matches!(
            StoreUrl::parse("postgresql://u@h/db").unwrap(),
            StoreUrl::Postgres(_)
        ));
        assert_eq!(
            StoreUrl::parse("mysql://x").unwrap_err().code(),
            "store_bad_url"
        );
        assert_eq!(
            StoreUrl::parse("postgres://u:pw@h/db").unwrap().to_string(),
            "postgres://u:***@h/db"
        );
    }
}
