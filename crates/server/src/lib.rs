//! # glassbox-server
//!
//! `glassbox serve`: the HTTP face of Glassbox. Every valid topology in a
//! directory is served (and hot-reloaded); each request runs through its
//! pipeline and is recorded as a trace in the store.
//!
//! - `/v1/topologies/{id}/runs`: run one request (output, path, receipt,
//!   explanation, request id).
//! - `/v1/topologies`, `/v1/traces`, `/v1/reports/summary`: what is served,
//!   what happened, what it cost.
//! - `/v1/topologies/{id}/versions`, `/split`, `/rollback`, `…/promote`:
//!   several versions of one topology, a sticky traffic split for canaries,
//!   promotion and rollback without a restart ([`versions`]).
//! - `/v1/chat/completions`, `/v1/embeddings`, `/v1/models`: the OpenAI API,
//!   topologies as models, streaming by SSE ([`api::openai`]).
//! - `/metrics`, `/healthz`, `/readyz`; the dashboard at `/` ([`dashboard`]).
//! - `/v1/gpus`, `/v1/alerts`: GPU readings and alerts ([`gpu_monitor`]),
//!   drift alerts ([`alerts`]).
//! - `/v1/cluster/workers`: the worker pool of `glassbox serve --cluster`
//!   ([`api::cluster`]).
//! - [`worker`]: a cluster worker's own, smaller surface (`glassbox
//!   worker`): its models through the application layer's model door,
//!   no topologies, no pipelines, no trace store.
//!
//! Main types: [`Server`] (bind, then run until a shutdown signal),
//! [`ServerOptions`], [`Config`] (the TOML config file: keys, limits, CORS),
//! [`Catalog`](glassbox_app::catalog::Catalog) (the served topologies), [`AppState`],
//! [`Service`] (the one door every request goes through:
//! admission, the engine runtime, streaming, usage, the trace hand-off).
//!
//! Why this shape: the server is a thin layer over the engine and the store.
//! Admission control happens before any work (API key and scope, per-key
//! token buckets that count work, per-topology semaphore answered with 429
//! rather than a queue), so overload shows up as fast rejections, never as
//! unbounded memory or latency. Metrics are derived from the very trace
//! records that go to the store, so the two cannot disagree.
//!
//! Inbound hardening (docs/security.md): every connection has header, body
//! and idle time limits and a per-address cap ([`connection`]); without API
//! keys only loopback `Host`s and same-origin state changes are accepted
//! ([`keyless`]); every error is JSON ([`error::json_errors`]); the
//! dashboard is served under a strict Content-Security-Policy.

pub mod alerts;
pub mod api;
pub mod auth;
pub mod config;
pub mod connection;
pub mod dashboard;
pub mod error;
pub mod gpu_monitor;
pub mod keyless;
mod llm_metrics;
pub mod metrics;
pub mod openapi;
pub mod read_pool;
pub mod service;
pub mod state;
pub mod worker;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::{get, post, put};
use glassbox_store::{StoreUrl, WriterOptions, WriterStats};
use tower_http::cors::{AllowOrigin, CorsLayer};

pub use config::{Config, Durability, Scope};
pub use error::{ApiError, ServerError};
pub use glassbox_app::catalog::{Catalog, Change};
pub use state::AppState;

use crate::auth::{Guard, Keys, RateLimiter};
use crate::metrics::{MeteredSink, Metrics};
use crate::read_pool::ReadPool;
use crate::service::Service;
use glassbox_app::catalog::Builder;

/// How to start a server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The directory of topology files (json, yaml, yml).
    pub topologies_dir: PathBuf,
    pub store: StoreUrl,
    pub config: Config,
    /// Overrides the config's `host`.
    pub host: Option<String>,
    /// Overrides the config's `port` (0: any free port).
    pub port: Option<u16>,
    /// How often the directory is rescanned.
    pub poll_interval: Duration,
    /// Longest input/output summary kept in traces.
    pub summary_chars: usize,
    /// The cluster's worker pool (`glassbox serve --cluster` fills it from
    /// etcd): GPU-tagged `llm_inference` and `embedding` nodes are placed
    /// on its workers (docs/cluster.md). `None`: everything runs here.
    /// How calls are placed on the pool's workers, timed out, failed over
    /// and probed comes from the config's `[cluster]` section
    /// (`Config::dispatch`).
    pub cluster: Option<glassbox_cluster::Pool>,
}

