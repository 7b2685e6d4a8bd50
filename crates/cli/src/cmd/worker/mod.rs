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

mod args;
mod attach;
mod local;
mod member;

use std::process::ExitCode;

pub use args::Args;
use member::Common;

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let common = Common::from_args(&args)?;
    match args.attach.clone() {
        Some(url) => attach::run(args, common, &url),
        None => local::run(args, common),
    }
}
