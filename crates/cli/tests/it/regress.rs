//! `glassbox test` (cases, replay, JUnit, exit codes) and `glassbox trace
//! diff`, through the binary. Every example's shipped cases run here, so CI
//! runs them.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{assert_exit, glassbox, is_case_file, models_turn, root, stderr, stdout};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every `*.cases.yaml` under `examples/`, with the topology it tests
/// (`NAME.cases.yaml` tests `NAME.yaml`).
fn example_cases() -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let mut todo = vec![root().join("examples")];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if is_case_file(&path) {
                let name = path
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .replace(".cases", "");
                let topology = path.with_file_name(name);
                assert!(
                    topology.exists(),
                    "{} has no topology {}",
                    path.display(),
                    topology.display()
                );
                out.push((topology, path));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_example_ships_cases_and_they_pass() {
    let all = example_cases();
    let names: Vec<String> = all
        .iter()
        .map(|(t, _)| t.strip_prefix(root()).unwrap().display().to_string())
        .collect();
    assert!(
        names.contains(&"examples/moderation.yaml".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"examples/rag-chat/topology.yaml".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"examples/agent/topology.yaml".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"examples/loop/topology.yaml".to_string()),
        "{names:?}"
    );
    for (topology, cases) in all {
        let tmp = tempfile::tempdir().unwrap();
        let dir = topology.parent().unwrap();
        // Run a copy beside the data it needs: the topology files beside
        // it (an agent's tools), and the vector index, built from `kb/` as
        // the topology's header says (it is not committed; an example
        // without its own `kb/` uses the rag-chat knowledge base).
        let copy = tmp.path().join(topology.file_name().unwrap());
        std::fs::copy(&topology, &copy).unwrap();
        let mut needs_index = dir.join("kb").is_dir();
        if dir != root().join("examples") {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                let yaml = path.extension().is_some_and(|e| e == "yaml");
                if yaml && !is_case_file(&path) && path != topology {
                    let text = std::fs::read_to_string(&path).unwrap();
                    needs_index |= text.contains("kb.index");
                    std::fs::write(tmp.path().join(path.file_name().unwrap()), text).unwrap();
                }
            }
        }
        let kb = if dir.join("kb").is_dir() {
            dir.join("kb")
        } else {
            root().join("examples/rag-chat/kb")
        };
        let _turn = needs_index.then(|| {
            let turn = models_turn();
            let built = glassbox(
                &[
                    "index",
                    "build",
                    s(&kb),
                    "--out",
                    s(&tmp.path().join("kb.index")),
                ],
                None,
            );
            assert_exit(&built, 0);
            turn
        });
        let junit = tmp.path().join("junit.xml");
        // Recorded, so that a failing case shows its whole trace (a
        // retrieval's hits, an agent's tool answers), not just its answer.
        let store = format!("sqlite://{}", tmp.path().join("cases.db").display());
        let out = glassbox(
            &[
                "test",
                s(&copy),
                s(&cases),
                "--junit",
                s(&junit),
                "--record",
                "--store",
                &store,
            ],
            None,
        );
        if out.status.code() != Some(0) {
            let xml = std::fs::read_to_string(&junit).unwrap_or_default();
            for id in xml.split("\nrequest ").skip(1) {
                let id = id.split('<').next().unwrap_or_default();
                let shown = glassbox(
                    &["trace", "show", id, "--store", &store, "--format", "json"],
                    None,
                );
                eprintln!("--- trace of failed request {id}\n{}", stdout(&shown));
            }
        }
        assert_exit(&out, 0);
        let table = stdout(&out);
        assert!(
            table.contains(" failed") && table.contains("0 failed"),
            "{table}"
        );
        assert!(!table.contains("FAIL"), "{table}");
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(xml.contains("failures=\"0\""), "{xml}");
        let cases_run = xml.matches("<testcase ").count();
        assert!(cases_run >= 2, "{xml}");
        // `--record`: every case's run is in the store.
        let listed = glassbox(
            &[
                "trace", "list", "--store", &store, "--limit", "1000", "--format", "json",
            ],
            None,
        );
        assert_exit(&listed, 0);
        let runs: serde_json::Value = serde_json::from_str(&stdout(&listed)).unwrap();
        assert_eq!(runs.as_array().map(Vec::len), Some(cases_run), "{runs}");
    }
}

