//! Gathering spans into whole traces.
//!
//! An OpenTelemetry SDK exports spans as they end, in batches, so a trace
//! can arrive in pieces: children end (and are exported) before their
//! parent. A trace is complete when its root span (no parent) has arrived;
//! the spans of a trace whose root is in the same export never leave the
//! request that carried them, and are committed before it is answered.
//! Spans that arrive without their root wait here, at most `hold` (then
//! they are stored as a partial trace, its earliest span standing in as
//! root) and at most `max_pending_spans` in all (the oldest traces are
//! stored first). Spans that arrive after their trace was stored are
//! refused and reported in the answer's `partial_success`, never merged
//! into a record that was already committed.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::build::{Origin, Received};
use crate::proto::{ExportTraceServiceRequest, Span};

/// How long and how much the assembler holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Microseconds a trace without its root waits.
    pub hold_us: u64,
    /// Spans held in all, across traces.
    pub max_pending_spans: usize,
    /// Trace ids remembered as stored, to refuse late spans.
    pub remember: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            hold_us: 30_000_000,
            max_pending_spans: 100_000,
            remember: 100_000,
        }
    }
}

/// Spans of one trace, gathered.
pub type Group = (u128, Vec<Received>);

/// What one export gave.
#[derive(Debug, Default)]
pub struct Accepted {
    /// Traces now complete (or pushed out by the span limit).
    pub ready: Vec<Group>,
    /// Spans held for a root still to come.
    pub held: usize,
    /// Spans refused, and why (the first few reasons).
    pub rejected: usize,
    pub reasons: Vec<String>,
}

impl Accepted {
    fn reject(&mut self, reason: String) {
        self.rejected += 1;
        if self.reasons.len() < 5 {
            self.reasons.push(reason);
        }
    }
}

struct Pending {
    spans: Vec<Received>,
    first_us: u64,
}

/// Holds incomplete traces between exports.
pub struct Assembler {
    limits: Limits,
    pending: HashMap<u128, Pending>,
    /// Pending trace ids, oldest first (may hold ids already gone).
    order: VecDeque<u128>,
    pending_spans: usize,
    stored: HashSet<u128>,
    stored_order: VecDeque<u128>,
}

impl std::fmt::Debug for Assembler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assembler")
            .field("pending_traces", &self.pending.len())
            .field("pending_spans", &self.pending_spans)
            .finish()
    }
}

fn origin(rs: &crate::proto::ResourceSpans) -> Origin {
    let attrs = rs.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
    let a = crate::attrs::Attrs(attrs);
    Origin {
        service: a.str("service.name").unwrap_or("unknown_service").into(),
        version: a.str("service.version").map(Into::into),
    }
}

fn trace_key(span: &Span) -> Result<u128, String> {
    let Ok(bytes) = <[u8; 16]>::try_from(span.trace_id.as_slice()) else {
        return Err(format!(
            "span `{}`: trace id has {} bytes (expected 16)",
            span.name,
            span.trace_id.len()
        ));
    };
    if span.span_id.len() != 8 {
        return Err(format!(
            "span `{}`: span id has {} bytes (expected 8)",
            span.name,
            span.span_id.len()
        ));
    }
    let id = u128::from_be_bytes(bytes);
    if id == 0 {
        return Err(format!("span `{}`: trace id is all zeros", span.name));
    }
    Ok(id)
}

/// Splits an export into traces: `(trace id, spans, has root)`, in first-seen order.
pub fn split(
    req: ExportTraceServiceRequest,
    out: &mut Accepted,
) -> Vec<(u128, Vec<Received>, bool)> {
    let mut groups: Vec<(u128, Vec<Received>, bool)> = Vec::new();
    let mut index: HashMap<u128, usize> = HashMap::new();
    for rs in req.resource_spans {
        let o = Arc::new(origin(&rs));
        for ss in rs.scope_spans {
            for span in ss.spans {
                let id = match trace_key(&span) {
                    Ok(id) => id,
                    Err(reason) => {
                        out.reject(reason);
                        continue;
                    }
                };
                let root = span.parent_span_id.is_empty();
                let g = *index.entry(id).or_insert_with(|| {
                    groups.push((id, Vec::new(), false));
                    groups.len() - 1
                });
                groups[g].2 |= root;
                groups[g].1.push(Received {
                    span,
                    origin: o.clone(),
                });
            }
        }
    }
    groups
}

