//! One node's whole run: attempts with retries and backoff, upstream
//! re-runs requested by output guards, and the fallback that replaces the
//! node when it still fails (the degraded path).

use std::sync::Arc;

use glassbox_topology::NodeId;
use glassbox_trace::{Fact, SpanRole};

use crate::attempt::{AttemptError, AttemptSpec, Begun, begin, finish};
use crate::built::BuiltPipeline;
use crate::cache::{Miss, NodeCache, Probe};
use crate::error::{ExecError, NodeError};
use crate::node::NodeCx;
use crate::request::{RequestShared, Slot};

/// Most upstream re-runs one node may trigger in one request, whatever the
/// node asks for (guards declare their own lower `max_reruns`).
pub const MAX_RERUNS: u32 = 10;

/// How one node's run ended.
pub(crate) struct NodeDone {
    pub node: NodeId,
    pub result: Result<Slot, ExecError>,
    /// The fallback that stood in, if one did.
    pub fallback: Option<NodeId>,
    /// Facts the engine adds to the explanation (retries, fallback, re-runs).
    pub facts: Vec<Fact>,
}

struct Attempts {
    result: Result<Slot, ExecError>,
    facts: Vec<Fact>,
}

/// Runs `node` (and its fallback if it fails) with the given active sources.
/// `first` is the node's first attempt when the executor already began it.
pub(crate) async fn run_node(
    built: &BuiltPipeline,
    req: Arc<RequestShared>,
    node: NodeId,
    sources: Arc<[NodeId]>,
    first: Option<Begun>,
) -> NodeDone {
    let primary = run_attempts(built, &req, node, SpanRole::Primary, sources.clone(), first).await;
    let mut facts = primary.facts;
    let err = match primary.result {
        Ok(slot) => {
            return NodeDone {
                node,
                result: Ok(slot),
                fallback: None,
                facts,
            };
        }
        Err(err) => err,
    };
    let Some(fallback) = req.topology.node(node).fallback else {
        return NodeDone {
            node,
            result: Err(err),
            fallback: None,
            facts,
        };
    };
    let role = SpanRole::Fallback {
        replaces: req.ids[node.0].clone(),
    };
    let fb = run_attempts(built, &req, fallback, role, sources, None).await;
    match fb.result {
        Ok(slot) => {
            // The fallback's output stands in for the failed node's.
            req.set_slot(node, slot.clone());
            facts.push(Fact::FellBack {
                fallback: req.ids[fallback.0].to_string(),
                cause: err.to_string(),
            });
            facts.extend(fb.facts);
            NodeDone {
                node,
                result: Ok(slot),
                fallback: Some(fallback),
                facts,
            }
        }
        Err(cause) => NodeDone {
            node,
            result: Err(ExecError::FallbackFailed {
                node: req.ids[node.0].to_string(),
                fallback: req.ids[fallback.0].to_string(),
                cause: Box::new(cause),
            }),
            fallback: Some(fallback),
            facts,
        },
    }
}

/// The sources an upstream node ran with: its incoming sources that finished.
fn finished_sources(req: &RequestShared, node: NodeId) -> Arc<[NodeId]> {
    req.topology
        .incoming(node)
        .iter()
        .map(|&e| req.topology.edge(e).from)
        .filter(|&src| req.output(src).is_some())
        .collect()
}

