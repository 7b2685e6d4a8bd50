//! Integration tests for glassbox-planner (one binary, see STYLE.md).

mod accuracy;
mod gguf_real;
mod seeds;
mod sources;
