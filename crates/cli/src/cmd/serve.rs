//! `glassbox serve`: the HTTP API, the OpenAI-compatible endpoints,
//! `/metrics` and the dashboard, over every topology in a directory.

use std::path::PathBuf;
use std::process::ExitCode;

use glassbox_server::api::system::describe;
use glassbox_server::{Config, ServerError, ServerOptions};
use glassbox_store::StoreUrl;

use super::store::{StoreArg, store_error};
use crate::exit::{self, Coded};

/// The environment variable holding a clear-text API key (every scope).
pub const API_KEY_ENV: &str = "GLASSBOX_API_KEY";

#[derive(Debug, clap::Args)]
#[command(
    after_help = "API keys come from GLASSBOX_API_KEY (every scope) or the config \
                        file (SHA-256 hashes with scopes); with none the server listens on \
                        127.0.0.1 only. With --cluster, GLASSBOX_WORKER_KEY is sent to the \
                        workers as their API key and is the pool key worker records must be \
                        signed with; GLASSBOX_WORKER_ALLOW lists the networks and hosts worker \
                        addresses may be in; GLASSBOX_ETCD_TLS_DIR (or GLASSBOX_ETCD_CA, GLASSBOX_ETCD_CERT, \
                        GLASSBOX_ETCD_KEY), GLASSBOX_ETCD_USER and GLASSBOX_ETCD_PASSWORD (or \
                        GLASSBOX_ETCD_PASSWORD_FILE) secure the connection to etcd \
                        (docs/cluster.md). See docs/server.md.\n\nExit codes: 0 stopped \
                        cleanly, 1 traces could not be flushed, 2 usage, 69 the address or \
                        the store is unavailable, 78 invalid config or directory."
)]
pub struct Args {
    /// Directory of topology files (json, yaml, yml); edits are picked up
    /// while serving.
    #[arg(long, value_name = "DIR", required_unless_present = "openapi")]
    pub topologies: Option<PathBuf>,
    /// Port [default: the config's, else 8080].
    #[arg(long)]
    pub port: Option<u16>,
    /// Address to listen on [default: 0.0.0.0 with keys, 127.0.0.1 without].
    #[arg(long)]
    pub host: Option<String>,
    #[command(flatten)]
    pub store: StoreArg,
    /// Server config file (TOML): keys, limits, CORS.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the OpenAPI document and exit.
    #[arg(long)]
    pub openapi: bool,
    /// Join a cluster: etcd client URLs, comma-separated. The worker pool
    /// (`glassbox worker`s registered there) is watched and shown at
    /// `GET /v1/cluster/workers` (docs/cluster.md).
    #[arg(long, value_name = "ETCD_URLS", env = "GLASSBOX_CLUSTER")]
    pub cluster: Option<String>,
    /// Key prefix in etcd (one pool per prefix).
    #[arg(long, value_name = "PREFIX", default_value = glassbox_cluster::member::DEFAULT_PREFIX, requires = "cluster")]
    pub cluster_prefix: String,
}

pub(crate) fn server_error(err: ServerError) -> anyhow::Error {
    let code = match err {
        ServerError::Store(e) => return store_error(e),
        ServerError::ConfigIo { .. }
        | ServerError::Config { .. }
        | ServerError::TopologiesDir { .. } => exit::INVALID,
        ServerError::Bind { .. } | ServerError::Models(_) => exit::UNAVAILABLE,
        ServerError::Io(_) => exit::FAILED,
    };
    anyhow::Error::new(Coded {
        code,
        message: format!("{err} [{}]", err.code()),
    })
}

