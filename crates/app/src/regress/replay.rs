//! Replay (`glassbox test TOPOLOGY --replay`): stored requests run again
//! through a (new) version of the topology, reporting every request whose
//! path, labels, status, guard outcome or cost changed.
//!
//! The input of a stored request is its input summary (the JSON of the
//! input, redacted and cut to the store's summary length): a request whose
//! summary is cut or not JSON cannot be replayed faithfully and is reported
//! as skipped, never guessed at. The comparison reads only trace types
//! (`glassbox_trace::diff`), and a changed path is explained by the same
//! first-divergence words as `trace diff`.

use std::collections::BTreeSet;
use std::str::FromStr;

use glassbox_engine::{Outcome, RunOptions};
use glassbox_store::{Filter, ListQuery, Sort, StoreError, StoredTrace, TraceStore};
use glassbox_trace::diff::{Side, TraceDiff, guard_outcomes, path_taken};
use glassbox_trace::{Lang, RequestId, RequestRecord, SpanRecord, Unit};
use rust_decimal::Decimal;
use serde_json::Value;

use super::suite::{CaseResult, Suite};
use crate::Local;

/// Which stored requests to replay and how strict to be about cost.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// The stored requests; with no topology, the topology under test's.
    pub filter: Filter,
    /// Most requests replayed (newest first).
    pub limit: u32,
    /// Relative change in a request's total cost that counts (0.25: 25%).
    pub cost_tolerance: f64,
}

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A listed request could not be read back.
    #[error(
        "no request `{0}` in the trace store (hint: `glassbox trace list` shows what is stored)"
    )]
    Missing(String),
}

/// The stored input, when the summary holds all of it.
pub fn stored_input(record: &RequestRecord) -> Result<Value, String> {
    let text = record.input_summary.trim();
    if text.is_empty() {
        return Err("no input was stored for this request".into());
    }
    serde_json::from_str::<Value>(text).map_err(|_| {
        if text.ends_with('…') {
            "the stored input was cut to the summary length, so it cannot be replayed".into()
        } else {
            "the stored input is not JSON, so it cannot be replayed".into()
        }
    })
}

fn arrow(nodes: &[std::sync::Arc<str>]) -> String {
    nodes.iter().map(|n| &**n).collect::<Vec<_>>().join(" → ")
}

/// Every change from `old` to `new` that `--replay` reports.
pub fn changes(
    old: (&RequestRecord, &[SpanRecord]),
    new: (&RequestRecord, &[SpanRecord]),
    cost_tolerance: f64,
) -> Vec<String> {
    let mut out = Vec::new();
    let (o, n) = (old.0, new.0);
    if o.status != n.status {
        out.push(format!(
            "status: {} became {}",
            o.status.as_str(),
            n.status.as_str()
        ));
    }
    let (po, pn) = (path_taken(&o.path), path_taken(&n.path));
    if po != pn {
        out.push(format!("path: {} became {}", arrow(&po), arrow(&pn)));
    }
    let nodes: BTreeSet<_> = o.labels.keys().chain(n.labels.keys()).collect();
    for node in nodes {
        let (lo, ln) = (o.labels.get(node), n.labels.get(node));
        if lo != ln {
            let show = |l: Option<&String>| l.map_or("(none)".to_string(), |l| format!("`{l}`"));
            out.push(format!("labels.{node}: {} became {}", show(lo), show(ln)));
        }
    }
    let (go, gn) = (guard_outcomes(o, old.1), guard_outcomes(n, new.1));
    let nodes: BTreeSet<_> = go.keys().chain(gn.keys()).collect();
    for node in nodes {
        let (a, b) = (go.get(node), gn.get(node));
        if a != b {
            let show = |g: Option<&glassbox_trace::GuardOutcome>| {
                g.map_or("(no judgement)".to_string(), |g| g.to_string())
            };
            out.push(format!("guard.{node}: {} became {}", show(a), show(b)));
        }
    }
    // Calls and tokens are priced exactly and repeat on a repeated path:
    // any change there counts. CPU-time prices vary from run to run, so the
    // total counts only beyond the tolerance.
    let fixed = |r: &RequestRecord| {
        r.receipt
            .lines
            .iter()
            .filter(|l| l.unit != Unit::CpuMs)
            .fold(Decimal::ZERO, |acc, l| acc.saturating_add(l.amount))
    };
    let (co, cn) = (o.receipt.total, n.receipt.total);
    let tolerance = Decimal::try_from(cost_tolerance).unwrap_or(Decimal::ZERO);
    if fixed(o) != fixed(n) || (cn - co).abs() > co.abs() * tolerance {
        let change = if co.is_zero() {
            String::new()
        } else {
            let pct = (cn - co) / co * Decimal::ONE_HUNDRED;
            format!(" ({:+}%)", pct.round_dp(1).normalize())
        };
        out.push(format!(
            "cost: {} became {} {}{change}",
            co.normalize(),
            cn.normalize(),
            n.receipt.currency
        ));
    }
    out
}

