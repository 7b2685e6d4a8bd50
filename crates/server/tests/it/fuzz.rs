//! Fuzzing the live server (issue #33, item 6), bounded for CI: fixed
//! seeds and case counts, a few seconds each.
//!
//! - the request decoders (`/v1/topologies/{id}/runs`,
//!   `/v1/chat/completions`, `/v1/embeddings`) get mutated valid bodies and
//!   arbitrary JSON from proptest: every answer is a JSON body with a
//!   status below 500, and the server keeps answering;
//! - schemathesis (installed by `scripts/install-test-python.sh`) generates
//!   requests for every operation in docs/openapi.json and checks
//!   `not_a_server_error`.

use std::path::Path;
use std::process::Command;

use glassbox_server::Config;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};

use crate::support::{MODERATION, TestServer, echo};

fn runner(seed: u8, cases: u32) -> TestRunner {
    TestRunner::new_with_rng(
        RunnerConfig {
            cases,
            failure_persistence: None,
            ..RunnerConfig::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]),
    )
}

/// Arbitrary JSON, a few levels deep, heavy in the field names the
/// decoders read.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let names = prop::sample::select(vec![
        "model",
        "messages",
        "role",
        "content",
        "input",
        "question",
        "stream",
        "max_tokens",
        "temperature",
        "n",
        "stop",
        "user",
        "encoding_format",
        "dimensions",
        "x",
    ]);
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f)
            .map_or(serde_json::Value::Null, serde_json::Value::Number)),
        prop::collection::vec(any::<char>(), 0..12)
            .prop_map(|cs| serde_json::Value::from(cs.into_iter().collect::<String>())),
        prop::sample::select(vec!["echo", "user", "system", "assistant", "tool", ""])
            .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::vec((names.clone(), inner), 0..5).prop_map(|pairs| {
                serde_json::Value::Object(
                    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                )
            }),
        ]
    })
}

/// A valid body with a few bytes deleted, duplicated or replaced.
fn mutated(valid: &'static str) -> impl Strategy<Value = String> {
    prop::collection::vec((any::<usize>(), 0u8..3, any::<char>()), 1..5).prop_map(move |edits| {
        let mut chars: Vec<char> = valid.chars().collect();
        for (at, op, c) in edits {
            if chars.is_empty() {
                break;
            }
            let i = at % chars.len();
            match op {
                0 => {
                    chars.remove(i);
                }
                1 => chars.insert(i, chars[i]),
                _ => chars[i] = c,
            }
        }
        chars.into_iter().collect()
    })
}

const BODIES: &[(&str, &str)] = &[
    (
        "/v1/chat/completions",
        r#"{"model":"echo","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":false}"#,
    ),
    (
        "/v1/embeddings",
        r#"{"model":"echo","input":["a","b"],"encoding_format":"float"}"#,
    ),
    (
        "/v1/topologies/echo/runs",
        r#"{"question":"what is the price?"}"#,
    ),
    (
        "/v1/topologies/moderation/runs",
        r#"{"question":"What is the price of Pro?"}"#,
    ),
];

fn check_answer(path: &str, body: &str, status: u16, text: &str) {
    assert!(
        status < 500 || status == 503 || status == 504,
        "{path} answered {status} to {body:?}: {text}"
    );
    assert!(
        serde_json::from_str::<serde_json::Value>(text).is_ok(),
        "{path} answered {status} without a JSON body to {body:?}: {text}"
    );
}

#[test]
fn request_decoders_answer_fuzzed_bodies_with_json_and_no_server_error() {
    let s = TestServer::start(
        &[
            ("echo.yaml", &echo("echo", "1.0.0")),
            ("moderation.yaml", MODERATION),
        ],
        Config::default(),
    );
    let mut sent = 0u32;
    for (i, (path, valid)) in BODIES.iter().enumerate() {
        let seed = u8::try_from(i).unwrap_or(0) + 1;
        runner(seed, 120)
            .run(&mutated(valid), |body| {
                let r = s.post(path, None, &body);
                check_answer(path, &body, r.status, &r.text);
                Ok(())
            })
            .unwrap();
        runner(seed + 16, 120)
            .run(&json_value(), |value| {
                let body = value.to_string();
                let r = s.post(path, None, &body);
                check_answer(path, &body, r.status, &r.text);
                Ok(())
            })
            .unwrap();
        sent += 240;
    }
    println!("request decoders: {sent} fuzzed bodies, 0 server errors");
    // Still serving.
    assert_eq!(s.get("/healthz", None).status, 200);
}

/// Schemathesis over every operation of docs/openapi.json, against a real
/// server with a template topology loaded; a bounded number of examples
/// per operation and a fixed seed.
#[test]
fn schemathesis_finds_no_server_error() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let st = root.join(".venv-test/bin/st");
    assert!(
        st.exists(),
        "{} is missing: run `scripts/install-test-python.sh` (it installs schemathesis)",
        st.display()
    );
    let s = TestServer::start(
        &[
            ("echo.yaml", &echo("echo", "1.0.0")),
            ("moderation.yaml", MODERATION),
        ],
        Config::default(),
    );
    // Schemathesis keeps a cache (`.schemathesis/`) in its working directory.
    let scratch = tempfile::tempdir().unwrap();
    let schema = root.join("docs/openapi.json");
    let out = Command::new(&st)
        .current_dir(scratch.path())
        .arg("run")
        .arg(&schema)
        .args([
            "--url",
            &s.base,
            "--checks",
            "not_a_server_error",
            "--max-examples",
            "15",
            "--seed",
            "33",
            "--workers",
            "1",
            "--no-shrink",
            "--request-timeout",
            "60",
        ])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "schemathesis found failures:\n{stdout}\n{stderr}"
    );
    assert_eq!(s.get("/healthz", None).status, 200);
}
