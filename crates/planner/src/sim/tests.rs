#![allow(clippy::unwrap_used)]

use super::*;
use crate::efficiency::{EfficiencyTable, Engine};
use crate::estimate::{Estimator, Scenario};
use crate::hardware::HardwareCatalogue;
use crate::model::ModelCatalogue;
use crate::quant::Quant;

/// A fake step cost for unit tests: a constant time per step.
struct FakeConstantCost(f64);

impl StepCost for FakeConstantCost {
    fn step_s(&self, _: &Step) -> f64 {
        self.0
    }
}

/// A fake step cost for unit tests: fixed + per sequence + per prompt token.
struct FakeLinearCost;

impl StepCost for FakeLinearCost {
    fn step_s(&self, s: &Step) -> f64 {
        0.005 + 0.0001 * f64::from(s.decode_seqs) + 0.00002 * s.prefill_tokens as f64
    }
}

fn chat(rate: f64, prompt: u64, output: u64, tasks: usize, seed: u64) -> Traffic {
    Traffic {
        arrivals: Arrivals::Poisson { rate },
        prompt: Lengths::Fixed(prompt),
        output: Lengths::Fixed(output),
        profile: Profile::Chat,
        tasks,
        seed,
    }
}

fn roomy() -> Limits {
    Limits::with_kv_tokens(1 << 20)
}

#[test]
fn one_at_a_time_matches_the_m_d_1_waiting_time() {
    // One sequence at a time, one step per request (output 1), constant
    // service D: an M/D/1 queue. Mean wait = ρD / (2(1 − ρ)).
    let d = 0.010;
    let limits = Limits {
        max_running: 1,
        ..roomy()
    };
    for rho in [0.5, 0.8] {
        let traffic = chat(rho / d, 100, 1, 40_000, 7);
        let r = simulate(&FakeConstantCost(d), limits, &traffic, 1, SlaP99::default()).unwrap();
        let expected_ms = (rho * d / (2.0 * (1.0 - rho)) + d) * 1e3;
        let err = (r.ttft_ms.mean - expected_ms).abs() / expected_ms;
        assert!(
            err < 0.06,
            "rho {rho}: simulated mean TTFT {} ms, M/D/1 {expected_ms} ms",
            r.ttft_ms.mean
        );
        assert!((r.utilisation - rho).abs() < 0.03, "{}", r.utilisation);
        assert_eq!(r.ttft_ms.mean, r.e2e_ms.mean);
    }
}

#[test]
fn more_replicas_are_never_worse() {
    let traffic = chat(60.0, 400, 64, 1500, 3);
    let mut last: Option<SimReport> = None;
    for n in [1, 2, 3, 4, 8] {
        let r = simulate(&FakeLinearCost, roomy(), &traffic, n, SlaP99::default()).unwrap();
        if let Some(prev) = &last {
            assert!(
                r.ttft_ms.p99 <= prev.ttft_ms.p99 * 1.001,
                "{n}: {} vs {}",
                r.ttft_ms.p99,
                prev.ttft_ms.p99
            );
            assert!(r.e2e_ms.p99 <= prev.e2e_ms.p99 * 1.001);
        }
        last = Some(r);
    }
    // And one replica is really overloaded here, four are not.
    let one = simulate(&FakeLinearCost, roomy(), &traffic, 1, SlaP99::default()).unwrap();
    let four = simulate(&FakeLinearCost, roomy(), &traffic, 4, SlaP99::default()).unwrap();
    assert!(one.ttft_ms.p99 > 5.0 * four.ttft_ms.p99, "{one:?} {four:?}");
}

