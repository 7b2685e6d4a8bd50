//! `Local`: a topology file validated, built, run and recorded here.

use std::cell::RefCell;
use std::path::Path;

use glassbox_app::local::Warning;
use glassbox_app::{Local, LocalError, LocalOptions, Record};
use glassbox_engine::RunOptions;
use serde_json::json;

const TEMPLATE: &str = "topology_id: greet\nversion: 1.0.0\nnodes:\n  - id: p\n    type: template\n    config: { template: 'hello {{ input.question }}' }\n";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Opens `file` with `record`, collecting the warnings as text.
fn open(file: &str, record: Record, warnings: &RefCell<Vec<String>>) -> Result<Local, LocalError> {
    let warn = |w: Warning<'_>| {
        warnings.borrow_mut().push(match w {
            Warning::Topology(report) => report.summary(),
            Warning::Calibration(text) => text,
        })
    };
    Local::open(
        file,
        &glassbox_nodes::registry(),
        LocalOptions {
            record,
            calibrated: true,
            warn: &warn,
        },
    )
}

#[test]
fn a_topology_runs_here_and_records_nowhere_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "greet.yaml", TEMPLATE);
    let warnings = RefCell::new(Vec::new());
    let local = open(&file, Record::Nowhere, &warnings).unwrap();
    assert_eq!(local.topology.id, "greet");
    assert!(local.calibration.is_none());
    let outcome = local.run(json!({"question": "you"}), RunOptions::default());
    let output = outcome.result.as_ref().unwrap();
    assert_eq!(
        glassbox_engine::text_of(output),
        Some("hello you"),
        "{output}"
    );
    assert!(local.close().is_none(), "nothing was recorded");
    assert!(warnings.borrow().is_empty(), "{:?}", warnings.borrow());
}

#[test]
fn a_run_is_recorded_in_the_store_it_names_and_durable_on_close() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "greet.yaml", TEMPLATE);
    let url = format!("sqlite://{}", dir.path().join("traces.db").display());
    let warnings = RefCell::new(Vec::new());
    let local = open(&file, Record::Store(Some(url)), &warnings).unwrap();
    let outcome = local.run(json!({"question": "store"}), RunOptions::default());
    let id = outcome.trace.record.request_id;
    let (written_to, closed) = local.close().unwrap();
    assert_eq!(closed.unwrap().requests_written, 1);
    let mut store = glassbox_store::open_store(&written_to).unwrap();
    let stored = store.get(id).unwrap().unwrap();
    assert_eq!(&*stored.record.topology_id, "greet");
}

#[test]
fn an_invalid_file_is_a_topology_error_and_opens_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "bad.yaml",
        "topology_id: bad\nversion: 1.0.0\nnodes:\n  - id: p\n    type: no_such_kind\n",
    );
    let db = dir.path().join("traces.db");
    let url = format!("sqlite://{}", db.display());
    let warnings = RefCell::new(Vec::new());
    let err = open(&file, Record::Store(Some(url)), &warnings).unwrap_err();
    assert!(matches!(err, LocalError::Topology(_)), "{err:?}");
    assert_eq!(err.code(), "invalid_topology");
    assert!(
        !db.exists(),
        "an invalid topology must not create the store"
    );
}

#[test]
fn an_unreadable_calibration_is_a_warning_and_the_topology_prices_apply() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "greet.yaml", TEMPLATE);
    write(dir.path(), "greet.calibration.json", "{ not json");
    let warnings = RefCell::new(Vec::new());
    let local = open(&file, Record::Nowhere, &warnings).unwrap();
    assert!(local.calibration.is_none());
    let warned = warnings.borrow();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("billing with the topology's prices"),
        "{}",
        warned[0]
    );
    let outcome = local.run(json!({"question": "x"}), RunOptions::default());
    assert!(outcome.result.is_ok());
}
