//! The SQLite store: one file, WAL mode, zero set-up.
//!
//! WAL with `synchronous = NORMAL` keeps every committed transaction through a
//! process crash (SIGKILL): the log lives in the OS page cache until
//! checkpointed. Only a power loss can take the last commits back, which is
//! the usual trade for trace data; `synchronous = FULL` is one pragma away.

use std::path::Path;

use glassbox_trace::RequestId;
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, Row, params_from_iter};

use crate::error::{Result, StoreError};
use crate::query::{
    Filter, ListQuery, Param, REQUEST_COLUMNS, REQUEST_FACT_COLUMNS, RequestFacts, RequestSummary,
    SPAN_COLUMNS, SPAN_FACT_COLUMNS, SUMMARY_COLUMNS, SpanFacts, StoredTrace, TraceStore, order_by,
    where_clause,
};
use crate::row::{Packed, RequestRow, SpanRow, decode_request, decode_span};

/// Migrations: (version, SQL). Applied in order, each in its own transaction.
const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../migrations/sqlite/001_init.sql")),
    (2, include_str!("../migrations/sqlite/002_report_index.sql")),
    (
        3,
        include_str!("../migrations/sqlite/003_drop_redundant_index.sql"),
    ),
    (4, include_str!("../migrations/sqlite/004_compact_rows.sql")),
    (
        5,
        include_str!("../migrations/sqlite/005_input_length_critical_path.sql"),
    ),
];

/// A trace store in one SQLite file.
pub struct SqliteStore {
    conn: Connection,
    insert_request: String,
    insert_span: String,
    checkpointer: Option<Checkpointer>,
}

/// A connection to the file at `path`. Several processes may share the file
/// (a server writing, the CLI reading): it waits for locks instead of failing
/// at once.
fn connect(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path).map_err(|e| StoreError::Open {
        url: format!("sqlite://{}", path.display()),
        message: e.to_string(),
    })?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(conn)
}

/// Copies committed WAL frames into the database file on its own thread and
/// connection, so the writer's commits do not also pay for checkpoints (they
/// took a sixth of the commit thread's time). Woken after each commit;
/// `PASSIVE`, so it never blocks the writer or readers.
struct Checkpointer {
    wake: Option<std::sync::mpsc::SyncSender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    fn start(path: &Path) -> Result<Checkpointer> {
        let conn = connect(path)?;
        let (wake, woken) = std::sync::mpsc::sync_channel::<()>(1);
        let thread = std::thread::Builder::new()
            .name("gb-trace-ckpt".into())
            .spawn(move || {
                while woken.recv().is_ok() {
                    // Busy or failed checkpoints are retried at the next
                    // wake-up; the writer's own (rare) checkpoint is the
                    // safety net.
                    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                }
            })
            .map_err(|source| StoreError::Io {
                context: "starting the checkpoint thread".into(),
                source,
            })?;
        Ok(Checkpointer {
            wake: Some(wake),
            thread: Some(thread),
        })
    }

    fn poke(&self) {
        if let Some(wake) = &self.wake {
            // Full means a wake-up is already pending: nothing to add.
            let _ = wake.try_send(());
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.wake.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.conn.path())
            .finish()
    }
}

fn ph(n: usize) -> String {
    format!("?{n}")
}

fn insert_sql(table: &str, columns: &[&str]) -> String {
    let marks: Vec<String> = (1..=columns.len()).map(ph).collect();
    format!(
        "INSERT OR REPLACE INTO {table} ({}) VALUES ({})",
        columns.join(", "),
        marks.join(", ")
    )
}

fn bind(params: Vec<Param>) -> Vec<Value> {
    params
        .into_iter()
        .map(|p| match p {
            Param::Text(s) => Value::Text(s),
            Param::Int(i) => Value::Integer(i),
        })
        .collect()
}

