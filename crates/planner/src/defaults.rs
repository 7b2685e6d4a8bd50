//! The values a plan request starts from when a setting is not given.
//! They sit at the bottom of the planner: requests, workloads and front
//! ends all read them, and they read nothing.

/// KV-cache dtype.
pub const KV_DTYPE: &str = "fp16";
/// Weight format when neither the request nor the model file names one.
pub const QUANT: &str = "fp16";
/// Concurrent sequences for the single-scenario estimate.
pub const BATCH: u32 = 1;
/// Prompt (input) tokens per request.
pub const PROMPT_TOKENS: u64 = 1500;
/// Generated (output) tokens per request.
pub const GEN_TOKENS: u64 = 300;
/// Device memory kept free (seed 001: at least 20%).
pub const MEMORY_HEADROOM: f64 = 0.2;
/// Requests per day (seed 001's example).
pub const REQUESTS_PER_DAY: f64 = 50_000.0;
/// Peak request rate ÷ average rate.
pub const PEAK_FACTOR: f64 = 3.0;
/// Capacity kept free at peak (seed 001: at least 30%).
pub const HEADROOM: f64 = 0.3;
/// Years a purchased device is paid off over.
pub const AMORTIZE_YEARS: f64 = 3.0;
/// Electricity price.
pub const USD_PER_KWH: f64 = 0.12;
/// Offline (batch) tokens per day sharing the pool.
pub const OFFLINE_TOKENS_PER_DAY: f64 = 0.0;
/// Simultaneous-use coefficient of a mixed online/offline pool (seed 003).
pub const SIMULTANEOUS_USE: f64 = 0.6;
/// Utilisation assumed by seed 000's concurrency formula.
pub const SEED000_UTILISATION: f64 = 0.4;