/// Fills a pool from etcd and logs who joins and leaves.
fn watch_cluster(
    urls: &str,
    prefix: &str,
) -> anyhow::Result<(glassbox_cluster::Pool, glassbox_cluster::Watch)> {
    use glassbox_cluster::{EtcdOptions, WatchEvent};
    let etcd_error = |err: glassbox_cluster::EtcdError| {
        let code = if err.is_usage() {
            exit::USAGE
        } else {
            exit::UNAVAILABLE
        };
        anyhow::Error::new(Coded {
            code,
            message: format!("`--cluster`: {err} [{}]", err.code()),
        })
    };
    // TLS, user, pool key and worker allow-list from the environment
    // (docs/cluster.md, "Securing the cluster").
    let mut options = EtcdOptions::new(EtcdOptions::parse_endpoints(urls).map_err(etcd_error)?)
        .with_env()
        .map_err(etcd_error)?;
    if options.trust.key.is_none() {
        crate::out::status(
            "glassbox serve: GLASSBOX_WORKER_KEY is not set: worker records in etcd are accepted unsigned; anyone who can write to etcd can add a worker (docs/cluster.md, \"Securing the cluster\")",
        );
    }
    options.prefix = prefix.to_owned();
    let pool = glassbox_cluster::Pool::new();
    let watch = glassbox_cluster::watch(options.clone(), pool.clone(), |event| match event {
        WatchEvent::Joined(r) => crate::out::status(&format!(
            "glassbox serve: worker `{}` joined: {} at {} ({}; models {})",
            r.id,
            r.engine,
            r.address,
            r.hardware.name(),
            r.models.join(", ")
        )),
        WatchEvent::Left { id } => {
            crate::out::status(&format!("glassbox serve: worker `{id}` left"))
        }
        WatchEvent::Interrupted { error } => crate::out::status(&format!(
            "glassbox serve: cluster watch interrupted: {error}; resuming"
        )),
        WatchEvent::Resumed => crate::out::status("glassbox serve: cluster watch resumed"),
        WatchEvent::Skipped { key, reason } => crate::out::status(&format!(
            "glassbox serve: ignoring etcd key `{key}`: {reason}"
        )),
    })
    .map_err(etcd_error)?;
    crate::out::status(&format!(
        "glassbox serve: cluster pool from etcd at {} (prefix `{}`): {} worker(s)",
        options.endpoints_text(),
        options.prefix,
        pool.len()
    ));
    Ok((pool, watch))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.openapi {
        crate::out::print_text(&glassbox_server::openapi::json())?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some(dir) = args.topologies else {
        return Err(anyhow::Error::new(Coded {
            code: exit::USAGE,
            message: "give `--topologies DIR`".into(),
        }));
    };
    let mut config = match &args.config {
        Some(path) => Config::load(path).map_err(server_error)?,
        None => Config::default(),
    };
    if let Ok(key) = std::env::var(API_KEY_ENV)
        && !key.is_empty()
    {
        config.add_env_key(&key);
    }
    let store = StoreUrl::resolve(args.store.store.as_deref()).map_err(store_error)?;
    // Held while serving: dropping it stops the watch.
    let (pool, _watch) = match &args.cluster {
        Some(urls) => {
            let (pool, watch) = watch_cluster(urls, &args.cluster_prefix)?;
            (Some(pool), Some(watch))
        }
        None => (None, None),
    };
    let mut options = ServerOptions::new(dir, store.clone());
    options.cluster = pool;
    options.config = config;
    options.host = args.host;
    options.port = args.port;
    let stats = glassbox_server::serve_until_signal(options, |server| {
        for change in server.initial_changes() {
            crate::out::status(&format!("glassbox serve: {}", describe(change)));
        }
        for note in server.notes() {
            crate::out::status(&format!("glassbox serve: {note}"));
        }
        crate::out::status(&format!(
            "glassbox serve: listening on http://{} (traces in {store}); dashboard at /, API under /v1, metrics at /metrics",
            server.local_addr()
        ));
    })
    .map_err(server_error)?;
    crate::out::status(&format!(
        "glassbox serve: stopped; {} requests and {} spans written to the trace store",
        stats.requests_written, stats.spans_written
    ));
    Ok(ExitCode::SUCCESS)
}
