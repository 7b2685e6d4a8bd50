//! The alert rules and the metric encoding, from injected readings.

use std::sync::Mutex;
use std::time::Duration;

use glassbox_cluster::member::Gpu;

use super::*;

const MIN: u64 = 60_000_000;

fn stats(index: u32) -> GpuStats {
    GpuStats {
        index,
        name: "Fake H100".into(),
        utilization: Some(0.10),
        memory_used_bytes: Some(10 << 30),
        memory_total_bytes: Some(80 << 30),
        temperature_celsius: Some(50.0),
        power_watts: Some(120.5),
        power_limit_watts: Some(700.0),
    }
}

fn hot(index: u32, celsius: f64) -> GpuStats {
    GpuStats {
        temperature_celsius: Some(celsius),
        ..stats(index)
    }
}

fn busy(index: u32, ratio: f64) -> GpuStats {
    GpuStats {
        utilization: Some(ratio),
        ..stats(index)
    }
}

fn started(changes: &[Change]) -> Vec<(GpuAlertKind, u32)> {
    changes
        .iter()
        .filter_map(|c| match c {
            Change::Started(a) => Some((a.kind, a.gpu)),
            Change::Cleared(_) => None,
        })
        .collect()
}

fn cleared(changes: &[Change]) -> Vec<(GpuAlertKind, u32)> {
    changes
        .iter()
        .filter_map(|c| match c {
            Change::Cleared(a) => Some((a.kind, a.gpu)),
            Change::Started(_) => None,
        })
        .collect()
}

#[test]
fn a_temperature_alert_starts_once_and_clears_once() {
    let s = GpuAlertSettings::default();
    let mut a = Alerting::default();
    assert!(a.observe(&s, "w1", &[hot(0, 80.0)], 0).is_empty());
    let c = a.observe(&s, "w1", &[hot(0, 91.0)], 5);
    assert_eq!(started(&c), [(GpuAlertKind::GpuTemperature, 0)]);
    let Change::Started(alert) = &c[0] else {
        panic!("{c:?}")
    };
    assert!(alert.message.contains("91 °C"), "{}", alert.message);
    assert!(alert.message.contains("`w1`"), "{}", alert.message);
    assert_eq!((alert.threshold, alert.since_us), (85.0, 5));
    // Still hot: nothing new to log, but the reading is the latest.
    assert!(a.observe(&s, "w1", &[hot(0, 93.0)], 10).is_empty());
    assert_eq!(a.firing().len(), 1);
    assert_eq!(a.firing()[0].value, 93.0);
    assert_eq!(a.firing()[0].since_us, 5);
    let c = a.observe(&s, "w1", &[hot(0, 70.0)], 15);
    assert_eq!(cleared(&c), [(GpuAlertKind::GpuTemperature, 0)]);
    assert!(a.firing().is_empty());
    assert!(a.observe(&s, "w1", &[hot(0, 70.0)], 20).is_empty());
}

#[test]
fn utilisation_must_stay_high_for_the_whole_stretch() {
    let s = GpuAlertSettings {
        utilization_ratio: 0.9,
        utilization_for: "10m".into(),
        ..GpuAlertSettings::default()
    };
    let mut a = Alerting::default();
    assert!(a.observe(&s, "w1", &[busy(0, 0.95)], 0).is_empty());
    assert!(a.observe(&s, "w1", &[busy(0, 0.97)], 9 * MIN).is_empty());
    // A dip restarts the stretch.
    assert!(
        a.observe(&s, "w1", &[busy(0, 0.50)], 9 * MIN + 1)
            .is_empty()
    );
    assert!(a.observe(&s, "w1", &[busy(0, 0.95)], 10 * MIN).is_empty());
    assert!(a.observe(&s, "w1", &[busy(0, 0.95)], 19 * MIN).is_empty());
    let c = a.observe(&s, "w1", &[busy(0, 0.99)], 20 * MIN);
    assert_eq!(started(&c), [(GpuAlertKind::GpuUtilization, 0)]);
    assert_eq!(a.firing()[0].since_us, 10 * MIN, "since the stretch began");
    let c = a.observe(&s, "w1", &[busy(0, 0.2)], 21 * MIN);
    assert_eq!(cleared(&c), [(GpuAlertKind::GpuUtilization, 0)]);
}