#[test]
fn a_failing_case_lists_every_miss_in_the_table_json_and_junit() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = tmp.path().join("bad.cases.yaml");
    std::fs::write(
        &cases,
        r#"cases:
  - name: passes
    question: What is the price of Pro?
    expect: { labels: { route: pricing } }
  - name: wrong about everything
    question: What is the price of Pro?
    expect:
      path: [route, general_answer, check]
      labels: { route: general }
      guard: replaced
      output:
        contains: Basic
        regex: '^Thanks'
        json_schema: { type: object, required: [answer] }
      max_cost: 0
"#,
    )
    .unwrap();
    let junit = tmp.path().join("out.xml");
    let out = glassbox(
        &[
            "test",
            "examples/moderation.yaml",
            s(&cases),
            "--junit",
            s(&junit),
        ],
        None,
    );
    assert_exit(&out, 1);
    let table = stdout(&out);
    for miss in [
        "path: expected route → general_answer → check, got route → pricing_answer → check",
        "labels.route: expected `general`, got `pricing`",
        "guard: expected `replaced`, `check` said `passed`",
        "output.contains: `Basic` not in",
        "output.regex: `^Thanks` does not match",
        "output.json_schema: the answer is not JSON",
        "max_cost: cost",
        "2 run: 1 passed, 1 failed, 0 skipped",
    ] {
        assert!(table.contains(miss), "{miss} missing from\n{table}");
    }
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"2\" failures=\"1\""), "{xml}");
    assert!(xml.contains("<testcase name=\"passes\""), "{xml}");
    assert!(
        xml.contains("file=\"") && xml.contains("bad.cases.yaml:5\""),
        "{xml}"
    );
    assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");

    let json = glassbox(
        &[
            "test",
            "examples/moderation.yaml",
            s(&cases),
            "--format",
            "json",
        ],
        None,
    );
    assert_exit(&json, 1);
    let v: Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(
        (v["passed"].as_u64(), v["failed"].as_u64()),
        (Some(1), Some(1))
    );
    let failures = v["suites"][0]["results"][1]["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 7, "{failures:?}");
}

#[test]
fn a_bad_case_file_is_exit_78_with_every_problem_located() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = tmp.path().join("typo.cases.yaml");
    std::fs::write(
        &cases,
        "cases:\n  - name: one\n    question: hi\n    expect:\n      path: [route, pricing_anser]\n      guard: passd\n      output: { regex: '(' }\n  - name: one\n    qestion: hi\n    expect: {}\n",
    )
    .unwrap();
    let out = glassbox(&["test", "examples/moderation.yaml", s(&cases)], None);
    assert_exit(&out, 78);
    let err = stderr(&out);
    let file = s(&cases);
    for want in [
        format!("{file}:5:21"),
        "unknown node `pricing_anser`".to_string(),
        "did you mean `pricing_answer`?".to_string(),
        format!("{file}:6:14"),
        "`passd` is not a guard outcome".to_string(),
        "the regex does not compile".to_string(),
        "unknown field `qestion`".to_string(),
        "two cases are named `one`".to_string(),
        "is not a valid case file".to_string(),
    ] {
        assert!(err.contains(&want), "{want} missing from\n{err}");
    }
    let missing = glassbox(
        &["test", "examples/moderation.yaml", "no/such.cases.yaml"],
        None,
    );
    assert_exit(&missing, 78);
    assert!(stderr(&missing).contains("cannot read case file `no/such.cases.yaml`"));
    let usage = glassbox(&["test", "examples/moderation.yaml"], None);
    assert_exit(&usage, 2);
}

fn run_into(store: &str, topology: &str, question: &str) -> String {
    let o = glassbox(
        &[
            "run", topology, "--store", store, "--format", "json", "-q", question,
        ],
        None,
    );
    assert_exit(&o, 0);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    v["request_id"].as_str().unwrap().to_string()
}

