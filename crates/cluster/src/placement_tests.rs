use super::*;
use crate::member::{Gpu, Hardware, Load, WorkerRecord};

const NOW: u64 = 1_000_000;

fn gpu(name: &str, gib: u64, cc: &str) -> Hardware {
    Hardware {
        gpus: vec![Gpu {
            name: name.into(),
            memory_bytes: gib << 30,
            compute_capability: Some(cc.into()),
        }],
        cpu_model: "x86".into(),
        cpu_cores: 16,
        memory_bytes: 64 << 30,
    }
}

fn member(id: &str, hw: Hardware, running: u64) -> Member {
    Member {
        record: WorkerRecord {
            id: id.into(),
            address: format!("http://{id}:8090"),
            engine: "glassbox".into(),
            hardware: hw,
            models: vec!["smollm2".into(), "minilm".into()],
            node_kinds: vec!["llm_inference".into(), "embedding".into()],
            labels: Default::default(),
            started_at: 0,
        },
        load: Some(Load {
            running,
            waiting: 0,
            kv_usage: 0.1,
            tokens_per_second: 0.0,
            at: NOW,
            at_ms: None,
        }),
    }
}

fn l4(id: &str, running: u64) -> Member {
    member(id, gpu("NVIDIA L4", 22, "8.9"), running)
}

fn cands(members: &[Member]) -> Vec<Candidate<'_>> {
    members
        .iter()
        .map(|m| Candidate {
            member: m,
            unhealthy: None,
            dead: false,
            pending: 0,
        })
        .collect()
}

fn llm() -> Ask<'static> {
    Ask {
        kind: "llm_inference",
        model: Some("smollm2"),
        affinity: None,
        tried: &[],
    }
}

fn place_once(ask: &Ask<'_>, members: &[Member]) -> Placement {
    place(
        ask,
        &cands(members),
        &Profiles::default(),
        &mut Swrr::new(),
        &Settings::default(),
        NOW,
    )
}

fn chosen(p: &Placement) -> &str {
    p.chosen().map_or("none", |a| a.worker.as_str())
}

#[test]
fn hard_filters_say_why_each_candidate_is_out() {
    let mut no_model = l4("w1", 0);
    no_model.record.models = vec!["other".into()];
    let mut no_kind = l4("w2", 0);
    no_kind.record.node_kinds = vec!["embedding".into()];
    let mut stale = l4("w3", 0);
    stale.load.as_mut().unwrap().at = NOW - 60;
    let sick = l4("w4", 0);
    let tried = l4("w5", 0);
    let good = l4("w6", 3);
    let members = [no_model, no_kind, stale, sick, tried, good];
    let mut cs = cands(&members);
    cs[3].unhealthy = Some("circuit open after 3 consecutive failures");
    let tried_list = ["w5".to_string()];
    let ask = Ask {
        tried: &tried_list,
        ..llm()
    };
    let p = place(
        &ask,
        &cs,
        &Profiles::default(),
        &mut Swrr::new(),
        &Settings::default(),
        NOW,
    );
    assert_eq!(chosen(&p), "w6");
    assert_eq!(
        p.rule,
        Rule::LeastLoaded,
        "the only eligible one has a score"
    );
    let failed: Vec<(&str, Filter, &str)> = p
        .candidates
        .iter()
        .filter_map(|a| {
            a.failed()
                .map(|c| (a.worker.as_str(), c.filter, c.detail.as_str()))
        })
        .collect();
    assert_eq!(failed[0], ("w1", Filter::Model, "does not serve `smollm2`"));
    assert_eq!(
        failed[1],
        ("w2", Filter::Kind, "does not run `llm_inference` nodes")
    );
    assert_eq!(failed[2].1, Filter::Load);
    assert!(failed[2].2.contains("60 s old"), "{}", failed[2].2);
    assert_eq!(failed[3].1, Filter::Health);
    assert_eq!(failed[4], ("w5", Filter::Tried, "already failed this call"));
    assert_eq!(failed.len(), 5);
    // Every filter's verdict is kept, passed ones too.
    assert_eq!(p.candidates[5].checks.len(), 5);
}

#[test]
fn no_eligible_worker_names_every_reason() {
    let mut m = l4("w1", 0);
    m.record.models.clear();
    let p = place_once(&llm(), &[m]);
    assert_eq!(p.chosen, None);
    assert_eq!(p.rule, Rule::NoWorker);
    assert_eq!(p.why_none(), "w1: does not serve `smollm2`");
    assert_eq!(
        place_once(&llm(), &[]).why_none(),
        "the pool has no workers"
    );
}