async fn run_attempts(
    built: &BuiltPipeline,
    req: &Arc<RequestShared>,
    node: NodeId,
    role: SpanRole,
    sources: Arc<[NodeId]>,
    mut first: Option<Begun>,
) -> Attempts {
    let policy = built.retry_policies[node.0];
    // A similarity cache embeds text before the first attempt, which is not
    // cheap: it runs here, asynchronously, and its result rides along with
    // every attempt (a retry that succeeds stores its output with it).
    let mut started = None;
    let probe = match &built.caches[node.0] {
        Some(cache)
            if cache.policy().similarity.is_some()
                && first.is_none()
                && !matches!(role, SpanRole::Rerun { .. }) =>
        {
            started = Some((glassbox_trace::unix_micros_now(), req.offset_us()));
            Some(probe(built, req, node, &sources, cache).await)
        }
        _ => None,
    };
    let mut facts = Vec::new();
    let mut attempt_no = 0u32;
    let mut retries_used = 0u32;
    let mut reruns = 0u32;
    let mut last_cause = String::new();
    loop {
        attempt_no += 1;
        let begun = match first.take() {
            Some(b) => b,
            None => {
                let spec = AttemptSpec {
                    node,
                    attempt: attempt_no,
                    role: role.clone(),
                    reruns,
                    sources: sources.clone(),
                    probe: probe.clone(),
                    started: started.take(),
                };
                begin(built, req, spec)
            }
        };
        let err = match finish(begun, built).await {
            Ok(slot) => {
                req.set_slot(node, slot.clone());
                if retries_used > 0 {
                    facts.insert(
                        0,
                        Fact::Retried {
                            attempts: attempt_no,
                            cause: last_cause,
                        },
                    );
                }
                return Attempts {
                    result: Ok(slot),
                    facts,
                };
            }
            Err(err) => err,
        };
        if let AttemptError::Node(NodeError::RerunUpstream { upstream, reason }) = &err
            && let Some(up) = req
                .topology
                .node_id(upstream)
                .filter(|_| reruns < MAX_RERUNS)
        {
            reruns += 1;
            let up_sources = finished_sources(req, up);
            let by = SpanRole::Rerun {
                by: req.ids[node.0].clone(),
            };
            let rerun = Box::pin(run_attempts(built, req, up, by, up_sources, None)).await;
            if let Err(e) = rerun.result {
                return Attempts {
                    result: Err(e),
                    facts,
                };
            }
            record_rerun(&mut facts, upstream, reason);
            continue;
        }
        if err.retryable() && policy.allows_another(retries_used + 1) {
            last_cause = err.describe();
            retries_used += 1;
            tokio::time::sleep(policy.backoff(retries_used)).await;
            continue;
        }
        let id = req.ids[node.0].to_string();
        let error = match err {
            AttemptError::Timeout(after) => ExecError::NodeTimeout {
                node: id,
                attempt: attempt_no,
                after,
            },
            AttemptError::Node(source) => ExecError::NodeFailed {
                node: id,
                attempt: attempt_no,
                source,
            },
        };
        if retries_used > 0 {
            facts.insert(
                0,
                Fact::Retried {
                    attempts: attempt_no,
                    cause: error.to_string(),
                },
            );
        }
        return Attempts {
            result: Err(error),
            facts,
        };
    }
}

/// Looks a request up in a similarity cache: the exact key first, then the
/// text's embedding (by the topology's embedding node, on the blocking pool,
/// within that node's timeout) against the cached ones. An embedding that
/// fails or times out is a miss: the cache never fails a request.
async fn probe(
    built: &BuiltPipeline,
    req: &Arc<RequestShared>,
    node: NodeId,
    sources: &Arc<[NodeId]>,
    cache: &NodeCache,
) -> Probe {
    let cx = NodeCx {
        req: req.clone(),
        node,
        attempt: 1,
        reruns: 0,
        sources: sources.clone(),
        cell: Default::default(),
    };
    let key = cache.key(built.nodes[node.0].as_ref(), &cx);
    if let hit @ Probe::Hit(_) = cache.exact(key) {
        return hit;
    }
    let miss = Probe::Miss(Miss { key, vector: None });
    let (Some(sim), Some(text)) = (cache.policy().similarity.as_ref(), cache.text(&cx)) else {
        return miss;
    };
    let embedder = built.nodes[sim.embedding.0].clone();
    let limit = req.topology.node(sim.embedding).timeout;
    let task = tokio::task::spawn_blocking(move || embedder.embed(&text));
    match tokio::time::timeout(limit, task).await {
        Ok(Ok(Some(Ok(vector)))) if !vector.is_empty() => cache.similar(key, vector.into()),
        _ => miss,
    }
}

fn record_rerun(facts: &mut Vec<Fact>, upstream: &str, reason: &str) {
    for f in facts.iter_mut() {
        if let Fact::Reran {
            node,
            times,
            reason: r,
        } = f
            && node == upstream
        {
            *times += 1;
            *r = reason.to_string();
            return;
        }
    }
    facts.push(Fact::Reran {
        node: upstream.to_string(),
        times: 1,
        reason: reason.to_string(),
    });
}
