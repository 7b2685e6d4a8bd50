use super::*;

#[test]
fn recovers_known_slope_and_overhead() {
    // t = x / 0.8 + 3 ms, exactly.
    let pts: Vec<Point> = [0.004, 0.006, 0.01, 0.02, 0.03]
        .iter()
        .map(|&x| Point {
            x,
            y: 0.0,
            comm: 0.0,
            t: x / 0.8 + 0.003,
        })
        .collect();
    let g = fit_group(&pts, 0.0).unwrap();
    assert!(g.overhead_fitted);
    assert!((g.factor.efficiency - 0.8).abs() < 0.01, "{g:?}");
    assert!((g.factor.overhead_ms - 3.0).abs() < 0.2, "{g:?}");
}

#[test]
fn too_few_rows_inherit_overhead() {
    let pts = [Point {
        x: 0.01,
        y: 0.0,
        comm: 0.0,
        t: 0.01 / 0.5 + 0.002,
    }];
    let g = fit_group(&pts, 0.002).unwrap();
    assert!(!g.overhead_fitted);
    assert!((g.factor.efficiency - 0.5).abs() < 0.01, "{g:?}");
    assert!(fit_group(&[], 0.0).is_none());
}

#[test]
fn graph_replaying_engines_inherit_at_most_their_step_prior() {
    let mut table = EfficiencyTable::priors_only();
    table.entries.push(Entry {
        class: "datacenter".into(),
        engine: "*".into(),
        phase: Phase::Decode,
        efficiency: 0.8,
        overhead_ms: 4.0,
        rows: 7,
        overhead_fitted: true,
    });
    let hw = crate::hardware::HardwareCatalogue::builtin().unwrap();
    let models = crate::model::ModelCatalogue::builtin().unwrap();
    let cat = Catalogues {
        hardware: &hw,
        models: &models,
    };
    let inherit = |engine: &str, phase| {
        parent_overhead(&table, "datacenter", engine, phase, &[], cat).unwrap() * 1e3
    };
    assert!((inherit("llama.cpp", Phase::Decode) - 4.0).abs() < 1e-9);
    let graph = crate::efficiency::GRAPH_REPLAY_STEP_OVERHEAD_MS;
    let vllm = crate::efficiency::VLLM_GRAPH_REPLAY_STEP_OVERHEAD_MS;
    assert!((inherit("vllm", Phase::Decode) - vllm).abs() < 1e-9);
    assert!((inherit("trt-llm", Phase::Decode) - graph).abs() < 1e-9);
}

#[test]
fn bench_runs_become_rows_the_parser_reads() {
    let target = BenchTarget {
        gpu: "cpu-generic".into(),
        engine: "llama.cpp".into(),
        model: "smollm2-135m".into(),
        quant: "q4_1".into(),
        kv_dtype: "f16".into(),
        source: "glassbox bench llm --local, 2026-12-01, a,b".into(),
    };
    let runs = [BenchRun {
        name: "seed000-512x256".into(),
        prompt_tokens: 512,
        gen_tokens: 256,
        ttft_ms: 60.0,
        prefill_ms: Some(50.0),
        tpot_ms: Some(10.0),
    }];
    let csv = bench_csv(&target, &runs);
    let rows = crate::measurements::parse_csv(&csv, "bench").unwrap();
    assert_eq!(rows.len(), 3);
    let decode = rows.iter().find(|r| r.id.ends_with("-tg")).unwrap();
    assert!((decode.value - 100.0).abs() < 1e-9);
    let prefill = rows.iter().find(|r| r.id.ends_with("-pp")).unwrap();
    assert!((prefill.value - 512.0 / 0.05).abs() < 1e-6);
    assert_eq!(prefill.source, target.source);
    let cat_hw = crate::hardware::HardwareCatalogue::builtin().unwrap();
    let cat_models = crate::model::ModelCatalogue::builtin().unwrap();
    let cat = Catalogues {
        hardware: &cat_hw,
        models: &cat_models,
    };
    let table = fit(&rows, cat).unwrap();
    assert!(
        table
            .entries
            .iter()
            .any(|e| e.class == "cpu" && e.engine == "llama.cpp")
    );
}
