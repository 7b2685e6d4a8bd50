//! The local LLM engines' series in `/metrics`, named and meant like vLLM's
//! (`num_requests_running`, `kv_cache_usage_perc`, prefix-cache and
//! speculative-decoding counters, TTFT / TPOT / queue / end-to-end
//! histograms with vLLM's buckets), one label `model` per loaded model, so
//! dashboards and placement logic built for vLLM read Glassbox alike.
//!
//! The engines keep their own counters and histograms (lock-free, on the
//! model's worker thread); these series are sampled from them at scrape.

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use glassbox_models::{EngineLoad, HistogramSnapshot};
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    model: String,
}

/// A histogram whose buckets are copied from an engine's snapshot.
#[derive(Debug, Default)]
struct SampledHistogram(Mutex<HistogramSnapshot>);

impl SampledHistogram {
    fn set(&self, snapshot: HistogramSnapshot) {
        if let Ok(mut s) = self.0.lock() {
            *s = snapshot;
        }
    }
}

impl TypedMetric for SampledHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for SampledHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let s = self.0.lock().map_err(|_| std::fmt::Error)?;
        // prometheus-client writes `le="+Inf"` for f64::MAX.
        let buckets: Vec<(f64, u64)> = s
            .buckets
            .iter()
            .map(|&(b, n)| (if b.is_finite() { b } else { f64::MAX }, n))
            .collect();
        encoder.encode_histogram::<NoLabelSet>(s.sum, s.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

type Counts = Family<ModelLabels, Gauge>;
type Histograms = Family<ModelLabels, SampledHistogram>;

/// Every local-LLM series.
#[derive(Debug)]
pub(crate) struct LlmMetrics {
    running: Counts,
    waiting: Counts,
    kv_usage: Family<ModelLabels, Gauge<f64, AtomicU64>>,
    prefix_queries: Counts,
    prefix_hits: Counts,
    prefix_host_hits: Counts,
    host_cache_bytes: Counts,
    chunk_placed_tokens: Counts,
    chunk_cache_bytes: Counts,
    spec_draft_tokens: Counts,
    spec_accepted_tokens: Counts,
    preemptions: Counts,
    generation_tokens: Counts,
    ttft: Histograms,
    tpot: Histograms,
    queue_time: Histograms,
    e2e: Histograms,
}

impl LlmMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let mut gauge = |name: &str, help: &str| {
            let g = Counts::default();
            registry.register(name, help, g.clone());
            g
        };
        let running = gauge(
            "llm_num_requests_running",
            "Requests in the local LLM's running batch",
        );
        let waiting = gauge(
            "llm_num_requests_waiting",
            "Requests waiting for a place in the local LLM's batch",
        );
        let prefix_queries = gauge(
            "llm_prefix_cache_queries",
            "Prompt tokens of the requests the local LLM admitted, since start",
        );
        let prefix_hits = gauge(
            "llm_prefix_cache_hits",
            "Of those, tokens whose KV was reused from an earlier request's prefix",
        );
        let prefix_host_hits = gauge(
            "llm_prefix_cache_host_hits",
            "Of the hits, tokens restored from host memory: a prompt whose slot another request had taken",
        );
        let chunk_placed_tokens = gauge(
            "llm_chunk_cache_placed_tokens",
            "Prompt tokens whose KV the local LLM placed from its chunk cache (kv_reuse: chunks), since start",
        );
        let chunk_cache_bytes = gauge(
            "llm_chunk_cache_bytes",
            "Bytes of retrieved chunks' KV the local LLM keeps in host memory now (kv_reuse: chunks)",
        );
        let host_cache_bytes = gauge(
            "llm_prefix_cache_host_bytes",
            "Bytes of prompt KV the local LLM keeps in host memory now",
        );
        let spec_draft_tokens = gauge(
            "llm_spec_decode_num_draft_tokens",
            "Draft tokens proposed by prompt lookup (speculative decoding), since start",
        );
        let spec_accepted_tokens = gauge(
            "llm_spec_decode_num_accepted_tokens",
            "Of those, tokens the model accepted",
        );
        let preemptions = gauge(
            "llm_num_preemptions",
            "Requests preempted because the local LLM's KV pool ran out (recomputed on resume), since start",
        );
        let generation_tokens = gauge(
            "llm_generation_tokens",
            "Output tokens the local LLM generated, since start (its rise per second is output tok/s)",
        );
        let kv_usage = Family::<ModelLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "llm_kv_cache_usage_perc",
            "Share of the local LLM's KV cache reserved by running requests (0-1)",
            kv_usage.clone(),
        );
        let mut histogram = |name: &str, help: &str| {
            let h = Histograms::default();
            registry.register_with_unit(name, help, Unit::Seconds, h.clone());
            h
        };
        let ttft = histogram(
            "llm_time_to_first_token",
            "Time from a request's arrival to its first output token",
        );
        let tpot = histogram(
            "llm_time_per_output_token",
            "Mean time between a request's output tokens after the first",
        );
        let queue_time = histogram(
            "llm_request_queue_time",
            "Time a request waited before joining the running batch",
        );
        let e2e = histogram(
            "llm_e2e_request_latency",
            "Time from a request's arrival to its end",
        );
        Self {
            running,
            waiting,
            kv_usage,
            prefix_queries,
            prefix_hits,
            prefix_host_hits,
            host_cache_bytes,
            chunk_placed_tokens,
            chunk_cache_bytes,
            spec_draft_tokens,
            spec_accepted_tokens,
            preemptions,
            generation_tokens,
            ttft,
            tpot,
            queue_time,
            e2e,
        }
    }

    /// Copies each loaded engine's numbers into the series.
    pub(crate) fn sample(&self, loads: Vec<(String, EngineLoad)>) {
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        for (model, load) in loads {
            let labels = ModelLabels { model };
            self.running
                .get_or_create(&labels)
                .set(count(load.running as u64));
            self.waiting
                .get_or_create(&labels)
                .set(count(load.waiting as u64));
            self.kv_usage
                .get_or_create(&labels)
                .set(load.kv_reserved as f64 / load.kv_cells.max(1) as f64);
            self.prefix_queries
                .get_or_create(&labels)
                .set(count(load.prefix_queries));
            self.prefix_hits
                .get_or_create(&labels)
                .set(count(load.prefix_hits));
            self.prefix_host_hits
                .get_or_create(&labels)
                .set(count(load.prefix_host_hits));
            self.host_cache_bytes
                .get_or_create(&labels)
                .set(count(load.host_cache_bytes as u64));
            self.chunk_placed_tokens
                .get_or_create(&labels)
                .set(count(load.chunk_placed_tokens));
            self.chunk_cache_bytes
                .get_or_create(&labels)
                .set(count(load.chunk_cache_bytes as u64));
            self.spec_draft_tokens
                .get_or_create(&labels)
                .set(count(load.spec_draft_tokens));
            self.spec_accepted_tokens
                .get_or_create(&labels)
                .set(count(load.spec_accepted_tokens));
            self.preemptions
                .get_or_create(&labels)
                .set(count(load.preemptions));
            self.generation_tokens
                .get_or_create(&labels)
                .set(count(load.generation_tokens));
            let latency = load.latency;
            self.ttft
                .get_or_create(&labels)
                .set(latency.time_to_first_token);
            self.tpot
                .get_or_create(&labels)
                .set(latency.time_per_output_token);
            self.queue_time
                .get_or_create(&labels)
                .set(latency.queue_time);
            self.e2e.get_or_create(&labels).set(latency.e2e_latency);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_histograms_encode_as_prometheus_histograms() {
        let mut registry = Registry::with_prefix("glassbox");
        let m = LlmMetrics::register(&mut registry);
        let mut load = EngineLoad {
            running: 2,
            waiting: 1,
            kv_reserved: 512,
            kv_cells: 2048,
            prefix_queries: 100,
            prefix_hits: 60,
            prefix_host_hits: 20,
            host_cache_bytes: 4096,
            chunk_placed_tokens: 7,
            chunk_cache_bytes: 0,
            spec_drafts: 1,
            spec_draft_tokens: 8,
            spec_accepted_tokens: 5,
            preemptions: 3,
            generation_tokens: 640,
            latency: Default::default(),
        };
        load.latency.time_to_first_token = HistogramSnapshot {
            buckets: vec![(0.1, 1), (1.0, 2), (f64::INFINITY, 1)],
            sum: 4.5,
            count: 4,
        };
        m.sample(vec![("smol".to_owned(), load)]);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        for line in [
            "glassbox_llm_num_requests_running{model=\"smol\"} 2",
            "glassbox_llm_kv_cache_usage_perc{model=\"smol\"} 0.25",
            "glassbox_llm_spec_decode_num_accepted_tokens{model=\"smol\"} 5",
            "glassbox_llm_num_preemptions{model=\"smol\"} 3",
            "glassbox_llm_prefix_cache_host_hits{model=\"smol\"} 20",
            "glassbox_llm_prefix_cache_host_bytes{model=\"smol\"} 4096",
            "glassbox_llm_generation_tokens{model=\"smol\"} 640",
            "# TYPE glassbox_llm_time_to_first_token_seconds histogram",
            "glassbox_llm_time_to_first_token_seconds_bucket{le=\"1.0\",model=\"smol\"} 3",
            "glassbox_llm_time_to_first_token_seconds_bucket{le=\"+Inf\",model=\"smol\"} 4",
            "glassbox_llm_time_to_first_token_seconds_count{model=\"smol\"} 4",
        ] {
            assert!(out.contains(line), "missing `{line}` in\n{out}");
        }
    }
}
