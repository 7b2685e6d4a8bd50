//! Tells once per served topology when its first request ran a model other
//! than the one its calibration measured (`glassbox calibrate`): the model
//! a node loads is known only once it has run, so the check sits on the
//! trace sink, after the first request's record. Age, hardware and topology
//! version are told when the topology is loaded.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use glassbox_engine::calibration::Calibration;
use glassbox_trace::{RequestRecord, SpanRecord, TraceSink};

/// A trace sink that checks the first request's models against a calibration.
pub struct CalibratedSink {
    name: String,
    calibration: Calibration,
    checked: AtomicBool,
    inner: Arc<dyn TraceSink>,
}

impl CalibratedSink {
    /// `name`: the topology file, for the warning.
    pub fn new(name: String, calibration: Calibration, inner: Arc<dyn TraceSink>) -> Self {
        Self {
            name,
            calibration,
            checked: AtomicBool::new(false),
            inner,
        }
    }

    /// The warnings for `record` if it is the first one checked; nothing after.
    pub fn check(&self, record: &RequestRecord) -> Vec<String> {
        if record.models.is_empty() || self.checked.swap(true, Ordering::Relaxed) {
            return Vec::new();
        }
        self.calibration.record_warnings(record)
    }
}

impl TraceSink for CalibratedSink {
    fn span(&self, span: Arc<SpanRecord>) {
        self.inner.span(span);
    }

    fn request(&self, record: Arc<RequestRecord>) {
        for w in self.check(&record) {
            crate::console::serve_line(format_args!("warning: `{}`: {w}", self.name));
        }
        self.inner.request(record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_trace::{MemorySink, ModelUse};

    fn calibration() -> Calibration {
        Calibration {
            topology: "rag".into(),
            version: "1.0.0".into(),
            date: "2026-12-01".into(),
            hardware: "cpu".into(),
            models: [("answer".to_string(), "smollm2@aaa".to_string())].into(),
            nodes: vec![],
        }
    }

    fn record(version: &str) -> RequestRecord {
        RequestRecord {
            request_id: glassbox_trace::RequestId::new(),
            topology_id: "rag".into(),
            version: "1.0.0".into(),
            started_at_us: 0,
            ended_at_us: 1,
            duration_us: 1,
            status: glassbox_trace::RequestStatus::Ok,
            degraded: false,
            error: None,
            path: Default::default(),
            labels: Default::default(),
            models: vec![ModelUse {
                node: "answer".into(),
                model: "smollm2".into(),
                version: Some(version.into()),
            }],
            input_summary: String::new(),
            input_chars: None,
            input_tokens: None,
            output_summary: String::new(),
            receipt: glassbox_trace::Receipt::new("USD".into()),
            explanation: Default::default(),
            worker: "server".into(),
            span_count: 0,
        }
    }

    #[test]
    fn a_changed_model_is_told_once_and_the_record_still_stored() {
        let memory = Arc::new(MemorySink::default());
        let sink = CalibratedSink::new("rag.yaml".into(), calibration(), memory.clone());
        let w = sink.check(&record("smollm2@bbb"));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("smollm2@bbb") && w[0].contains("smollm2@aaa"),
            "{w:?}"
        );
        assert!(sink.check(&record("smollm2@bbb")).is_empty(), "told once");
        sink.request(Arc::new(record("smollm2@bbb")));
        assert_eq!(memory.request_count(), 1);
    }

    #[test]
    fn the_calibrated_model_gives_no_warning() {
        let sink = CalibratedSink::new(
            "rag.yaml".into(),
            calibration(),
            Arc::new(MemorySink::default()),
        );
        assert!(sink.check(&record("smollm2@aaa")).is_empty());
    }
}