impl Assembler {
    pub fn new(limits: Limits) -> Assembler {
        Assembler {
            limits,
            pending: HashMap::new(),
            order: VecDeque::new(),
            pending_spans: 0,
            stored: HashSet::new(),
            stored_order: VecDeque::new(),
        }
    }

    /// Spans held now.
    pub fn pending_spans(&self) -> usize {
        self.pending_spans
    }

    /// Whether trace `id` was stored (late spans of it are refused).
    pub fn is_stored(&self, id: u128) -> bool {
        self.stored.contains(&id)
    }

    fn remember(&mut self, id: u128) {
        if self.stored.insert(id) {
            self.stored_order.push_back(id);
            while self.stored_order.len() > self.limits.remember {
                if let Some(old) = self.stored_order.pop_front() {
                    self.stored.remove(&old);
                }
            }
        }
    }

    /// Takes the traces of one export (from [`split`]) at time `now_us`.
    pub fn accept(
        &mut self,
        groups: Vec<(u128, Vec<Received>, bool)>,
        now_us: u64,
        out: &mut Accepted,
    ) {
        for (id, mut spans, has_root) in groups {
            if self.stored.contains(&id) {
                for s in &spans {
                    out.reject(format!(
                        "span `{}` arrived after its trace {id:032x} was stored (hint: export each trace's spans before its root span ends, or raise the batch processor's schedule delay)",
                        s.span.name
                    ));
                }
                continue;
            }
            if let Some(p) = self.pending.remove(&id) {
                self.pending_spans -= p.spans.len();
                let mut all = p.spans;
                all.append(&mut spans);
                spans = all;
                if !has_root {
                    self.hold(id, spans, p.first_us, out);
                    continue;
                }
            } else if !has_root {
                self.hold(id, spans, now_us, out);
                continue;
            }
            self.remember(id);
            out.ready.push((id, spans));
        }
        while self.pending_spans > self.limits.max_pending_spans {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(p) = self.pending.remove(&oldest) {
                self.pending_spans -= p.spans.len();
                out.held = out.held.saturating_sub(p.spans.len());
                self.remember(oldest);
                out.ready.push((oldest, p.spans));
            }
        }
    }

    fn hold(&mut self, id: u128, spans: Vec<Received>, first_us: u64, out: &mut Accepted) {
        out.held += spans.len();
        self.pending_spans += spans.len();
        if !self.pending.contains_key(&id) {
            self.order.push_back(id);
        }
        self.pending.insert(id, Pending { spans, first_us });
    }

    /// Traces that waited longer than `hold` for their root, as they are.
    pub fn expire(&mut self, now_us: u64) -> Vec<Group> {
        let mut out = Vec::new();
        while let Some(&id) = self.order.front() {
            match self.pending.get(&id) {
                None => {
                    self.order.pop_front();
                }
                Some(p) if now_us.saturating_sub(p.first_us) >= self.limits.hold_us => {
                    self.order.pop_front();
                    if let Some(p) = self.pending.remove(&id) {
                        self.pending_spans -= p.spans.len();
                        self.remember(id);
                        out.push((id, p.spans));
                    }
                }
                Some(_) => break,
            }
        }
        out
    }

    /// Everything held (at shutdown).
    pub fn drain(&mut self) -> Vec<Group> {
        self.order.clear();
        self.pending_spans = 0;
        self.pending.drain().map(|(id, p)| (id, p.spans)).collect()
    }
}
