//! The PostgreSQL store, for several servers sharing their traces.
//!
//! A batch is written with one `INSERT ... SELECT FROM UNNEST(arrays)` per
//! table: one round trip per batch whatever its size, which is what lets a
//! remote database keep up with the writer.

use std::collections::HashSet;

use glassbox_trace::RequestId;
use postgres::types::ToSql;
use postgres::{Client, NoTls};
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::query::{
    Filter, ListQuery, Param, REQUEST_COLUMNS, REQUEST_FACT_COLUMNS, RequestFacts, RequestSummary,
    SPAN_COLUMNS, SPAN_FACT_COLUMNS, SUMMARY_COLUMNS, SpanFacts, StoredTrace, TraceStore, order_by,
    where_clause,
};
use crate::row::{Packed, RequestRow, SpanRow, decode_request, decode_span};

const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../migrations/postgres/001_init.sql")),
    (
        2,
        include_str!("../migrations/postgres/002_report_index.sql"),
    ),
    (
        3,
        include_str!("../migrations/postgres/003_drop_redundant_index.sql"),
    ),
    (
        4,
        include_str!("../migrations/postgres/004_compact_rows.sql"),
    ),
    (
        5,
        include_str!("../migrations/postgres/005_input_length_critical_path.sql"),
    ),
];

/// Array types of `REQUEST_COLUMNS`, in order.
const REQUEST_TYPES: &[&str] = &[
    "uuid", "text", "text", "int8", "int8", "int8", "text", "bool", "text", "text", "text",
    "bytea", "text", "text", "text", "text", "text", "int8", "text", "float8", "text", "text",
    "int8", "bytea", "bytea", "text", "int8", "int8", "int8",
];

/// Array types of `SPAN_COLUMNS`, in order.
const SPAN_TYPES: &[&str] = &[
    "uuid", "int8", "text", "text", "text", "int8", "text", "text", "int8", "text", "text", "int8",
    "int8", "int8", "int8", "text", "text", "text", "int8", "int8", "int8", "int8", "text",
    "float8", "text", "text", "text", "int8", "int8",
];

