//! The HTTP face of a cluster worker (`glassbox worker`, docs/cluster.md
//! "Membership"): its models, served by the application layer's model
//! door ([`ModelDoor`]) straight from their engines, behind the endpoints
//! a coordinator calls and watches:
//!
//! - `POST /v1/chat/completions` (streamed by SSE, with a progress
//!   comment every quiet second so a queued call is not taken for a hung
//!   one) and `POST /v1/embeddings`, OpenAI-compatible, `model` = a model
//!   name ([`routes`]);
//! - `GET /v1/models`: what is served;
//! - `/metrics` (the engines' `glassbox_llm_*`, the admission gauges, the
//!   GPUs' `glassbox_gpu_*`), `/health`, `/healthz`, `/readyz`.
//!
//! Why not the whole server: a worker answers model calls that a
//! coordinator's pipeline places, traces and prices; it has no topologies,
//! so it builds none, keeps no trace store and runs no pipeline. What it
//! shares with `glassbox serve` is the HTTP plumbing: the config file
//! (keys, connection limits, per-model `[topologies.NAME]` admission
//! limits), API keys and their rate limits ([`crate::auth`]), the keyless
//! checks, the connection limits and graceful drain ([`crate::connection`]),
//! the metrics registry and the GPU monitor.

pub mod routes;
pub mod state;

pub use state::WorkerState;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::{get, post};
use glassbox_app::models::Models;
use glassbox_app::models::door::ModelDoor;
use glassbox_app::service::Settings;

use crate::auth::{Guard, Keys, RateLimiter};
use crate::config::{Config, Scope};
use crate::error::{ApiError, ServerError};
use crate::gpu_monitor::{self, GpuMonitor};
use crate::metrics::Metrics;

/// How to start a worker's server.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The models to serve (loaded by [`WorkerServer::bind`]).
    pub models: Models,
    /// Keys, connection limits, and each model's admission under
    /// `[topologies.NAME]` (`max_concurrency`, `max_queue`).
    pub config: Config,
    /// Overrides the config's `host`.
    pub host: Option<String>,
    /// Overrides the config's `port` (0: any free port).
    pub port: Option<u16>,
}

/// A bound worker, not yet accepting calls.
pub struct WorkerServer {
    state: WorkerState,
    gpus: Arc<GpuMonitor>,
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    notes: Vec<String>,
}

impl std::fmt::Debug for WorkerServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerServer")
            .field("addr", &self.addr)
            .field("door", &self.state.door)
            .finish()
    }
}

impl WorkerServer {
    /// Loads the models (failing, naming each one that did not load) and
    /// binds the socket.
    pub async fn bind(options: WorkerOptions) -> Result<WorkerServer, ServerError> {
        let WorkerOptions {
            models,
            config,
            host,
            port,
        } = options;
        let config = Arc::new(config);
        let metrics = Arc::new(Metrics::new());
        let door = {
            let (config, metrics) = (config.clone(), metrics.clone());
            tokio::task::spawn_blocking(move || {
                let settings = config.clone();
                ModelDoor::load(models, move |name| settings.limits(name), metrics)
            })
            .await
            .map_err(|e| ServerError::Io(std::io::Error::other(e.to_string())))??
        };
        let mut notes = Vec::new();
        let listener = crate::connection::listen(&config, host, port, &mut notes).await?;
        let addr = listener.local_addr()?;
        let gpus = Arc::new(GpuMonitor::new(
            Arc::new(glassbox_cluster::gpu::shared()),
            gpu_monitor::local_worker_name(),
            config.alerts.gpu.clone(),
            metrics.clone(),
        ));
        let state = WorkerState {
            door: Arc::new(door),
            keys: Arc::new(Keys::new(&config)),
            limiter: Arc::new(RateLimiter::default()),
            metrics,
            config,
            ready: Arc::new(AtomicBool::new(false)),
        };
        Ok(WorkerServer {
            state,
            gpus,
            listener,
            addr,
            notes,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Things the operator should know (e.g. loopback-only without keys).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    pub fn state(&self) -> &WorkerState {
        &self.state
    }

    /// Serves until `shutdown` completes, then stops accepting and waits
    /// for the calls in flight; returns how many calls it answered.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<u64, ServerError> {
        let state = self.state.clone();
        let stop = glassbox_engine::CancellationToken::new();
        if state.config.alerts.gpu.enabled {
            let first = self.gpus.clone();
            let _ = tokio::task::spawn_blocking(move || {
                first.sample_now(glassbox_trace::unix_micros_now())
            })
            .await;
        }
        let sampler = tokio::spawn(gpu_monitor::run_periodically(
            self.gpus.clone(),
            stop.clone(),
        ));
        state.ready.store(true, Ordering::Release);
        let ready = state.ready.clone();
        crate::connection::serve(
            self.listener,
            router(state.clone()),
            state.config.connections,
            state.metrics.clone(),
            async move {
                shutdown.await;
                ready.store(false, Ordering::Release);
            },
        )
        .await;
        stop.cancel();
        let _ = sampler.await;
        Ok(state.door.answered())
    }
}

fn guarded(
    state: &WorkerState,
    scopes: &'static [Scope],
    routes: Router<WorkerState>,
) -> Router<WorkerState> {
    Guard::around(&state.keys, &state.limiter, &state.metrics, scopes, routes)
}

async fn not_found() -> ApiError {
    ApiError::not_found("not_found", "no such endpoint on a worker").hint(
        "a worker serves POST /v1/chat/completions, POST /v1/embeddings, GET /v1/models, /metrics and /health; topologies run on a coordinator (`glassbox serve --cluster`)",
    )
}

/// The worker's whole HTTP surface.
pub fn router(state: WorkerState) -> Router {
    let run = guarded(
        &state,
        &[Scope::Run],
        Router::new()
            .route("/v1/chat/completions", post(routes::chat_completions))
            .route("/v1/embeddings", post(routes::embeddings)),
    );
    let models = guarded(
        &state,
        &[Scope::Run, Scope::Read],
        Router::new().route("/v1/models", get(routes::models)),
    );
    let public = Router::new()
        .route("/healthz", get(routes::health))
        .route("/health", get(routes::health))
        .route("/readyz", get(routes::ready))
        .route("/metrics", get(routes::metrics));
    let keyless = crate::keyless::Keyless {
        keys_required: state.keys.required(),
        config: state.config.clone(),
    };
    let limit = state.config.body_limit_bytes;
    Router::new()
        .merge(run)
        .merge(models)
        .merge(public)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limit))
        .layer(from_fn_with_state(keyless, crate::keyless::guard))
        .layer(from_fn(crate::error::json_errors))
        .with_state(state)
}