#[test]
fn the_least_loaded_worker_wins_on_equal_hardware() {
    let members = [l4("w1", 4), l4("w2", 0), l4("w3", 2)];
    let p = place_once(&llm(), &members);
    assert_eq!(chosen(&p), "w2");
    assert_eq!(p.rule, Rule::LeastLoaded);
    let s: Vec<f64> = p.candidates.iter().map(|a| a.score.unwrap()).collect();
    assert!(s[1] < s[2] && s[2] < s[0], "{s:?}");
}

#[test]
fn calls_in_flight_from_this_coordinator_count_as_load() {
    let members = [l4("w1", 0), l4("w2", 1)];
    let mut cs = cands(&members);
    cs[0].pending = 3;
    let p = place(
        &llm(),
        &cs,
        &Profiles::default(),
        &mut Swrr::new(),
        &Settings::default(),
        NOW,
    );
    assert_eq!(chosen(&p), "w2");
    assert_eq!(p.candidates[0].queue, Some(3));
}

#[test]
fn load_is_normalised_by_the_learned_throughput_of_model_and_hardware() {
    let members = [
        member("fast", gpu("NVIDIA H100", 80, "9.0"), 2),
        member("slow", gpu("Tesla T4", 16, "7.5"), 0),
    ];
    let mut profiles = Profiles::default();
    profiles.observe("smollm2", "NVIDIA H100", 300.0);
    profiles.observe("smollm2", "Tesla T4", 50.0);
    let p = place(
        &llm(),
        &cands(&members),
        &profiles,
        &mut Swrr::new(),
        &Settings::default(),
        NOW,
    );
    assert_eq!(chosen(&p), "fast", "3 calls at 300 tok/s beat 1 at 50");
    // Learned for another model, the profile does not apply.
    let ask = Ask {
        model: Some("minilm"),
        ..llm()
    };
    let mut other = Profiles::default();
    other.observe("smollm2", "Tesla T4", 5000.0);
    let p = place(
        &ask,
        &cands(&members),
        &other,
        &mut Swrr::new(),
        &Settings::default(),
        NOW,
    );
    assert_eq!(
        p.candidates[1].tokens_per_second,
        Some(1.0),
        "no rate known for minilm: all count as equally fast"
    );
}

#[test]
fn the_reported_rate_seeds_a_profile_nobody_measured() {
    let mut a = l4("a", 1);
    a.load.as_mut().unwrap().tokens_per_second = 400.0;
    let mut b = member("b", gpu("NVIDIA A10", 24, "8.6"), 0);
    b.load.as_mut().unwrap().tokens_per_second = 100.0;
    let p = place_once(&llm(), &[a, b]);
    assert_eq!(p.candidates[0].tokens_per_second, Some(400.0));
    assert_eq!(chosen(&p), "a", "2/400 beats 1/100");
}

#[test]
fn a_nearly_full_kv_cache_counts_against_a_worker() {
    let mut full = l4("full", 0);
    full.load.as_mut().unwrap().kv_usage = 0.98;
    let members = [full, l4("roomy", 1)];
    assert_eq!(chosen(&place_once(&llm(), &members)), "roomy");
}

#[test]
fn idle_llm_calls_go_to_the_strongest_card() {
    let members = [
        member("l4", gpu("NVIDIA L4", 22, "8.9"), 0),
        member("h200", gpu("NVIDIA H200", 141, "9.0"), 0),
    ];
    let p = place_once(&llm(), &members);
    assert_eq!(chosen(&p), "h200");
    assert!(p.candidates[1].weight > p.candidates[0].weight * 5.0);
}

#[test]
fn idle_embeddings_go_to_the_mid_range_card_with_memory() {
    let members = [
        member("h200", gpu("NVIDIA H200", 141, "9.0"), 0),
        member("l40s", gpu("NVIDIA L40S", 48, "8.9"), 0),
        member("t4", gpu("Tesla T4", 16, "7.5"), 0),
    ];
    let ask = Ask {
        kind: "embedding",
        model: Some("minilm"),
        ..llm()
    };
    let p = place_once(&ask, &members);
    assert_eq!(chosen(&p), "l40s", "{:#?}", p.candidates);
    // ...but the strongest still takes embeddings when the others are busy.
    let members = [
        member("h200", gpu("NVIDIA H200", 141, "9.0"), 0),
        member("l40s", gpu("NVIDIA L40S", 48, "8.9"), 6),
    ];
    assert_eq!(chosen(&place_once(&ask, &members)), "h200");
}