#[test]
fn a_tiny_kv_cache_preempts_and_still_finishes_everything() {
    let traffic = chat(40.0, 200, 200, 400, 5);
    // Room for about three full sequences of 400 tokens.
    let tiny = Limits {
        kv_blocks: 80,
        ..roomy()
    };
    let small = simulate(&FakeLinearCost, tiny, &traffic, 1, SlaP99::default()).unwrap();
    assert!(small.preemptions > 0, "{small:?}");
    assert_eq!(small.rejected, 0);
    assert_eq!(small.e2e_ms.count, small.tasks);
    let big = simulate(&FakeLinearCost, roomy(), &traffic, 1, SlaP99::default()).unwrap();
    assert_eq!(big.preemptions, 0);
    assert!(small.e2e_ms.p99 > big.e2e_ms.p99);
    // A request larger than the whole cache is rejected, not looped on.
    let none = Limits {
        kv_blocks: 10,
        ..roomy()
    };
    let r = simulate(&FakeLinearCost, none, &traffic, 1, SlaP99::default()).unwrap();
    assert_eq!(r.rejected, r.calls);
    assert!(!r.meets_sla);
    let err = search::fewest_replicas(
        &FakeLinearCost,
        none,
        &traffic,
        SlaP99 {
            ttft_ms: Some(100.0),
            ..SlaP99::default()
        },
        8,
    )
    .unwrap_err();
    assert_eq!(err.code(), "planner.does_not_fit", "{err}");
}

#[test]
fn same_seed_same_run_other_seed_other_run() {
    let mut traffic = chat(30.0, 300, 50, 500, 11);
    traffic.arrivals = Arrivals::Gamma {
        rate: 30.0,
        cv: 3.0,
    };
    traffic.prompt = Lengths::Uniform { lo: 50, hi: 900 };
    let a = simulate(&FakeLinearCost, roomy(), &traffic, 2, SlaP99::default()).unwrap();
    let b = simulate(&FakeLinearCost, roomy(), &traffic, 2, SlaP99::default()).unwrap();
    let json = |r: &SimReport| serde_json::to_string(r).unwrap();
    assert_eq!(json(&a), json(&b));
    traffic.seed = 12;
    let c = simulate(&FakeLinearCost, roomy(), &traffic, 2, SlaP99::default()).unwrap();
    assert_ne!(json(&a), json(&c));
}

#[test]
fn chunked_prefill_respects_the_token_budget() {
    // A 5000-token prompt with a 1000-token budget takes five prefill steps.
    let limits = Limits {
        max_batched_tokens: 1000,
        ..roomy()
    };
    let traffic = chat(0.01, 5000, 1, 10, 1);
    let r = simulate(
        &FakeConstantCost(0.01),
        limits,
        &traffic,
        1,
        SlaP99::default(),
    )
    .unwrap();
    assert!((r.ttft_ms.p50 - 50.0).abs() < 1e-6, "{:?}", r.ttft_ms);
    let whole = Limits {
        max_batched_tokens: 8192,
        ..roomy()
    };
    let r = simulate(
        &FakeConstantCost(0.01),
        whole,
        &traffic,
        1,
        SlaP99::default(),
    )
    .unwrap();
    assert!((r.ttft_ms.p50 - 10.0).abs() < 1e-6, "{:?}", r.ttft_ms);
}

#[test]
fn search_finds_the_fewest_replicas() {
    let traffic = chat(80.0, 400, 64, 1000, 9);
    let sla = SlaP99 {
        ttft_ms: Some(200.0),
        tpot_ms: Some(40.0),
        e2e_ms: None,
    };
    let s = search::fewest_replicas(&FakeLinearCost, roomy(), &traffic, sla, 64).unwrap();
    let best = s.best.unwrap();
    assert!(best.meets_sla && best.replicas > 1, "{best:?}");
    assert!(best.ttft_ms.p99 <= 200.0 && best.tpot_ms.p99 <= 40.0);
    let below = simulate(&FakeLinearCost, roomy(), &traffic, best.replicas - 1, sla).unwrap();
    assert!(!below.meets_sla);
    assert!(best.goodput_per_s > below.goodput_per_s);
    assert!(s.tried.iter().any(|r| r.replicas == best.replicas - 1));
    // No target, nothing to size against.
    assert!(
        search::fewest_replicas(&FakeLinearCost, roomy(), &traffic, SlaP99::default(), 4).is_err()
    );
}

