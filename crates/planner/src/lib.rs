//! glassbox-planner: capacity planning for LLM inference without a GPU.
//!
//! From a model, a device and a workload it estimates memory, prefill and
//! decode speed, TTFT/TPOT, the number of devices an SLA needs and the cost
//! per million tokens, and it explains every figure with its formula and
//! inputs ([`explain::Line`]).
//!
//! Main types, in the order data flows:
//! - [`HardwareCatalogue`] / [`Hardware`]: accelerators as data
//!   (`data/hardware.toml`), user-extendable.
//! - [`ModelCatalogue`] / [`ModelSpec`]: shapes from the catalogue, a
//!   Hugging Face `config.json` ([`hf_config`]) or a GGUF header ([`gguf`]).
//! - [`Quant`]: weight formats at their real bits per weight.
//! - [`Engine`]: an engine (and version range) as a profile of mechanisms
//!   ([`engine`]); [`parallel`]: how a GPU count is split, per engine.
//! - [`EfficiencyTable`]: how far below the roofline engines run, per
//!   (hardware class, engine, phase), fitted by [`calibrate::fit`] from
//!   [`measurements`].
//! - [`Estimator`] + [`Scenario`] → [`Estimate`]; [`batching`] adds what
//!   limits a replica at batch > 1 (KV and engine caps on running
//!   sequences, prompts interleaved with decode, per-sequence host cost);
//!   [`workload::size`] turns an estimate plus traffic and an SLA into
//!   devices and cost.
//! - [`PlanRequest`] → [`ResolvedRequest`] → [`Plan`]: a request as given
//!   (names, optional settings), resolved with the planner's defaults, then
//!   estimated and sized per device — what `glassbox plan` prints, with
//!   [`accuracy`]'s held-out error band for its headline figures.
//!
//! Why a roofline with fitted factors: pure rooflines (100% of peak) are
//! 1.4-2× optimistic, and simulators need profiling on the GPU itself. Two
//! numbers per (class, engine, phase), fitted (robust L1, shrunk toward the
//! coarser level) on published measurements and checked on held-out sources
//! and GPUs ([`validate::held_out`], `examples/accuracy.rs -- --loso`), keep
//! the model explainable while matching measured numbers closely.
//! The crate does no I/O beyond reading the files it is given.

pub mod accuracy;
pub mod batching;
pub mod block_fp8;
pub mod calibrate;
pub mod collective;
pub mod coverage;
pub mod defaults;
pub mod efficiency;
pub mod engine;
pub mod error;
pub mod estimate;
pub mod estimator;
pub mod expert_tiles;
pub mod explain;
pub mod gguf;
pub mod hardware;
pub mod hf_config;
pub mod measurements;
pub mod model;
pub mod model_source;
mod names;
pub mod parallel;
pub mod phase;
pub mod pipeline;
pub mod quant;
pub mod request;
pub mod roofline;
pub mod sealed;
pub mod sealed_files;
pub mod sealed_gpu;
pub mod sim;
pub mod source_level;
pub mod stream;
pub mod validate;
pub mod weights;
pub mod window;
pub mod workload;

pub use efficiency::{EfficiencyTable, Engine, Phase};
pub use error::PlannerError;
pub use estimate::{Estimate, Estimator, Scenario};
pub use hardware::{Hardware, HardwareCatalogue, HardwareClass};
pub use model::{ModelCatalogue, ModelSpec};
pub use quant::Quant;
pub use request::{Plan, PlanRequest, ResolvedRequest};