#[test]
fn tied_scores_share_the_work_by_round_robin() {
    let members = [l4("a", 1), l4("b", 1), l4("c", 1)];
    let mut swrr = Swrr::new();
    let mut seen = Vec::new();
    for _ in 0..6 {
        let p = place(
            &llm(),
            &cands(&members),
            &Profiles::default(),
            &mut swrr,
            &Settings::default(),
            NOW,
        );
        assert_eq!(p.rule, Rule::Tied);
        seen.push(chosen(&p).to_string());
    }
    assert_eq!(seen, ["a", "b", "c", "a", "b", "c"]);
}

#[test]
fn stale_loads_fall_back_to_weighted_round_robin() {
    let mut strong = member("h200", gpu("NVIDIA H200", 141, "9.0"), 0);
    let mut weak = l4("l4", 0);
    strong.load.as_mut().unwrap().at = NOW - 5;
    weak.load = None;
    let members = [strong, weak];
    let mut swrr = Swrr::new();
    let mut counts = (0, 0);
    for _ in 0..20 {
        let p = place(
            &llm(),
            &cands(&members),
            &Profiles::default(),
            &mut swrr,
            &Settings::default(),
            NOW,
        );
        assert_eq!(p.rule, Rule::Stale);
        assert!(p.candidates.iter().all(|a| a.score.is_none()));
        match chosen(&p) {
            "h200" => counts.0 += 1,
            _ => counts.1 += 1,
        }
    }
    assert!(counts.0 > counts.1 * 5, "by capability: {counts:?}");
    assert!(counts.1 >= 1, "the weaker one is not starved: {counts:?}");
}

#[test]
fn an_affinity_group_stays_on_its_worker_while_it_can_work() {
    let members = [l4("w1", 5), l4("w2", 0)];
    let ask = Ask {
        affinity: Some(Affinity {
            group: "gpu-a",
            bound: Some("w1"),
        }),
        ..llm()
    };
    let p = place_once(&ask, &members);
    assert_eq!(chosen(&p), "w1", "bound, though busier");
    assert_eq!(p.rule, Rule::Affinity);
    let c = p.candidates[1].failed().unwrap();
    assert_eq!(c.filter, Filter::Affinity);
    assert_eq!(
        c.detail,
        "affinity group `gpu-a` is bound to w1 in this request"
    );

    // The bound worker cannot work: the group moves, and says so.
    let mut cs = cands(&members);
    cs[0].unhealthy = Some("last probe failed");
    let p = place(
        &ask,
        &cs,
        &Profiles::default(),
        &mut Swrr::new(),
        &Settings::default(),
        NOW,
    );
    assert_eq!(chosen(&p), "w2");
    assert_eq!(p.rebound_from.as_deref(), Some("w1"));
    assert_ne!(p.rule, Rule::Affinity);

    // Not bound yet: placed as usual.
    let unbound = Ask {
        affinity: Some(Affinity {
            group: "gpu-a",
            bound: None,
        }),
        ..llm()
    };
    assert_eq!(chosen(&place_once(&unbound, &members)), "w2");
}

#[test]
fn capability_reads_memory_and_compute_from_the_record() {
    let h200 = gpu("NVIDIA H200", 141, "9.0");
    assert!((strength(&h200) - 141.0 * 9.0).abs() < 1e-9);
    let top = strength(&h200);
    assert!((weight("embedding", &h200, top) - 141.0 * 0.25).abs() < 1e-9);
    let l40s = gpu("NVIDIA L40S", 48, "8.9");
    assert!(weight("embedding", &l40s, top) > weight("embedding", &h200, top));
    assert!(weight("llm_inference", &l40s, top) < weight("llm_inference", &h200, top));
    let cpu = Hardware {
        cpu_cores: 32,
        ..Hardware::default()
    };
    assert!((strength(&cpu) - 1.6).abs() < 1e-9);
    let mut odd = gpu("x", 10, "not a number");
    assert!(
        (strength(&odd) - 50.0).abs() < 1e-9,
        "unknown compute counts 5.0"
    );
    odd.gpus[0].compute_capability = None;
    assert!((strength(&odd) - 50.0).abs() < 1e-9);
}

fn with_policy(policy: Policy) -> Settings {
    Settings {
        policy,
        ..Settings::default()
    }
}