#[test]
fn memory_alerts_compare_used_over_total() {
    let s = GpuAlertSettings {
        memory_ratio: 0.9,
        ..GpuAlertSettings::default()
    };
    let mut a = Alerting::default();
    let full = GpuStats {
        memory_used_bytes: Some(75 << 30),
        memory_total_bytes: Some(80 << 30),
        ..stats(1)
    };
    let c = a.observe(&s, "w1", &[stats(0), full], 0);
    assert_eq!(started(&c), [(GpuAlertKind::GpuMemory, 1)]);
    assert!(a.firing()[0].message.contains("93.8%"), "{:?}", a.firing());
}

#[test]
fn an_absent_reading_keeps_an_alert_and_a_gone_gpu_clears_it() {
    let s = GpuAlertSettings::default();
    let mut a = Alerting::default();
    a.observe(&s, "w1", &[hot(0, 95.0), hot(1, 95.0)], 0);
    a.observe(&s, "w2", &[hot(0, 95.0)], 0);
    assert_eq!(a.firing().len(), 3);
    let no_sensor = GpuStats {
        temperature_celsius: None,
        ..stats(0)
    };
    assert!(
        a.observe(&s, "w1", &[no_sensor, hot(1, 95.0)], 5)
            .is_empty()
    );
    assert_eq!(a.firing().len(), 3);
    // GPU 1 of w1 is no longer reported: its alert clears; w2 is untouched.
    let c = a.observe(&s, "w1", &[hot(0, 95.0)], 10);
    assert_eq!(cleared(&c), [(GpuAlertKind::GpuTemperature, 1)]);
    let left: Vec<(String, u32)> = a.firing().into_iter().map(|x| (x.worker, x.gpu)).collect();
    assert_eq!(left, [("w1".to_string(), 0), ("w2".to_string(), 0)]);
}

/// Readings set by the test, in place of NVML.
struct FakeGpus {
    samples: Mutex<Vec<GpuStats>>,
}

impl GpuSource for FakeGpus {
    fn gpus(&self) -> Vec<Gpu> {
        Vec::new()
    }

