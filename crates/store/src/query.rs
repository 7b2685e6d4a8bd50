//! The store interface and the queries it answers.

use glassbox_trace::{RequestId, RequestRecord, SpanRecord};
use serde::Serialize;

use crate::error::Result;
use crate::row::{RequestRow, SpanRow};

/// A persistent trace store. Both backends implement it and pass one shared
/// test suite. Methods take `&mut self`: a store is one connection, owned by
/// one thread (the writer, or a command reading).
pub trait TraceStore: Send {
    /// `sqlite` or `postgres`.
    fn kind(&self) -> &'static str;
    /// The schema version the database is at (after migrations).
    fn schema_version(&mut self) -> Result<u32>;
    /// Writes requests and spans in one transaction; rewriting a request id
    /// replaces it (writes are idempotent).
    fn write(&mut self, requests: &[RequestRow], spans: &[SpanRow]) -> Result<()>;
    /// One request and its spans (in the order they finished).
    fn get(&mut self, id: RequestId) -> Result<Option<StoredTrace>>;
    /// Request summaries matching `query`.
    fn list(&mut self, query: &ListQuery) -> Result<Vec<RequestSummary>>;
    /// Streams the report columns of every matching request.
    fn scan_requests(
        &mut self,
        filter: &Filter,
        each: &mut dyn FnMut(RequestFacts<'_>),
    ) -> Result<()>;
    /// Streams the report columns of every span of the matching requests.
    fn scan_spans(&mut self, filter: &Filter, each: &mut dyn FnMut(SpanFacts<'_>)) -> Result<()>;
    /// Numbers of stored requests and spans.
    fn counts(&mut self) -> Result<(u64, u64)>;
    /// Checks the database is whole (SQLite: `PRAGMA integrity_check`).
    fn integrity_check(&mut self) -> Result<()>;
}

/// A stored request with its spans.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredTrace {
    pub record: RequestRecord,
    pub spans: Vec<SpanRecord>,
}

/// Which requests: every field narrows the set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub topology: Option<String>,
    pub version: Option<String>,
    /// `ok`, `failed` or `cancelled`.
    pub status: Option<String>,
    /// Started at or after (microseconds since the epoch).
    pub since_us: Option<i64>,
    /// Started before.
    pub until_us: Option<i64>,
}

/// The statuses a request can end with, as stored and as filtered on.
pub const STATUSES: [&str; 3] = ["ok", "failed", "cancelled"];

/// A filter as people type it: the `--topology`, `--topology-version`,
/// `--status`, `--since` and `--until` flags of `glassbox trace` and
/// `glassbox report`, and the `topology`, `version`, `status`, `since` and
/// `until` query parameters of the server's `/v1/traces` and `/v1/reports`.
/// [`FilterInput::parse`] is the one place these become a [`Filter`], so
/// the command line and the API accept exactly the same things.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterInput {
    pub topology: Option<String>,
    pub version: Option<String>,
    /// One of [`STATUSES`].
    pub status: Option<String>,
    /// `2026-11-30`, `2026-11-30T12:00:00Z`, Unix seconds, or an age like
    /// `90m`, `24h`, `7d` ([`crate::time::parse_time`]).
    pub since: Option<String>,
    /// Same forms as `since`.
    pub until: Option<String>,
}