/// `old`, or `old ⇒ new` when they differ.
fn either(old: String, new: String) -> String {
    if old == new {
        old
    } else {
        format!("{old} ⇒ {new}")
    }
}

/// Replays the stored requests of `store` that `options` selects through
/// `local`; one result per request (none when nothing matched).
pub fn replay(
    local: &Local,
    store: &mut dyn TraceStore,
    options: &ReplayOptions,
) -> Result<Suite, ReplayError> {
    let topology_id = local.topology.id.as_str();
    let mut filter = options.filter.clone();
    if filter.topology.is_none() {
        filter.topology = Some(topology_id.to_string());
    }
    let rows = store.list(&ListQuery {
        filter,
        sort: Sort::Recent,
        limit: options.limit,
    })?;
    let mut results = Vec::with_capacity(rows.len());
    for row in rows {
        let missing = || ReplayError::Missing(row.request_id.clone());
        let id = RequestId::from_str(&row.request_id).map_err(|_| missing())?;
        let stored: StoredTrace = store.get(id)?.ok_or_else(missing)?;
        let old = &stored.record;
        let name = format!(
            "{} {}",
            old.request_id,
            glassbox_trace::truncate(&old.input_summary, 60)
        );
        let input = match stored_input(old) {
            Ok(v) => v,
            Err(why) => {
                results.push(CaseResult {
                    name,
                    location: format!("{}@{}", old.topology_id, old.version),
                    seconds: 0.0,
                    failures: Vec::new(),
                    skipped: Some(why),
                    request_id: old.request_id.to_string(),
                    path: arrow(&path_taken(&old.path)),
                    cost: old.receipt.total.normalize().to_string(),
                });
                continue;
            }
        };
        let outcome: Outcome = local.run(input, RunOptions::default());
        let new = &outcome.trace.record;
        let new_spans: Vec<SpanRecord> =
            outcome.trace.spans.iter().map(|s| (**s).clone()).collect();
        let mut failures = changes(
            (old, &stored.spans),
            (new, &new_spans),
            options.cost_tolerance,
        );
        if !failures.is_empty() {
            let diff = TraceDiff::between(
                Side {
                    record: old,
                    spans: &stored.spans,
                },
                Side {
                    record: new,
                    spans: &new_spans,
                },
            );
            if diff
                .first_divergence
                .as_ref()
                .is_some_and(|d| d.is_decision())
            {
                failures.push(format!("why: {}", diff.explain(Lang::En)));
            }
        }
        results.push(CaseResult {
            name,
            location: format!("{}@{}", old.topology_id, old.version),
            seconds: new.duration_us as f64 / 1e6,
            failures,
            skipped: None,
            request_id: new.request_id.to_string(),
            path: either(arrow(&path_taken(&old.path)), arrow(&path_taken(&new.path))),
            cost: either(
                old.receipt.total.normalize().to_string(),
                new.receipt.total.normalize().to_string(),
            ),
        });
    }
    Ok(Suite {
        name: format!("replay of {topology_id} on {}", local.topology.version),
        results,
    })
}