/// A trace store in a PostgreSQL database.
pub struct PostgresStore {
    client: Client,
    insert_request: String,
    insert_span: String,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

fn ph(n: usize) -> String {
    format!("${n}")
}

fn upsert_sql(table: &str, columns: &[&str], types: &[&str], key: &str) -> String {
    let arrays: Vec<String> = types
        .iter()
        .enumerate()
        .map(|(i, t)| format!("${}::{t}[]", i + 1))
        .collect();
    let updates: Vec<String> = columns
        .iter()
        .map(|c| format!("{c} = EXCLUDED.{c}"))
        .collect();
    format!(
        "INSERT INTO {table} ({}) SELECT * FROM UNNEST({}) ON CONFLICT ({key}) DO UPDATE SET {}",
        columns.join(", "),
        arrays.join(", "),
        updates.join(", ")
    )
}

fn bind(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| match p {
            Param::Text(s) => s as &(dyn ToSql + Sync),
            Param::Int(i) => i as &(dyn ToSql + Sync),
        })
        .collect()
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user@host:port/db`) and migrates.
    pub fn connect(url: &str) -> Result<PostgresStore> {
        let client = Client::connect(url, NoTls).map_err(|e| StoreError::Open {
            url: redact_password(url),
            message: format!(
                "{e}{} (hint: is the server running and the database created?)",
                std::error::Error::source(&e)
                    .map(|s| format!(": {s}"))
                    .unwrap_or_default()
            ),
        })?;
        let mut store = PostgresStore {
            client,
            insert_request: upsert_sql("requests", REQUEST_COLUMNS, REQUEST_TYPES, "request_id"),
            insert_span: upsert_sql("spans", SPAN_COLUMNS, SPAN_TYPES, "request_id, seq"),
        };
        store.migrate()?;
        Ok(store)
    }

    fn migrate(&mut self) -> Result<()> {
        let mut tx = self.client.transaction()?;
        // Serialise concurrent migrations from several servers.
        tx.execute("SELECT pg_advisory_xact_lock(7138420051)", &[])?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_version (
                 version BIGINT PRIMARY KEY NOT NULL,
                 applied_at_us BIGINT NOT NULL)",
        )?;
        let current: Option<i64> = tx
            .query_one("SELECT MAX(version) FROM schema_version", &[])?
            .get(0);
        let current = u32::try_from(current.unwrap_or(0)).unwrap_or(0);
        let known = MIGRATIONS.last().map_or(0, |m| m.0);
        if current > known {
            return Err(StoreError::SchemaTooNew {
                found: current,
                known,
            });
        }
        for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
            tx.batch_execute(sql)?;
            tx.execute(
                "INSERT INTO schema_version (version, applied_at_us) VALUES ($1, $2)",
                &[
                    &i64::from(*version),
                    &crate::row::i(glassbox_trace::unix_micros_now()),
                ],
            )?;
        }
        tx.commit()?;
        Ok(())
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
pub fn redact_password(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let Some(at) = rest.find('@') else {
        return url.to_string();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &url[..scheme_end + 3],
            &rest[..colon],
            &rest[at..]
        ),
        None => url.to_string(),
    }
}

/// Keeps the last row for each key (one statement may not upsert a key twice).
fn last_per_key<T, K: std::hash::Hash + Eq>(rows: &[T], key: impl Fn(&T) -> K) -> Vec<&T> {
    let mut seen = HashSet::new();
    let mut out: Vec<&T> = rows.iter().rev().filter(|r| seen.insert(key(r))).collect();
    out.reverse();
    out
}

macro_rules! column {
    ($rows:expr, $field:ident) => {
        $rows.iter().map(|r| r.$field.clone()).collect::<Vec<_>>()
    };
}

/// A packed column as a `bytea[]` parameter (borrowed, not copied).
macro_rules! packed_column {
    ($rows:expr, $field:ident) => {
        $rows
            .iter()
            .map(|r| r.$field.as_bytes())
            .collect::<Vec<&[u8]>>()
    };
}

/// Request ids are `uuid`s holding the id's 128 bits.
fn id_key(id: RequestId) -> Uuid {
    Uuid::from_u128(id.0)
}

fn id_at(r: &postgres::Row, i: usize) -> Result<RequestId> {
    Ok(RequestId(r.try_get::<_, Uuid>(i)?.as_u128()))
}

fn request_row(r: &postgres::Row) -> Result<RequestRow> {
    Ok(RequestRow {
        request_id: id_at(r, 0)?,
        topology_id: r.try_get(1)?,
        version: r.try_get(2)?,
        started_at_us: r.try_get(3)?,
        ended_at_us: r.try_get(4)?,
        duration_us: r.try_get(5)?,
        status: r.try_get(6)?,
        degraded: r.try_get(7)?,
        error_code: r.try_get(8)?,
        error: r.try_get(9)?,
        path_key: r.try_get(10)?,
        path: Packed::from_stored(r.try_get(11)?),
        labels: r.try_get(12)?,
        models: r.try_get(13)?,
        model_key: r.try_get(14)?,
        input_summary: r.try_get(15)?,
        output_summary: r.try_get(16)?,
        input_chars: r.try_get(17)?,
        cost: r.try_get(18)?,
        cost_f: r.try_get(19)?,
        currency: r.try_get(20)?,
        top_node: r.try_get(21)?,
        timeouts: r.try_get(22)?,
        receipt: Packed::from_stored(r.try_get(23)?),
        explanation: Packed::from_stored(r.try_get(24)?),
        worker: r.try_get(25)?,
        span_count: r.try_get(26)?,
        input_len: r.try_get(27)?,
        input_tokens: r.try_get(28)?,
    })
}

fn span_row(r: &postgres::Row) -> Result<SpanRow> {
    Ok(SpanRow {
        request_id: id_at(r, 0)?,
        seq: r.try_get(1)?,
        topology_id: r.try_get(2)?,
        version: r.try_get(3)?,
        model_key: r.try_get(4)?,
        req_started_at_us: r.try_get(5)?,
        node: r.try_get(6)?,
        kind: r.try_get(7)?,
        attempt: r.try_get(8)?,
        role: r.try_get(9)?,
        role_ref: r.try_get(10)?,
        started_at_us: r.try_get(11)?,
        start_us: r.try_get(12)?,
        end_us: r.try_get(13)?,
        duration_us: r.try_get(14)?,
        status: r.try_get(15)?,
        error: r.try_get(16)?,
        tags: r.try_get(17)?,
        wall_us: r.try_get(18)?,
        cpu_us: r.try_get(19)?,
        input_tokens: r.try_get(20)?,
        output_tokens: r.try_get(21)?,
        cost: r.try_get(22)?,
        cost_f: r.try_get(23)?,
        worker: r.try_get(24)?,
        input_summary: r.try_get(25)?,
        output_summary: r.try_get(26)?,
        critical_us: r.try_get(27)?,
        req_input_len: r.try_get(28)?,
    })
}

impl TraceStore for PostgresStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn schema_version(&mut self) -> Result<u32> {
        let v: Option<i64> = self
            .client
            .query_one("SELECT MAX(version) FROM schema_version", &[])?
            .get(0);
        Ok(u32::try_from(v.unwrap_or(0)).unwrap_or(0))
    }

    fn write(&mut self, requests: &[RequestRow], spans: &[SpanRow]) -> Result<()> {
        let mut tx = self.client.transaction()?;
        if !requests.is_empty() {
            let r = last_per_key(requests, |r| r.request_id);
            let (c0, c1, c2, c3) = (
                r.iter().map(|r| id_key(r.request_id)).collect::<Vec<_>>(),
                column!(r, topology_id),
                column!(r, version),
                column!(r, started_at_us),
            );
            let (c4, c5, c6, c7) = (
                column!(r, ended_at_us),
                column!(r, duration_us),
                column!(r, status),
                column!(r, degraded),
            );
            let (c8, c9, c10, c11) = (
                column!(r, error_code),
                column!(r, error),
                column!(r, path_key),
                packed_column!(r, path),
            );
            let (c12, c13, c14, c15) = (
                column!(r, labels),
                column!(r, models),
                column!(r, model_key),
                column!(r, input_summary),
            );
            let (c16, c17, c18, c19) = (
                column!(r, output_summary),
                column!(r, input_chars),
                column!(r, cost),
                column!(r, cost_f),
            );
            let (c20, c21, c22, c23) = (
                column!(r, currency),
                column!(r, top_node),
                column!(r, timeouts),
                packed_column!(r, receipt),
            );
            let (c24, c25, c26) = (
                packed_column!(r, explanation),
                column!(r, worker),
                column!(r, span_count),
            );
            let (c27, c28) = (column!(r, input_len), column!(r, input_tokens));
            tx.execute(
                &self.insert_request,
                &[
                    &c0, &c1, &c2, &c3, &c4, &c5, &c6, &c7, &c8, &c9, &c10, &c11, &c12, &c13, &c14,
                    &c15, &c16, &c17, &c18, &c19, &c20, &c21, &c22, &c23, &c24, &c25, &c26, &c27,
                    &c28,
                ],
            )?;
        }
        if !spans.is_empty() {
            let s = last_per_key(spans, |s| (s.request_id, s.seq));
            let (c0, c1, c2, c3) = (
                s.iter().map(|s| id_key(s.request_id)).collect::<Vec<_>>(),
                column!(s, seq),
                column!(s, topology_id),
                column!(s, version),
            );
            let (c4, c5, c6, c7) = (
                column!(s, model_key),
                column!(s, req_started_at_us),
                column!(s, node),
                column!(s, kind),
            );
            let (c8, c9, c10, c11) = (
                column!(s, attempt),
                column!(s, role),
                column!(s, role_ref),
                column!(s, started_at_us),
            );
            let (c12, c13, c14, c15) = (
                column!(s, start_us),
                column!(s, end_us),
                column!(s, duration_us),
                column!(s, status),
            );
            let (c16, c17, c18, c19) = (
                column!(s, error),
                column!(s, tags),
                column!(s, wall_us),
                column!(s, cpu_us),
            );
            let (c20, c21, c22, c23) = (
                column!(s, input_tokens),
                column!(s, output_tokens),
                column!(s, cost),
                column!(s, cost_f),
            );
            let (c24, c25, c26) = (
                column!(s, worker),
                column!(s, input_summary),
                column!(s, output_summary),
            );
            let (c27, c28) = (column!(s, critical_us), column!(s, req_input_len));
            tx.execute(
                &self.insert_span,
                &[
                    &c0, &c1, &c2, &c3, &c4, &c5, &c6, &c7, &c8, &c9, &c10, &c11, &c12, &c13, &c14,
                    &c15, &c16, &c17, &c18, &c19, &c20, &c21, &c22, &c23, &c24, &c25, &c26, &c27,
                    &c28,
                ],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    fn get(&mut self, id: RequestId) -> Result<Option<StoredTrace>> {
        let key = id_key(id);
        let sql = format!(
            "SELECT {} FROM requests WHERE request_id = $1",
            REQUEST_COLUMNS.join(", ")
        );
        let Some(row) = self.client.query_opt(&sql, &[&key])? else {
            return Ok(None);
        };
        let record = decode_request(&request_row(&row)?)?;
        let sql = format!(
            "SELECT {} FROM spans WHERE request_id = $1 ORDER BY seq",
            SPAN_COLUMNS.join(", ")
        );
        let spans = self
            .client
            .query(&sql, &[&key])?
            .iter()
            .map(|r| span_row(r).and_then(|s| decode_span(&s)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(StoredTrace { record, spans }))
    }

    fn list(&mut self, query: &ListQuery) -> Result<Vec<RequestSummary>> {
        let (cond, params) = where_clause(&query.filter, ph, "started_at_us", true);
        let sql = format!(
            "SELECT {SUMMARY_COLUMNS} FROM requests{cond}{} LIMIT {}",
            order_by(query.sort),
            query.limit
        );
        let rows = self.client.query(&sql, &bind(&params))?;
        rows.iter()
            .map(|r| {
                Ok(RequestSummary {
                    request_id: id_at(r, 0)?.to_string(),
                    topology_id: r.try_get(1)?,
                    version: r.try_get(2)?,
                    started_at_us: r.try_get(3)?,
                    duration_us: r.try_get(4)?,
                    status: r.try_get(5)?,
                    degraded: r.try_get(6)?,
                    error_code: r.try_get(7)?,
                    cost: r.try_get(8)?,
                    currency: r.try_get(9)?,
                    path: r.try_get(10)?,
                    span_count: r.try_get(11)?,
                })
            })
            .collect()
    }

    fn scan_requests(
        &mut self,
        filter: &Filter,
        each: &mut dyn FnMut(RequestFacts<'_>),
    ) -> Result<()> {
        use postgres::fallible_iterator::FallibleIterator;
        let (cond, params) = where_clause(filter, ph, "started_at_us", true);
        let sql = format!("SELECT {REQUEST_FACT_COLUMNS} FROM requests{cond}");
        let mut rows = self.client.query_raw(&sql, bind(&params))?;
        while let Some(r) = rows.next()? {
            each(RequestFacts {
                topology_id: r.try_get(0)?,
                version: r.try_get(1)?,
                model_key: r.try_get(2)?,
                started_at_us: r.try_get(3)?,
                duration_us: r.try_get(4)?,
                status: r.try_get(5)?,
                degraded: r.try_get(6)?,
                timeouts: r.try_get(7)?,
                cost: r.try_get(8)?,
                path_key: r.try_get(9)?,
                top_node: r.try_get(10)?,
                input_chars: r.try_get(11)?,
                input_len: r.try_get(12)?,
            });
        }
        Ok(())
    }

    fn scan_spans(&mut self, filter: &Filter, each: &mut dyn FnMut(SpanFacts<'_>)) -> Result<()> {
        use postgres::fallible_iterator::FallibleIterator;
        let (cond, params) = where_clause(filter, ph, "req_started_at_us", false);
        let sql = format!("SELECT {SPAN_FACT_COLUMNS} FROM spans{cond}");
        let mut rows = self.client.query_raw(&sql, bind(&params))?;
        while let Some(r) = rows.next()? {
            each(SpanFacts {
                topology_id: r.try_get(0)?,
                version: r.try_get(1)?,
                model_key: r.try_get(2)?,
                req_started_at_us: r.try_get(3)?,
                node: r.try_get(4)?,
                duration_us: r.try_get(5)?,
                cost: r.try_get(6)?,
                status: r.try_get(7)?,
                kind: r.try_get(8)?,
                tags: r.try_get(9)?,
                critical_us: r.try_get(10)?,
                req_input_len: r.try_get(11)?,
            });
        }
        Ok(())
    }

    fn counts(&mut self) -> Result<(u64, u64)> {
        let r: i64 = self
            .client
            .query_one("SELECT COUNT(*) FROM requests", &[])?
            .get(0);
        let s: i64 = self
            .client
            .query_one("SELECT COUNT(*) FROM spans", &[])?
            .get(0);
        Ok((crate::row::u(r), crate::row::u(s)))
    }

    fn integrity_check(&mut self) -> Result<()> {
        // PostgreSQL guards its own pages (WAL, checksums when enabled); check
        // what the store itself relies on: the schema and readable tables.
        let v = self.schema_version()?;
        let known = MIGRATIONS.last().map_or(0, |m| m.0);
        if v != known {
            return Err(StoreError::Integrity(format!(
                "schema version {v}, expected {known}"
            )));
        }
        self.counts().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hides_passwords() {
        assert_eq!(
            redact_password("postgres://u:pw@h:5/db"),
            "postgres://u:***@h:5/db"
        );
        assert_eq!(redact_password("postgres://u@h/db"), "postgres://u@h/db");
    }

    #[test]
    fn type_lists_match_columns() {
        assert_eq!(REQUEST_TYPES.len(), REQUEST_COLUMNS.len());
        assert_eq!(SPAN_TYPES.len(), SPAN_COLUMNS.len());
    }
}
