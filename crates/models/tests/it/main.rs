//! Integration tests of glassbox-models against the real models in
//! `models_dir()`. They fail (never skip) when the models are missing: run
//! `glassbox models fetch` or `scripts/fetch-models.sh` first.

mod attention;
mod bench_report;
mod build_units;
mod chunk_reuse;
mod common;
mod constrained;
mod embed;
mod exact_search;
mod fetch;
mod index;
mod llm;
mod prefill;
mod prefix_sharing;
mod rows8;