#[test]
fn round_robin_takes_the_filtered_candidates_in_turn_whatever_their_load() {
    let mut no_model = l4("out", 0);
    no_model.record.models.clear();
    let members = [
        member("h200", gpu("NVIDIA H200", 141, "9.0"), 9),
        no_model,
        l4("b", 0),
        l4("c", 4),
    ];
    let mut swrr = Swrr::new();
    let mut seen = Vec::new();
    for _ in 0..6 {
        let p = place(
            &llm(),
            &cands(&members),
            &Profiles::default(),
            &mut swrr,
            &with_policy(Policy::RoundRobin),
            NOW,
        );
        assert_eq!(p.rule, Rule::RoundRobin);
        assert!(p.candidates.iter().all(|a| a.score.is_none()), "no scores");
        assert!(p.candidates.iter().all(|a| a.weight == 0.0), "no weights");
        assert_eq!(p.candidates[1].failed().unwrap().filter, Filter::Model);
        seen.push(chosen(&p).to_string());
    }
    assert_eq!(seen, ["h200", "b", "c", "h200", "b", "c"]);
}

#[test]
fn random_draws_uniformly_among_the_filtered_candidates() {
    let members = [l4("a", 5), l4("sick", 0), l4("b", 0), l4("c", 0)];
    let mut cs = cands(&members);
    cs[1].unhealthy = Some("circuit open");
    fastrand::seed(7);
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..300 {
        let p = place(
            &llm(),
            &cs,
            &Profiles::default(),
            &mut Swrr::new(),
            &with_policy(Policy::Random),
            NOW,
        );
        assert_eq!(p.rule, Rule::Random);
        *counts.entry(chosen(&p).to_string()).or_insert(0) += 1;
    }
    assert!(!counts.contains_key("sick"), "{counts:?}");
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert!(
        counts.values().all(|&n| n > 60),
        "about 100 each: {counts:?}"
    );
}

#[test]
fn baselines_keep_affinity_and_find_nobody_when_all_are_filtered() {
    let members = [l4("w1", 5), l4("w2", 0)];
    let ask = Ask {
        affinity: Some(Affinity {
            group: "g",
            bound: Some("w1"),
        }),
        ..llm()
    };
    for policy in [Policy::RoundRobin, Policy::Random] {
        let mut swrr = Swrr::new();
        for _ in 0..3 {
            let p = place(
                &ask,
                &cands(&members),
                &Profiles::default(),
                &mut swrr,
                &with_policy(policy),
                NOW,
            );
            assert_eq!((chosen(&p), p.rule), ("w1", Rule::Affinity), "{policy:?}");
        }
        let mut m = l4("w1", 0);
        m.record.models.clear();
        let p = place(
            &llm(),
            &cands(&[m]),
            &Profiles::default(),
            &mut swrr,
            &with_policy(policy),
            NOW,
        );
        assert_eq!((p.chosen, p.rule), (None, Rule::NoWorker), "{policy:?}");
    }
}

#[test]
fn policies_are_named_as_the_config_spells_them() {
    for name in Policy::NAMES {
        assert_eq!(Policy::parse(name).map(Policy::as_str), Some(name));
    }
    assert_eq!(Policy::parse("least_loaded"), None);
    assert_eq!(Policy::default(), Policy::Scored);
    assert_eq!(Rule::RoundRobin.as_str(), "round_robin");
    assert_eq!(Rule::Random.as_str(), "random");
}

#[test]
fn panic_mode_keeps_the_least_loaded_live_worker_when_every_one_is_unhealthy() {
    let mut no_model = l4("other", 0);
    no_model.record.models = vec!["minilm".into()];
    let members = [l4("busy", 6), l4("lighter", 2), l4("refused", 0), no_model];
    let mut cs = cands(&members);
    for c in &mut cs {
        c.unhealthy = Some("circuit open after 3 consecutive failures");
    }
    // `refused` refused a connection: dead, never taken even in panic;
    // `other` lacks the model: failing another filter keeps it out too.
    cs[2].dead = true;
    let go = |tried: &[String], cs: &[Candidate<'_>]| {
        place(
            &Ask { tried, ..llm() },
            cs,
            &Profiles::default(),
            &mut Swrr::new(),
            &Settings::default(),
            NOW,
        )
    };
    let p = go(&[], &cs);
    assert_eq!(p.rule, Rule::Panic, "{p:?}");
    assert_eq!(chosen(&p), "lighter");
    // A worker that failed this call already is not taken again.
    let p = go(&["lighter".to_string()], &cs);
    assert_eq!((p.rule, chosen(&p)), (Rule::Panic, "busy"));
    // Every live one tried, the rest dead or without the model: nobody.
    let p = go(&["lighter".to_string(), "busy".to_string()], &cs);
    assert_eq!(p.rule, Rule::NoWorker);
    assert!(
        p.why_none().contains("refused: circuit open"),
        "{}",
        p.why_none()
    );
    // One healthy worker: no panic, it is chosen though busier.
    cs[0].unhealthy = None;
    let p = go(&[], &cs);
    assert_eq!((p.rule, chosen(&p)), (Rule::LeastLoaded, "busy"));
}
