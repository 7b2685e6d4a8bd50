//! The held-span log: spans that wait for their root are written here
//! before their export is answered, so an acknowledged span survives a
//! crash even while it is held in memory.
//!
//! A trace is complete when its root span arrives; until then its spans
//! wait in the [`Assembler`](crate::Assembler), up to `hold_secs`. The
//! store only ever receives whole traces (a committed record is never
//! merged into), so held spans cannot go to the store yet; but the OTLP
//! answer tells the exporter they were accepted and it will not send them
//! again. This log closes that gap, the way a database's write-ahead log
//! does: append (under the assembler's lock), then answer; once the trace
//! the spans belong to has committed to the store, they are retired.
//!
//! - The log is a directory of numbered segment files. Each record is
//!   `[u32 length][u64 received µs][ExportTraceServiceRequest protobuf]`
//!   holding one export's held spans (service name and version kept as
//!   resource attributes). The active segment is rotated once it passes
//!   [`SEGMENT_BYTES`]; a segment whose traces have all committed is
//!   deleted.
//! - A write is a `write(2)` into the page cache, not an `fsync`: like
//!   SQLite's WAL at `synchronous = NORMAL` (the store's setting), it
//!   survives a crash of this process (`kill -9`), not of the machine.
//! - At start, [`HeldLog::open`] returns every record still there; the
//!   receiver holds those spans again (their wait counted from when they
//!   were first received). A record cut short at the end of a segment (a
//!   crash in the middle of a write, before its export was answered) ends
//!   that segment's replay. Traces that had committed after all (a crash
//!   between the commit and the retirement) are filtered out by the caller
//!   before the spans are held again.

use std::collections::{BTreeMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use prost::Message;

use crate::build::Received;
use crate::proto::{
    AnyValue, ExportTraceServiceRequest, KeyValue, Resource, ResourceSpans, ScopeSpans, Value,
};

/// Bytes after which the active segment is closed and a new one begun.
pub const SEGMENT_BYTES: u64 = 8 << 20;

/// A record read back at start: when its spans were first received, and
/// the spans (one `ResourceSpans` per origin).
pub type Replayed = (u64, ExportTraceServiceRequest);

struct Active {
    number: u64,
    file: File,
    bytes: u64,
}

/// The log of held spans (one per receiver; not shared between processes:
/// [`HeldLog::open`] locks the directory).
pub struct HeldLog {
    dir: PathBuf,
    /// `LOCK` in the directory, locked while this log is open.
    _lock: File,
    active: Option<Active>,
    next: u64,
    /// Traces not yet committed, by segment.
    live: BTreeMap<u64, HashSet<u128>>,
}

impl std::fmt::Debug for HeldLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldLog")
            .field("dir", &self.dir)
            .field("segments", &self.live.len())
            .finish()
    }
}

fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:012}.held"))
}

fn segment_number(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    name.strip_suffix(".held")?.parse().ok()
}

fn trace_id(span: &crate::proto::Span) -> Option<u128> {
    <[u8; 16]>::try_from(span.trace_id.as_slice())
        .ok()
        .map(u128::from_be_bytes)
}

/// Reads a segment's records; a record cut short ends it.
fn read_segment(path: &Path) -> io::Result<Vec<Replayed>> {
    let mut bytes = Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    let mut out = Vec::new();
    let mut at = 0usize;
    while bytes.len() - at >= 12 {
        let len = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        let mut us = [0u8; 8];
        us.copy_from_slice(&bytes[at + 4..at + 12]);
        let start = at + 12;
        let Some(end) = start
            .checked_add(len as usize)
            .filter(|&e| e <= bytes.len())
        else {
            break;
        };
        match ExportTraceServiceRequest::decode(&bytes[start..end]) {
            Ok(req) => out.push((u64::from_le_bytes(us), req)),
            Err(_) => break,
        }
        at = end;
    }
    Ok(out)
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::String(value.into())),
        }),
    }
}

