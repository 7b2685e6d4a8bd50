//! The trace store as commands reach it: the `--store` option, opening
//! the store with exit-coded errors, the filter flags (parsed by
//! `glassbox_store::FilterInput`, as the server's are), loading one trace
//! by id, and how times read in tables. Shared by `trace`, `explain`,
//! `report`, `alerts`, `plan`, `test` and `worker`.

use std::str::FromStr;

use glassbox_store::report::day_key;
use glassbox_store::{
    Filter, FilterError, FilterInput, StoreError, StoreUrl, StoredTrace, TraceStore,
};
use glassbox_trace::RequestId;

use crate::exit::{self, Coded};

/// `--store`, shared by every command that reads or writes traces.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArg {
    /// Trace store: `sqlite:///path/traces.db` or `postgres://user@host/db`
    /// [default: $XDG_DATA_HOME/glassbox/traces.db].
    #[arg(long, env = "GLASSBOX_STORE", value_name = "URL")]
    pub store: Option<String>,
}

impl StoreArg {
    /// Opens the store; a bad URL is exit 78, an unreachable store exit 69.
    pub fn open(&self) -> anyhow::Result<Box<dyn TraceStore>> {
        let url = StoreUrl::resolve(self.store.as_deref()).map_err(store_error)?;
        glassbox_store::open_store(&url).map_err(store_error)
    }
}

/// Maps store errors onto documented exit codes.
pub fn store_error(err: StoreError) -> anyhow::Error {
    let code = match &err {
        StoreError::BadUrl { .. }
        | StoreError::BadPattern { .. }
        | StoreError::BadRedactRule { .. } => exit::INVALID,
        StoreError::Open { .. } | StoreError::Export { .. } => exit::UNAVAILABLE,
        _ => exit::FAILED,
    };
    anyhow::Error::new(Coded {
        code,
        message: format!("{err} [{}]", err.code()),
    })
}

/// Filters shared by `trace list`, `trace export` and `report`.
#[derive(Debug, Clone, clap::Args)]
pub struct FilterArgs {
    /// Only this topology id.
    #[arg(long)]
    pub topology: Option<String>,
    /// Only this topology version.
    #[arg(long, value_name = "VERSION")]
    pub topology_version: Option<String>,
    /// Requests that started at or after TIME: `2026-11-30`,
    /// `2026-11-30T12:00:00Z`, Unix seconds, or an age like `90m`, `24h`, `7d`.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Requests that started before TIME (same forms as `--since`).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
}

impl FilterArgs {
    /// The store's filter (the parse the server's `/v1/traces` shares); a
    /// value it cannot understand is exit 78, worded for the flag.
    pub fn filter(&self, status: Option<String>) -> anyhow::Result<Filter> {
        FilterInput {
            topology: self.topology.clone(),
            version: self.topology_version.clone(),
            status,
            since: self.since.clone(),
            until: self.until.clone(),
        }
        .parse(glassbox_trace::unix_micros_now())
        .map_err(|e: FilterError| Coded::invalid(format!("`--{} {}`: {e}", e.field(), e.value())))
    }
}

/// `2026-11-30 12:00:03.120` (UTC).
pub fn format_time(us: i64) -> String {
    let day = day_key(us);
    let in_day = us.rem_euclid(86_400_000_000);
    let (h, m) = (in_day / 3_600_000_000, in_day / 60_000_000 % 60);
    let s = in_day / 1_000_000 % 60;
    let ms = in_day / 1000 % 1000;
    format!("{day} {h:02}:{m:02}:{s:02}.{ms:03}")
}

pub fn ms(us: i64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

/// Parses an id or fails with exit 78.
pub fn request_id(text: &str) -> anyhow::Result<RequestId> {
    RequestId::from_str(text).map_err(|e| Coded::invalid(format!("`{text}`: {e}")))
}

/// Loads one trace or fails with exit 78 naming the id.
pub fn load_trace(store: &mut dyn TraceStore, id: &str) -> anyhow::Result<StoredTrace> {
    let rid = request_id(id)?;
    store.get(rid).map_err(store_error)?.ok_or_else(|| {
        Coded::invalid(format!(
            "no request `{id}` in the trace store (hint: `glassbox trace list` shows what is stored)"
        ))
    })
}
