//! Regression runs as library code: case files run into suites, stored
//! requests replayed against a changed topology, the JUnit report; with
//! the real moderation example, its node kinds and a real SQLite store.

use std::path::{Path, PathBuf};

use glassbox_app::regress::replay::{self, ReplayOptions};
use glassbox_app::regress::{cases, junit, suite};
use glassbox_app::{Local, LocalOptions, Record};
use glassbox_engine::RunOptions;
use glassbox_store::Filter;
use glassbox_topology::Source;
use serde_json::json;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn open(file: &str, record: Record) -> Local {
    Local::open(
        file,
        &glassbox_nodes::registry(),
        LocalOptions {
            record,
            calibrated: false,
            warn: &|_| {},
        },
    )
    .unwrap()
}

#[test]
fn case_files_run_into_suites_with_every_miss_and_a_junit_report() {
    let topology = example("moderation.yaml");
    let local = open(topology.to_str().unwrap(), Record::Nowhere);
    let shipped = example("moderation.cases.yaml");
    let text = std::fs::read_to_string(&shipped).unwrap();
    let good = cases::read(Source::new("moderation.cases.yaml", text), &local.topology).unwrap();
    let failing = "cases:\n  - name: wrong branch\n    question: What is the price of Pro?\n    \
                   expect:\n      labels: { route: general }\n      output: { contains: nowhere }\n";
    let bad = cases::read(Source::new("bad.yaml", failing), &local.topology).unwrap();
    let suites = suite::run_cases(
        &local,
        &[
            ("moderation.cases.yaml".into(), good.clone()),
            ("bad.yaml".into(), bad),
        ],
    );
    assert_eq!(suites.len(), 2);
    assert_eq!(suites[0].name, "moderation@1.0.0 moderation.cases.yaml");
    assert_eq!(suites[0].results.len(), good.len());
    assert!(
        suites[0].results.iter().all(|r| r.passed()),
        "{:#?}",
        suites[0].results
    );
    let miss = &suites[1].results[0];
    assert_eq!(miss.location, "bad.yaml:2");
    assert_eq!(miss.path, "route → pricing_answer → check");
    assert_eq!(miss.failures.len(), 2, "{:?}", miss.failures);
    assert!(
        miss.failures[0].contains("labels.route"),
        "{:?}",
        miss.failures
    );
    assert_eq!(suite::totals(&suites), (good.len(), 1, 0));
    let xml = junit::render(&suites);
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(
        xml.contains(&format!("request {}", miss.request_id)),
        "{xml}"
    );
}

#[test]
fn a_replay_reports_the_stored_requests_a_changed_router_sends_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = std::fs::read_to_string(example("moderation.yaml")).unwrap();
    let file = dir.path().join("moderation.yaml");
    std::fs::write(&file, &v1).unwrap();
    let url = format!("sqlite://{}", dir.path().join("traces.db").display());
    let recorded = open(file.to_str().unwrap(), Record::Store(Some(url.clone())));
    // The third input is longer than the store keeps of an input.
    let long = "tell me more ".repeat(400);
    for q in ["What is the price of Pro?", "hello there", &long] {
        let outcome = recorded.run(json!({ "question": q }), RunOptions::default());
        assert!(outcome.result.is_ok());
    }
    let (_, closed) = recorded.close().unwrap();
    assert_eq!(closed.unwrap().requests_written, 3);

    // Version 2 no longer knows prices: the pricing question goes general.
    let v2 = v1.replace("version: 1.0.0", "version: 2.0.0").replace(
        "input.question.contains(\"price\") || input.question.contains(\"cost\")",
        "input.question.contains(\"tariff\")",
    );
    assert_ne!(v1, v2);
    std::fs::write(&file, &v2).unwrap();
    let local = open(file.to_str().unwrap(), Record::Nowhere);
    let mut store =
        glassbox_store::open_store(&glassbox_store::StoreUrl::resolve(Some(&url)).unwrap())
            .unwrap();
    let options = ReplayOptions {
        filter: Filter::default(),
        limit: 10,
        cost_tolerance: 0.25,
    };
    let suite = replay::replay(&local, &mut *store, &options).unwrap();
    assert_eq!(suite.name, "replay of moderation on 2.0.0");
    assert_eq!(suite.results.len(), 3, "{:#?}", suite.results);
    // A cut input is not guessed at: skipped, with the reason.
    let skipped: Vec<_> = suite
        .results
        .iter()
        .filter(|r| r.skipped.is_some())
        .collect();
    assert_eq!(skipped.len(), 1, "{:#?}", suite.results);
    assert!(
        skipped[0].skipped.as_deref().unwrap().contains("cut"),
        "{:?}",
        skipped[0].skipped
    );
    let changed: Vec<_> = suite
        .results
        .iter()
        .filter(|r| !r.failures.is_empty())
        .collect();
    assert_eq!(changed.len(), 1, "{:#?}", suite.results);
    let c = changed[0];
    assert!(c.name.contains("price of Pro"), "{}", c.name);
    assert!(
        c.failures
            .iter()
            .any(|f| f.starts_with("path: route → pricing_answer")),
        "{:?}",
        c.failures
    );
    assert!(
        c.failures
            .iter()
            .any(|f| f == "labels.route: `pricing` became `general`"),
        "{:?}",
        c.failures
    );
    assert!(c.path.contains(" ⇒ "), "old and new path: {}", c.path);

    // Another topology's requests: nothing matches, nothing is replayed.
    let other = ReplayOptions {
        filter: Filter {
            topology: Some("elsewhere".into()),
            ..Filter::default()
        },
        ..options
    };
    assert!(
        replay::replay(&local, &mut *store, &other)
            .unwrap()
            .results
            .is_empty()
    );
}