impl SqliteStore {
    /// Opens (creating when missing) the store at `path`, creating its
    /// directory, switching to WAL and migrating to the latest schema.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                context: format!("creating `{}`", dir.display()),
                source,
            })?;
        }
        let conn = connect(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "OFF")?;
        // 64 MiB of page cache: batches touch the tail of three indexes.
        conn.pragma_update(None, "cache_size", -65_536)?;
        conn.set_prepared_statement_cache_capacity(32);
        let mut store = SqliteStore {
            conn,
            insert_request: insert_sql("requests", REQUEST_COLUMNS),
            insert_span: insert_sql("spans", SPAN_COLUMNS),
            checkpointer: None,
        };
        store.migrate()?;
        Ok(store)
    }

    fn migrate(&mut self) -> Result<()> {
        self.conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_version (
                 version INTEGER PRIMARY KEY NOT NULL,
                 applied_at_us INTEGER NOT NULL)",
        )?;
        let current = self.version()?;
        let known = MIGRATIONS.last().map_or(0, |m| m.0);
        if current > known {
            return Err(StoreError::SchemaTooNew {
                found: current,
                known,
            });
        }
        for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
            let tx = self.conn.transaction()?;
            tx.execute_batch(sql)?;
            tx.execute(
                "INSERT INTO schema_version (version, applied_at_us) VALUES (?1, ?2)",
                (version, crate::row::i(glassbox_trace::unix_micros_now())),
            )?;
            tx.commit()?;
        }
        Ok(())
    }

    fn version(&self) -> Result<u32> {
        let v: Option<i64> =
            self.conn
                .query_row("SELECT MAX(version) FROM schema_version", [], |r| r.get(0))?;
        Ok(u32::try_from(v.unwrap_or(0)).unwrap_or(0))
    }

    /// For the connection that writes: checkpoints move to a background
    /// thread. The connection checkpoints by itself only if the WAL passes
    /// 64 MiB (the background thread fell behind).
    pub fn with_background_checkpoints(mut self) -> Result<SqliteStore> {
        self.conn
            .pragma_update(None, "wal_autocheckpoint", 16_384)?;
        let path = self.conn.path().map(std::path::PathBuf::from);
        if let Some(path) = path.filter(|p| !p.as_os_str().is_empty()) {
            self.checkpointer = Some(Checkpointer::start(&path)?);
        }
        Ok(self)
    }

    /// The underlying connection, for benchmarks and maintenance.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}

/// Packed documents are BLOBs; rows from before schema 4 hold TEXT.
impl rusqlite::types::ToSql for Packed {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(rusqlite::types::ToSqlOutput::Borrowed(
            rusqlite::types::ValueRef::Blob(self.as_bytes()),
        ))
    }
}

impl rusqlite::types::FromSql for Packed {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        match value {
            rusqlite::types::ValueRef::Blob(b) | rusqlite::types::ValueRef::Text(b) => {
                Ok(Packed::from_stored(b.to_vec()))
            }
            _ => Err(rusqlite::types::FromSqlError::InvalidType),
        }
    }
}

/// Request ids are 16-byte BLOBs, big-endian: they sort by start time.
fn id_key(id: RequestId) -> [u8; 16] {
    id.0.to_be_bytes()
}

fn id_at(r: &Row<'_>, i: usize) -> rusqlite::Result<RequestId> {
    Ok(RequestId(u128::from_be_bytes(r.get(i)?)))
}

fn request_row(r: &Row<'_>) -> rusqlite::Result<RequestRow> {
    Ok(RequestRow {
        request_id: id_at(r, 0)?,
        topology_id: r.get(1)?,
        version: r.get(2)?,
        started_at_us: r.get(3)?,
        ended_at_us: r.get(4)?,
        duration_us: r.get(5)?,
        status: r.get(6)?,
        degraded: r.get(7)?,
        error_code: r.get(8)?,
        error: r.get(9)?,
        path_key: r.get(10)?,
        path: r.get(11)?,
        labels: r.get(12)?,
        models: r.get(13)?,
        model_key: r.get(14)?,
        input_summary: r.get(15)?,
        output_summary: r.get(16)?,
        input_chars: r.get(17)?,
        cost: r.get(18)?,
        cost_f: r.get(19)?,
        currency: r.get(20)?,
        top_node: r.get(21)?,
        timeouts: r.get(22)?,
        receipt: r.get(23)?,
        explanation: r.get(24)?,
        worker: r.get(25)?,
        span_count: r.get(26)?,
        input_len: r.get(27)?,
        input_tokens: r.get(28)?,
    })
}

