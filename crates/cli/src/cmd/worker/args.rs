//! The flags of `glassbox worker`.

use std::path::PathBuf;

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