impl FilterInput {
    /// The filter these values ask for; ages count back from `now_us`. An
    /// empty topology, version or status means "not given"; a time or status
    /// that cannot be understood is an error naming the field.
    pub fn parse(&self, now_us: u64) -> std::result::Result<Filter, FilterError> {
        let given = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
        let time = |v: &Option<String>, field: &'static str| {
            v.as_deref()
                .map(|text| {
                    crate::time::parse_time(text, now_us).map_err(|message| FilterError::Time {
                        field,
                        value: text.to_string(),
                        message,
                    })
                })
                .transpose()
        };
        let status = match given(&self.status) {
            Some(s) if !STATUSES.contains(&s.as_str()) => {
                return Err(FilterError::Status { value: s });
            }
            s => s,
        };
        let since_us = time(&self.since, "since")?;
        let until_us = time(&self.until, "until")?;
        if let (Some(since), Some(until), Some(text)) = (since_us, until_us, &self.until)
            && until <= since
        {
            return Err(FilterError::Time {
                field: "until",
                value: text.clone(),
                message: format!(
                    "`{text}` is not after `since` ({}): no request can start in that window; give the earlier time as `since`",
                    self.since.as_deref().unwrap_or_default()
                ),
            });
        }
        Ok(Filter {
            topology: given(&self.topology),
            version: given(&self.version),
            status,
            since_us,
            until_us,
        })
    }
}

/// Why a typed filter or order was refused. Each front end words it for its
/// own syntax (a flag, a query parameter) from [`field`](Self::field) and
/// [`value`](Self::value); the message and [`hint`](Self::hint) are shared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// `since` or `until` is not a time.
    #[error("{message}")]
    Time {
        field: &'static str,
        value: String,
        message: String,
    },
    /// Not one of [`STATUSES`].
    #[error("`{value}` is not a status")]
    Status { value: String },
    /// Not an order [`Sort::parse`] knows.
    #[error("`{value}` is not an order")]
    Sort { value: String },
}

impl FilterError {
    /// The field at fault: `since`, `until`, `status` or `sort`.
    pub fn field(&self) -> &'static str {
        match self {
            Self::Time { field, .. } => field,
            Self::Status { .. } => "status",
            Self::Sort { .. } => "sort",
        }
    }

    /// The value given.
    pub fn value(&self) -> &str {
        match self {
            Self::Time { value, .. } | Self::Status { value } | Self::Sort { value } => value,
        }
    }

    /// What would be accepted, where a short list says it.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Self::Time { .. } => None,
            Self::Status { .. } => Some("use ok, failed or cancelled"),
            Self::Sort { .. } => Some("use recent, slowest or costliest"),
        }
    }
}

/// Order of `list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// Newest first.
    #[default]
    Recent,
    /// Longest duration first.
    Slowest,
    /// Highest cost first.
    Costliest,
}

impl Sort {
    /// `recent` (also when not given), `slowest` or `costliest`.
    pub fn parse(text: Option<&str>) -> std::result::Result<Sort, FilterError> {
        match text.unwrap_or("recent") {
            "recent" => Ok(Sort::Recent),
            "slowest" => Ok(Sort::Slowest),
            "costliest" => Ok(Sort::Costliest),
            other => Err(FilterError::Sort {
                value: other.to_string(),
            }),
        }
    }
}

/// `glassbox trace list`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListQuery {
    pub filter: Filter,
    pub sort: Sort,
    pub limit: u32,
}

impl Default for ListQuery {
    fn default() -> Self {
        ListQuery {
            filter: Filter::default(),
            sort: Sort::Recent,
            limit: 50,
        }
    }
}

/// One line of `glassbox trace list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestSummary {
    pub request_id: String,
    pub topology_id: String,
    pub version: String,
    pub started_at_us: i64,
    pub duration_us: i64,
    pub status: String,
    pub degraded: bool,
    pub error_code: Option<String>,
    pub cost: String,
    pub currency: String,
    pub path: String,
    pub span_count: i64,
}

/// What reports read of a request. Borrowed from the row being scanned, so
/// a report over millions of requests allocates per group, not per row.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestFacts<'a> {
    pub topology_id: &'a str,
    pub version: &'a str,
    pub model_key: &'a str,
    pub started_at_us: i64,
    pub duration_us: i64,
    pub status: &'a str,
    pub degraded: bool,
    pub timeouts: i64,
    pub cost: f64,
    pub path_key: &'a str,
    pub top_node: Option<&'a str>,
    /// Characters of the input summary (rows before schema 5 have only this).
    pub input_chars: i64,
    /// Characters of the whole input (schema 5 on).
    pub input_len: Option<i64>,
}

