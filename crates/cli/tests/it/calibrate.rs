//! `glassbox calibrate` through the binary: a dated file next to the
//! topology, and `run` billing from it.

use crate::support::{glassbox, stderr, stdout};

const TOPOLOGY: &str = "topology_id: cal\nversion: 1.0.0\nnodes:\n  - id: prompt\n    type: template\n    resource: { type: cpu, cost_per_call: 0.5 }\n    config: { template: 'hi {{ input.question }}' }\n";

#[test]
fn calibrate_writes_a_dated_file_that_run_bills_from() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("calibrate-it");
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("cal.yaml");
    std::fs::write(&topo, TOPOLOGY).unwrap();
    let cal_path = dir.join("cal.calibration.json");
    let _ = std::fs::remove_file(&cal_path);
    let topo_s = topo.to_str().unwrap();
    let out = glassbox(
        &[
            "calibrate",
            topo_s,
            "-q",
            "hello",
            "-n",
            "3",
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["topology"], "cal");
    assert_eq!(v["date"].as_str().unwrap().len(), 10);
    let node = &v["nodes"][0];
    assert_eq!(node["id"], "prompt");
    assert_eq!(node["calls"], 3);
    let cost: f64 = node["cost_per_call"].as_str().unwrap().parse().unwrap();
    // A template call is microseconds of CPU: far below the topology's 0.5.
    assert!(cost < 0.001, "{cost}");
    assert!(cal_path.exists());

    // `run` bills the node from the calibration, not the topology's 0.5.
    let run = glassbox(
        &[
            "run",
            topo_s,
            "-q",
            "hello",
            "--no-store",
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let r: serde_json::Value = serde_json::from_str(&stdout(&run)).unwrap();
    let total: f64 = r["receipt"]["total"]
        .as_str()
        .map(|s| s.parse().unwrap())
        .or_else(|| r["receipt"]["total"].as_f64())
        .unwrap();
    assert!(total < 0.001, "{r}");

    // A stale calibration is warned about.
    let mut old = v.clone();
    old["date"] = "2020-01-01".into();
    std::fs::write(&cal_path, old.to_string()).unwrap();
    let run = glassbox(&["run", topo_s, "-q", "hello", "--no-store"], None);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    assert!(stderr(&run).contains("days old"), "{}", stderr(&run));
    std::fs::remove_dir_all(&dir).unwrap();
}
