//! `glassbox worker`: one member of the cluster's pool (docs/cluster.md,
//! "Membership").
//!
//! Without `--attach` it loads local models (the same `llm_inference` and
//! `embedding` engines `glassbox serve` runs) and serves each as a model of
//! the OpenAI-compatible API ([`local`]); with `--attach URL` it registers
//! a server that already runs elsewhere (vLLM, SGLang, llama.cpp's
//! `llama-server`, another Glassbox) and reads its load from its
//! Prometheus metrics ([`attach`]). Either way it registers in etcd under a
//! lease (`glassbox_cluster::Registration`) and refreshes its load about
//! every second until it stops; a worker killed outright leaves the pool
//! when its lease expires.

mod attach;
mod local;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use glassbox_cluster::{EtcdError, EtcdOptions, RegistrationEvent, RegistrationOptions};

use super::trace::StoreArg;
use crate::exit::{self, Coded};

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    glassbox worker --etcd http://10.0.0.5:2379 --port 8090 --label zone=a\n  \
    glassbox worker --etcd http://10.0.0.5:2379 --llm qwen=/models/qwen2.5-0.5b-q4.gguf --threads 8\n  \
    glassbox worker --etcd http://10.0.0.5:2379 --attach http://10.0.0.7:8000   # a vLLM server\n\n\
    Without --llm or --embedding, the local models `glassbox models fetch` put in the models \
    directory are served (smollm2, all-minilm-l6-v2). API keys work as for `glassbox serve` \
    (GLASSBOX_API_KEY or --config); without one the worker listens on 127.0.0.1 only. \
    GLASSBOX_WORKER_KEY signs the worker's record in etcd (coordinators with the key accept \
    no other); GLASSBOX_ETCD_TLS_DIR (or GLASSBOX_ETCD_CA, GLASSBOX_ETCD_CERT, GLASSBOX_ETCD_KEY), GLASSBOX_ETCD_USER \
    and GLASSBOX_ETCD_PASSWORD (or GLASSBOX_ETCD_PASSWORD_FILE) secure the connection to \
    etcd. See docs/cluster.md.\n\nExit codes: 0 stopped cleanly, 2 usage, 69 etcd, a model, the \
    address or the attached server is unavailable, 78 invalid config.")]
pub struct Args {
    /// etcd client URLs, comma-separated (`http://HOST:2379,...`).
    #[arg(long, value_name = "URLS", env = "GLASSBOX_ETCD")]
    pub etcd: String,
    /// Key prefix in etcd (one pool per prefix).
    #[arg(long, value_name = "PREFIX", default_value = glassbox_cluster::member::DEFAULT_PREFIX)]
    pub etcd_prefix: String,
    /// Register this existing OpenAI-compatible server instead of serving
    /// local models: its base URL (`http://HOST:PORT`, without `/v1`).
    #[arg(long, value_name = "URL", conflicts_with_all = ["llm", "embedding", "port", "host", "config"])]
    pub attach: Option<String>,
    /// With --attach: the engine whose metric names to read (vllm, sglang,
    /// llama.cpp, glassbox) [default: told by its /metrics].
    #[arg(long, value_name = "ENGINE", requires = "attach")]
    pub engine: Option<String>,
    /// With --attach: node kinds it serves (repeatable) [default: llm_inference].
    #[arg(long = "node-kind", value_name = "KIND", requires = "attach")]
    pub node_kinds: Vec<String>,
    /// A local LLM to serve as model NAME: a GGUF file, absolute or in the
    /// models directory (repeatable).
    #[arg(long, value_name = "NAME=GGUF")]
    pub llm: Vec<String>,
    /// A local embedding model to serve as model NAME: its directory,
    /// absolute or in the models directory (repeatable).
    #[arg(long, value_name = "NAME=DIR")]
    pub embedding: Vec<String>,
    /// CPU threads per local LLM [default: the engine's].
    #[arg(long)]
    pub threads: Option<u64>,
    /// Context size per sequence of the local LLMs [default: the engine's].
    #[arg(long)]
    pub context_size: Option<u64>,
    /// Sequences each local LLM decodes together [default: the engine's].
    #[arg(long)]
    pub max_num_seqs: Option<u64>,
    /// Most tokens a chat answer may have (a chat request's own
    /// `max_tokens` lowers it for that request, as coordinators' calls do).
    #[arg(long, default_value_t = 256)]
    pub max_tokens: u64,
    /// Port to listen on [default: 8090; 0 picks a free one].
    #[arg(long)]
    pub port: Option<u16>,
    /// Address to listen on [default: 0.0.0.0 with keys, 127.0.0.1 without].
    #[arg(long)]
    pub host: Option<String>,
    #[command(flatten)]
    pub store: StoreArg,
    /// Server config file (TOML): keys, limits; as for `glassbox serve`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The base URL coordinators reach this worker at [default: from the
    /// bound address; the host name when bound to every interface].
    #[arg(long, value_name = "URL")]
    pub advertise: Option<String>,
    /// This worker's id in the pool [default: HOSTNAME-PID-STARTSECS, so a
    /// restarted worker is a new member].
    #[arg(long)]
    pub id: Option<String>,
    /// A label placement may filter on (repeatable): `zone=a`.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Seconds after its last keep-alive that a dead worker leaves the pool.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub lease_ttl: u64,
    /// For benchmarks only: every step of the local LLMs also sleeps
    /// (FACTOR − 1) × its compute time, emulating hardware FACTOR× slower.
    /// The worker's hardware name and a `test_slowdown` label say so.
    #[arg(long, value_name = "FACTOR", hide = true, conflicts_with = "attach")]
    pub test_slowdown: Option<f64>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let common = Common::from_args(&args)?;
    match args.attach.clone() {
        Some(url) => attach::run(args, common, &url),
        None => local::run(args, common),
    }
}

