//! The model door: a worker's registered models ([`Models`]) served
//! straight from their engines, as TGI's `Infer` serves its one model. A
//! call is admitted, then handed to the model's engine: a llama.cpp
//! generation ([`ModelDoor::chat`], its text read piece by piece) or an
//! embedding ([`ModelDoor::embed`]). No topology, pipeline or trace of its
//! own stands between the caller and the engine: the coordinator that
//! placed the call traces, prices and explains it in its own request.
//!
//! Admission is the request service's, per model: each model has a gate
//! of `max_concurrency` slots and a bounded queue ordered by priority band
//! ([`crate::service::queue`], limits from the worker's config read by
//! model name), and a call asked to start within a time the engines' queue
//! would exceed is refused at once ([`crate::service::start`]), so a
//! coordinator moves it elsewhere instead of waiting.
//!
//! Errors are domain errors ([`CallError`]): an unknown model names what
//! is served, a model asked for the other kind of work says so, a refusal
//! is the request service's own; the door's HTTP routes (the server's
//! `worker` module) translate them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use glassbox_models::{
    ChatMessage, CompletionStream, Embedder, GenerateRequest, LlmError, LlmHandle, Role,
};
use glassbox_trace::Priority;

use super::{Model, ModelError, ModelKind, Models};
use crate::service::ServiceError;
use crate::service::queue::{Gates, Limits, Occupancy, Refused, Slot};

/// One model's engine, loaded once.
enum Engine {
    Llm(Arc<LlmHandle>),
    Embedding(Arc<Embedder>),
}

/// The models a worker serves, loaded, behind their admission.
pub struct ModelDoor {
    models: Models,
    engines: HashMap<String, Engine>,
    gates: Gates,
    /// Calls answered so far (for the worker's last words).
    answered: AtomicU64,
}

impl std::fmt::Debug for ModelDoor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelDoor")
            .field("models", &self.models.names())
            .finish_non_exhaustive()
    }
}

/// Why the door's models could not all be loaded: one line per model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .problems.join("\n"))]
pub struct LoadError {
    pub problems: Vec<String>,
}

/// Why a call was not answered.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// No model of that name is served here.
    #[error(transparent)]
    Unknown(ModelError),
    /// The model does the other kind of work.
    #[error("model `{name}` is an {} model; {}", .kind.node_kind(), match .kind {
        ModelKind::Llm => "ask it for chat completions, not embeddings",
        ModelKind::Embedding => "ask it for embeddings, not chat completions",
    })]
    WrongKind { name: String, kind: ModelKind },
    /// Admission refused it (full, shed, or it cannot start in time).
    #[error(transparent)]
    Refused(ServiceError),
    /// The call itself is malformed (an unknown role, nothing to embed).
    #[error("{0}")]
    BadInput(String),
    /// The engine's own queue is full.
    #[error("{0}")]
    Overloaded(String),
    /// The engine failed.
    #[error("model `{name}` failed: {message}")]
    Failed { name: String, message: String },
}

impl CallError {
    /// Its stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            CallError::Unknown(_) => "model_not_found",
            CallError::WrongKind { .. } => "wrong_model_kind",
            CallError::Refused(e) => e.code(),
            CallError::BadInput(_) => "bad_input",
            CallError::Overloaded(_) => "overloaded",
            CallError::Failed { .. } => "model_failed",
        }
    }
}

/// How a call asks to be admitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Admit {
    /// Its band: the slot and the engine's queue go to urgent work first.
    pub priority: Priority,
    /// How long it may wait to start (a coordinator says what is left of
    /// its node's timeout and its request's deadline).
    pub start_within: Option<Duration>,
}

/// One chat completion asked of an LLM.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatAsk {
    /// `(role, text)`: `system`, `user` or `assistant`.
    pub messages: Vec<(String, String)>,
    /// Lowers the worker's own `max_tokens` (never raises it).
    pub max_tokens: Option<u64>,
    /// Absent: an `llm_inference` node's default.
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub seed: Option<u64>,
    pub stop: Vec<String>,
    /// Someone reads the text as it comes (a client streaming it), so the
    /// engine keeps its pace while other prompts enter (chunked prefill).
    /// False when the pieces are only relayed to a caller that reads the
    /// answer whole: then a new prompt is evaluated in as few steps as it
    /// can.
    pub watched: bool,
}

/// A chat completion under way: its text piece by piece, then its end.
/// Dropping it (the caller went away) cancels the generation and frees
/// its slot.
pub struct ChatCall {
    pieces: CompletionStream,
    name: String,
    _slot: Slot,
}

impl std::fmt::Debug for ChatCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatCall")
            .field("model", &self.name)
            .finish_non_exhaustive()
    }
}

/// A finished chat completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatDone {
    pub text: String,
    /// `stop` or `length`.
    pub finish_reason: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The engine's version of the model (file name and hash prefix).
    pub version: String,
}

/// Embeddings of several texts.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    /// Input tokens, all texts together.
    pub tokens: u64,
    pub version: String,
}

impl ChatCall {
    /// The next piece of text, or `None` once generation ended.
    pub async fn next(&mut self) -> Option<String> {
        self.pieces.next().await
    }

