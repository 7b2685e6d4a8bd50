//! The lineup's rules on small template topologies (no models).

use std::collections::BTreeMap;
use std::sync::Arc;

use glassbox_engine::PipelineOptions;
use glassbox_nodes::{Assembly, TopologyInput};

use super::*;
use crate::served::StreamMode;

fn served(version: &str) -> Arc<Served> {
    let text = format!(
        "topology_id: t\nversion: {version}\nnodes:\n  - id: a\n    type: template\n    config: {{ template_id: x, template: hi }}\n"
    );
    let registry = glassbox_nodes::registry();
    let options = |_: &glassbox_topology::Topology, _: &glassbox_topology::Report| {
        Ok::<_, std::convert::Infallible>(PipelineOptions::default())
    };
    let assembly = Assembly {
        registry: &registry,
        options: &options,
        outbound: None,
        models: None,
        cluster: None,
    };
    let a = glassbox_nodes::assemble(
        TopologyInput::Source(glassbox_topology::Source::new("t.yaml", text)),
        &assembly,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    Arc::new(Served {
        topology: a.topology,
        pipeline: a.pipeline,
        file: format!("{version}.yaml").into(),
        loaded_at_us: 0,
        stream: StreamMode::Buffered { reason: "no_llm" },
        embeds: false,
    })
}

fn lineup(versions: &[&str]) -> Lineup {
    let mut l = Lineup::new(served(versions[0]));
    for v in &versions[1..] {
        l.insert(served(v));
    }
    l
}

fn weights(w: &[(&str, u32)]) -> BTreeMap<String, u32> {
    w.iter().map(|(v, p)| (v.to_string(), *p)).collect()
}

fn key(k: &str) -> RequestKey {
    RequestKey {
        value: k.into(),
        from: KeySource::Header,
    }
}

fn version_for(l: &Lineup, k: &str) -> String {
    let chosen = l.choose("t", Some(&key(k)), "unused").expect("a version");
    chosen.served.topology.version.clone()
}

#[test]
fn buckets_are_stable_and_spread() {
    // A bucket must mean the same after a restart or an upgrade: these are
    // SHA-256("t\0alice") and ("t\0bob"), first 8 bytes big-endian, mod 100,
    // as Python's hashlib computes them.
    assert_eq!((bucket("t", "alice"), bucket("t", "bob")), (69, 58));
    assert_ne!(
        (0..20)
            .map(|i| bucket("t", &format!("k{i}")))
            .collect::<Vec<_>>(),
        vec![bucket("t", "k0"); 20]
    );
    let mut counts = [0u32; BUCKETS as usize];
    for i in 0..10_000 {
        counts[bucket("t", &format!("user-{i}")) as usize] += 1;
    }
    // 100 per bucket expected; a fair hash stays well inside 50..200.
    assert!(counts.iter().all(|c| (50..200).contains(c)), "{counts:?}");
}

#[test]
fn the_first_version_is_promoted_and_others_wait() {
    let l = lineup(&["1.0.0", "1.1.0"]);
    assert_eq!(l.promoted_version(), "1.0.0");
    assert_eq!((l.percent("1.0.0"), l.percent("1.1.0")), (100, 0));
    for i in 0..50 {
        assert_eq!(version_for(&l, &format!("k{i}")), "1.0.0");
    }
    let why = l.choose("t", None, "r").unwrap().why.unwrap();
    assert_eq!((why.role.as_str(), why.bucket), ("promoted", None));
    // One version alone: nothing to say.
    assert!(
        lineup(&["1.0.0"])
            .choose("t", None, "r")
            .unwrap()
            .why
            .is_none()
    );
}

#[test]
fn raising_a_canary_only_moves_keys_onto_it() {
    let mut l = lineup(&["1.0.0", "1.1.0"]);
    l.set_split("t", &weights(&[("1.0.0", 90), ("1.1.0", 10)]))
        .unwrap();
    let at_10: Vec<String> = (0..300)
        .map(|i| version_for(&l, &format!("k{i}")))
        .collect();
    l.set_split("t", &weights(&[("1.0.0", 70), ("1.1.0", 30)]))
        .unwrap();
    let at_30: Vec<String> = (0..300)
        .map(|i| version_for(&l, &format!("k{i}")))
        .collect();
    let canary = |v: &Vec<String>| v.iter().filter(|x| *x == "1.1.0").count();
    assert!(
        canary(&at_10) > 10 && canary(&at_10) < 60,
        "{}",
        canary(&at_10)
    );
    assert!(canary(&at_30) > canary(&at_10));
    for (a, b) in at_10.iter().zip(&at_30) {
        assert!(!(a == "1.1.0" && b == "1.0.0"), "a key left the canary");
    }
}

#[test]
fn splits_must_add_up_and_name_loaded_versions() {
    let mut l = lineup(&["1.0.0", "1.1.0"]);
    let e = l
        .set_split("t", &weights(&[("1.0.0", 60), ("1.1.0", 30)]))
        .unwrap_err();
    assert_eq!(e.code(), "bad_split");
    assert!(e.to_string().contains("90%"), "{e}");
    let e = l.set_split("t", &weights(&[("2.0.0", 100)])).unwrap_err();
    assert_eq!(e.code(), "version_not_found");
    assert!(e.to_string().contains("`1.0.0`, `1.1.0`"), "{e}");
    // All on the promoted one is no split.
    l.set_split("t", &weights(&[("1.0.0", 100)])).unwrap();
    assert!(l.split().is_empty());
}

#[test]
fn promote_then_rollback_returns_to_the_earlier_version() {
    let mut l = lineup(&["1.0.0", "1.1.0", "1.2.0"]);
    assert_eq!(l.rollback("t").unwrap_err().code(), "nothing_to_roll_back");
    l.set_split("t", &weights(&[("1.0.0", 50), ("1.1.0", 50)]))
        .unwrap();
    l.promote("t", "1.1.0").unwrap();
    assert!(l.split().is_empty(), "promotion sends all traffic");
    l.promote("t", "1.2.0").unwrap();
    assert_eq!(l.rollback("t").unwrap(), "1.1.0");
    assert_eq!(l.rollback("t").unwrap(), "1.0.0");
    assert!(l.rollback("t").is_err());
    assert!(l.ever_changed());
}

#[test]
fn removing_versions_keeps_a_promoted_one() {
    let mut l = lineup(&["1.0.0", "1.1.0", "1.2.0"]);
    l.set_split("t", &weights(&[("1.0.0", 80), ("1.2.0", 20)]))
        .unwrap();
    assert!(l.remove("1.2.0"));
    assert!(
        l.split().is_empty(),
        "its share went back to the promoted one"
    );
    l.promote("t", "1.1.0").unwrap();
    assert!(l.remove("1.1.0"));
    assert_eq!(l.promoted_version(), "1.0.0", "the earlier promoted one");
    assert!(!l.remove("1.0.0"), "the last one gone empties the lineup");
}

#[test]
fn an_edited_file_keeps_its_place() {
    let mut l = lineup(&["1.0.0", "1.1.0"]);
    l.set_split("t", &weights(&[("1.0.0", 75), ("1.1.0", 25)]))
        .unwrap();
    l.rename("1.1.0", served("1.1.1"));
    assert_eq!(l.percent("1.1.1"), 25);
    l.rename("1.0.0", served("1.0.1"));
    assert_eq!(l.promoted_version(), "1.0.1");
}

#[test]
fn keys_come_from_the_header_then_user_then_query() {
    let k = RequestKey::find(None, Some("u"), Some("q")).unwrap();
    assert_eq!((k.value.as_str(), k.from), ("u", KeySource::User));
    let k = RequestKey::find(Some(" h "), Some("u"), Some("q")).unwrap();
    assert_eq!((k.value.as_str(), k.from), ("h", KeySource::Header));
    let none = RequestKey::find(Some(""), Some(""), None);
    assert!(none.is_none());
}
