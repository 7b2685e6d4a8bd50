//! `glassbox plan` through the binary: JSON contract, errors, comparison.

use crate::support::{glassbox, stderr, stdout};

/// Runs `glassbox` with `args`, which must succeed, and parses its JSON output.
fn json_of(args: &[&str]) -> serde_json::Value {
    let out = glassbox(args, None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[test]
fn plan_json_has_the_documented_keys() {
    let out = glassbox(
        &[
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "rtx-4090",
            "--quant",
            "q4_k_m",
            "--engine",
            "llama.cpp",
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    for key in [
        "weights_gb",
        "kv_bytes_per_token",
        "max_concurrent_seqs",
        "prefill_tok_s",
        "decode_tok_s",
        "ttft_ms",
        "tpot_ms",
        "gpus_needed",
        "cost_per_1m_tokens",
        "binding_constraint",
    ] {
        assert!(!v[key].is_null(), "`{key}` missing from {v}");
    }
    // 8B at Q4_K_M (4.85 bits/weight) is a little under 5 GB of weights.
    let w = v["weights_gb"].as_f64().unwrap();
    assert!((4.0..5.5).contains(&w), "weights_gb = {w}");
    // GQA: 2 × 32 layers × 8 KV heads × 128 × 2 bytes.
    assert_eq!(v["kv_bytes_per_token"].as_f64().unwrap(), 131072.0);
}

#[test]
fn plan_unknown_names_exit_78_with_a_suggestion() {
    let out = glassbox(
        &["plan", "--model", "llama-3.1-8b", "--gpu", "rtx-4900"],
        None,
    );
    assert_eq!(out.status.code(), Some(78));
    assert!(
        stderr(&out).contains("did you mean `rtx-4090`?"),
        "{}",
        stderr(&out)
    );
    let out = glassbox(&["plan", "--gpu", "h100-sxm"], None);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a missing --model is a usage error"
    );
}

#[test]
fn plan_takes_the_names_nvidia_smi_and_hugging_face_print() {
    let out = glassbox(
        &[
            "plan",
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--gpu",
            "NVIDIA A100-SXM4-80GB",
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["model"], "llama-3.1-8b", "{v}");
    assert_eq!(v["gpu"], "a100-sxm-80gb", "{v}");
    // A quantised repository is not taken for its base model.
    let out = glassbox(
        &[
            "plan",
            "--model",
            "TheBloke/Llama-2-7B-GPTQ",
            "--gpu",
            "Tesla T4",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(78), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("unknown model `TheBloke/Llama-2-7B-GPTQ`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn plan_compare_ranks_cards_meeting_the_sla_first() {
    let out = glassbox(
        &[
            "plan",
            "--model",
            "llama-3.1-70b",
            "--quant",
            "fp8",
            "--tp",
            "2",
            "--sla-ttft-ms",
            "1000",
            "--sla-tpot-ms",
            "50",
            "--compare",
            "h100-sxm",
            "l40s",
            "h200",
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let rows = v.as_array().expect("a ranking list");
    assert_eq!(rows.len(), 3, "{v}");
    let meets: Vec<bool> = rows
        .iter()
        .map(|r| r["sizing"]["meets_sla"].as_bool().unwrap_or(false))
        .collect();
    // Cards that meet the SLA come before those that do not, cheapest first.
    assert!(meets.windows(2).all(|w| w[0] || !w[1]), "{meets:?}");
    let costs: Vec<f64> = rows
        .iter()
        .filter(|r| r["sizing"]["meets_sla"] == true)
        .map(|r| r["cost_per_1m_tokens"].as_f64().unwrap())
        .collect();
    assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{costs:?}");
    assert_eq!(
        rows[2]["gpu"], "l40s",
        "70B FP8 on PCIe L40S pairs cannot meet a 50 ms TPOT cheaply"
    );
    // A comma-separated list names the same cards.
    let args = "plan --model llama-3.1-8b --compare h100-sxm,l40s --format json";
    let commas = glassbox(&args.split_whitespace().collect::<Vec<_>>(), None);
    assert_eq!(commas.status.code(), Some(0), "{}", stderr(&commas));
    let v: serde_json::Value = serde_json::from_str(&stdout(&commas)).unwrap();
    let mut gpus: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["gpu"].as_str().unwrap())
        .collect();
    gpus.sort_unstable();
    assert_eq!(gpus, ["h100-sxm", "l40s"]);
}

#[test]
fn rate_and_p99_sla_size_by_simulation() {
    let out = glassbox(
        &[
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--prompt-tokens",
            "1000",
            "--gen-tokens",
            "100",
            "--rate",
            "30",
            "--sla-ttft-p99",
            "300",
            "--sla-tpot-p99",
            "40",
            "--sim-requests",
            "400",
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let gpus = v["gpus_needed"].as_u64().unwrap();
    let best = &v["best"];
    assert!(best["meets_sla"].as_bool().unwrap());
    assert!(best["ttft_ms"]["p99"].as_f64().unwrap() <= 300.0);
    assert!(best["tpot_ms"]["p99"].as_f64().unwrap() <= 40.0);
    // One GPU fewer was simulated and missed the SLA.
    let tried = v["tried"].as_array().unwrap();
    if gpus > 1 {
        let below = tried
            .iter()
            .find(|t| t["replicas"].as_u64() == Some(gpus - 1))
            .unwrap();
        assert!(!below["meets_sla"].as_bool().unwrap());
    }
    // Same flags, same answer (seeded).
    let again = glassbox(
        &[
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--prompt-tokens",
            "1000",
            "--gen-tokens",
            "100",
            "--rate",
            "30",
            "--sla-ttft-p99",
            "300",
            "--sla-tpot-p99",
            "40",
            "--sim-requests",
            "400",
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(stdout(&again), stdout(&out));
}

#[test]
fn rate_without_a_p99_target_is_a_usage_error() {
    let out = glassbox(
        &[
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--rate",
            "3",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--sla-ttft-p99"), "{}", stderr(&out));
}

#[test]
fn pipeline_plan_learns_from_stored_traces() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("plan-pipeline-it");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("t.yaml");
    std::fs::write(
        &topo,
        "topology_id: tiny\nversion: 1.0.0\nnodes:\n  - id: route\n    type: template\n    resource: { type: cpu }\n    config: { template: 'hi {{ input.question }}' }\n  - id: answer\n    type: template\n    resource: { type: gpu, model: llama-3.1-8b }\n    config: { template: 'a {{ input.question }}' }\nedges:\n  - { from: route, to: answer }\n",
    )
    .unwrap();
    let store = format!("sqlite://{}", dir.join("s.db").display());
    let topo_s = topo.to_str().unwrap();
    for q in ["a", "b"] {
        let out = glassbox(&["run", topo_s, "-q", q, "--store", &store], None);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let plan = |extra: &[&str]| {
        let mut args = vec![
            "plan", "pipeline", topo_s, "--store", &store, "--rate", "10", "--format", "json",
        ];
        args.extend_from_slice(extra);
        let out = glassbox(&args, None);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_str::<serde_json::Value>(&stdout(&out)).unwrap()
    };
    let v = plan(&[]);
    assert_eq!(v["profile"]["requests"], 2);
    assert_eq!(v["profile"]["nodes"][1]["reach"], 1.0);
    let base_calls = v["plan"]["nodes"][1]["calls_per_s"].as_f64().unwrap();
    assert!((base_calls - 10.0).abs() < 1e-9);
    assert!(
        v["plan"]["gpus"]["llama-3.1-8b @ h100-sxm"]
            .as_u64()
            .unwrap()
            >= 1
    );
    let half = plan(&["--route", "answer=0.5"]);
    assert!((half["plan"]["nodes"][1]["calls_per_s"].as_f64().unwrap() - 5.0).abs() < 1e-9);
    let bad = glassbox(
        &[
            "plan", "pipeline", topo_s, "--store", &store, "--rate", "10", "--route", "x=0.5",
        ],
        None,
    );
    assert_eq!(bad.status.code(), Some(78));
    assert!(stderr(&bad).contains("no node `x`"), "{}", stderr(&bad));
}

#[test]
fn exponential_lengths_give_a_longer_e2e_tail_than_fixed_ones_of_the_same_mean() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--prompt-tokens",
            "500",
            "--gen-tokens",
            "200",
            "--rate",
            "2",
            "--sla-e2e-p99",
            "600000",
            "--sim-requests",
            "600",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let out = glassbox(&args, None);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["gpus_needed"].as_u64(), Some(1), "{v}");
        v["best"]["e2e_ms"]["p99"].as_f64().unwrap()
    };
    let fixed = run(&[]);
    let tail = run(&["--lengths", "exponential"]);
    // A P99 output is ~4.6 means long: the tail's P99 E2E is far longer.
    assert!(
        tail > 2.5 * fixed,
        "exponential {tail} ms vs fixed {fixed} ms"
    );

    // A cap below twice the mean cannot hold that mean with a tail.
    let out = glassbox(
        &[
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--gen-tokens",
            "200",
            "--gen-tokens-max",
            "300",
            "--lengths",
            "exponential",
            "--rate",
            "2",
            "--sla-e2e-p99",
            "60000",
        ],
        None,
    );
    assert_ne!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(
        err.contains("--gen-tokens") && err.contains("exponential"),
        "{err}"
    );
}

/// Every plan carries the held-out accuracy of its headline figures: the
/// range that 80% of public measurements of the kind fell in, from the
/// narrowest band with enough rows (the H100's own for batched serving).
#[test]
fn plan_shows_how_far_held_out_measurements_were_from_its_figures() {
    let args = [
        "plan",
        "--model",
        "qwen3-14b",
        "--gpu",
        "h100-sxm",
        "--quant",
        "bf16",
        "--engine",
        "vllm",
        "--batch",
        "256",
    ];
    let out = glassbox(&[&args[..], &["--format", "json"]].concat(), None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let acc = v["accuracy"].as_array().unwrap();
    let metrics: Vec<&str> = acc.iter().map(|r| r["metric"].as_str().unwrap()).collect();
    assert_eq!(metrics, ["prefill_tok_s", "ttft_ms", "serving_tok_s"]);
    let serving = &acc[2];
    assert_eq!(serving["band"]["scope"], "h100-sxm");
    assert_eq!(serving["band"]["engine"], "vllm");
    // No vLLM prefill row is public: the band is the one over every row,
    // never another engine's rows on the H100 or its class.
    assert_eq!(acc[0]["band"]["scope"], "*");
    assert_eq!(acc[0]["band"]["engine"], "*");
    let (lo, p, hi) = (
        serving["low"].as_f64().unwrap(),
        serving["predicted"].as_f64().unwrap(),
        serving["high"].as_f64().unwrap(),
    );
    let band = |k: &str| serving["band"][k].as_f64().unwrap();
    assert!(p > 0.0 && lo <= hi, "{serving}");
    assert!((lo - p * band("ratio_p10")).abs() < 1e-9 * p, "{serving}");
    assert!((hi - p * band("ratio_p90")).abs() < 1e-9 * p, "{serving}");
    let out_tok_s = v["estimate"]["output_tok_s"].as_f64().unwrap();
    assert!(
        (p - out_tok_s).abs() < 1e-9 * out_tok_s,
        "{p} vs {out_tok_s}"
    );

    // Beside each band, the same metric on the sealed holdouts' first
    // scores: the blind figure.
    for r in acc {
        let b = &r["blind"];
        let pct = |k: &str| b[k].as_f64().unwrap();
        assert!(b["files"].as_u64().unwrap() >= 1, "{r}");
        assert!(
            b["rows"].as_u64().unwrap() >= b["files"].as_u64().unwrap(),
            "{r}"
        );
        assert!(
            pct("lowest_pct") <= pct("typical_pct") && pct("typical_pct") <= pct("highest_pct"),
            "{r}"
        );
        // And which way the first scores missed: the files' median
        // predicted/measured, weighted by their rows.
        assert!(pct("typical_ratio") > 0.0, "{r}");
        // Sealed files hold vLLM's batched rows (and, since the
        // twenty-fifth, a few of its TTFT rows; none of its prompt rows):
        // where the plan's engine has sealed rows of a metric, their blind
        // figure is given too, over no more files and rows than every
        // file's, and none where it has none.
        let own = &r["blind_engine"];
        if r["metric"] == "serving_tok_s" {
            assert!(!own.is_null(), "{r}");
        }
        if r["metric"] == "prefill_tok_s" {
            assert!(own.is_null(), "{r}");
        }
        if !own.is_null() {
            assert_eq!(own["engine"], "vllm", "{r}");
            let files = own["files"].as_u64().unwrap();
            assert!(files >= 1 && files <= b["files"].as_u64().unwrap(), "{r}");
            assert!(
                own["rows"].as_u64().unwrap() <= b["rows"].as_u64().unwrap(),
                "{r}"
            );
        }
    }

    let text = glassbox(&args, None);
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    let s = stdout(&text);
    assert!(s.contains("80% of measurements were"), "{s}");
    assert!(s.contains("h100-sxm"), "{s}");
    assert!(s.contains("blind: median error on sealed sources"), "{s}");
    assert!(s.contains("× of measured"), "{s}");
    // Public rows measured vLLM on the H100 in 16 bits at tp 1: covered.
    let c = &v["coverage"];
    assert!(
        c["gpu"].as_u64().unwrap() > 0 && c["engine"].as_u64().unwrap() > 0,
        "{c}"
    );
    assert_eq!(c["uncovered"].as_array().unwrap().len(), 0, "{c}");
    assert_eq!(c["architecture"], "dense", "{c}");
    assert!(c["architecture_rows"].as_u64().unwrap() > 0, "{c}");
    assert!(!s.contains("not covered by the public rows"), "{s}");
    // No public row ran DeepSeek's latent attention: the plan says so.
    let mla = glassbox(
        &[
            "plan",
            "--model",
            "deepseek-v3",
            "--gpu",
            "h200",
            "--quant",
            "fp8",
            "--tp",
            "8",
        ],
        None,
    );
    assert_eq!(mla.status.code(), Some(0), "{}", stderr(&mla));
    let s = stdout(&mla);
    assert!(
        s.contains("0 on latent-attention (MLA) models")
            && s.contains("no row on a latent-attention (MLA) model"),
        "{s}"
    );
    // No public row is on an AMD GPU: the plan says so.
    let mi300x = [
        "plan",
        "--model",
        "llama-3.1-70b",
        "--gpu",
        "mi300x",
        "--quant",
        "fp8",
        "--tp",
        "8",
    ];
    let amd = glassbox(&mi300x, None);
    assert_eq!(amd.status.code(), Some(0), "{}", stderr(&amd));
    let s = stdout(&amd);
    assert!(
        s.contains("not covered by the public rows: no row on any AMD GPU"),
        "{s}"
    );
    // The sealed rows measured on the MI300X are what the plan can say of
    // its own GPU: measured ÷ planned of its vLLM serving rows near its batch.
    assert!(
        s.contains("sealed rows on the mi300x, measured ÷ planned by this model (median):")
            && s.contains("vllm rows at 1–4 in flight"),
        "{s}"
    );
    let json = glassbox(
        &[&mi300x[..], &["--batch", "64", "--format", "json"]].concat(),
        None,
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    let serving = v["sealed_on_gpu"]
        .as_array()
        .and_then(|a| a.iter().find(|g| g["metric"] == "serving_tok_s"))
        .cloned()
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(serving["engine_family"], "vllm");
    assert_eq!(serving["batch_range"], serde_json::json!([16, 256]));
    assert!(serving["rows"].as_u64().unwrap() >= 3, "{serving}");
    assert!(
        serving["measured_over_planned"].as_f64().unwrap() > 0.0,
        "{serving}"
    );

    // At one stream the decode speed carries the band instead.
    let single = glassbox(
        &[
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "rtx-4090",
            "--quant",
            "q4_k_m",
            "--engine",
            "llama.cpp",
            "--format",
            "json",
        ],
        None,
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&single)).unwrap();
    let last = v["accuracy"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["metric"], "decode_tok_s");
    assert_eq!(last["band"]["scope"], "rtx-4090");
    assert_eq!(last["band"]["engine"], "llama.cpp");
}

#[test]
fn a_gpu_count_is_split_the_way_the_engine_splits_it_and_the_plan_says_so() {
    let plan = |args: &[&str]| {
        let mut all = vec!["plan", "--model", "llama-3.1-70b", "--format", "json"];
        all.extend_from_slice(args);
        json_of(&all)
    };
    // llama.cpp on two 4090s (43 GB of Q4_K_M weights: little headroom left to keep): layers
    // split (one stream passes both cards in turn).
    let two = plan(&[
        "--gpu",
        "rtx-4090",
        "--quant",
        "q4_k_m",
        "--engine",
        "llama.cpp",
        "--gpus",
        "2",
        "--memory-headroom",
        "0.05",
    ]);
    let p = &two["parallelism"];
    assert_eq!(
        (p["tp"].as_u64(), p["pp"].as_u64()),
        (Some(1), Some(2)),
        "{p}"
    );
    assert_eq!(p["assumed"].as_bool(), Some(true));
    assert!(
        p["why"].as_str().unwrap().contains("split-mode layer"),
        "{p}"
    );
    let row = plan(&[
        "--gpu",
        "rtx-4090",
        "--quant",
        "q4_k_m",
        "--engine",
        "llama.cpp",
        "--gpus",
        "2",
        "--split-mode",
        "row",
        "--memory-headroom",
        "0.05",
    ]);
    assert_eq!(row["parallelism"]["tp"].as_u64(), Some(2));
    // Tensor parallel reads half the weights per GPU per token: faster than the layer split.
    let (layer_tps, row_tps) = (
        two["decode_tok_s"].as_f64().unwrap(),
        row["decode_tok_s"].as_f64().unwrap(),
    );
    assert!(
        row_tps > 1.3 * layer_tps,
        "row {row_tps} vs layer {layer_tps}"
    );
    // vLLM on eight A100s: the smallest tensor-parallel group that holds 70B in BF16 (141 GB of
    // weights; two cards keep 2 × 80 GiB × 0.8 = 137 GB free of headroom, four do), the rest replicas.
    let eight = plan(&[
        "--gpu",
        "a100-sxm-80gb",
        "--engine",
        "vllm@0.5",
        "--gpus",
        "8",
    ]);
    let p = &eight["parallelism"];
    assert_eq!(
        (p["tp"].as_u64(), p["dp"].as_u64()),
        (Some(4), Some(2)),
        "{p}"
    );
    assert_eq!(eight["engine"].as_str(), Some("vllm@0.5"));
    assert!(eight["gpus_needed"].as_u64().unwrap() >= 8, "{eight}");
}

#[test]
fn a_llama_cpp_micro_batch_sets_an_moe_prompts_expert_tiles() {
    let plan = |args: &[&str]| {
        let mut all = vec![
            "plan",
            "--model",
            "qwen3-30b-a3b",
            "--gpu",
            "rtx-4090",
            "--quant",
            "q4_k_m",
            "--prompt-tokens",
            "2048",
            "--format",
            "json",
        ];
        all.extend_from_slice(args);
        json_of(&all)
    };
    let tiles = |p: &serde_json::Value| {
        p["estimate"]["explain"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["metric"] == "expert_tiles")
            .map(|l| (l["value"].as_f64().unwrap(), l["inputs"].to_string()))
    };
    // llama-bench's default micro-batch: 512 tokens, ~32 an expert, a
    // 128-column tile each: about 4x the experts' useful work.
    let default = plan(&["--engine", "llama.cpp"]);
    let (pad, inputs) = tiles(&default).unwrap();
    assert!((3.8..4.2).contains(&pad), "{pad}");
    assert!(inputs.contains("u = 512"), "{inputs}");
    // `-ub 2048`: four times the tokens an expert, less padding, a faster prompt.
    let big = plan(&["--engine", "llama.cpp", "--ubatch", "2048"]);
    let (pad_big, inputs) = tiles(&big).unwrap();
    assert!(pad_big < 0.5 * pad, "{pad_big} vs {pad}");
    assert!(inputs.contains("u = 2048"), "{inputs}");
    let profile = big["estimate"]["engine_profile"].as_str().unwrap();
    assert!(
        profile.contains("micro-batches of 2048 tokens (--ubatch)"),
        "{profile}"
    );
    let ttft = |p: &serde_json::Value| p["ttft_ms"].as_f64().unwrap();
    assert!(
        ttft(&big) < ttft(&default),
        "{} {}",
        ttft(&big),
        ttft(&default)
    );
    // vLLM sizes an expert's GEMM to its tokens: no padding line.
    assert!(tiles(&plan(&["--engine", "vllm"])).is_none());
    // `--ubatch` is llama.cpp's flag: another engine, or zero tokens, is refused.
    for (engine, ubatch, says) in [
        ("vllm", "2048", "llama.cpp's `--ubatch-size`"),
        ("llama.cpp", "0", "must be 1-65536"),
    ] {
        let out = glassbox(
            &[
                "plan",
                "--model",
                "qwen3-30b-a3b",
                "--gpu",
                "rtx-4090",
                "--engine",
                engine,
                "--ubatch",
                ubatch,
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    }
}

#[test]
fn parallelism_that_does_not_add_up_exits_78_naming_the_numbers() {
    let out = glassbox(
        &[
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--gpus",
            "6",
            "--tp",
            "4",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(stderr(&out).contains("6 GPUs"), "{}", stderr(&out));
    let out = glassbox(
        &[
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--engine",
            "vllm@zero",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(stderr(&out).contains("vllm@0.5"), "{}", stderr(&out));
}

#[test]
fn setups_engines_refuse_and_impossible_traffic_exit_with_the_value_that_works() {
    // (extra flags, exit code, text the message must carry)
    let cases = [
        ("--model qwen2.5-7b --tp 8", 78, "one of 1, 2, 4, 28"),
        (
            "--model llama-3.1-8b --pp 40",
            78,
            "at most 32 pipeline stages",
        ),
        (
            "--model llama-2-7b --prompt-tokens 4000",
            78,
            "at most 4096 tokens",
        ),
        (
            "--model llama-3.1-8b --requests-per-day 0",
            78,
            "requests per day",
        ),
        ("--model llama-3.1-8b --sla-ttft-ms 0", 2, "above 0"),
        // Money and volumes that would print $NaN or $inf, and negative
        // numbers, which reach the plan's check rather than clap's
        // "unexpected argument".
        (
            "--model llama-3.1-8b --price-per-hour nan",
            78,
            "price per hour: must be a finite amount",
        ),
        ("--model llama-3.1-8b --price-per-hour -3", 78, "got -3"),
        (
            "--model llama-3.1-8b --purchase-price 1e400",
            78,
            "purchase price",
        ),
        (
            "--model llama-3.1-8b --offline-tokens-per-day -5",
            78,
            "offline tokens per day",
        ),
        (
            "--model llama-3.1-8b --peak-concurrency 0",
            78,
            "leave `--peak-concurrency` out",
        ),
        (
            "--model llama-3.1-8b --batch 100000000",
            78,
            "must be 1-1048576 sequences",
        ),
    ];
    for (extra, code, text) in cases {
        let mut args = vec!["plan", "--gpu", "h100-sxm"];
        args.extend(extra.split_whitespace());
        let out = glassbox(&args, None);
        assert_eq!(out.status.code(), Some(code), "{extra}: {}", stderr(&out));
        assert!(stderr(&out).contains(text), "{extra}: {}", stderr(&out));
    }
}

#[test]
fn pipeline_plan_learns_an_agents_iterations_and_tokens_per_model_call() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("plan-agent-it");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("orders.yaml"),
        "topology_id: orders\nversion: 1.0.0\nnodes:\n  - id: lookup\n    type: template\n    config: { template: 'Order {{ input.order_id }}: shipped.' }\n",
    )
    .unwrap();
    let topo = dir.join("agent.yaml");
    std::fs::write(
        &topo,
        r#"topology_id: plan-agent
version: 1.0.0
defaults: { timeout_ms: 600000, deadline_ms: 900000 }
nodes:
  - id: agent
    type: agent
    resource: { type: gpu, model: llama-3.1-8b }
    config:
      backend: local
      model: smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
      system: You are a support assistant. Use lookup_order for order numbers.
      max_tokens: 32
      temperature: 0
      seed: 42
      max_iterations: 2
      tools:
        - name: lookup_order
          description: Looks up an order by its number.
          parameters: { type: object, properties: { order_id: { type: integer } }, required: [order_id] }
          topology: orders.yaml
"#,
    )
    .unwrap();
    let store = format!("sqlite://{}", dir.join("s.db").display());
    let topo_s = topo.to_str().unwrap();
    let _turn = crate::support::models_turn();
    let out = glassbox(
        &[
            "run",
            topo_s,
            "-q",
            "Where is my order 7?",
            "--store",
            &store,
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let iterations = run["output"]["iterations"].as_f64().unwrap();
    let model_steps: Vec<&serde_json::Value> = run["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["role"] == "step" && s["kind"] == "agent.model")
        .collect();
    assert_eq!(model_steps.len() as f64, iterations, "{run}");
    let input: f64 = model_steps
        .iter()
        .map(|s| s["usage"]["input_tokens"].as_f64().unwrap())
        .sum();

    let out = glassbox(
        &[
            "plan", "pipeline", topo_s, "--store", &store, "--rate", "10", "--format", "json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let agent = &v["profile"]["nodes"][0];
    // One model call per iteration: the agent's calls per request are its
    // iterations, and its tokens per call are per model call.
    assert_eq!(
        agent["calls_per_visit"].as_f64().unwrap(),
        iterations,
        "{v}"
    );
    let per_call = agent["input_tokens_per_call"].as_f64().unwrap();
    assert!((per_call - input / iterations).abs() < 1e-9, "{v}");
    let calls_per_s = v["plan"]["nodes"][0]["calls_per_s"].as_f64().unwrap();
    assert!((calls_per_s - 10.0 * iterations).abs() < 1e-9, "{v}");

    let table = glassbox(
        &[
            "plan", "pipeline", topo_s, "--store", &store, "--rate", "10",
        ],
        None,
    );
    assert!(
        stdout(&table).contains(&format!(
            "agent: {iterations:.1} model calls (loop iterations) per request"
        )),
        "{}",
        stdout(&table)
    );
}

#[test]
fn a_llama_cpp_build_before_b6327_pays_for_its_attention_scores_on_a_long_prompt() {
    let plan = |engine: &str| {
        json_of(&[
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "rtx-4090",
            "--quant",
            "q4_k_m",
            "--engine",
            engine,
            "--prompt-tokens",
            "8192",
            "--format",
            "json",
        ])
    };
    let (current, old) = (plan("llama.cpp"), plan("llama.cpp@b5000"));
    // The old build is its own profile, and the plan says which one it took.
    assert_eq!(old["engine"].as_str(), Some("llama.cpp@b6326"), "{old}");
    // A build before b3216 also dequantises the Q4_K_M weights to F16 before each cuBLAS GEMM.
    let cublas = plan("llama.cpp@b2800");
    assert_eq!(
        cublas["engine"].as_str(),
        Some("llama.cpp@b3215"),
        "{cublas}"
    );
    assert!(
        cublas["ttft_ms"].as_f64().unwrap() > old["ttft_ms"].as_f64().unwrap(),
        "{cublas} vs {old}"
    );
    assert!(
        current["estimate"]["engine_profile"]
            .as_str()
            .unwrap()
            .contains("flash attention"),
        "{current}"
    );
    // Without flash attention an 8192-token prompt writes and reads 8192 × 4096 F32 scores per
    // head and layer: its first token comes measurably later.
    let ttft = |v: &serde_json::Value| v["ttft_ms"].as_f64().unwrap();
    assert!(
        ttft(&old) > 1.1 * ttft(&current),
        "old {} vs current {}",
        ttft(&old),
        ttft(&current)
    );
    // A malformed build number is an input error naming the form.
    let out = glassbox(
        &[
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "rtx-4090",
            "--engine",
            "llama.cpp@0.5",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(stderr(&out).contains("b6327"), "{}", stderr(&out));
}

#[test]
fn plan_sliding_window_models_hold_more_sequences_where_the_engine_keeps_the_window() {
    let seqs = |engine: &str| {
        let out = glassbox(
            &[
                "plan",
                "--model",
                "google/gemma-3-27b-it",
                "--gpu",
                "h200",
                "--quant",
                "bf16",
                "--engine",
                engine,
                "--prompt-tokens",
                "120000",
                "--gen-tokens",
                "1000",
                "--format",
                "json",
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        v["max_concurrent_seqs"].as_f64().unwrap()
    };
    let (windowed, full) = (seqs("vllm"), seqs("vllm@0.5"));
    assert!(
        full >= 1.0 && windowed >= 5.0 * full,
        "{windowed} vs {full}"
    );
    let out = glassbox(&["plan", "list-models"], None);
    assert!(
        stdout(&out).contains("52 of 62 layers: 1024"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn plan_takes_the_published_format_when_no_quant_is_given() {
    let json = |args: &[&str]| {
        let mut all = vec!["plan"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--format", "json"]);
        json_of(&all)
    };
    // gpt-oss ships MXFP4 experts with the rest in BF16: about 13.7 GB.
    let v = json(&["--model", "openai/gpt-oss-20b", "--gpu", "rtx-4090"]);
    let w = v["weights_gb"].as_f64().unwrap();
    assert!((13.0..14.5).contains(&w), "weights_gb = {w}");
    // A format named on the command line wins.
    let v = json(&[
        "--model",
        "gpt-oss-20b",
        "--gpu",
        "h100-sxm",
        "--quant",
        "bf16",
    ]);
    assert!(v["weights_gb"].as_f64().unwrap() > 40.0, "{v}");
    // A dense model published in 16 bits keeps the FP16 default.
    let v = json(&["--model", "llama-3.1-8b", "--gpu", "h100-sxm"]);
    let w = v["weights_gb"].as_f64().unwrap();
    assert!((15.0..17.0).contains(&w), "weights_gb = {w}");
}

/// `plan --model MODEL --gpu GPU --format json`.
fn plan_json_args<'a>(model: &'a str, gpu: &'a str) -> Vec<&'a str> {
    vec!["plan", "--model", model, "--gpu", gpu, "--format", "json"]
}

#[test]
fn a_gpu_that_falls_short_of_its_datasheet_says_so_in_the_plan() {
    // (model, GPU, JSON field, what it says, the text plan's line): a
    // compute clock below the datasheet's (the T4), a streamed bandwidth
    // below the fitted devices' share (the MI300X).
    let cases = [
        (
            "qwen2.5-1.5b",
            "t4",
            "compute_clock",
            &["585 MHz", "1590 MHz"][..],
            "compute clock: t4 holds 585 MHz",
        ),
        (
            "llama-3.1-8b",
            "mi300x",
            "memory_stream",
            &["4150 of 5300 GB/s", "4737 GB/s"][..],
            "memory bandwidth: mi300x streams",
        ),
    ];
    for (model, gpu, field, says, line) in cases {
        let plan = json_of(&plan_json_args(model, gpu));
        let note = plan["estimate"][field].as_str().unwrap();
        assert!(says.iter().all(|s| note.contains(s)), "{gpu}: {note}");
        // The H100 holds its datasheet figures: no such line.
        let h100 = json_of(&plan_json_args(model, "h100-sxm"));
        assert!(h100["estimate"].get(field).is_none(), "{h100}");
        // The text plan prints it under the engine profile.
        let out = glassbox(&plan_json_args(model, gpu)[..5], None);
        assert!(stdout(&out).contains(line), "{}", stdout(&out));
    }
}

/// `--server-path-ms` puts the user's own server path in the plan's TTFT in
/// place of the engine's published one, for an engine without one too; a
/// value that is no time is refused with the flag named.
#[test]
fn plan_takes_the_users_own_server_path() {
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--engine",
            "vllm",
            "--prompt-tokens",
            "1000",
            "--format",
            "json",
        ];
        a.extend_from_slice(extra);
        a
    };
    let ttft = |v: &serde_json::Value| v["ttft_ms"].as_f64().unwrap();
    let published = json_of(&args(&[]));
    let mine = json_of(&args(&["--server-path-ms", "45.5"]));
    // vLLM's published fixed part is 5.5 ms: 40 ms more.
    let more = ttft(&mine) - ttft(&published);
    assert!((more - 40.0).abs() < 1e-6, "{more}");
    // The decode rate holds no server path.
    assert_eq!(mine["decode_tok_s"], published["decode_tok_s"]);
    // TensorRT-LLM has no published path: the whole figure is added.
    let trt = |extra: &[&'static str]| {
        let mut a = args(extra);
        a[6] = "trt-llm";
        json_of(&a)
    };
    let added = ttft(&trt(&["--server-path-ms", "12"])) - ttft(&trt(&[]));
    assert!((added - 12.0).abs() < 1e-6, "{added}");
    let out = glassbox(&args(&["--server-path-ms", "70000"]), None);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`--server-path-ms 70000`"),
        "{}",
        stderr(&out)
    );
}