impl HeldLog {
    /// Opens (creating) the log in `dir` and reads back what an earlier
    /// process left there, oldest first.
    pub fn open(dir: &Path) -> io::Result<(HeldLog, Vec<Replayed>)> {
        fs::create_dir_all(dir)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("LOCK"))?;
        if let Err(e) = lock.try_lock() {
            return Err(io::Error::new(
                io::ErrorKind::ResourceBusy,
                format!(
                    "another process has it open ({e}) (hint: give each server its own `[ingest] held_dir`)"
                ),
            ));
        }
        let mut numbers: Vec<u64> = fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| segment_number(&e.path()))
            .collect();
        numbers.sort_unstable();
        let mut live = BTreeMap::new();
        let mut replayed = Vec::new();
        for &n in &numbers {
            let records = read_segment(&segment_path(dir, n))?;
            let ids: HashSet<u128> = records
                .iter()
                .flat_map(|(_, r)| &r.resource_spans)
                .flat_map(|rs| &rs.scope_spans)
                .flat_map(|ss| &ss.spans)
                .filter_map(trace_id)
                .collect();
            if ids.is_empty() {
                fs::remove_file(segment_path(dir, n))?;
                continue;
            }
            live.insert(n, ids);
            replayed.extend(records);
        }
        let log = HeldLog {
            dir: dir.to_path_buf(),
            _lock: lock,
            active: None,
            next: numbers.last().map_or(0, |n| n + 1),
            live,
        };
        Ok((log, replayed))
    }

    /// Segments on disk (tests, metrics).
    pub fn segments(&self) -> usize {
        self.live.len()
    }

    /// Appends one export's held spans (all received at `received_us`).
    pub fn append(&mut self, received_us: u64, spans: &[&Received]) -> io::Result<()> {
        if spans.is_empty() {
            return Ok(());
        }
        let mut resource_spans: Vec<ResourceSpans> = Vec::new();
        let mut origins: Vec<&crate::build::Origin> = Vec::new();
        let mut ids = Vec::with_capacity(spans.len());
        for r in spans {
            let i = match origins.iter().position(|o| **o == *r.origin) {
                Some(i) => i,
                None => {
                    let mut attributes = vec![text("service.name", &r.origin.service)];
                    if let Some(v) = &r.origin.version {
                        attributes.push(text("service.version", v));
                    }
                    resource_spans.push(ResourceSpans {
                        resource: Some(Resource { attributes }),
                        scope_spans: vec![ScopeSpans {
                            scope: None,
                            spans: Vec::new(),
                        }],
                    });
                    origins.push(&r.origin);
                    origins.len() - 1
                }
            };
            resource_spans[i].scope_spans[0].spans.push(r.span.clone());
            ids.extend(trace_id(&r.span));
        }
        let body = ExportTraceServiceRequest { resource_spans }.encode_to_vec();
        let len = u32::try_from(body.len())
            .map_err(|_| io::Error::other("held spans of one export exceed 4 GiB"))?;
        let mut record = Vec::with_capacity(body.len() + 12);
        record.extend_from_slice(&len.to_le_bytes());
        record.extend_from_slice(&received_us.to_le_bytes());
        record.extend_from_slice(&body);
        let active = self.active()?;
        active.file.write_all(&record)?;
        active.bytes += record.len() as u64;
        let n = active.number;
        let full = active.bytes >= SEGMENT_BYTES;
        self.live.entry(n).or_default().extend(ids);
        if full {
            self.active = None;
        }
        Ok(())
    }

    fn active(&mut self) -> io::Result<&mut Active> {
        if self.active.is_none() {
            let number = self.next;
            self.next += 1;
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(segment_path(&self.dir, number))?;
            self.active = Some(Active {
                number,
                file,
                bytes: 0,
            });
        }
        match self.active.as_mut() {
            Some(a) => Ok(a),
            None => Err(io::Error::other("no active segment")),
        }
    }

    /// Traces now committed to the store: their held spans are retired,
    /// and segments left with none are deleted.
    pub fn committed(&mut self, ids: &[u128]) -> io::Result<()> {
        if self.live.is_empty() {
            return Ok(());
        }
        let mut empty = Vec::new();
        for (n, live) in &mut self.live {
            for id in ids {
                live.remove(id);
            }
            if live.is_empty() {
                empty.push(*n);
            }
        }
        for n in empty {
            self.live.remove(&n);
            if self.active.as_ref().is_some_and(|a| a.number == n) {
                self.active = None;
            }
            match fs::remove_file(segment_path(&self.dir, n)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}
