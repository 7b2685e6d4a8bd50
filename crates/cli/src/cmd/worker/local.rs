//! A worker that serves local models: each `--llm` / `--embedding` is
//! registered with the application layer's model door
//! (`glassbox_app::models`), which the server's worker surface
//! (`glassbox_server::worker`) serves straight from the engines:
//! `/v1/chat/completions` (streaming too), `/v1/embeddings`,
//! `/v1/models`, `/metrics` and `/health`. No topology or pipeline is
//! built for a model. This module only turns flags into registrations
//! and registers the worker in the pool.

use std::process::ExitCode;
use std::time::Instant;

use glassbox_app::models::{LlmSettings, ModelKind, Models};
use glassbox_cluster::{Load, WorkerRecord};
use glassbox_server::Config;
use glassbox_server::worker::{WorkerOptions, WorkerServer};

use super::args::Args;
use super::member::{Common, usage};
use crate::cmd::serve::{API_KEY_ENV, server_error};
use crate::exit::{self, Coded};

/// The port a worker listens on unless told otherwise.
const DEFAULT_PORT: u16 = 8090;

pub(super) fn run(args: Args, mut common: Common) -> anyhow::Result<ExitCode> {
    let models = models(&args)?;
    let slowdown = slowdown(args.test_slowdown)?;
    if let Some(factor) = slowdown {
        glassbox_models::set_test_slowdown(factor);
        common
            .labels
            .insert("test_slowdown".into(), format!("{factor}"));
        crate::out::status(&format!(
            "glassbox worker: TEST SLOWDOWN {factor}x: the local LLMs sleep {}x their compute time each step (for benchmarks only)",
            factor - 1.0
        ));
    }
    let mut config = match &args.config {
        Some(path) => Config::load(path).map_err(server_error)?,
        None => Config::default(),
    };
    if let Ok(key) = std::env::var(API_KEY_ENV)
        && !key.is_empty()
    {
        config.add_env_key(&key);
    }
    let options = WorkerOptions {
        models: models.clone(),
        config,
        host: args.host.clone(),
        port: Some(args.port.unwrap_or(DEFAULT_PORT)),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("glassbox-worker")
        .build()?;
    let answered = runtime.block_on(async move {
        let server = WorkerServer::bind(options).await.map_err(server_error)?;
        for note in server.notes() {
            crate::out::status(&format!("glassbox worker: {note}"));
        }
        let addr = server.local_addr();
        let address = match &args.advertise {
            Some(a) => a.trim_end_matches('/').to_owned(),
            None if addr.ip().is_unspecified() => {
                format!("http://{}:{}", glassbox_cluster::host::hostname(), addr.port())
            }
            None => format!("http://{addr}"),
        };
        let record = WorkerRecord {
            id: common.id.clone(),
            address: address.clone(),
            engine: "glassbox".into(),
            // GPUs through NVML (none without a driver), CPU and memory.
            hardware: throttled(glassbox_cluster::host::hardware(), slowdown),
            models: models.names(),
            node_kinds: models.node_kinds(),
            labels: common.labels.clone(),
            started_at: common.started_at,
        };
        let registration = tokio::task::block_in_place(|| common.register(record, engine_load()))?;
        crate::out::status(&format!(
            "glassbox worker: `{}` serving {} at {address} (listening on http://{addr}); /v1/chat/completions, /v1/embeddings, /metrics",
            common.id,
            models
                .iter()
                .map(|m| format!("{} ({})", m.name, m.kind.node_kind()))
                .collect::<Vec<_>>()
                .join(", "),
        ));
        // On a signal the worker leaves the pool first, then drains.
        let shutdown = async move {
            glassbox_server::shutdown_signal().await;
            let _ = tokio::task::spawn_blocking(move || registration.shutdown()).await;
        };
        server.run(shutdown).await.map_err(server_error)
    })?;
    crate::out::status(&format!(
        "glassbox worker: stopped; {answered} calls answered"
    ));
    Ok(ExitCode::SUCCESS)
}

/// `--test-slowdown`: above 1, or none at 1.
fn slowdown(factor: Option<f64>) -> anyhow::Result<Option<f64>> {
    match factor {
        None => Ok(None),
        Some(1.0) => Ok(None),
        Some(f) if f.is_finite() && f > 1.0 && f <= 1000.0 => Ok(Some(f)),
        Some(f) => Err(usage(format!(
            "`--test-slowdown {f}` must be a factor between 1 and 1000 (2: twice as slow)"
        ))),
    }
}

/// The hardware as a throttled worker names it: each device's name says
/// it is slowed down, so placement's throughput profiles (per hardware
/// name) and anyone reading the pool tell it from the real thing.
fn throttled(
    mut hw: glassbox_cluster::Hardware,
    slowdown: Option<f64>,
) -> glassbox_cluster::Hardware {
    if let Some(f) = slowdown {
        let tag = format!(" [test slowdown {f}x]");
        hw.cpu_model.push_str(&tag);
        for g in &mut hw.gpus {
            g.name.push_str(&tag);
        }
    }
    hw
}

/// The models to serve: as given, else the fetched defaults.
fn models(args: &Args) -> anyhow::Result<Models> {
    let mut out = Models::new(LlmSettings {
        max_tokens: args.max_tokens,
        threads: args.threads,
        context_size: args.context_size,
        max_num_seqs: args.max_num_seqs,
    });
    for (flag, kind, values) in [
        ("--llm", ModelKind::Llm, &args.llm),
        ("--embedding", ModelKind::Embedding, &args.embedding),
    ] {
        for v in values {
            let Some((name, path)) = v
                .split_once('=')
                .filter(|(n, p)| !n.is_empty() && !p.is_empty())
            else {
                return Err(usage(format!(
                    "`{flag} {v}` is not NAME=PATH (for example `{flag} {}`)",
                    match kind {
                        ModelKind::Embedding => "minilm=all-minilm-l6-v2",
                        ModelKind::Llm => "smollm2=smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                    }
                )));
            };
            out.register(name, kind, path)
                .map_err(|e| usage(e.to_string()))?;
        }
    }
    if !out.is_empty() {
        return Ok(out);
    }
    let dir = glassbox_models::models_dir();
    for (name, kind, path) in [
        (
            "smollm2",
            ModelKind::Llm,
            "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
        ("all-minilm-l6-v2", ModelKind::Embedding, "all-minilm-l6-v2"),
    ] {
        if dir.join(path).exists() {
            out.register(name, kind, path)
                .map_err(|e| usage(e.to_string()))?;
        }
    }
    if out.is_empty() {
        return Err(anyhow::Error::new(Coded {
            code: exit::UNAVAILABLE,
            message: format!(
                "no model to serve: none given (`--llm NAME=GGUF`, `--embedding NAME=DIR`) and none fetched in `{}` (run `glassbox models fetch`)",
                dir.display()
            ),
        }));
    }
    Ok(out)
}

/// The load of every local LLM together, in vLLM's terms; output tok/s
/// from the engines' token counters between two calls.
fn engine_load() -> impl FnMut() -> Load + Send + 'static {
    let cache = glassbox_nodes::model_cache::global();
    let mut last: Option<(u64, Instant)> = None;
    move || {
        let loads = cache.llm_loads();
        let running = loads.iter().map(|(_, l)| l.running as u64).sum();
        let waiting = loads.iter().map(|(_, l)| l.waiting as u64).sum();
        let reserved: usize = loads.iter().map(|(_, l)| l.kv_reserved).sum();
        let cells: usize = loads.iter().map(|(_, l)| l.kv_cells).sum();
        let tokens: u64 = loads.iter().map(|(_, l)| l.generation_tokens).sum();
        let now = Instant::now();
        let ms = glassbox_cluster::member::now_ms();
        let tokens_per_second = match last {
            Some((before, then)) if now > then => {
                tokens.saturating_sub(before) as f64 / (now - then).as_secs_f64()
            }
            _ => 0.0,
        };
        last = Some((tokens, now));
        Load {
            running,
            waiting,
            kv_usage: if cells == 0 {
                0.0
            } else {
                reserved as f64 / cells as f64
            },
            tokens_per_second,
            at: ms / 1000,
            at_ms: Some(ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn args(extra: &[&str]) -> Args {
        let mut argv = vec!["worker", "--etcd", "http://127.0.0.1:2379"];
        argv.extend_from_slice(extra);
        Cli::parse_from(argv).args
    }

    #[test]
    fn each_flag_registers_a_model_with_the_engine_settings() {
        let a = args(&[
            "--llm",
            "small=/m/s.gguf",
            "--embedding",
            "mini=all-minilm-l6-v2",
            "--threads",
            "4",
        ]);
        let ms = models(&a).unwrap();
        assert_eq!(ms.names(), vec!["small", "mini"]);
        assert_eq!(ms.get("small").unwrap().kind, ModelKind::Llm);
        assert_eq!(ms.get("mini").unwrap().path, "all-minilm-l6-v2");
        assert_eq!(ms.node_kinds(), vec!["embedding", "llm_inference"]);
        assert_eq!(ms.llm_settings().threads, Some(4));
        assert_eq!(ms.llm_settings().max_tokens, 256);
    }

    #[test]
    fn a_test_slowdown_is_checked_and_named_in_the_hardware() {
        let a = args(&["--test-slowdown", "4"]);
        assert_eq!(slowdown(a.test_slowdown).unwrap(), Some(4.0));
        assert_eq!(slowdown(Some(1.0)).unwrap(), None, "1 is no slowdown");
        for bad in [0.5, 0.0, f64::NAN, 1e9] {
            let err = slowdown(Some(bad)).unwrap_err();
            assert_eq!(exit::code_for(&err), exit::USAGE, "{bad}");
        }
        let hw = glassbox_cluster::Hardware {
            gpus: vec![glassbox_cluster::Gpu {
                name: "NVIDIA L4".into(),
                memory_bytes: 1,
                compute_capability: None,
            }],
            cpu_model: "EPYC".into(),
            ..Default::default()
        };
        let slow = throttled(hw.clone(), Some(2.5));
        assert_eq!(slow.name(), "NVIDIA L4 [test slowdown 2.5x]");
        assert_eq!(slow.cpu_model, "EPYC [test slowdown 2.5x]");
        assert_eq!(throttled(hw.clone(), None), hw);
    }

    #[test]
    fn bad_and_duplicate_models_are_usage_errors() {
        for bad in [
            &["--llm", "x"][..],
            &["--embedding", "=dir"],
            &["--llm", "a=1", "--llm", "a=2"],
        ] {
            let err = models(&args(bad)).unwrap_err();
            assert_eq!(exit::code_for(&err), exit::USAGE, "{bad:?}: {err}");
        }
    }
}