#[test]
fn arrival_processes_keep_their_mean_rate() {
    let mut rng = fastrand::Rng::with_seed(1);
    for a in [
        Arrivals::Poisson { rate: 20.0 },
        Arrivals::Gamma {
            rate: 20.0,
            cv: 4.0,
        },
        Arrivals::Gamma {
            rate: 20.0,
            cv: 0.5,
        },
        Arrivals::OnOff {
            rate: 20.0,
            on_s: 2.0,
            off_s: 8.0,
        },
    ] {
        let t = a.times(40_000, &mut rng);
        let rate = t.len() as f64 / t.last().unwrap();
        assert!((rate / 20.0 - 1.0).abs() < 0.08, "{a:?}: {rate}");
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
    }
    let on_off = Arrivals::OnOff {
        rate: 5.0,
        on_s: 1.0,
        off_s: 4.0,
    };
    let t = on_off.times(2000, &mut rng);
    assert!(
        t.iter().all(|x| x % 5.0 <= 1.0 + 1e-9),
        "arrival in an off period"
    );
    // A replay keeps the stored gaps' shape at the asked rate.
    let r = Arrivals::replay_at(vec![100.0, 101.0, 103.0, 104.0, 110.0], 2.0).unwrap();
    let t = r.times(100, &mut rng);
    // 4 gaps over 10 s is 0.4/s; at 2/s every gap is 5× shorter.
    let want = [0.0, 0.2, 0.6, 0.8, 2.0];
    assert!(
        t.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-9),
        "{t:?}"
    );
    assert_eq!(t.len(), want.len());
    assert!((r.mean_rate() - 2.0).abs() < 1e-9);
    assert!(Arrivals::replay_at(vec![1.0], 2.0).is_err());
}

#[test]
fn bursty_arrivals_hurt_the_tail() {
    let smooth = chat(40.0, 400, 64, 2000, 4);
    let mut bursty = smooth.clone();
    bursty.arrivals = Arrivals::Gamma {
        rate: 40.0,
        cv: 4.0,
    };
    let a = simulate(&FakeLinearCost, roomy(), &smooth, 2, SlaP99::default()).unwrap();
    let b = simulate(&FakeLinearCost, roomy(), &bursty, 2, SlaP99::default()).unwrap();
    assert!(
        b.ttft_ms.p99 > a.ttft_ms.p99,
        "{} vs {}",
        b.ttft_ms.p99,
        a.ttft_ms.p99
    );
}

#[test]
fn agent_tasks_loop_and_are_judged_whole() {
    let mut traffic = chat(2.0, 500, 100, 600, 2);
    traffic.profile = Profile::Agent {
        mean_iterations: 4.0,
        cap: 6,
        tool_s: 0.5,
        tool_tokens: 200,
    };
    let r = simulate(&FakeLinearCost, roomy(), &traffic, 1, SlaP99::default()).unwrap();
    let per_task = r.calls as f64 / r.tasks as f64;
    // Geometric with mean 4 capped at 6 has mean ~3.2.
    assert!((2.7..3.7).contains(&per_task), "{per_task}");
    let single = simulate(
        &FakeLinearCost,
        roomy(),
        &chat(2.0, 500, 100, 600, 2),
        1,
        SlaP99::default(),
    )
    .unwrap();
    assert!(r.e2e_ms.mean > 2.5 * single.e2e_ms.mean);
    // The cap holds.
    let capped = Profile::Agent {
        mean_iterations: 50.0,
        cap: 3,
        tool_s: 0.0,
        tool_tokens: 0,
    };
    let mut rng = fastrand::Rng::with_seed(3);
    assert!((0..1000).all(|_| (1..=3).contains(&capped.iterations(&mut rng))));
    assert_eq!(capped.prompt_of_call(100, 10, 2), 120);
}

