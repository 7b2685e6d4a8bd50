//! GPU monitoring through the real server: `/v1/gpus`, the `glassbox_gpu_*`
//! series and `gpu_alerts` in `/v1/alerts` agree, on whatever machine the
//! tests run (here, usually one without NVML: no GPUs, and the reason).

use glassbox_server::Config;

use crate::support::{MODERATION, TestServer};

fn series(metrics: &str, name: &str) -> usize {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .count()
}

#[test]
fn gpus_metrics_and_alerts_agree_with_or_without_nvml() {
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], Config::default());
    let snap = s.get("/v1/gpus", None).json();
    let gpus = snap["gpus"].as_array().expect("gpus");
    assert_eq!(snap["settings"]["enabled"], true);
    assert_eq!(snap["settings"]["temperature_celsius"], 85.0);
    match snap["unavailable"].as_str() {
        // No driver: a normal state, with the reason, and no GPU.
        Some(why) => {
            assert!(why.contains("NVML"), "{why}");
            assert!(gpus.is_empty(), "{snap}");
        }
        None => assert!(snap["unavailable"].is_null(), "{snap}"),
    }
    for g in gpus {
        assert_eq!(g["worker"], snap["worker"], "{g}");
        assert!(g["name"].is_string() && g["index"].is_u64(), "{g}");
    }
    let metrics = s.get("/metrics", None).text;
    assert!(
        metrics.contains("# TYPE glassbox_gpu_temperature_celsius gauge"),
        "{metrics}"
    );
    let with_total = gpus
        .iter()
        .filter(|g| g["memory_total_bytes"].is_u64())
        .count();
    assert_eq!(
        series(&metrics, "glassbox_gpu_memory_total_bytes"),
        with_total
    );
    let alerts = s.get("/v1/alerts", None).json();
    assert_eq!(alerts["gpu_alerts"], snap["alerts"], "{alerts}");
    let firing = metrics
        .lines()
        .filter(|l| l.starts_with("glassbox_alerts_firing{kind=\"gpu_"))
        .count();
    assert_eq!(firing, snap["alerts"].as_array().map_or(0, Vec::len));
}

#[test]
fn gpu_sampling_can_be_turned_off() {
    let config = Config::parse("[alerts.gpu]\nenabled = false").unwrap();
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], config);
    let snap = s.get("/v1/gpus", None).json();
    assert_eq!(snap["settings"]["enabled"], false);
    assert_eq!(snap["gpus"].as_array().map(Vec::len), Some(0), "{snap}");
    let metrics = s.get("/metrics", None).text;
    assert_eq!(series(&metrics, "glassbox_gpu_utilization_ratio"), 0);
}
