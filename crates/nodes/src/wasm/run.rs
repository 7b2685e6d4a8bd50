//! `wasm` at run time: one sandboxed instance per call, on the blocking
//! pool (the engine then measures the call's thread CPU time, which the
//! receipt prices like any CPU node's).
//!
//! Every way a step can go wrong ends the call with a stable code (see
//! [`codes`]); the span keeps the code, a message naming the step and the
//! limit, and, for admins, the tail of the step's stderr and the trap's
//! WebAssembly backtrace.

use std::sync::Arc;

use glassbox_engine::trace::Fact;
use glassbox_engine::{BuildError, Call, Node, NodeCx, NodeError, NodeOutput};
use serde_json::{Map, Value, json};
use wasmtime::{Trap, UpdateDeadline};

use super::config::WasmConfig;
use super::host::{self, Emit, Loaded, Reply, Sandbox};
use crate::resources::BuildContext;
use crate::schema_subset;

/// The stable error codes of a failed call.
pub mod codes {
    /// The step trapped (a panic, `unreachable`, an out-of-bounds access).
    pub const TRAP: &str = "wasm_trap";
    /// The step used all its fuel (`limits.fuel` instructions).
    pub const FUEL: &str = "wasm_fuel";
    /// The step wanted more memory than `limits.memory_mb`.
    pub const MEMORY: &str = "wasm_memory";
    /// The engine stopped waiting (node timeout, request deadline,
    /// cancellation) and the step was interrupted.
    pub const INTERRUPTED: &str = "wasm_interrupted";
    /// The step's output is not JSON.
    pub const BAD_JSON: &str = "wasm_bad_json";
    /// The step's output breaks the step's own output schema.
    pub const OUTPUT_SCHEMA: &str = "wasm_output_schema";
    /// The step returned a label it did not declare.
    pub const BAD_LABEL: &str = "wasm_bad_label";
    /// The step returned an error of its own.
    pub const FAILED: &str = "wasm_failed";
}

/// A built `wasm` node (cheap to clone into a blocking call).
#[derive(Clone)]
pub struct WasmNode(Arc<Inner>);

struct Inner {
    loaded: Arc<Loaded>,
    /// `config.settings` as JSON text, passed on every call.
    settings: String,
    sandbox: Sandbox,
    output_schema: Option<Value>,
}

/// Loads the component (compiled once per process and hash), checks the
/// settings against its schema and resolves granted directories.
pub(super) fn build(config: &WasmConfig, cx: &BuildContext) -> Result<WasmNode, BuildError> {
    let component = config
        .component
        .as_deref()
        .ok_or_else(|| BuildError::config("`component` is missing"))?;
    let sha256 = config
        .sha256
        .as_deref()
        .ok_or_else(|| BuildError::config("`sha256` is missing"))?;
    let loaded = host::load(&cx.topology.resolve_path(component), sha256).map_err(|e| {
        let message = format!("{e} (hint: {})", e.hint());
        match e {
            host::LoadError::Io { .. } | host::LoadError::Engine(_) => BuildError::Unavailable {
                message,
                source: Some(Box::new(e)),
            },
            _ => BuildError::config(message),
        }
    })?;
    if let Some(schema) = super::config::schema_of(loaded.about.config_schema.as_deref())
        .map_err(|e| BuildError::config(format!("the step's config schema: {e}")))?
    {
        schema_subset::validate(&schema, &config.settings, "settings")
            .map_err(|e| BuildError::config(format!("`settings` breaks the step's schema: {e}")))?;
    }
    let output_schema = super::config::schema_of(loaded.about.output_schema.as_deref())
        .map_err(|e| BuildError::config(format!("the step's output schema: {e}")))?;
    let mut dirs = Vec::new();
    for dir in &config.grant.dirs {
        let path = cx.topology.resolve_path(&dir.path);
        if !path.is_dir() {
            return Err(BuildError::config(format!(
                "granted directory `{}` is not a directory",
                path.display()
            )));
        }
        dirs.push((path, dir.guest.clone()));
    }
    Ok(WasmNode(Arc::new(Inner {
        loaded,
        settings: config.settings.to_string(),
        sandbox: Sandbox {
            fuel: config.fuel,
            memory_bytes: usize::try_from(config.memory_mb << 20).unwrap_or(usize::MAX),
            grant: config.grant.clone(),
            dirs,
        },
        output_schema,
    })))
}

impl Node for WasmNode {
    fn call(&self, cx: NodeCx) -> Call {
        let upstream: Map<String, Value> = cx
            .upstream()
            .into_iter()
            .map(|(id, out)| (id.to_string(), out.value.clone()))
            .collect();
        let input = json!({ "input": cx.input(), "upstream": upstream }).to_string();
        let node = self.clone();
        Call::blocking(move || node.0.run(&cx, &input))
    }
}

