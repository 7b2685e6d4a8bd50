//! A topology being served ([`Served`]): its validated topology, the
//! pipeline built from it, where it came from, and what its kinds let it
//! do (stream tokens live, embed). Below the catalog that loads them, the
//! version line-ups that choose among them, and the service that runs them.

use std::path::PathBuf;
use std::sync::Arc;

use glassbox_engine::Pipeline;
use glassbox_nodes::Registry;
use glassbox_topology::Topology;

/// How chat completions stream a topology's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamMode {
    /// Tokens of these LLM nodes (the last LLMs on any path) go out as
    /// they are generated.
    Live { nodes: Vec<String> },
    /// The final output is sent once the request ends: the topology has no
    /// LLM, or an output guard checks LLM text before it leaves.
    Buffered { reason: &'static str },
}

/// A topology being served.
#[derive(Debug)]
pub struct Served {
    pub topology: Arc<Topology>,
    pub pipeline: Pipeline,
    /// The file it came from.
    pub file: PathBuf,
    /// When this version was loaded (microseconds since the epoch).
    pub loaded_at_us: u64,
    pub stream: StreamMode,
    /// Every entry node embeds (usable by `/v1/embeddings`).
    pub embeds: bool,
}

/// Live streaming unless an output guard sits after a text-streaming node
/// (its text must not leave unchecked) or no node streams text at all.
/// What a kind does is the kind's answer, through `kinds`.
pub fn stream_mode(t: &Topology, kinds: &Registry) -> StreamMode {
    let writers: Vec<glassbox_topology::NodeId> = t
        .node_ids()
        .filter(|&i| kinds.streams_text(&t.node(i).kind))
        .collect();
    if writers.is_empty() {
        return StreamMode::Buffered { reason: "no_llm" };
    }
    let mut last = Vec::new();
    for &i in &writers {
        let after = t.downstream(i);
        if after.iter().any(|&j| kinds.guards_output(&t.node(j).kind)) {
            return StreamMode::Buffered {
                reason: "output_guard",
            };
        }
        if !after.iter().any(|&j| kinds.streams_text(&t.node(j).kind)) {
            last.push(t.node(i).id.clone());
        }
    }
    StreamMode::Live { nodes: last }
}

/// Every entry node embeds: the topology turns text into a vector.
pub fn embeds(t: &Topology, kinds: &Registry) -> bool {
    !t.entries().is_empty() && t.entries().iter().all(|e| kinds.embeds(&t.node(*e).kind))
}
