//! Prometheus metrics (OpenMetrics text at `/metrics`), all prefixed
//! `glassbox_`.
//!
//! Request and node numbers come from the trace records themselves: each
//! pipeline's sink is a [`MeteredSink`] that counts a record and then hands it
//! to the store writer, so metrics and traces can never disagree.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

use glassbox_cluster::gpu::GpuStats;

use glassbox_store::StoreWriter;
use glassbox_trace::{RequestRecord, SpanRecord, TraceSink};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use rust_decimal::prelude::ToPrimitive;

use crate::llm_metrics::LlmMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TopologyLabel {
    topology: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    topology: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    topology: String,
    node: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CostLabels {
    topology: String,
    currency: String,
}

/// `glassbox_alerts_firing` labels: `{kind, topology, node}` for a drift
/// alert, `{kind, worker, gpu, name}` for a GPU alert.
pub type AlertLabels = Vec<(&'static str, String)>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GpuLabels {
    worker: String,
    gpu: String,
    name: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// The per-GPU gauges (`glassbox_gpu_*`).
struct GpuGauges {
    utilization: Family<GpuLabels, FloatGauge>,
    memory_used: Family<GpuLabels, FloatGauge>,
    memory_total: Family<GpuLabels, FloatGauge>,
    temperature: Family<GpuLabels, FloatGauge>,
    power: Family<GpuLabels, FloatGauge>,
    power_limit: Family<GpuLabels, FloatGauge>,
    /// The series set per worker, so a GPU that is gone loses its series.
    shown: Mutex<BTreeMap<String, Vec<GpuLabels>>>,
}

impl GpuGauges {
    fn register(registry: &mut Registry) -> GpuGauges {
        let g = GpuGauges {
            utilization: Family::default(),
            memory_used: Family::default(),
            memory_total: Family::default(),
            temperature: Family::default(),
            power: Family::default(),
            power_limit: Family::default(),
            shown: Mutex::new(BTreeMap::new()),
        };
        registry.register(
            "gpu_utilization_ratio",
            "Share of the last sample period a kernel ran on the GPU (0-1), per worker and GPU",
            g.utilization.clone(),
        );
        registry.register(
            "gpu_memory_used_bytes",
            "GPU memory allocated, per worker and GPU",
            g.memory_used.clone(),
        );
        registry.register(
            "gpu_memory_total_bytes",
            "GPU memory installed, per worker and GPU",
            g.memory_total.clone(),
        );
        registry.register(
            "gpu_temperature_celsius",
            "GPU die temperature, per worker and GPU",
            g.temperature.clone(),
        );
        registry.register(
            "gpu_power_watts",
            "Power the GPU draws, per worker and GPU",
            g.power.clone(),
        );
        registry.register(
            "gpu_power_limit_watts",
            "Power cap the driver enforces on the GPU, per worker and GPU",
            g.power_limit.clone(),
        );
        g
    }

    fn families(&self) -> [&Family<GpuLabels, FloatGauge>; 6] {
        [
            &self.utilization,
            &self.memory_used,
            &self.memory_total,
            &self.temperature,
            &self.power,
            &self.power_limit,
        ]
    }

    fn set(&self, worker: &str, samples: &[GpuStats]) {
        let mut shown = self.shown.lock().unwrap_or_else(PoisonError::into_inner);
        for labels in shown.remove(worker).unwrap_or_default() {
            for f in self.families() {
                f.remove(&labels);
            }
        }
        let mut now = Vec::with_capacity(samples.len());
        for s in samples {
            let labels = GpuLabels {
                worker: worker.to_string(),
                gpu: s.index.to_string(),
                name: s.name.clone(),
            };
            let readings = [
                s.utilization,
                s.memory_used_bytes.map(|b| b as f64),
                s.memory_total_bytes.map(|b| b as f64),
                s.temperature_celsius,
                s.power_watts,
                s.power_limit_watts,
            ];
            for (f, v) in self.families().into_iter().zip(readings) {
                if let Some(v) = v {
                    f.get_or_create(&labels).set(v);
                }
            }
            now.push(labels);
        }
        if !now.is_empty() {
            shown.insert(worker.to_string(), now);
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BandLabels {
    topology: String,
    priority: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RejectLabels {
    topology: String,
    reason: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 1 ms .. ~33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// Every series the server exports.
pub struct Metrics {
    registry: Registry,
    requests: Family<StatusLabels, Counter>,
    request_seconds: HistogramFamily<TopologyLabel>,
    node_seconds: HistogramFamily<NodeLabels>,
    cost: Family<CostLabels, Counter<f64, AtomicU64>>,
    in_flight: Family<TopologyLabel, Gauge>,
    rejections: Family<RejectLabels, Counter>,
    queue_depth: Gauge,
    queue_capacity: Gauge,
    commits: Gauge,
    requests_written: Gauge,
    commit_seconds: Gauge<f64, AtomicU64>,
    llm: LlmMetrics,
    topologies: Gauge,
    alerts_firing: Family<AlertLabels, Gauge>,
    band_running: Family<BandLabels, Gauge>,
    band_waiting: Family<BandLabels, Gauge>,
    /// The firing series of the latest drift evaluation and of the GPU
    /// monitor, kept apart so each replaces only its own.
    firing: Mutex<(Vec<AlertLabels>, Vec<AlertLabels>)>,
    gpus: GpuGauges,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("glassbox");
        let requests = Family::<StatusLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests finished, by topology and status (ok, failed, cancelled)",
            requests.clone(),
        );
        let request_seconds: HistogramFamily<TopologyLabel> =
            Family::new_with_constructor(latency_histogram);
        registry.register_with_unit(
            "request_duration",
            "Request latency per topology",
            Unit::Seconds,
            request_seconds.clone(),
        );
        let node_seconds: HistogramFamily<NodeLabels> =
            Family::new_with_constructor(latency_histogram);
        registry.register_with_unit(
            "node_duration",
            "Node attempt latency per topology and node",
            Unit::Seconds,
            node_seconds.clone(),
        );
        let cost = Family::<CostLabels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "cost",
            "Cost of finished requests (sum of receipts), by topology and currency",
            cost.clone(),
        );
        let in_flight = Family::<TopologyLabel, Gauge>::default();
        registry.register(
            "in_flight_requests",
            "Requests running now, per topology",
            in_flight.clone(),
        );
        let rejections = Family::<RejectLabels, Counter>::default();
        registry.register(
            "rejections",
            "Requests turned away before running (overloaded, queue_full, shed, rate_limited)",
            rejections.clone(),
        );
        let queue_depth = Gauge::default();
        registry.register(
            "trace_queue_depth",
            "Records waiting in the trace writer's queue",
            queue_depth.clone(),
        );
        let queue_capacity = Gauge::default();
        registry.register(
            "trace_queue_capacity",
            "Capacity of the trace writer's queue",
            queue_capacity.clone(),
        );
        // Sampled from the writer's counters at each scrape. Requests written
        // over commits is the group-commit size; commit seconds over
        // commits the mean time an answer waits on its commit.
        let commits = Gauge::default();
        registry.register(
            "trace_commits",
            "Transactions the trace writer has committed (one per batch)",
            commits.clone(),
        );
        let requests_written = Gauge::default();
        registry.register(
            "trace_requests_written",
            "Requests the trace writer has committed",
            requests_written.clone(),
        );
        let commit_seconds = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "trace_commit_seconds",
            "Time the trace writer has spent in commits, in total",
            commit_seconds.clone(),
        );
        let llm = LlmMetrics::register(&mut registry);
        let topologies = Gauge::default();
        registry.register("topologies", "Topologies being served", topologies.clone());
        let alerts_firing = Family::<AlertLabels, Gauge>::default();
        registry.register(
            "alerts_firing",
            "Alerts firing (1 each). Drift alerts by kind (route_shift, p99_regression, \
             cost_jump), topology and node (the path for a route shift; empty for cost); \
             GPU alerts by kind (gpu_temperature, gpu_memory, gpu_utilization), worker, \
             gpu and name",
            alerts_firing.clone(),
        );
        let band_running = Family::<BandLabels, Gauge>::default();
        registry.register(
            "requests_running",
            "Requests holding a slot of their topology now, by priority band",
            band_running.clone(),
        );
        let band_waiting = Family::<BandLabels, Gauge>::default();
        registry.register(
            "requests_waiting",
            "Requests waiting in their topology's queue for a slot, by priority band",
            band_waiting.clone(),
        );
        let gpus = GpuGauges::register(&mut registry);
        Metrics {
            band_running,
            band_waiting,
            registry,
            requests,
            request_seconds,
            node_seconds,
            cost,
            in_flight,
            rejections,
            queue_depth,
            queue_capacity,
            commits,
            requests_written,
            llm,
            commit_seconds,
            topologies,
            alerts_firing,
            firing: Mutex::new((Vec::new(), Vec::new())),
            gpus,
        }
    }

    /// A request turned away before it ran.
    pub fn rejected(&self, topology: &str, reason: &str) {
        self.rejections
            .get_or_create(&RejectLabels {
                topology: topology.to_string(),
                reason: reason.to_string(),
            })
            .inc();
    }

    /// A topology's running and waiting requests of one priority band.
    pub fn band(
        &self,
        topology: &str,
        band: glassbox_trace::Priority,
        running: usize,
        waiting: usize,
    ) {
        let label = BandLabels {
            topology: topology.to_string(),
            priority: band.as_str().to_string(),
        };
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        self.band_running.get_or_create(&label).set(n(running));
        self.band_waiting.get_or_create(&label).set(n(waiting));
    }

    /// Counts a request as running until the guard drops.
    pub fn in_flight(&self, topology: &str) -> InFlight {
        let label = TopologyLabel {
            topology: topology.to_string(),
        };
        // The gauge shares its value with the family's: one count.
        let gauge = self.in_flight.get_or_create(&label).clone();
        gauge.inc();
        InFlight { gauge }
    }

    pub fn set_topologies(&self, n: usize) {
        self.topologies.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    fn span(&self, topology: &str, span: &SpanRecord) {
        self.node_seconds
            .get_or_create(&NodeLabels {
                topology: topology.to_string(),
                node: span.node.to_string(),
            })
            .observe(span.usage.wall_us as f64 / 1e6);
    }

    fn request(&self, record: &RequestRecord) {
        let topology = record.topology_id.to_string();
        self.requests
            .get_or_create(&StatusLabels {
                topology: topology.clone(),
                status: record.status.as_str().to_string(),
            })
            .inc();
        self.request_seconds
            .get_or_create(&TopologyLabel {
                topology: topology.clone(),
            })
            .observe(record.duration_us as f64 / 1e6);
        let cost = record.receipt.total.to_f64().unwrap_or(0.0);
        self.cost
            .get_or_create(&CostLabels {
                topology,
                currency: record.receipt.currency.to_string(),
            })
            .inc_by(cost.max(0.0));
    }

    /// Publishes the alerts of the latest drift evaluation: one series at 1
    /// per firing alert; alerts that stopped firing disappear.
    pub fn set_alerts(&self, alerts: &[glassbox_store::drift::Alert]) {
        let labels = alerts
            .iter()
            .map(|a| {
                vec![
                    ("kind", a.kind.as_str().to_string()),
                    ("topology", a.topology.clone()),
                    ("node", a.node.clone()),
                ]
            })
            .collect();
        let mut firing = self.firing.lock().unwrap_or_else(PoisonError::into_inner);
        firing.0 = labels;
        self.publish_firing(&firing);
    }

    /// Publishes the GPU alerts firing now (each as its labels), in place
    /// of the previous ones.
    pub fn set_gpu_alerts(&self, labels: Vec<AlertLabels>) {
        let mut firing = self.firing.lock().unwrap_or_else(PoisonError::into_inner);
        firing.1 = labels;
        self.publish_firing(&firing);
    }

    fn publish_firing(&self, firing: &(Vec<AlertLabels>, Vec<AlertLabels>)) {
        self.alerts_firing.clear();
        for labels in firing.0.iter().chain(&firing.1) {
            self.alerts_firing.get_or_create(labels).set(1);
        }
    }

    /// One worker's latest GPU readings (all its GPUs; an empty list
    /// removes its series). A reading a GPU lacks is not exported.
    pub fn set_gpus(&self, worker: &str, samples: &[GpuStats]) {
        self.gpus.set(worker, samples);
    }

    /// The text exposition, with the writer's queue sampled now.
    pub fn encode(&self, writer: &StoreWriter) -> String {
        let stats = writer.stats();
        self.queue_depth
            .set(i64::try_from(stats.queue_depth).unwrap_or(i64::MAX));
        self.queue_capacity
            .set(i64::try_from(stats.queue_capacity).unwrap_or(i64::MAX));
        self.commits
            .set(i64::try_from(stats.batches).unwrap_or(i64::MAX));
        self.requests_written
            .set(i64::try_from(stats.requests_written).unwrap_or(i64::MAX));
        self.commit_seconds.set(stats.write_us_total as f64 / 1e6);
        self.llm
            .sample(glassbox_nodes::model_cache::global().llm_loads());
        self.encode_registry()
    }

    /// The text exposition without a trace store (a cluster worker keeps
    /// none), with the local LLM engines sampled now.
    pub fn encode_engines(&self) -> String {
        self.llm
            .sample(glassbox_nodes::model_cache::global().llm_loads());
        self.encode_registry()
    }

    /// The text exposition of the registry as it is.
    pub(crate) fn encode_registry(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Decrements the in-flight gauge when dropped.
pub struct InFlight {
    gauge: Gauge,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// A pipeline's sink: counts each record, then passes it to the store writer.
pub struct MeteredSink {
    pub topology: Arc<str>,
    pub metrics: Arc<Metrics>,
    pub inner: Arc<StoreWriter>,
}

impl TraceSink for MeteredSink {
    fn span(&self, span: Arc<SpanRecord>) {
        self.metrics.span(&self.topology, &span);
        self.inner.span(span);
    }

    fn request(&self, record: Arc<RequestRecord>) {
        self.metrics.request(&record);
        self.inner.request(record);
    }
}

impl glassbox_app::service::queue::Occupancy for Metrics {
    fn band(&self, topology: &str, band: glassbox_trace::Priority, running: usize, waiting: usize) {
        Metrics::band(self, topology, band, running, waiting);
    }
}