fn coded(code: &'static str, message: String, detail: Option<String>) -> NodeError {
    NodeError::Coded {
        code,
        message,
        detail: detail.filter(|d| !d.is_empty()),
        // A step given the same input fails the same way; an interrupted
        // one ran out of time, which another attempt would too.
        retryable: false,
    }
}

impl Inner {
    fn name(&self) -> String {
        let about = &self.loaded.about;
        format!("{} {}", about.name, about.version)
    }

    fn run(&self, cx: &NodeCx, input: &str) -> Result<NodeOutput, NodeError> {
        let emit: Option<Emit> = cx.token_stream().map(|stream| {
            Box::new(move |text: String| {
                stream.send(text);
            }) as Emit
        });
        let mut store = host::new_store(&self.sandbox, emit).map_err(|e| {
            coded(
                codes::TRAP,
                format!("step `{}` could not start: {e}", self.name()),
                None,
            )
        })?;
        let watch = cx.clone();
        store.epoch_deadline_callback(move |_| {
            Ok(if watch.attempt_over() {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Continue(1)
            })
        });
        let step = self
            .loaded
            .pre
            .instantiate(&mut store)
            .map_err(|e| self.trapped(&store, &e))?;
        let result = step.call_run(&mut store, &self.settings, input);
        let fuel = self
            .sandbox
            .fuel
            .saturating_sub(store.get_fuel().unwrap_or(0));
        match result {
            Err(e) => Err(self.trapped(&store, &e)),
            Ok(Err(message)) => Err(coded(
                codes::FAILED,
                format!("step `{}` failed: {message}", self.name()),
                Some(store.data().stderr()),
            )),
            Ok(Ok(reply)) => self.answer(reply, fuel),
        }
    }

    /// Names why a call ended in a trap.
    fn trapped(&self, store: &wasmtime::Store<host::State>, e: &wasmtime::Error) -> NodeError {
        let name = self.name();
        let detail = {
            let stderr = store.data().stderr();
            let trace = format!("{e:?}");
            Some(if stderr.is_empty() {
                trace
            } else {
                format!("{trace}\nstderr:\n{stderr}")
            })
        };
        if store.data().limits.refused {
            return coded(
                codes::MEMORY,
                format!(
                    "step `{name}` needed more than its {} MiB of memory (`limits.memory_mb`)",
                    self.sandbox.memory_bytes >> 20
                ),
                detail,
            );
        }
        match e.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => coded(
                codes::FUEL,
                format!(
                    "step `{name}` used all its fuel ({} instructions, `limits.fuel`)",
                    self.sandbox.fuel
                ),
                detail,
            ),
            Some(Trap::Interrupt) => coded(
                codes::INTERRUPTED,
                format!("step `{name}` was stopped: the node's time ran out or the request ended"),
                detail,
            ),
            Some(trap) => coded(
                codes::TRAP,
                format!("step `{name}` trapped: {trap}"),
                detail,
            ),
            None => coded(codes::TRAP, format!("step `{name}` failed: {e}"), detail),
        }
    }

    /// Turns a reply into the node's output, checking it against what the
    /// step declared.
    fn answer(&self, reply: Reply, fuel: u64) -> Result<NodeOutput, NodeError> {
        let name = self.name();
        let value: Value = serde_json::from_str(&reply.output).map_err(|e| {
            let excerpt: String = reply.output.chars().take(200).collect();
            coded(
                codes::BAD_JSON,
                format!("step `{name}` returned output that is not JSON: {e}"),
                Some(excerpt),
            )
        })?;
        if let Some(schema) = &self.output_schema
            && let Err(e) = schema_subset::validate(schema, &value, "output")
        {
            return Err(coded(
                codes::OUTPUT_SCHEMA,
                format!("step `{name}` returned output that breaks its own output schema: {e}"),
                None,
            ));
        }
        let about = &self.loaded.about;
        let mut out = NodeOutput::new(value)
            .tag("wasm.step", name.clone())
            .tag("wasm.sha256", self.loaded.sha256[..12].to_string())
            .tag("wasm.fuel", fuel.to_string());
        if let Some(label) = reply.label {
            if !about.labels.contains(&label) {
                return Err(coded(
                    codes::BAD_LABEL,
                    format!(
                        "step `{name}` returned label `{label}`, which it does not declare (it declares: {})",
                        if about.labels.is_empty() {
                            "none".to_string()
                        } else {
                            about.labels.join(", ")
                        }
                    ),
                    None,
                ));
            }
            out = out
                .label(label.clone())
                .tag("label", label.clone())
                .fact(Fact::Routed {
                    label,
                    rule: Some(about.name.clone()),
                    reason: format!("custom step `{name}` chose it"),
                });
        }
        for fact in reply.facts {
            let zh = fact
                .zh
                .unwrap_or_else(|| format!("自定义步骤 `{}` 报告：{}", about.name, fact.en));
            out = out.fact(Fact::Note { en: fact.en, zh });
        }
        Ok(out)
    }
}