#[test]
fn prefix_cache_hits_shorten_ttft() {
    let cold = chat(20.0, 4000, 32, 500, 6);
    let mut warm = cold.clone();
    warm.profile = Profile::Coding { prefix_hit: 0.8 };
    let a = simulate(&FakeLinearCost, roomy(), &cold, 1, SlaP99::default()).unwrap();
    let b = simulate(&FakeLinearCost, roomy(), &warm, 1, SlaP99::default()).unwrap();
    assert!(
        b.ttft_ms.p50 < 0.6 * a.ttft_ms.p50,
        "{:?} {:?}",
        b.ttft_ms,
        a.ttft_ms
    );
    assert!(Profile::Coding { prefix_hit: 1.0 }.validate().is_err());
}

#[test]
fn async_work_is_judged_by_its_deadline() {
    let mut traffic = chat(30.0, 2000, 400, 600, 8);
    traffic.profile = Profile::Async { deadline_s: 60.0 };
    let sla = SlaP99 {
        ttft_ms: Some(1.0),
        ..SlaP99::default()
    };
    let judged = sla.for_profile(&traffic.profile);
    assert_eq!(judged.ttft_ms, None);
    assert_eq!(judged.e2e_ms, Some(60_000.0));
    let s = search::fewest_replicas(&FakeLinearCost, roomy(), &traffic, sla, 64).unwrap();
    let best = s.best.unwrap();
    assert!(best.e2e_ms.p99 <= 60_000.0);
    let tight = Profile::Async { deadline_s: 5.0 };
    traffic.profile = tight;
    let s2 = search::fewest_replicas(&FakeLinearCost, roomy(), &traffic, sla, 64).unwrap();
    assert!(s2.best.unwrap().replicas >= best.replicas);
}

#[test]
fn estimator_cost_mixes_prefill_into_decode() {
    let models = ModelCatalogue::builtin().unwrap();
    let hw = HardwareCatalogue::builtin().unwrap();
    let est = Estimator::new(EfficiencyTable::priors_only());
    let s = Scenario {
        model: models.get("llama-3.1-8b").unwrap(),
        hw: hw.get("h100-sxm").unwrap(),
        quant: Quant::parse("fp16").unwrap(),
        kv_bytes: 2.0,
        engine: Engine::Vllm,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 512,
        gen_tokens: 128,
        context: 4096,
        memory_headroom: 0.2,
        ubatch: None,
    };
    let cost = EstimatorCost::new(&est, s.clone());
    let decode = Step {
        decode_seqs: 32,
        decode_ctx: 1000.0,
        ..Step::default()
    };
    let prefill = Step {
        prefill_tokens: 1024,
        prefill_seqs: 1,
        ..Step::default()
    };
    let mixed = Step {
        prefill_tokens: 1024,
        prefill_seqs: 1,
        ..decode
    };
    let (d, p, m) = (
        cost.step_s(&decode),
        cost.step_s(&prefill),
        cost.step_s(&mixed),
    );
    assert!((d - est.tpot_s(&s, 32.0, 1000.0)).abs() < 1e-12);
    assert!((p - est.prefill_pass_s(&s, 1024.0)).abs() < 1e-12);
    assert!(m >= d && m >= p && m < d + p, "{d} {p} {m}");
    // KV capacity in tokens agrees with the estimator's bytes.
    let tokens = cost.kv_tokens() as f64;
    let bytes = est.kv_capacity_bytes(&s);
    assert!((tokens * s.kv_bytes_per_token() - bytes).abs() <= s.kv_bytes_per_token());
}

/// A fake step cost for unit tests: a constant step time, a constant
/// per-request server latency, and overlap scheduling or not.
struct FakeServerCost {
    step_s: f64,
    request_s: f64,
    overlap: bool,
}

