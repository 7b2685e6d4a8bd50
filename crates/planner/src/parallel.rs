//! How one model is spread over several GPUs, as engines really do it.
//!
//! Three ways, and they are not interchangeable:
//! - **tensor** (`tp`): every layer's matmuls split over the GPUs, two
//!   all-reduces per layer. Bytes and FLOPs per GPU fall with `tp`, so one
//!   stream gets faster.
//! - **pipeline / layer split** (`pp`): consecutive layers on each GPU. A
//!   token passes the GPUs one after another, so one stream is no faster
//!   than on one GPU (llama.cpp's default `--split-mode layer`); memory adds
//!   up, and engines that keep several micro-batches in flight
//!   ([`Engine::pipelines_micro_batches`]) keep every stage busy at batch > 1.
//! - **data-parallel replicas** (`dp`): whole copies, each serving its own
//!   requests; capacity adds up, no single request gets faster.
//!
//! A user who gives only a GPU count gets the engine's own default
//! ([`Engine::multi_gpu_default`]), and [`Parallelism::why`] says which was
//! assumed and why: a GPU count modelled as tensor parallel for llama.cpp
//! predicted multi-GPU decode up to 3–4× too fast (issue 37).

use serde::Serialize;

use crate::engine::{Engine, MultiGpu};
use crate::error::PlannerError;
pub use crate::roofline::prompt_overlap;

/// llama.cpp's `--split-mode`: `layer` (its default) or `row`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitMode {
    Layer,
    Row,
}

impl SplitMode {
    pub fn parse(s: &str) -> Result<Self, PlannerError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "layer" => Ok(Self::Layer),
            "row" => Ok(Self::Row),
            other => Err(PlannerError::invalid(
                "split mode",
                format!(
                    "`{other}` is not a split mode (hint: `layer` or `row`, as llama.cpp's `--split-mode`)"
                ),
            )),
        }
    }
}

/// What the user said about GPUs, every part optional.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParallelRequest {
    /// GPUs in all (`--gpus`): replicas × tp × pp.
    pub gpus: Option<u32>,
    pub tp: Option<u32>,
    pub pp: Option<u32>,
    pub dp: Option<u32>,
    pub split_mode: Option<SplitMode>,
}

/// How a replica is spread, and how many replicas, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Parallelism {
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    /// Whether the planner chose the split (from a GPU count or nothing)
    /// rather than the user.
    pub assumed: bool,
    /// One sentence: what was assumed and why.
    pub why: String,
}

impl Parallelism {
    /// GPUs one replica holds.
    pub fn per_replica(&self) -> u32 {
        self.tp * self.pp
    }
}

/// The most GPUs a plan takes, in all and in one replica.
pub(crate) const MAX_GPUS: u32 = 64;

/// `(tp, pp)` of one replica of `gpus` GPUs run the way `engine` runs them
/// by default, all GPUs in the one replica (a measurement's `tp` column:
/// the GPUs one published run used). `fits_one` says whether the model
/// fits one GPU (Ollama's rule).
pub fn replica_split(engine: Engine, gpus: u32, fits_one: bool) -> (u32, u32) {
    match engine.multi_gpu_default() {
        MultiGpu::Tensor => (gpus, 1),
        MultiGpu::Layer => (1, gpus),
        MultiGpu::OneThenLayer if fits_one => (1, 1),
        MultiGpu::OneThenLayer => (1, gpus),
    }
}

fn check(what: &'static str, v: Option<u32>) -> Result<(), PlannerError> {
    match v {
        Some(n) if n == 0 || n > MAX_GPUS => Err(PlannerError::invalid(
            what,
            format!("must be 1-{MAX_GPUS}, got {n}"),
        )),
        _ => Ok(()),
    }
}

impl ParallelRequest {
    /// A request for `tp`-way tensor parallelism and nothing else.
    pub fn tensor(tp: u32) -> Self {
        Self {
            tp: Some(tp),
            ..Self::default()
        }
    }

