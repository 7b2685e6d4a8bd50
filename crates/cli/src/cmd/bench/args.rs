//! The flags of `glassbox bench` and its subcommands.

use std::time::Duration;

use super::duration::parse_duration;
use super::{chat, llm};
use crate::cmd::common::OutputFormat;

#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Exit codes: 0 ok, 1 `--verify-traces` found admitted requests \
                        without a trace, 2 usage, 69 the server cannot be reached, 78 bad \
                        inputs file or options."
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Sub>,
    /// Base URL of the server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Topology id to run (`POST /v1/topologies/{id}/runs`).
    #[arg(long, required = true)]
    pub topology: Option<String>,
    /// API key, sent as `Authorization: Bearer KEY`.
    #[arg(long, env = "GLASSBOX_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Request inputs, one per line, used in turn: a JSON object, or a plain
    /// question sent as `{"question": LINE}`. Blank lines are skipped.
    #[arg(long, value_name = "FILE", required_unless_present = "question")]
    pub inputs: Option<String>,
    /// A question to send (repeatable); instead of `--inputs`.
    #[arg(long, short = 'q', conflicts_with = "inputs")]
    pub question: Vec<String>,
    /// Open loop: requests arrive at this many per second, whatever the
    /// server does.
    #[arg(long, value_name = "REQ_PER_S", conflicts_with = "concurrency")]
    pub rate: Option<f64>,
    /// How open-loop arrivals are spaced.
    #[arg(long, value_enum, default_value_t = Arrivals::Poisson)]
    pub arrivals: Arrivals,
    /// Closed loop: this many clients, each waiting for its answer before
    /// sending again [default: 1, when `--rate` is not given].
    #[arg(long, short = 'c')]
    pub concurrency: Option<usize>,
    /// How long to measure: `30`, `30s`, `500ms`, `2m` [default: 10s, when
    /// `--requests` is not given].
    #[arg(long, short = 'd', value_parser = parse_duration, conflicts_with = "requests")]
    pub duration: Option<Duration>,
    /// Measure this many requests instead of a duration.
    #[arg(long, short = 'n')]
    pub requests: Option<u64>,
    /// Load sent before measuring starts, left out of the figures.
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub warmup: Duration,
    /// Per-request timeout (counted as a `timeout` transport error).
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub timeout: Duration,
    /// Open loop: sender threads, i.e. the most requests in flight at once
    /// [default: rate × timeout, between 16 and 512].
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<usize>,
    /// Input-length bucket boundaries in characters (of the `question`
    /// field, or of the whole input when it has none).
    #[arg(long, value_delimiter = ',', default_value = "64,256,1024")]
    pub buckets: Vec<usize>,
    /// After the run, check that every admitted request has a trace
    /// (`GET /v1/traces/{id}`).
    #[arg(long)]
    pub verify_traces: bool,
    /// Seed of the Poisson arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

#[derive(Debug, clap::Subcommand)]
pub enum Sub {
    /// Calibration benchmark of one LLM (local engine or an OpenAI-compatible
    /// endpoint): writes measurements `glassbox plan calibrate` fits; with
    /// `--rates`, measured vs simulated P99 under open-loop load.
    Llm(Box<llm::LlmArgs>),
    /// Streamed chat completions against an OpenAI-compatible server, open
    /// loop (seeded Poisson arrivals) or closed loop: TTFT, E2E, goodput
    /// within an SLO.
    Chat(Box<chat::ChatArgs>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Arrivals {
    /// Exponential gaps: independent users.
    Poisson,
    /// Evenly spaced.
    Fixed,
}

impl From<Arrivals> for glassbox_bench::load::Arrivals {
    fn from(a: Arrivals) -> Self {
        match a {
            Arrivals::Poisson => Self::Poisson,
            Arrivals::Fixed => Self::Fixed,
        }
    }
}
