//! `glassbox run`: tables, JSON and exit codes.

use serde_json::Value;

use crate::support::{glassbox, stdout};

#[test]
fn runs_the_moderation_example_as_json() {
    let o = glassbox(
        &[
            "run",
            "examples/moderation.yaml",
            "--question",
            "What is the price of Pro?",
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    for key in [
        "request_id",
        "topology_id",
        "version",
        "status",
        "output",
        "path",
        "receipt",
        "explanation",
    ] {
        assert!(v.get(key).is_some(), "missing `{key}`");
    }
    assert_eq!(v["status"], "ok");
    assert_eq!(v["path"]["nodes"][0]["type"], "router");
    assert!(v["path"]["nodes"][0]["duration_us"].is_u64());
    let edge = &v["path"]["edges"][0];
    assert_eq!(
        (
            edge["from"].as_str(),
            edge["to"].as_str(),
            edge["taken"].as_bool()
        ),
        (Some("route"), Some("pricing_answer"), Some(true))
    );
    assert_eq!(
        edge["why"],
        "label pricing emitted by route (rule mentions_price)"
    );
    let line = &v["receipt"]["lines"][0];
    for key in ["node", "unit", "quantity", "unit_price", "amount"] {
        assert!(line.get(key).is_some(), "receipt line lacks `{key}`");
    }
    assert_eq!(v["receipt"]["currency"], "USD");
}

#[test]
fn tables_show_path_receipt_and_explanation() {
    let o = glassbox(
        &[
            "run",
            "examples/moderation.yaml",
            "-q",
            "you idiot",
            "--lang",
            "zh",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    for section in [
        "Answer",
        "Path",
        "Edges",
        "Receipt (USD)",
        "TOTAL",
        "Explanation",
    ] {
        assert!(out.contains(section), "missing {section}:\n{out}");
    }
    assert!(
        out.contains("问题被归类为「abuse」（规则 `abusive`）"),
        "{out}"
    );
}

#[test]
fn failed_runs_exit_1_and_still_print_the_trace() {
    let o = glassbox(
        &[
            "run",
            "examples/moderation.yaml",
            "--input",
            r#"{"text": "no question"}"#,
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("Path"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("node `route` failed on attempt 1"));
}

#[test]
fn bad_input_and_usage_have_their_exit_codes() {
    assert_eq!(
        glassbox(
            &["run", "examples/moderation.yaml", "--input", "{nope"],
            None
        )
        .status
        .code(),
        Some(78)
    );
    assert_eq!(
        glassbox(&["run", "examples/moderation.yaml"], None)
            .status
            .code(),
        Some(2)
    );
}

/// `glassbox run ... --format json | head -1`: the reader closes the pipe
/// before the answer is written; the command must not panic on it (the
/// demo's last step once died so, exit 101).
#[test]
fn a_reader_that_stops_reading_is_not_a_panic() {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_glassbox"))
        .args([
            "run",
            "examples/moderation.yaml",
            "--question",
            "What is the price of Pro?",
        ])
        .args(["--format", "json"])
        .current_dir(crate::support::root())
        .env("XDG_DATA_HOME", env!("CARGO_TARGET_TMPDIR"))
        .env_remove("GLASSBOX_STORE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end at once: every write of the answer meets a closed pipe.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "glassbox panicked: {stderr}");
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
}

/// The same on standard error: `glassbox diff bad.yaml good.yaml 2>&1 |
/// head -1` closes the pipe the diagnostics and the error line go to. The command
/// keeps its own exit code (78, invalid input) instead of panicking (101).
#[test]
fn a_closed_stderr_is_not_a_panic() {
    use std::process::Command;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("closed-stderr");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "topology_id: x\nversion: 1.0.0\nnodes: [\n").unwrap();
    let mut child = crate::support::spawn_with_closed_stderr(
        Command::new(env!("CARGO_BIN_EXE_glassbox")).args([
            "diff",
            bad.to_str().unwrap(),
            bad.to_str().unwrap(),
        ]),
    );
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(78), "exit {status:?}");
}