    /// Resolves the request for `engine`. `fits_one_gpu(n)` says whether
    /// the model fits a replica of `n` tensor-parallel GPUs (used to pick
    /// the smallest such replica, and for Ollama's one-GPU rule).
    pub fn resolve(
        &self,
        engine: Engine,
        fits_on: impl Fn(u32) -> bool,
    ) -> Result<Parallelism, PlannerError> {
        check("gpus", self.gpus)?;
        check("tp", self.tp)?;
        check("pp", self.pp)?;
        check("dp", self.dp)?;
        if let Some(mode) = self.split_mode {
            if engine.family() != Engine::LlamaCpp {
                return Err(PlannerError::invalid(
                    "split mode",
                    format!(
                        "`--split-mode` is llama.cpp's flag; engine `{engine}` does not take it (hint: use `--tp` or `--pp`)"
                    ),
                ));
            }
            if self.tp.is_some() || self.pp.is_some() {
                return Err(PlannerError::invalid(
                    "split mode",
                    "give either `--split-mode` with a GPU count, or `--tp`/`--pp`, not both",
                ));
            }
            let n = self
                .gpus
                .map_or(1, |g| g / self.dp.unwrap_or(1).max(1))
                .max(1);
            let (tp, pp, how) = match mode {
                SplitMode::Layer => (
                    1,
                    n,
                    "layers split over the GPUs: one stream is no faster than on one GPU",
                ),
                SplitMode::Row => (n, 1, "matrices split by rows, modelled as tensor parallel"),
            };
            return self.finish(
                tp,
                pp,
                false,
                format!("--split-mode {mode:?}: {how}").to_lowercase(),
            );
        }
        if self.tp.is_some() || self.pp.is_some() {
            let (tp, pp) = (self.tp.unwrap_or(1), self.pp.unwrap_or(1));
            return self.finish(tp, pp, false, format!("as given: tp {tp}, pp {pp}"));
        }
        let Some(gpus) = self.gpus else {
            let dp = self.dp.unwrap_or(1);
            return self.finish(
                1,
                1,
                self.dp.is_none(),
                format!("one GPU per replica, {dp} replica(s)"),
            );
        };
        let per_replica_budget = gpus / self.dp.unwrap_or(1).max(1);
        let (_, pp) = replica_split(engine, per_replica_budget.max(1), fits_on(1));
        match engine.multi_gpu_default() {
            MultiGpu::Layer => self.finish(
                1,
                pp,
                true,
                format!(
                    "{engine} splits layers over the GPUs it is given by default ({}), so one stream runs at one GPU's speed; memory adds up",
                    match engine.family() {
                        Engine::LlamaCpp => "`--split-mode layer`",
                        Engine::Transformers => "`device_map=\"auto\"`",
                        _ => "`gpu_split`",
                    }
                ),
            ),
            MultiGpu::OneThenLayer if fits_on(1) => self.finish(
                1,
                1,
                true,
                format!("{engine} loads a model that fits one GPU on one GPU; the others serve other models"),
            ),
            MultiGpu::OneThenLayer => self.finish(
                1,
                pp,
                true,
                format!("{engine} spreads the layers of a model too big for one GPU over all of them (llama.cpp layer split)"),
            ),
            MultiGpu::Tensor => {
                // The smallest power-of-two tensor-parallel group the model
                // fits, the rest as replicas: how these engines are deployed
                // (a TP group per replica), unless replicas were fixed.
                let tp = match self.dp {
                    Some(dp) => (gpus / dp).max(1),
                    None => {
                        let mut tp = 1;
                        while tp < gpus && !fits_on(tp) {
                            tp *= 2;
                        }
                        tp.min(gpus)
                    }
                };
                let why = format!(
                    "{engine} shards each layer over a tensor-parallel group (its multi-GPU default); tp {tp} is the smallest group the model fits{}",
                    if gpus > tp { ", the other GPUs as data-parallel replicas" } else { "" }
                );
                self.finish(tp, 1, true, why)
            }
        }
    }