    fn sample(&self) -> Vec<GpuStats> {
        self.samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The value of the series `name{labels}` in an exposition.
fn series(text: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.parse().unwrap_or_else(|e| panic!("{v}: {e}")))
}

#[test]
fn readings_and_firing_alerts_are_exported_per_worker_and_gpu() {
    let metrics = Arc::new(Metrics::new());
    let fake = Arc::new(FakeGpus {
        samples: Mutex::new(vec![
            hot(0, 91.0),
            GpuStats {
                power_watts: None,
                ..stats(1)
            },
        ]),
    });
    let monitor = GpuMonitor::new(
        fake.clone(),
        "w1".into(),
        GpuAlertSettings::default(),
        metrics.clone(),
    );
    let changes = monitor.sample_now(1_000);
    assert_eq!(started(&changes), [(GpuAlertKind::GpuTemperature, 0)]);
    let text = metrics.encode_registry();
    let l0 = r#"worker="w1",gpu="0",name="Fake H100""#;
    let l1 = r#"worker="w1",gpu="1",name="Fake H100""#;
    assert_eq!(
        series(&text, "glassbox_gpu_utilization_ratio", l0),
        Some(0.1)
    );
    assert_eq!(
        series(&text, "glassbox_gpu_memory_used_bytes", l0),
        Some((10u64 << 30) as f64)
    );
    assert_eq!(
        series(&text, "glassbox_gpu_memory_total_bytes", l1),
        Some((80u64 << 30) as f64)
    );
    assert_eq!(
        series(&text, "glassbox_gpu_temperature_celsius", l0),
        Some(91.0)
    );
    assert_eq!(
        series(&text, "glassbox_gpu_temperature_celsius", l1),
        Some(50.0)
    );
    assert_eq!(series(&text, "glassbox_gpu_power_watts", l0), Some(120.5));
    assert_eq!(
        series(&text, "glassbox_gpu_power_limit_watts", l0),
        Some(700.0)
    );
    assert_eq!(
        series(&text, "glassbox_gpu_power_watts", l1),
        None,
        "a reading the GPU lacks is not exported:\n{text}"
    );
    let firing = r#"kind="gpu_temperature",worker="w1",gpu="0",name="Fake H100""#;
    assert_eq!(series(&text, "glassbox_alerts_firing", firing), Some(1.0));
    // A drift evaluation replaces only the drift series.
    metrics.set_alerts(&[]);
    let text = metrics.encode_registry();
    assert_eq!(series(&text, "glassbox_alerts_firing", firing), Some(1.0));

    // The snapshot `/v1/gpus` answers.
    let snap = monitor.snapshot();
    assert_eq!(snap.gpus.len(), 2);
    assert_eq!(snap.gpus[0].sampled_at_us, 1_000);
    assert_eq!(snap.alerts.len(), 1);
    let json = serde_json::to_value(&snap).unwrap();
    assert_eq!(json["gpus"][0]["worker"], "w1");
    assert_eq!(json["gpus"][0]["temperature_celsius"], 91.0);
    assert_eq!(json["gpus"][1]["power_watts"], serde_json::Value::Null);
    assert_eq!(json["alerts"][0]["kind"], "gpu_temperature");

    // GPU 0 cools down and GPU 1 goes away: its series and the alert go.
    *fake.samples.lock().unwrap() = vec![hot(0, 60.0)];
    let changes = monitor.sample_now(2_000);
    assert_eq!(cleared(&changes), [(GpuAlertKind::GpuTemperature, 0)]);
    let text = metrics.encode_registry();
    assert_eq!(
        series(&text, "glassbox_gpu_temperature_celsius", l0),
        Some(60.0)
    );
    assert_eq!(
        series(&text, "glassbox_gpu_temperature_celsius", l1),
        None,
        "{text}"
    );
    assert_eq!(
        series(&text, "glassbox_alerts_firing", firing),
        None,
        "{text}"
    );

    // Another worker's readings sit beside this machine's.
    monitor.record("w2", vec![stats(0)], 3_000);
    let text = metrics.encode_registry();
    let w2 = r#"worker="w2",gpu="0",name="Fake H100""#;
    assert_eq!(
        series(&text, "glassbox_gpu_temperature_celsius", w2),
        Some(50.0)
    );
    assert_eq!(
        series(&text, "glassbox_gpu_temperature_celsius", l0),
        Some(60.0)
    );
}

#[test]
fn no_gpus_exports_no_gpu_series() {
    let metrics = Arc::new(Metrics::new());
    let fake = Arc::new(FakeGpus {
        samples: Mutex::new(Vec::new()),
    });
    let monitor = GpuMonitor::new(
        fake,
        "w1".into(),
        GpuAlertSettings::default(),
        metrics.clone(),
    );
    assert!(monitor.sample_now(1).is_empty());
    let text = metrics.encode_registry();
    assert!(
        text.contains("# TYPE glassbox_gpu_temperature_celsius gauge"),
        "{text}"
    );
    assert!(
        !text.contains("glassbox_gpu_temperature_celsius{"),
        "{text}"
    );
    assert!(monitor.snapshot().gpus.is_empty());
}

#[test]
fn gpu_thresholds_are_read_from_the_alerts_section_and_checked() {
    let c = crate::Config::parse(
        "[alerts.gpu]\ntemperature_celsius = 80.0\nutilization_for = \"2m\"\ninterval = \"1s\"",
    )
    .unwrap();
    let g = &c.alerts.gpu;
    assert_eq!(g.temperature_celsius, 80.0);
    assert_eq!(g.utilization_for_us(), 2 * MIN);
    assert_eq!(g.interval(), Duration::from_secs(1));
    assert_eq!(g.memory_ratio, 0.95, "others keep their defaults");
    let err = crate::Config::parse(
        "[alerts.gpu]\nmemory_ratio = 95.0\ntemperature_celsius = -1.0\nutilization_for = \"soon\"",
    )
    .unwrap_err();
    assert!(
        err.contains("`memory_ratio`") && err.contains("(0, 1]"),
        "{err}"
    );
    assert!(err.contains("`temperature_celsius`"), "{err}");
    assert!(err.contains("`utilization_for`"), "{err}");
    let err = crate::Config::parse("[alerts.gpu]\ntemprature = 80.0").unwrap_err();
    assert!(err.contains("temprature"), "{err}");
}