    /// The whole completion (pieces not read are in its text).
    pub async fn finish(self) -> Result<ChatDone, CallError> {
        let ChatCall {
            pieces,
            name,
            _slot,
        } = self;
        let c = pieces.finish().await.map_err(|e| engine_error(&name, e))?;
        Ok(ChatDone {
            text: c.text,
            finish_reason: c.finish_reason.as_str().to_owned(),
            prompt_tokens: u64::from(c.usage.prompt_tokens),
            completion_tokens: u64::from(c.usage.completion_tokens),
            version: c.model,
        })
    }
}

impl ModelDoor {
    /// Loads every model's engine (blocking: model files are read here),
    /// the LLMs with the worker's engine settings; fails naming each model
    /// that did not load and why. `limits` gives each model's admission
    /// (by model name), `occupancy` hears how full each band is.
    pub fn load(
        models: Models,
        limits: impl Fn(&str) -> Limits + Send + Sync + 'static,
        occupancy: Arc<dyn Occupancy>,
    ) -> Result<ModelDoor, LoadError> {
        let cache = glassbox_nodes::model_cache::global();
        let settings = models.llm_settings();
        let config = glassbox_nodes::llm::LlmConfig {
            threads: settings.threads,
            context_size: settings.context_size,
            max_num_seqs: settings.max_num_seqs,
            ..Default::default()
        };
        let mut engines = HashMap::new();
        let mut problems = Vec::new();
        for m in models.iter() {
            let path = m.location();
            let loaded = match m.kind {
                ModelKind::Llm => cache
                    .llm(glassbox_nodes::llm::run::engine_options(&config, &path))
                    .map(Engine::Llm),
                ModelKind::Embedding => cache.embedder(&path).map(Engine::Embedding),
            };
            match loaded {
                Ok(engine) => {
                    engines.insert(m.name.clone(), engine);
                }
                Err(e) => problems.push(format!("model `{}` ({}): {e}", m.name, m.path)),
            }
        }
        if !problems.is_empty() {
            return Err(LoadError { problems });
        }
        Ok(ModelDoor {
            models,
            engines,
            gates: Gates::new(limits, occupancy),
            answered: AtomicU64::new(0),
        })
    }

    /// What is served.
    pub fn models(&self) -> &Models {
        &self.models
    }

    /// The engine's version of model `name` (file name and hash prefix).
    pub fn version(&self, name: &str) -> Option<&str> {
        match self.engines.get(name)? {
            Engine::Llm(h) => Some(h.version()),
            Engine::Embedding(e) => Some(e.version()),
        }
    }

    /// Calls answered so far.
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// Starts a chat completion on LLM `name` once admitted; its text is
    /// read from the returned call.
    pub async fn chat(
        &self,
        name: &str,
        ask: ChatAsk,
        admit: Admit,
    ) -> Result<ChatCall, CallError> {
        let (model, engine) = self.engine(name, ModelKind::Llm)?;
        let Engine::Llm(handle) = engine else {
            return Err(wrong_kind(model));
        };
        let messages = ask
            .messages
            .iter()
            .map(|(role, text)| message(role, text))
            .collect::<Result<Vec<_>, _>>()?;
        if !messages.iter().any(|m| m.role == Role::User) {
            return Err(CallError::BadInput(
                "no `user` message with text content".into(),
            ));
        }
        let cap = self.models.llm_settings().max_tokens;
        let max_tokens = ask.max_tokens.map_or(cap, |asked| asked.min(cap)).max(1);
        let request = GenerateRequest {
            messages,
            max_tokens: u32::try_from(max_tokens).unwrap_or(u32::MAX),
            temperature: ask
                .temperature
                .unwrap_or(glassbox_nodes::llm::run::DEFAULT_TEMPERATURE)
                as f32,
            top_p: ask.top_p.unwrap_or(1.0) as f32,
            seed: ask.seed.map(|s| s as u32),
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            stop: ask.stop,
            priority: admit.priority.rank(),
            grammar: None,
            chunks: Vec::new(),
        };
        let slot = self.admit(model, &admit, true).await?;
        let pieces = if ask.watched {
            handle.stream(request)
        } else {
            handle.stream_unwatched(request)
        }
        .map_err(|e| engine_error(&model.name, e))?;
        self.answered.fetch_add(1, Ordering::Relaxed);
        Ok(ChatCall {
            pieces,
            name: model.name.clone(),
            _slot: slot,
        })
    }

