//! The model benchmarks' report (`scripts/bench_models_peers.py report`):
//! a figure above its physical bound is called impossible, never "meets"
//! (issue #41), and interleaved rounds give medians.

use std::path::Path;
use std::process::Command;

fn report(dir: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench_models_peers.py");
    let out = Command::new("python3")
        .arg(script)
        .arg("report")
        .arg(dir)
        .output()
        .expect("python3 runs (hint: install python3)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("the report is UTF-8")
}

fn row<'a>(table: &'a str, starts: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.starts_with(&format!("| {starts}")))
        .unwrap_or_else(|| panic!("no row `{starts}` in\n{table}"))
}

#[test]
fn issue_41_a_prompt_figure_above_the_cpu_ceiling_is_called_impossible() {
    let dir = tempfile::tempdir().unwrap();
    // The issue's figures: a cached "prompt" 90× the peer's, above what the
    // CPU can compute; decode under its bound and 0.85× the peer's.
    let ours = serde_json::json!({
        "threads": 2, "prompt_tokens": 546, "completion_tokens": 128,
        "prompt_tps": 18476.0, "decode_tps": 65.0,
        "prompt_bound_tps": 9000.0, "decode_bound_tps": 400.0,
    });
    let peer = serde_json::json!({
        "engine": "llama-cpp-python 0.3.36", "prompt_tps": 203.0, "decode_tps": 77.0,
    });
    std::fs::write(dir.path().join("llm-rust.json"), ours.to_string()).unwrap();
    std::fs::write(dir.path().join("llm-python.json"), peer.to_string()).unwrap();
    let table = report(dir.path());
    let prompt = row(&table, "LLM prompt, reuse off");
    assert!(
        prompt.contains("impossible: above bound (glassbox), no verdict"),
        "{prompt}"
    );
    assert!(!prompt.contains("meets"), "{prompt}");
    assert!(
        row(&table, "LLM decode, reuse off").ends_with("1.0x below |"),
        "{table}"
    );

    // Under its bound, the same prompt figure is judged.
    let honest = serde_json::json!({
        "threads": 2, "prompt_tokens": 546, "completion_tokens": 128,
        "prompt_tps": 250.0, "decode_tps": 80.0,
        "prompt_bound_tps": 9000.0, "decode_bound_tps": 400.0,
    });
    std::fs::write(dir.path().join("llm-rust.json"), honest.to_string()).unwrap();
    let table = report(dir.path());
    assert!(
        row(&table, "LLM prompt, reuse off").ends_with("0.9x meets |"),
        "{table}"
    );
    assert!(
        row(&table, "LLM decode, reuse off").ends_with("1.0x meets |"),
        "{table}"
    );
}

#[test]
fn a_peer_figure_above_the_bound_also_withholds_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let ours = serde_json::json!({
        "threads": 2, "prompt_tokens": 546, "completion_tokens": 128,
        "prompt_tps": 250.0, "decode_tps": 80.0,
        "prompt_bound_tps": 9000.0, "decode_bound_tps": 400.0,
    });
    let peer = serde_json::json!({"engine": "peer", "prompt_tps": 200.0, "decode_tps": 500.0});
    std::fs::write(dir.path().join("llm-rust.json"), ours.to_string()).unwrap();
    std::fs::write(dir.path().join("llm-python.json"), peer.to_string()).unwrap();
    let table = report(dir.path());
    let decode = row(&table, "LLM decode, reuse off");
    assert!(
        decode.contains("impossible: above bound (peer)"),
        "{decode}"
    );
    assert!(!decode.contains("meets"), "{decode}");
}

/// One round's figures, as bench_llm and the peer write them.
fn round(dir: &Path, n: usize, ours: f64, peer: f64, load: &str) {
    let d = dir.join("llm").join(format!("round-{n}"));
    std::fs::create_dir_all(&d).expect("a round folder");
    let rust = serde_json::json!({
        "threads": 2, "prompt_tokens": 546, "completion_tokens": 128,
        "prompt_tps": 250.0, "decode_tps": ours,
        "prompt_bound_tps": 9000.0, "decode_bound_tps": 400.0,
    });
    let python = serde_json::json!({"engine": "peer", "prompt_tps": 250.0, "decode_tps": peer});
    std::fs::write(d.join("llm-rust.json"), rust.to_string()).expect("a round file");
    std::fs::write(d.join("llm-python.json"), python.to_string()).expect("a round file");
    std::fs::write(d.join("load-before"), format!("{load} 1.00 1.00\n")).expect("a round file");
    std::fs::write(d.join("load-after"), "2.50 1.00 1.00\n").expect("a round file");
}

#[test]
fn interleaved_rounds_give_the_median_figure_and_the_median_paired_ratio() {
    let dir = tempfile::tempdir().unwrap();
    // A noisy machine: one round where a neighbour slowed the peer, one
    // where it slowed us; the paired median is the middle round's ratio.
    round(dir.path(), 1, 80.0, 100.0, "0.50");
    round(dir.path(), 2, 90.0, 45.0, "4.00");
    round(dir.path(), 3, 40.0, 50.0, "3.10");
    let table = report(dir.path());
    let decode = row(&table, "LLM decode, reuse off");
    // Medians of the figures: 80 and 50; of the ratios (0.8, 2.0, 0.8): 0.8.
    assert!(
        decode.contains("| 80 tok/s | 50 tok/s | 0.80x |"),
        "{decode}"
    );
    assert!(decode.contains("median of 3 rounds"), "{decode}");
    assert!(decode.ends_with("1.0x below |"), "{decode}");
    // Each round is listed with its load.
    assert!(row(&table, "round-2").contains("4.00 → 2.50"), "{table}");
    assert!(row(&table, "round-3").contains("0.80x"), "{table}");
}