impl RequestFacts<'_> {
    /// The input's length in characters: the whole input's where the row
    /// has it, else (rows written before schema 5) its summary's.
    pub fn input_length(&self) -> i64 {
        self.input_len.unwrap_or(self.input_chars)
    }
}

/// What reports read of a span (borrowed, like [`RequestFacts`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SpanFacts<'a> {
    pub topology_id: &'a str,
    pub version: &'a str,
    pub model_key: &'a str,
    pub req_started_at_us: i64,
    pub node: &'a str,
    pub duration_us: i64,
    pub cost: f64,
    pub status: &'a str,
    /// The node kind, e.g. `output_guard`.
    pub kind: &'a str,
    /// The span's tags as stored (a JSON object).
    pub tags: &'a str,
    /// What this attempt's node added to the request's latency, on the
    /// attempt that ended its time on the critical path (else `None`).
    pub critical_us: Option<i64>,
    /// Characters of the request's whole input (schema 5 on).
    pub req_input_len: Option<i64>,
}

/// A bound SQL parameter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Param {
    Text(String),
    Int(i64),
}

/// Builds `WHERE ...` for a filter. `ph(n)` writes the n-th placeholder
/// (`?n` for SQLite, `$n` for PostgreSQL); `time` names the time column and
/// `prefix` qualifies the other columns (spans carry copies of them).
pub(crate) fn where_clause(
    filter: &Filter,
    ph: fn(usize) -> String,
    time: &str,
    with_status: bool,
) -> (String, Vec<Param>) {
    let mut parts = Vec::new();
    let mut params = Vec::new();
    let mut push = |sql: String, p: Param| {
        params.push(p);
        parts.push(sql.replace('#', &ph(params.len())));
    };
    if let Some(t) = &filter.topology {
        push("topology_id = #".into(), Param::Text(t.clone()));
    }
    if let Some(v) = &filter.version {
        push("version = #".into(), Param::Text(v.clone()));
    }
    if with_status && let Some(s) = &filter.status {
        push("status = #".into(), Param::Text(s.clone()));
    }
    if let Some(s) = filter.since_us {
        push(format!("{time} >= #"), Param::Int(s));
    }
    if let Some(u) = filter.until_us {
        push(format!("{time} < #"), Param::Int(u));
    }
    if parts.is_empty() {
        (String::new(), params)
    } else {
        (format!(" WHERE {}", parts.join(" AND ")), params)
    }
}

pub(crate) fn order_by(sort: Sort) -> &'static str {
    match sort {
        Sort::Recent => " ORDER BY started_at_us DESC",
        Sort::Slowest => " ORDER BY duration_us DESC",
        Sort::Costliest => " ORDER BY cost_f DESC",
    }
}

/// The columns `list` reads, in `RequestSummary` order.
pub(crate) const SUMMARY_COLUMNS: &str = "request_id, topology_id, version, started_at_us, \
     duration_us, status, degraded, error_code, cost, currency, path_key, span_count";

/// The columns `scan_requests` reads, in `RequestFacts` order.
pub(crate) const REQUEST_FACT_COLUMNS: &str = "topology_id, version, model_key, started_at_us, \
     duration_us, status, degraded, timeouts, cost_f, path_key, top_node, input_chars, input_len";

/// The columns `scan_spans` reads, in `SpanFacts` order.
pub(crate) const SPAN_FACT_COLUMNS: &str = "topology_id, version, model_key, req_started_at_us, node, duration_us, cost_f, status, \
     kind, tags, critical_us, req_input_len";