    /// Embeds `texts` with embedding model `name` once admitted, on a
    /// blocking thread.
    pub async fn embed(
        &self,
        name: &str,
        texts: Vec<String>,
        admit: Admit,
    ) -> Result<Embedded, CallError> {
        let (model, engine) = self.engine(name, ModelKind::Embedding)?;
        let Engine::Embedding(embedder) = engine else {
            return Err(wrong_kind(model));
        };
        if texts.is_empty() || texts.iter().any(|t| t.trim().is_empty()) {
            return Err(CallError::BadInput(
                "`input` needs at least one text, and no text may be empty".into(),
            ));
        }
        let slot = self.admit(model, &admit, false).await?;
        let embedder = embedder.clone();
        let name = model.name.clone();
        let failed = |message: String| CallError::Failed {
            name: name.clone(),
            message,
        };
        let done = tokio::task::spawn_blocking(move || {
            let mut tokens = 0u64;
            for t in &texts {
                let n = embedder
                    .tokenize(t)
                    .map_err(|e| CallError::BadInput(e.to_string()))?
                    .len();
                tokens += n as u64;
            }
            let vectors = embedder.embed(&texts).map_err(|e| e.to_string());
            Ok::<_, CallError>((vectors, tokens, embedder.version().to_owned()))
        })
        .await
        .map_err(|e| failed(e.to_string()))??;
        drop(slot);
        let (vectors, tokens, version) = done;
        self.answered.fetch_add(1, Ordering::Relaxed);
        Ok(Embedded {
            vectors: vectors.map_err(failed)?,
            tokens,
            version,
        })
    }

    /// Model `name` and its engine, when it does `kind` of work.
    fn engine(&self, name: &str, kind: ModelKind) -> Result<(&Model, &Engine), CallError> {
        let model = self.models.get(name).map_err(CallError::Unknown)?;
        if model.kind != kind {
            return Err(wrong_kind(model));
        }
        let engine = self.engines.get(name).ok_or_else(|| CallError::Failed {
            name: name.to_owned(),
            message: "its engine is not loaded".into(),
        })?;
        Ok((model, engine))
    }

    /// A slot of the model's gate, after the engines' start estimate (LLMs).
    async fn admit(&self, model: &Model, admit: &Admit, llm: bool) -> Result<Slot, CallError> {
        if llm {
            let loads: Vec<_> = glassbox_nodes::model_cache::global()
                .llm_loads()
                .into_iter()
                .map(|(_, l)| l)
                .collect();
            crate::service::start::check(admit.start_within, &loads).map_err(CallError::Refused)?;
        }
        let gate = self.gates.gate(&model.name);
        let limits = gate.limits();
        let band = admit.priority;
        gate.acquire(band)
            .await
            .map(|(slot, _)| slot)
            .map_err(|refused| {
                let topology = model.name.clone();
                CallError::Refused(match refused {
                    Refused::Full => ServiceError::Overloaded {
                        topology,
                        slots: limits.slots,
                        queue: None,
                    },
                    Refused::QueueFull => ServiceError::Overloaded {
                        topology,
                        slots: limits.slots,
                        queue: Some((limits.queue, band)),
                    },
                    Refused::Shed { by } => ServiceError::Shed {
                        topology,
                        band,
                        by,
                        queue: limits.queue,
                    },
                })
            })
    }
}

fn wrong_kind(model: &Model) -> CallError {
    CallError::WrongKind {
        name: model.name.clone(),
        kind: model.kind,
    }
}

fn message(role: &str, text: &str) -> Result<ChatMessage, CallError> {
    match role {
        "system" | "developer" => Ok(ChatMessage::system(text)),
        "user" => Ok(ChatMessage::user(text)),
        "assistant" => Ok(ChatMessage::assistant(text)),
        other => Err(CallError::BadInput(format!(
            "a worker reads `system`, `user` and `assistant` messages, not `{other}` (tool calls are not placed on workers)"
        ))),
    }
}

fn engine_error(name: &str, e: LlmError) -> CallError {
    if e.is_invalid_request() {
        CallError::BadInput(e.to_string())
    } else if matches!(e, LlmError::QueueFull { .. }) {
        CallError::Overloaded(e.to_string())
    } else {
        CallError::Failed {
            name: name.to_owned(),
            message: e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::LlmSettings;

    struct Quiet;
    impl Occupancy for Quiet {
        fn band(&self, _: &str, _: Priority, _: usize, _: usize) {}
    }

    fn limits(_: &str) -> Limits {
        Limits {
            slots: 1,
            queue: 0,
            max_passed_over: 1,
        }
    }

    #[test]
    fn a_model_that_does_not_load_is_named_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent.gguf");
        let mut models = Models::new(LlmSettings::default());
        models
            .register("small", ModelKind::Llm, missing.to_str().unwrap())
            .unwrap();
        let err = ModelDoor::load(models, limits, Arc::new(Quiet)).unwrap_err();
        assert_eq!(err.problems.len(), 1, "{err}");
        let line = &err.problems[0];
        assert!(line.starts_with("model `small` ("), "{line}");
        assert!(line.contains("absent.gguf"), "{line}");
    }

    #[test]
    fn an_empty_door_names_what_it_serves_and_roles_are_checked() {
        let door = ModelDoor::load(Models::default(), limits, Arc::new(Quiet)).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let err = rt
            .block_on(door.chat("x", ChatAsk::default(), Admit::default()))
            .unwrap_err();
        assert_eq!(err.code(), "model_not_found");
        assert_eq!(
            err.to_string(),
            "this worker does not serve model `x`; it serves: nothing"
        );
        assert_eq!(message("tool", "t").unwrap_err().code(), "bad_input");
        assert_eq!(message("developer", "t").unwrap().role, Role::System);
    }
}
