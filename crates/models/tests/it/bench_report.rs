//! The model benchmarks' report (`scripts/bench_models_peers.py report`):
//! no verdict for a figure above its physical bound (issue #41).

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
fn issue_41_a_prompt_figure_above_the_cpu_ceiling_gets_no_verdict() {
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
        prompt.contains("no verdict, glassbox above the physical bound"),
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
        decode.contains("no verdict, peer above the physical bound"),
        "{decode}"
    );
}