impl ServerOptions {
    pub fn new(topologies_dir: PathBuf, store: StoreUrl) -> ServerOptions {
        ServerOptions {
            topologies_dir,
            store,
            config: Config::default(),
            host: None,
            port: None,
            poll_interval: Duration::from_secs(1),
            summary_chars: 200,
            cluster: None,
        }
    }
}

/// A bound server, not yet accepting requests.
pub struct Server {
    state: AppState,
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    notes: Vec<String>,
    initial: Vec<Change>,
    poll_interval: Duration,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

fn blocking_error(e: tokio::task::JoinError) -> ServerError {
    ServerError::Io(std::io::Error::other(e.to_string()))
}

impl Server {
    /// Opens the store, loads the topologies and binds the socket.
    pub async fn bind(options: ServerOptions) -> Result<Server, ServerError> {
        let ServerOptions {
            topologies_dir,
            store,
            config,
            host,
            port,
            poll_interval,
            summary_chars,
            cluster,
        } = options;
        // The pool for `/v1/cluster/workers`; the dispatcher places on it.
        let pool = cluster.clone();
        let cluster = match cluster {
            Some(pool) => {
                let dispatcher = glassbox_nodes::cluster::Dispatcher::new(pool, config.dispatch);
                dispatcher.start_probes()?;
                Some(Arc::new(dispatcher))
            }
            None => None,
        };
        let mut config = config;
        if config.ingest.held_dir.is_none() {
            config.ingest.held_dir = api::otlp::default_held_dir(&store);
        }
        let config = Arc::new(config);
        let url = store.clone();
        let (writer, readers) = tokio::task::spawn_blocking(move || {
            let writer = glassbox_store::open_with(&url, WriterOptions::default())?;
            let readers = (0..ReadPool::SIZE)
                .map(|_| glassbox_store::open_store(&url))
                .collect::<Result<Vec<_>, _>>()?;
            Ok::<_, glassbox_store::StoreError>((writer, readers))
        })
        .await
        .map_err(blocking_error)??;
        let writer = Arc::new(writer);
        let metrics = Arc::new(Metrics::new());
        let registry = glassbox_nodes::registry();
        let builder = Builder {
            registry,
            sink_for: {
                let (metrics, writer) = (metrics.clone(), writer.clone());
                Box::new(move |id: &str| {
                    Arc::new(MeteredSink {
                        topology: Arc::from(id),
                        metrics: metrics.clone(),
                        inner: writer.clone(),
                    }) as Arc<dyn glassbox_trace::TraceSink>
                })
            },
            on_scan: {
                let metrics = metrics.clone();
                Box::new(move |n| metrics.set_topologies(n))
            },
            summary_chars,
            promoted: config.promoted_versions(),
            outbound: Arc::new(glassbox_nodes::outbound::ServerAllow {
                ranges: config.outbound_allow.clone(),
                secrets: config.secrets.clone(),
            }),
            cluster,
        };
        let catalog = Arc::new(Catalog::new(topologies_dir, builder));
        let scan = catalog.clone();
        let initial = tokio::task::spawn_blocking(move || scan.rescan())
            .await
            .map_err(blocking_error)??;

        let mut notes = Vec::new();
        let listener = connection::listen(&config, host, port, &mut notes).await?;
        let addr = listener.local_addr()?;
        let gpus = Arc::new(gpu_monitor::GpuMonitor::new(
            Arc::new(glassbox_cluster::gpu::shared()),
            gpu_monitor::local_worker_name(),
            config.alerts.gpu.clone(),
            metrics.clone(),
        ));
        if config.alerts.gpu.enabled {
            // The first reading before any request, so `/metrics` and
            // `/v1/gpus` agree from the start.
            let first = gpus.clone();
            tokio::task::spawn_blocking(move || {
                first.sample_now(glassbox_trace::unix_micros_now())
            })
            .await
            .map_err(blocking_error)?;
        }
        let readers = Arc::new(ReadPool::new(readers));
        let (ingest, replayed) = api::otlp::open_receiver(&config, &readers, &mut notes).await?;
        let alerts = Arc::new(alerts::AlertBoard::new(
            config.alerts.clone(),
            readers.clone(),
            metrics.clone(),
        ));
        let limiter = Arc::new(RateLimiter::default());
        let state = AppState {
            keys: Arc::new(Keys::new(&config)),
            service: Arc::new(Service::new(service::Parts {
                catalog: catalog.clone(),
                settings: config.clone(),
                observer: metrics.clone(),
                writer: writer.clone(),
                limiter: limiter.clone(),
            })?),
            config,
            catalog,
            limiter,
            metrics,
            writer,
            readers,
            ready: Arc::new(AtomicBool::new(false)),
            alerts,
            gpus,
            pool,
            ingest,
        };
        api::otlp::store_replayed(&state, replayed);
        Ok(Server {
            state,
            listener,
            addr,
            notes,
            initial,
            poll_interval,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Things the operator should know (e.g. loopback-only without keys).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// What the first scan of the topologies directory found.
    pub fn initial_changes(&self) -> &[Change] {
        &self.initial
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` completes, then stops accepting, waits for
    /// in-flight requests to finish and flushes the trace writer.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<WriterStats, ServerError> {
        let state = self.state.clone();
        let stop = glassbox_engine::CancellationToken::new();
        let poller = tokio::spawn(poll(state.clone(), self.poll_interval, stop.clone()));
        let drift = tokio::spawn(alerts::run_periodically(state.alerts.clone(), stop.clone()));
        let expiry = tokio::spawn(api::otlp::expire_periodically(state.clone(), stop.clone()));
        let gpu_sampler = tokio::spawn(gpu_monitor::run_periodically(
            state.gpus.clone(),
            stop.clone(),
        ));
        state.ready.store(true, Ordering::Release);
        let ready = state.ready.clone();
        let draining = stop.clone();
        let app = router(state.clone());
        connection::serve(
            self.listener,
            app,
            state.config.connections,
            state.metrics.clone(),
            async move {
                shutdown.await;
                ready.store(false, Ordering::Release);
                draining.cancel();
            },
        )
        .await;
        stop.cancel();
        let _ = poller.await;
        let _ = drift.await;
        let _ = expiry.await;
        let _ = gpu_sampler.await;
        let writer = state.writer.clone();
        let stats = tokio::task::spawn_blocking(move || writer.close())
            .await
            .map_err(blocking_error)??;
        Ok(stats)
    }
}

async fn poll(state: AppState, every: Duration, stop: glassbox_engine::CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let catalog = state.catalog.clone();
        match tokio::task::spawn_blocking(move || catalog.rescan()).await {
            Ok(Ok(changes)) => {
                for c in &changes {
                    glassbox_app::console::serve_line(api::system::describe(c));
                }
            }
            Ok(Err(e)) => glassbox_app::console::serve_line(format_args!("rescan failed: {e}")),
            Err(e) => glassbox_app::console::serve_line(format_args!("rescan failed: {e}")),
        }
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

fn guarded(
    state: &AppState,
    scopes: &'static [Scope],
    routes: Router<AppState>,
) -> Router<AppState> {
    Guard::around(&state.keys, &state.limiter, &state.metrics, scopes, routes)
}

async fn not_found() -> ApiError {
    ApiError::not_found("not_found", "no such endpoint").hint(
        "GET /v1/topologies, /v1/traces, /v1/models; the API is described in docs/openapi.json",
    )
}

/// The whole HTTP surface.
pub fn router(state: AppState) -> Router {
    use crate::api::{
        cluster, compare, openai, reports, runs, system, topologies, traces, versions,
    };
    let run = guarded(
        &state,
        &[Scope::Run],
        Router::new()
            .route("/v1/topologies/{id}/runs", post(runs::create_run))
            .route("/v1/chat/completions", post(openai::chat_completions))
            .route("/v1/embeddings", post(openai::embeddings)),
    );
    let read = guarded(
        &state,
        &[Scope::Read],
        Router::new()
            .route("/v1/topologies", get(topologies::list_topologies))
            .route("/v1/topologies/{id}", get(topologies::get_topology))
            .route("/v1/topologies/{id}/versions", get(versions::list_versions))
            .route("/v1/discovered", get(api::discovered::list_discovered))
            .route(
                "/v1/discovered/graph",
                get(api::discovered::discovered_graph),
            )
            .route("/v1/traces", get(traces::list_traces))
            .route("/v1/traces/{request_id}", get(traces::get_trace))
            .route("/v1/traces/{a}/diff/{b}", get(traces::diff_traces))
            .route("/v1/reports", get(reports::get_summary))
            .route("/v1/reports/compare", get(compare::compare_versions))
            .route("/v1/reports/{name}", get(reports::get_report))
            .route("/v1/alerts", get(api::alerts::list_alerts))
            .route("/v1/gpus", get(api::gpus::list_gpus))
            .route("/v1/cluster/workers", get(cluster::list_workers)),
    );
    // The OTLP trace receiver: an app sending its traces is writing, like
    // a run, so it takes the `run` scope.
    let ingest = guarded(
        &state,
        &[Scope::Run],
        Router::new()
            .route("/v1/traces", post(api::otlp::export))
            .layer(DefaultBodyLimit::max(state.config.ingest.max_body_bytes)),
    );
    let models = guarded(
        &state,
        &[Scope::Run, Scope::Read],
        Router::new().route("/v1/models", get(openai::models)),
    );
    let admin = guarded(
        &state,
        &[Scope::Admin],
        Router::new()
            .route("/v1/admin/reload", post(system::reload))
            .route("/v1/topologies/{id}/split", put(versions::set_split))
            .route(
                "/v1/topologies/{id}/versions/{version}/promote",
                post(versions::promote),
            )
            .route("/v1/topologies/{id}/rollback", post(versions::rollback)),
    );
    let public = Router::new()
        .route("/healthz", get(system::healthz))
        // `/health` as vLLM, SGLang and llama-server name it, so a cluster
        // probes every kind of worker at the same path.
        .route("/health", get(system::healthz))
        .route("/readyz", get(system::readyz))
        .route("/metrics", get(system::metrics))
        .route("/", get(dashboard::index))
        .route("/assets/{file}", get(dashboard::asset));
    let mut app: Router<AppState> = Router::new()
        .merge(run)
        .merge(read)
        .merge(ingest)
        .merge(models)
        .merge(admin)
        .merge(public)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(state.config.body_limit_bytes));
    if let Some(cors) = cors(&state.config) {
        app = app.layer(cors);
    }
    // Outermost: keyless checks before anything else runs, and every error
    // on the way out is JSON (the keyless refusals included).
    let keyless = keyless::Keyless {
        keys_required: state.keys.required(),
        config: state.config.clone(),
    };
    app.layer(from_fn_with_state(keyless, keyless::guard))
        .layer(from_fn(error::json_errors))
        .with_state(state)
}

/// CORS is off unless origins are configured (`*` allows any).
fn cors(config: &Config) -> Option<CorsLayer> {
    if config.cors_origins.is_empty() {
        return None;
    }
    let origin = if config.cors_origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            config
                .cors_origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(o).ok()),
        )
    };
    Some(
        CorsLayer::new()
            .allow_origin(origin)
            .allow_methods([Method::GET, Method::POST, Method::PUT])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                HeaderName::from_static(glassbox_app::versions::KEY_HEADER),
            ])
            .expose_headers([
                HeaderName::from_static(api::REQUEST_ID_HEADER),
                header::RETRY_AFTER,
            ]),
    )
}

/// Binds and serves on a new multi-threaded runtime until SIGINT/SIGTERM;
/// `started` sees the bound server first (to print its address and notes).
/// For callers without a runtime of their own (the `glassbox` binary).
pub fn serve_until_signal(
    options: ServerOptions,
    started: impl FnOnce(&Server),
) -> Result<WriterStats, ServerError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("glassbox-server")
        .build()?;
    runtime.block_on(async move {
        let server = Server::bind(options).await?;
        started(&server);
        server.run(shutdown_signal()).await
    })
}