/// What both kinds of worker share: where etcd is, who this worker is.
#[derive(Debug)]
struct Common {
    registration: RegistrationOptions,
    id: String,
    labels: BTreeMap<String, String>,
    started_at: u64,
}

impl Common {
    fn from_args(args: &Args) -> anyhow::Result<Common> {
        let endpoints = EtcdOptions::parse_endpoints(&args.etcd).map_err(etcd_error)?;
        // The pool key signs this worker's record; TLS and user from the
        // environment too (docs/cluster.md, "Securing the cluster").
        let mut etcd = EtcdOptions::new(endpoints).with_env().map_err(etcd_error)?;
        etcd.prefix = args.etcd_prefix.clone();
        let mut registration = RegistrationOptions::new(etcd);
        if args.lease_ttl == 0 {
            return Err(usage("`--lease-ttl` must be at least 1 second"));
        }
        registration.ttl = Duration::from_secs(args.lease_ttl);
        let started_at = glassbox_cluster::member::now_secs();
        let id = match &args.id {
            Some(id) => check_id(id)?,
            None => format!(
                "{}-{}-{started_at}",
                glassbox_cluster::host::hostname(),
                std::process::id()
            ),
        };
        let labels = parse_labels(&args.labels)?;
        Ok(Common {
            registration,
            id,
            labels,
            started_at,
        })
    }

    /// Registers `record` in etcd; its load from `load`.
    fn register(
        &self,
        record: glassbox_cluster::WorkerRecord,
        load: impl FnMut() -> glassbox_cluster::Load + Send + 'static,
    ) -> anyhow::Result<glassbox_cluster::Registration> {
        let id = record.id.clone();
        glassbox_cluster::Registration::start(
            self.registration.clone(),
            record,
            load,
            move |event| eprintln!("glassbox worker: {}", describe(&id, &event)),
        )
        .map_err(etcd_error)
    }
}

fn describe(id: &str, event: &RegistrationEvent) -> String {
    match event {
        RegistrationEvent::Registered {
            lease,
            again: false,
        } => {
            format!("registered `{id}` in etcd (lease {lease:x})")
        }
        RegistrationEvent::Registered { lease, again: true } => {
            format!("registered `{id}` again (new lease {lease:x})")
        }
        RegistrationEvent::Interrupted { error } => {
            format!("{error}; retrying")
        }
        RegistrationEvent::LeaseLost { lease } => format!(
            "lease {lease:x} expired while etcd was out of reach: out of the pool until etcd answers"
        ),
        RegistrationEvent::Revoked { lease } => {
            format!("left the pool (lease {lease:x} revoked)")
        }
    }
}

/// Ids become etcd keys and URL path segments: keep them plain.
fn check_id(id: &str) -> anyhow::Result<String> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(id.to_owned())
    } else {
        Err(usage(format!(
            "`--id {id}` is not a usable worker id (use 1-128 letters, digits, `-`, `_`, `.`)"
        )))
    }
}

fn parse_labels(labels: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for l in labels {
        match l.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                out.insert(k.trim().to_owned(), v.trim().to_owned());
            }
            _ => {
                return Err(usage(format!(
                    "`--label {l}` is not KEY=VALUE (for example `--label zone=a`)"
                )));
            }
        }
    }
    Ok(out)
}

fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Coded {
        code: exit::USAGE,
        message: message.into(),
    })
}

fn etcd_error(err: EtcdError) -> anyhow::Error {
    let code = if err.is_usage() {
        exit::USAGE
    } else {
        exit::UNAVAILABLE
    };
    anyhow::Error::new(Coded {
        code,
        message: format!("{err} [{}]", err.code()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_ids_are_checked() {
        let labels = parse_labels(&["zone=a".into(), "tier = spot".into()]).unwrap();
        assert_eq!(labels["zone"], "a");
        assert_eq!(labels["tier"], "spot");
        let err = parse_labels(&["zone".into()]).unwrap_err();
        assert_eq!(exit::code_for(&err), exit::USAGE);
        assert!(err.to_string().contains("KEY=VALUE"));
        assert_eq!(check_id("gpu-7.a_1").unwrap(), "gpu-7.a_1");
        for bad in ["", "a/b", "a b"] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
    }
}