fn span_row(r: &Row<'_>) -> rusqlite::Result<SpanRow> {
    Ok(SpanRow {
        request_id: id_at(r, 0)?,
        seq: r.get(1)?,
        topology_id: r.get(2)?,
        version: r.get(3)?,
        model_key: r.get(4)?,
        req_started_at_us: r.get(5)?,
        node: r.get(6)?,
        kind: r.get(7)?,
        attempt: r.get(8)?,
        role: r.get(9)?,
        role_ref: r.get(10)?,
        started_at_us: r.get(11)?,
        start_us: r.get(12)?,
        end_us: r.get(13)?,
        duration_us: r.get(14)?,
        status: r.get(15)?,
        error: r.get(16)?,
        tags: r.get(17)?,
        wall_us: r.get(18)?,
        cpu_us: r.get(19)?,
        input_tokens: r.get(20)?,
        output_tokens: r.get(21)?,
        cost: r.get(22)?,
        cost_f: r.get(23)?,
        worker: r.get(24)?,
        input_summary: r.get(25)?,
        output_summary: r.get(26)?,
        critical_us: r.get(27)?,
        req_input_len: r.get(28)?,
    })
}

impl TraceStore for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn schema_version(&mut self) -> Result<u32> {
        self.version()
    }

    fn write(&mut self, requests: &[RequestRow], spans: &[SpanRow]) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(&self.insert_request)?;
            for r in requests {
                stmt.execute(rusqlite::params![
                    id_key(r.request_id),
                    r.topology_id,
                    r.version,
                    r.started_at_us,
                    r.ended_at_us,
                    r.duration_us,
                    r.status,
                    r.degraded,
                    r.error_code,
                    r.error,
                    r.path_key,
                    r.path,
                    r.labels,
                    r.models,
                    r.model_key,
                    r.input_summary,
                    r.output_summary,
                    r.input_chars,
                    r.cost,
                    r.cost_f,
                    r.currency,
                    r.top_node,
                    r.timeouts,
                    r.receipt,
                    r.explanation,
                    r.worker,
                    r.span_count,
                    r.input_len,
                    r.input_tokens,
                ])?;
            }
            let mut stmt = tx.prepare_cached(&self.insert_span)?;
            for s in spans {
                stmt.execute(rusqlite::params![
                    id_key(s.request_id),
                    s.seq,
                    s.topology_id,
                    s.version,
                    s.model_key,
                    s.req_started_at_us,
                    s.node,
                    s.kind,
                    s.attempt,
                    s.role,
                    s.role_ref,
                    s.started_at_us,
                    s.start_us,
                    s.end_us,
                    s.duration_us,
                    s.status,
                    s.error,
                    s.tags,
                    s.wall_us,
                    s.cpu_us,
                    s.input_tokens,
                    s.output_tokens,
                    s.cost,
                    s.cost_f,
                    s.worker,
                    s.input_summary,
                    s.output_summary,
                    s.critical_us,
                    s.req_input_len,
                ])?;
            }
        }
        tx.commit()?;
        if let Some(c) = &self.checkpointer {
            c.poke();
        }
        Ok(())
    }

    fn get(&mut self, id: RequestId) -> Result<Option<StoredTrace>> {
        let key = id_key(id);
        let sql = format!(
            "SELECT {} FROM requests WHERE request_id = ?1",
            REQUEST_COLUMNS.join(", ")
        );
        let row = self.conn.query_row(&sql, [&key], request_row).optional()?;
        let Some(row) = row else { return Ok(None) };
        let sql = format!(
            "SELECT {} FROM spans WHERE request_id = ?1 ORDER BY seq",
            SPAN_COLUMNS.join(", ")
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt
            .query_map([&key], span_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let spans = rows.iter().map(decode_span).collect::<Result<Vec<_>>>()?;
        Ok(Some(StoredTrace {
            record: decode_request(&row)?,
            spans,
        }))
    }

    fn list(&mut self, query: &ListQuery) -> Result<Vec<RequestSummary>> {
        let (cond, params) = where_clause(&query.filter, ph, "started_at_us", true);
        let sql = format!(
            "SELECT {SUMMARY_COLUMNS} FROM requests{cond}{} LIMIT {}",
            order_by(query.sort),
            query.limit
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt
            .query_map(params_from_iter(bind(params)), |r| {
                Ok(RequestSummary {
                    request_id: id_at(r, 0)?.to_string(),
                    topology_id: r.get(1)?,
                    version: r.get(2)?,
                    started_at_us: r.get(3)?,
                    duration_us: r.get(4)?,
                    status: r.get(5)?,
                    degraded: r.get(6)?,
                    error_code: r.get(7)?,
                    cost: r.get(8)?,
                    currency: r.get(9)?,
                    path: r.get(10)?,
                    span_count: r.get(11)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    fn scan_requests(
        &mut self,
        filter: &Filter,
        each: &mut dyn FnMut(RequestFacts<'_>),
    ) -> Result<()> {
        let (cond, params) = where_clause(filter, ph, "started_at_us", true);
        let sql = format!("SELECT {REQUEST_FACT_COLUMNS} FROM requests{cond}");
        let mut stmt = self.conn.prepare(&sql)?;
        let mut rows = stmt.query(params_from_iter(bind(params)))?;
        while let Some(r) = rows.next()? {
            each(RequestFacts {
                topology_id: text(r, 0)?,
                version: text(r, 1)?,
                model_key: text(r, 2)?,
                started_at_us: r.get(3)?,
                duration_us: r.get(4)?,
                status: text(r, 5)?,
                degraded: r.get(6)?,
                timeouts: r.get(7)?,
                cost: r.get(8)?,
                path_key: text(r, 9)?,
                top_node: opt_text(r, 10)?,
                input_chars: r.get(11)?,
                input_len: r.get(12)?,
            });
        }
        Ok(())
    }

    fn scan_spans(&mut self, filter: &Filter, each: &mut dyn FnMut(SpanFacts<'_>)) -> Result<()> {
        let (cond, params) = where_clause(filter, ph, "req_started_at_us", false);
        let sql = format!("SELECT {SPAN_FACT_COLUMNS} FROM spans{cond}");
        let mut stmt = self.conn.prepare(&sql)?;
        let mut rows = stmt.query(params_from_iter(bind(params)))?;
        while let Some(r) = rows.next()? {
            each(SpanFacts {
                topology_id: text(r, 0)?,
                version: text(r, 1)?,
                model_key: text(r, 2)?,
                req_started_at_us: r.get(3)?,
                node: text(r, 4)?,
                duration_us: r.get(5)?,
                cost: r.get(6)?,
                status: text(r, 7)?,
                kind: text(r, 8)?,
                tags: text(r, 9)?,
                critical_us: r.get(10)?,
                req_input_len: r.get(11)?,
            });
        }
        Ok(())
    }

    fn counts(&mut self) -> Result<(u64, u64)> {
        let r: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM requests", [], |r| r.get(0))?;
        let s: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM spans", [], |r| r.get(0))?;
        Ok((crate::row::u(r), crate::row::u(s)))
    }

    fn integrity_check(&mut self) -> Result<()> {
        let mut stmt = self.conn.prepare("PRAGMA integrity_check")?;
        let lines = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        if lines == ["ok"] {
            Ok(())
        } else {
            Err(StoreError::Integrity(lines.join("; ")))
        }
    }
}

/// A text column, borrowed from the row.
fn text<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> rusqlite::Result<&'r str> {
    r.get_ref(i)?.as_str().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// A nullable text column, borrowed from the row.
fn opt_text<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<&'r str>> {
    r.get_ref(i)?.as_str_or_null().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    })
}