impl StepCost for FakeServerCost {
    fn step_s(&self, _: &Step) -> f64 {
        self.step_s
    }
    fn request_overhead_s(&self) -> f64 {
        self.request_s
    }
    fn overlap_schedule(&self) -> bool {
        self.overlap
    }
}

/// A fake step cost for unit tests: fast steps behind a one-process front
/// end holding each request `frontend_s`.
struct FakeFrontEndCost {
    frontend_s: f64,
}

impl StepCost for FakeFrontEndCost {
    fn step_s(&self, _: &Step) -> f64 {
        0.001
    }
    fn request_overhead_s(&self) -> f64 {
        0.03
    }
    fn frontend_s(&self) -> f64 {
        self.frontend_s
    }
}

#[test]
fn a_one_process_front_end_caps_requests_per_second() {
    // 200 users sending 128/4 requests: the GPU side alone takes in
    // thousands per second; a front end holding each 10 ms passes 100.
    let traffic = closed(200, Lengths::Fixed(128), 4, 2000);
    let run = |frontend_s| {
        let r = simulate(
            &FakeFrontEndCost { frontend_s },
            roomy(),
            &traffic,
            1,
            SlaP99::default(),
        )
        .unwrap();
        2000.0 / r.makespan_s
    };
    let (free, capped) = (run(0.0), run(0.010));
    assert!(free > 500.0, "{free}");
    assert!((capped - 100.0).abs() < 3.0, "{capped}");
    // Two replicas have two front ends.
    let two = simulate(
        &FakeFrontEndCost { frontend_s: 0.010 },
        roomy(),
        &traffic,
        2,
        SlaP99::default(),
    )
    .unwrap();
    assert!((2000.0 / two.makespan_s - 200.0).abs() < 6.0);
    // At light load a request waits for nobody: TTFT is the latency plus
    // one step, as without a front-end limit.
    let light = simulate(
        &FakeFrontEndCost { frontend_s: 0.010 },
        roomy(),
        &chat(1.0, 128, 4, 50, 3),
        1,
        SlaP99::default(),
    )
    .unwrap();
    assert!(
        (light.ttft_ms.mean - 31.0).abs() < 0.5,
        "{}",
        light.ttft_ms.mean
    );
}

#[test]
fn the_server_latency_is_in_every_ttft_but_takes_no_step() {
    let traffic = chat(5.0, 100, 20, 400, 11);
    let run = |request_s| {
        let cost = FakeServerCost {
            step_s: 0.01,
            request_s,
            overlap: false,
        };
        simulate(&cost, roomy(), &traffic, 1, SlaP99::default()).unwrap()
    };
    let (plain, served) = (run(0.0), run(0.03));
    // The engine sees the same requests, shifted by 30 ms: the same steps.
    let ttft_gain = served.ttft_ms.mean - plain.ttft_ms.mean;
    assert!((ttft_gain - 30.0).abs() < 1.0, "{ttft_gain}");
    assert!((served.e2e_ms.mean - plain.e2e_ms.mean - 30.0).abs() < 1.0);
    assert!((served.tpot_ms.mean - plain.tpot_ms.mean).abs() < 0.5);
    assert!((served.utilisation - plain.utilisation).abs() < 0.01);
}

fn closed(users: u32, prompt: Lengths, output: u64, tasks: usize) -> Traffic {
    Traffic {
        arrivals: Arrivals::Closed { users },
        prompt,
        output: Lengths::Fixed(output),
        profile: Profile::Chat,
        tasks,
        seed: 5,
    }
}