/// Every `requests` column, in `RequestRow` order.
pub(crate) const REQUEST_COLUMNS: &[&str] = &[
    "request_id",
    "topology_id",
    "version",
    "started_at_us",
    "ended_at_us",
    "duration_us",
    "status",
    "degraded",
    "error_code",
    "error",
    "path_key",
    "path",
    "labels",
    "models",
    "model_key",
    "input_summary",
    "output_summary",
    "input_chars",
    "cost",
    "cost_f",
    "currency",
    "top_node",
    "timeouts",
    "receipt",
    "explanation",
    "worker",
    "span_count",
    "input_len",
    "input_tokens",
];

/// Every `spans` column, in `SpanRow` order.
pub(crate) const SPAN_COLUMNS: &[&str] = &[
    "request_id",
    "seq",
    "topology_id",
    "version",
    "model_key",
    "req_started_at_us",
    "node",
    "kind",
    "attempt",
    "role",
    "role_ref",
    "started_at_us",
    "start_us",
    "end_us",
    "duration_us",
    "status",
    "error",
    "tags",
    "wall_us",
    "cpu_us",
    "input_tokens",
    "output_tokens",
    "cost",
    "cost_f",
    "worker",
    "input_summary",
    "output_summary",
    "critical_us",
    "req_input_len",
];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const NOW: u64 = 1_796_040_000_000_000;

    #[test]
    fn typed_filters_parse_once_for_every_front_end() {
        let input = FilterInput {
            topology: Some("rag-chat".into()),
            version: Some(String::new()),
            status: Some("failed".into()),
            since: Some("24h".into()),
            until: Some("2026-11-30T12:00:00Z".into()),
        };
        assert_eq!(
            input.parse(NOW).unwrap(),
            Filter {
                topology: Some("rag-chat".into()),
                version: None,
                status: Some("failed".into()),
                since_us: Some(1_795_953_600_000_000),
                until_us: Some(1_796_040_000_000_000),
            }
        );
        assert_eq!(
            FilterInput::default().parse(NOW).unwrap(),
            Filter::default()
        );
        let status = FilterInput {
            status: Some(String::new()),
            ..FilterInput::default()
        };
        assert_eq!(status.parse(NOW).unwrap().status, None);
    }

    #[test]
    fn refusals_name_the_field_and_the_value() {
        let bad_time = FilterInput {
            until: Some("yesterday".into()),
            ..FilterInput::default()
        };
        let e = bad_time.parse(NOW).unwrap_err();
        assert_eq!(
            (e.field(), e.value(), e.hint()),
            ("until", "yesterday", None)
        );
        assert!(
            e.to_string().starts_with("`yesterday` is not a time"),
            "{e}"
        );
        let bad_status = FilterInput {
            status: Some("done".into()),
            ..FilterInput::default()
        };
        let e = bad_status.parse(NOW).unwrap_err();
        assert_eq!(e.to_string(), "`done` is not a status");
        assert_eq!(e.hint(), Some("use ok, failed or cancelled"));
        assert_eq!(Sort::parse(None).unwrap(), Sort::Recent);
        assert_eq!(Sort::parse(Some("slowest")).unwrap(), Sort::Slowest);
        assert_eq!(Sort::parse(Some("costliest")).unwrap(), Sort::Costliest);
        let e = Sort::parse(Some("fastest")).unwrap_err();
        assert_eq!((e.field(), e.value()), ("sort", "fastest"));
        // A window that ends where or before it starts matches nothing.
        for (since, until) in [("2026-12-01", "2026-11-01"), ("2h", "2h")] {
            let empty = FilterInput {
                since: Some(since.into()),
                until: Some(until.into()),
                ..FilterInput::default()
            };
            let e = empty.parse(NOW).unwrap_err();
            assert_eq!((e.field(), e.value()), ("until", until));
            assert!(e.to_string().contains("is not after `since`"), "{e}");
        }
        let window = FilterInput {
            since: Some("2h".into()),
            until: Some("1h".into()),
            ..FilterInput::default()
        };
        assert!(window.parse(NOW).is_ok());
    }
}