#[test]
fn replay_reports_the_requests_whose_path_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", tmp.path().join("traces.db").display());
    let v1 = "examples/moderation.yaml";
    run_into(&store, v1, "What is the price of Pro?");
    run_into(&store, v1, "hello there");
    // Longer than the stored summary: its input cannot be replayed.
    let long = format!("hello {}", "and more ".repeat(40));
    run_into(&store, v1, &long);
    // Unchanged topology: nothing changed, exit 0.
    let same = glassbox(&["test", v1, "--replay", "--store", &store], None);
    assert_exit(&same, 0);
    let table = stdout(&same);
    assert!(
        table.contains("3 run: 2 passed, 0 failed, 1 skipped"),
        "{table}"
    );
    assert!(table.contains("the stored input was cut"), "{table}");

    // Version 2 no longer routes on "price": pricing questions now take the
    // general branch; the small talk keeps its path.
    let text = std::fs::read_to_string(root().join(v1)).unwrap();
    let v2 = text
        .replace("version: 1.0.0", "version: 2.0.0")
        .replace(r#"input.question.contains("price") || "#, "");
    assert_ne!(v2, text);
    let v2_path = tmp.path().join("moderation-v2.yaml");
    std::fs::write(&v2_path, v2).unwrap();
    let junit = tmp.path().join("replay.xml");
    let out = glassbox(
        &[
            "test",
            s(&v2_path),
            "--replay",
            "--store",
            &store,
            "--junit",
            s(&junit),
            "--format",
            "json",
        ],
        None,
    );
    assert_exit(&out, 1);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        (
            v["passed"].as_u64(),
            v["failed"].as_u64(),
            v["skipped"].as_u64()
        ),
        (Some(1), Some(1), Some(1)),
        "{v}"
    );
    let changed = v["suites"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["failures"].as_array().is_some_and(|f| !f.is_empty()))
        .unwrap();
    let failures: Vec<&str> = changed["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        failures.contains(
            &"path: route → pricing_answer → check became route → general_answer → check"
        ),
        "{failures:?}"
    );
    assert!(
        failures.contains(&"labels.route: `pricing` became `general`"),
        "{failures:?}"
    );
    assert!(
        failures
            .iter()
            .any(|f| f.starts_with("why: ") && f.contains("part at `route`")),
        "{failures:?}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""),
        "{xml}"
    );
}

#[test]
fn trace_diff_shows_both_requests_and_the_first_divergence() {
    let tmp = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", tmp.path().join("traces.db").display());
    let v1 = "examples/moderation.yaml";
    let a = run_into(&store, v1, "What is the price of Pro?");
    let b = run_into(&store, v1, "you idiot");
    let out = glassbox(&["trace", "diff", &a, &b, "--store", &store], None);
    assert_exit(&out, 0);
    let text = stdout(&out);
    for want in [
        "first divergence",
        "The requests part at `route`: in A the question was classified as `pricing`",
        "only B ran `refuse`",
        "≠ route → refuse",
        "pricing_answer",
        "A TOOK",
    ] {
        assert!(text.contains(want), "{want} missing from\n{text}");
    }
    let zh = glassbox(
        &[
            "trace", "diff", &a, &b, "--store", &store, "--lang", "zh", "--format", "json",
        ],
        None,
    );
    assert_exit(&zh, 0);
    let v: Value = serde_json::from_str(&stdout(&zh)).unwrap();
    assert_eq!(v["first_divergence"]["kind"], "label");
    assert_eq!(v["lang"], "zh");
    assert!(
        v["explanation"]
            .as_str()
            .unwrap()
            .contains("在 `route` 分道"),
        "{v}"
    );
    let unknown = glassbox(
        &[
            "trace",
            "diff",
            &a,
            "00000000-0000-0000-0000-000000000000",
            "--store",
            &store,
        ],
        None,
    );
    assert_exit(&unknown, 78);
    assert!(
        stderr(&unknown).contains("no request"),
        "{}",
        stderr(&unknown)
    );
}