#[test]
fn a_closed_loop_keeps_its_users_in_flight_and_no_more() {
    // Requests of one prefill step and 4 decode steps, 10 ms a step. One
    // user: strictly one after another, 40 × 5 steps, and no queueing.
    let one = closed(1, Lengths::Fixed(50), 5, 40);
    let r = simulate(&FakeConstantCost(0.01), roomy(), &one, 1, SlaP99::default()).unwrap();
    assert!((r.makespan_s - 2.0).abs() < 1e-9, "{}", r.makespan_s);
    assert!((r.mean_batch - 1.0).abs() < 1e-9, "{}", r.mean_batch);
    assert!((r.ttft_ms.p99 - 10.0).abs() < 1e-6, "{:?}", r.ttft_ms);
    // Four users share the steps: never more than four sequences in one,
    // and nearly four times the throughput (a request sent as another
    // finishes misses the step already planned at that instant).
    let four = closed(4, Lengths::Fixed(50), 5, 40);
    let f = simulate(
        &FakeConstantCost(0.01),
        roomy(),
        &four,
        1,
        SlaP99::default(),
    )
    .unwrap();
    assert!(
        f.mean_batch <= 4.0 && f.mean_batch > 3.0,
        "{}",
        f.mean_batch
    );
    let speedup = r.makespan_s / f.makespan_s;
    assert!((3.0..=4.0).contains(&speedup), "{speedup}");
}

#[test]
fn a_request_that_never_fits_frees_its_users_slot() {
    // One user; some prompts exceed the KV cache and are refused at once.
    let limits = Limits {
        kv_blocks: 40,
        ..roomy()
    };
    let traffic = closed(1, Lengths::Uniform { lo: 100, hi: 1200 }, 4, 60);
    let r = simulate(&FakeLinearCost, limits, &traffic, 1, SlaP99::default()).unwrap();
    assert!(r.rejected > 0);
    // Every measured task was sent (one call each), refused or served.
    assert_eq!(r.calls, r.tasks);
    assert_eq!(r.ttft_ms.count + r.rejected, r.tasks);
}

#[test]
fn estimator_cost_carries_the_engines_server_latency() {
    let models = ModelCatalogue::builtin().unwrap();
    let hw = HardwareCatalogue::builtin().unwrap();
    let h100 = hw.get("h100-sxm").unwrap();
    let scenario = |engine| Scenario {
        model: models.get("llama-3.1-8b").unwrap(),
        hw: h100,
        quant: Quant::parse("fp16").unwrap(),
        kv_bytes: 2.0,
        engine,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 512,
        gen_tokens: 128,
        context: 4096,
        memory_headroom: 0.2,
        ubatch: None,
    };
    let est = Estimator::new(EfficiencyTable::priors_only());
    for engine in Engine::ALL {
        let cost = EstimatorCost::new(&est, scenario(engine));
        let want = engine.profile(h100).request_overhead_ms / 1e3;
        assert_eq!(cost.request_overhead_s(), want, "{engine}");
        let front = engine.profile(h100).frontend_ms_per_request / 1e3;
        assert!((cost.frontend_s() - front).abs() < 1e-12, "{engine}");
        let overlap = engine.profile(h100).overlap_schedule;
        assert_eq!(cost.overlap_schedule(), overlap, "{engine}");
    }
    assert!(EstimatorCost::new(&est, scenario(Engine::Vllm)).frontend_s() > 0.0);
    assert!(EstimatorCost::new(&est, scenario(Engine::Sglang)).overlap_schedule());
    assert!(!EstimatorCost::new(&est, scenario(Engine::Vllm)).overlap_schedule());
    // The constant-efficiency baseline models the engine step only.
    let baseline = Estimator::new(EfficiencyTable::baseline());
    let cost = EstimatorCost::new(&baseline, scenario(Engine::Vllm));
    assert_eq!(cost.request_overhead_s(), 0.0);
    assert_eq!(cost.frontend_s(), 0.0);
}