    fn finish(
        &self,
        tp: u32,
        pp: u32,
        assumed: bool,
        why: String,
    ) -> Result<Parallelism, PlannerError> {
        let per_replica = tp * pp;
        if per_replica > MAX_GPUS {
            return Err(PlannerError::invalid(
                "parallelism",
                format!("tp × pp must be at most {MAX_GPUS}, got {tp} × {pp}"),
            ));
        }
        let dp = match (self.dp, self.gpus) {
            (Some(dp), Some(g)) if dp * per_replica != g => {
                return Err(PlannerError::invalid(
                    "gpus",
                    format!(
                        "{g} GPUs are not {dp} replica(s) × tp {tp} × pp {pp} (hint: make `--gpus` the product, or drop one of them)"
                    ),
                ));
            }
            (Some(dp), _) => dp,
            (None, Some(g)) if g % per_replica != 0 => {
                return Err(PlannerError::invalid(
                    "gpus",
                    format!(
                        "{g} GPUs do not divide into replicas of tp {tp} × pp {pp} = {per_replica} (hint: a multiple of {per_replica})"
                    ),
                ));
            }
            (None, Some(g)) => g / per_replica,
            (None, None) => 1,
        };
        Ok(Parallelism {
            tp,
            pp,
            dp,
            assumed,
            why,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn gpus(n: u32) -> ParallelRequest {
        ParallelRequest {
            gpus: Some(n),
            ..ParallelRequest::default()
        }
    }

    #[test]
    fn a_gpu_count_alone_gets_each_engines_own_split() {
        let fits_one = |_: u32| true;
        let p = gpus(4).resolve(Engine::LlamaCpp, fits_one).unwrap();
        assert_eq!((p.tp, p.pp, p.dp, p.assumed), (1, 4, 1, true));
        assert!(p.why.contains("split-mode layer"), "{}", p.why);
        let p = gpus(4).resolve(Engine::ExLlamaV2, fits_one).unwrap();
        assert_eq!((p.tp, p.pp), (1, 4));
        // transformers' `device_map="auto"` places layers, it does not shard.
        let p = gpus(8).resolve(Engine::Transformers, fits_one).unwrap();
        assert_eq!((p.tp, p.pp, p.dp), (1, 8, 1));
        assert!(p.why.contains("device_map"), "{}", p.why);
        // Tensor-parallel engines: the smallest group the model fits.
        let needs_two = |n: u32| n >= 2;
        let p = gpus(8).resolve(Engine::Vllm, needs_two).unwrap();
        assert_eq!((p.tp, p.pp, p.dp), (2, 1, 4));
        assert!(p.why.contains("replicas"), "{}", p.why);
        // Ollama: one GPU if it fits, else layers over all.
        let p = gpus(2).resolve(Engine::Ollama, fits_one).unwrap();
        assert_eq!((p.tp, p.pp, p.dp), (1, 1, 2));
        let p = gpus(2).resolve(Engine::Ollama, |n| n > 1).unwrap();
        assert_eq!((p.tp, p.pp, p.dp), (1, 2, 1));
    }

    #[test]
    fn split_mode_row_is_tensor_and_layer_is_pipeline() {
        let mut r = gpus(2);
        r.split_mode = Some(SplitMode::Row);
        let p = r.resolve(Engine::LlamaCpp, |_| true).unwrap();
        assert_eq!((p.tp, p.pp, p.assumed), (2, 1, false));
        r.split_mode = Some(SplitMode::Layer);
        let p = r.resolve(Engine::Ollama, |_| true).unwrap();
        assert_eq!((p.tp, p.pp), (1, 2));
        let e = r.resolve(Engine::Vllm, |_| true).unwrap_err().to_string();
        assert!(e.contains("llama.cpp") && e.contains("--tp"), "{e}");
    }

    #[test]
    fn explicit_degrees_win_and_counts_that_do_not_multiply_are_refused() {
        let r = ParallelRequest {
            tp: Some(2),
            pp: Some(2),
            gpus: Some(8),
            ..ParallelRequest::default()
        };
        let p = r.resolve(Engine::Vllm, |_| true).unwrap();
        assert_eq!((p.tp, p.pp, p.dp, p.assumed), (2, 2, 2, false));
        let r = ParallelRequest {
            tp: Some(4),
            gpus: Some(6),
            ..ParallelRequest::default()
        };
        let e = r.resolve(Engine::Vllm, |_| true).unwrap_err().to_string();
        assert!(e.contains("6 GPUs") && e.contains("multiple of 4"), "{e}");
        let r = ParallelRequest {
            tp: Some(0),
            ..ParallelRequest::default()
        };
        assert!(r.resolve(Engine::Vllm, |_| true).is_err());
        assert!(
            SplitMode::parse("rows")
                .unwrap_err()
                .to_string()
                .contains("layer")
        );
    }

    #[test]
    fn nothing_given_is_one_gpu() {
        let p = ParallelRequest::default()
            .resolve(Engine::LlamaCpp, |_| false)
            .unwrap();
        assert_eq!((p.tp, p.pp, p.dp), (1, 1, 1));
    }
}