#[test]
fn overlap_scheduling_admits_a_busy_engines_arrivals_a_step_later() {
    // Four users, 10 ms steps, 20 output tokens each: every request is sent
    // as another finishes, when the engine has just started its next step
    // for the other three. Without overlap it waits for that step, then
    // runs its prompt step: TTFT 20 ms. With overlap the step after that
    // was formed with the one in flight, so one more: 30 ms.
    let traffic = closed(4, Lengths::Fixed(50), 20, 200);
    let run = |overlap| {
        let cost = FakeServerCost {
            step_s: 0.01,
            request_s: 0.0,
            overlap,
        };
        simulate(&cost, roomy(), &traffic, 1, SlaP99::default()).unwrap()
    };
    let (plain, overlapped) = (run(false), run(true));
    assert!(
        (plain.ttft_ms.p50 - 20.0).abs() < 1e-6,
        "{:?}",
        plain.ttft_ms
    );
    assert!(
        (overlapped.ttft_ms.p50 - 30.0).abs() < 1e-6,
        "{:?}",
        overlapped.ttft_ms
    );
    // Decoding is untouched: the same time per output token.
    assert!((overlapped.tpot_ms.p50 - plain.tpot_ms.p50).abs() < 1e-6);
    // One user alone finds the engine idle: it starts at once either way.
    let alone = closed(1, Lengths::Fixed(50), 20, 20);
    let cost = FakeServerCost {
        step_s: 0.01,
        request_s: 0.0,
        overlap: true,
    };
    let r = simulate(&cost, roomy(), &alone, 1, SlaP99::default()).unwrap();
    assert!((r.ttft_ms.p99 - 10.0).abs() < 1e-6, "{:?}", r.ttft_ms);
}

#[test]
fn exponential_lengths_keep_the_mean_and_bounds_and_have_a_long_tail() {
    let lengths = Lengths::exponential(4, 1024, 202.0, "gen_tokens").unwrap();
    assert!((lengths.mean() - 202.0).abs() < 1e-6, "{}", lengths.mean());
    assert_eq!(lengths.max(), 1024);
    let mut rng = fastrand::Rng::with_seed(3);
    let mut draws: Vec<u64> = (0..200_000).map(|_| lengths.draw(&mut rng)).collect();
    assert!(draws.iter().all(|&n| (4..=1024).contains(&n)));
    let mean = draws.iter().sum::<u64>() as f64 / draws.len() as f64;
    assert!((mean - 202.0).abs() < 2.0, "sample mean {mean}");
    draws.sort_unstable();
    // Uniform lengths of the same mean (4..=400) end at 400; this tail's
    // 99th percentile is about 4.6 × (202 − 4) above the floor.
    let p99 = draws[draws.len() * 99 / 100];
    assert!((800..=1000).contains(&p99), "p99 {p99}");
    // The flat limit is the midpoint: a mean at or past it is refused with
    // the field named, as is an empty range.
    let e = Lengths::exponential(4, 1024, 514.0, "gen_tokens").unwrap_err();
    assert!(e.to_string().contains("gen_tokens"), "{e}");
    assert!(Lengths::exponential(10, 10, 10.0, "prompt_tokens").is_err());
}

#[test]
fn a_long_tail_stretches_a_run_sent_all_at_once() {
    // Same mean output, all requests at once, 10 ms steps: the run lasts as
    // long as its longest request, so the exponential tail takes longer
    // than uniform lengths that stop at twice the mean.
    let traffic = |output: Lengths| Traffic {
        arrivals: Arrivals::Closed { users: 400 },
        prompt: Lengths::Fixed(100),
        output,
        profile: Profile::Chat,
        tasks: 400,
        seed: 11,
    };
    let run = |t: &Traffic| {
        simulate(&FakeConstantCost(0.01), roomy(), t, 1, SlaP99::default())
            .unwrap()
            .makespan_s
    };
    let flat = run(&traffic(Lengths::Uniform { lo: 4, hi: 196 }));
    let tail = run(&traffic(
        Lengths::exponential(4, 1024, 100.0, "gen").unwrap(),
    ));
    assert!(tail > 2.0 * flat, "tail {tail} s vs flat {flat} s");
}
