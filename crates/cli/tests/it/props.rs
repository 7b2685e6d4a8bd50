//! Property tests (fixed seeds, bounded cases): the parser and validator
//! never panic, on arbitrary bytes or on mutated valid topologies.

use glassbox_topology::{Source, parse, validate};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::support::{root, topology_files};

fn check_bytes(name: &str, bytes: Vec<u8>) {
    let kinds = glassbox_nodes::builtin_kinds();
    if let Ok(source) = parse::decode(name, bytes, None) {
        let (topology, diags) = validate(&source, &kinds);
        // Either a topology or at least one error: never neither.
        assert!(topology.is_some() || diags.iter().any(|d| d.is_error()));
        for d in &diags {
            if let Some(span) = d.span {
                assert!(
                    span.end <= source.text().len() + 1,
                    "span out of bounds: {d:?}"
                );
            }
        }
        let report = glassbox_topology::Report::new(source, diags);
        let _ = report.render(false);
    }
}

fn runner(seed: u8, cases: u32) -> TestRunner {
    TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]),
    )
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut r = runner(7, 2000);
    r.run(&prop::collection::vec(any::<u8>(), 0..512), |bytes| {
        check_bytes("fuzz.yaml", bytes.clone());
        check_bytes("fuzz.json", bytes);
        Ok(())
    })
    .unwrap();
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize, usize),
    Insert(usize, String),
    Replace(usize, char),
    Duplicate(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let tokens = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        "\"",
        "'",
        "-",
        "\n",
        "  ",
        "&a",
        "*a",
        "!!str",
        "null",
        "1e999",
        "-1",
        "id",
        "type",
        "nodes",
        "edges",
        "condition",
        "fallback",
        "\t",
        "#",
        "|",
        ">",
    ]);
    prop_oneof![
        (any::<usize>(), 1usize..8).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), tokens).prop_map(|(a, t)| Mutation::Insert(a, t.to_string())),
        (any::<usize>(), any::<char>()).prop_map(|(a, c)| Mutation::Replace(a, c)),
        (any::<usize>(), 1usize..64).prop_map(|(a, n)| Mutation::Duplicate(a, n)),
    ]
}

fn apply(text: &str, muts: &[Mutation]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for m in muts {
        let len = chars.len().max(1);
        match m {
            Mutation::Delete(a, n) => {
                let s = a % len;
                let e = (s + n).min(chars.len());
                chars.drain(s.min(chars.len())..e);
            }
            Mutation::Insert(a, t) => {
                let s = (a % len).min(chars.len());
                for (i, c) in t.chars().enumerate() {
                    chars.insert(s + i, c);
                }
            }
            Mutation::Replace(a, c) => {
                if !chars.is_empty() {
                    let i = a % chars.len();
                    chars[i] = *c;
                }
            }
            Mutation::Duplicate(a, n) => {
                let s = (a % len).min(chars.len());
                let e = (s + n).min(chars.len());
                let piece: Vec<char> = chars[s..e].to_vec();
                for (i, c) in piece.into_iter().enumerate() {
                    chars.insert(e + i, c);
                }
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn mutated_valid_topologies_never_panic() {
    let mut files = topology_files(&root().join("examples"));
    files.extend(topology_files(&root().join("tests/fixtures/valid")));
    let texts: Vec<(String, String)> = files
        .iter()
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(p).unwrap(),
            )
        })
        .collect();
    let mut r = runner(11, 1500);
    r.run(
        &(0..texts.len(), prop::collection::vec(mutation(), 1..6)),
        |(i, muts)| {
            let (name, text) = &texts[i];
            let mutated = apply(text, &muts);
            check_bytes(name, mutated.into_bytes());
            Ok(())
        },
    )
    .unwrap();
}

#[test]
fn hostile_inputs_get_errors() {
    let kinds = glassbox_nodes::builtin_kinds();
    let cases: Vec<(&str, String)> = vec![
        ("deep.json", "[".repeat(200_000) + &"]".repeat(200_000)),
        ("deep.yaml", "a:\n".to_string() + &"[".repeat(200_000)),
        ("bomb.yaml", {
            let mut s = String::from("a0: &a0 [x,x,x,x,x,x,x,x,x,x]\n");
            for i in 1..20 {
                s.push_str(&format!(
                    "a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n",
                    p = i - 1
                ));
            }
            s
        }),
        ("empty.json", String::new()),
        ("spaces.yaml", "   \n\n  ".into()),
        ("garbage.json", "\u{1}\u{2}\u{3}garbage".into()),
    ];
    for (name, text) in cases {
        let (t, diags) = validate(&Source::new(name, text), &kinds);
        assert!(t.is_none(), "{name} should be rejected");
        assert!(diags.iter().any(|d| d.is_error()), "{name}");
    }
}

/// CEL-ish text: identifiers, literals and operators the condition
/// language has, in random order, so most cases parse far enough to reach
/// the checker and many compile and run.
fn cel_text() -> impl Strategy<Value = String> {
    let tokens = prop::sample::select(vec![
        "input",
        "outputs",
        "labels",
        "input.question",
        "outputs.r.hits",
        "labels.route",
        ".contains(",
        ".startsWith(",
        ".endsWith(",
        ".matches(",
        "size(",
        "has(",
        "int(",
        "string(",
        "double(",
        "\"price\"",
        "'a'",
        "\"\\u00e9\"",
        "\"(a+)+$\"",
        "0",
        "1",
        "-1",
        "9223372036854775807",
        "1.5",
        "1e308",
        "true",
        "false",
        "null",
        "[",
        "]",
        "{",
        "}",
        "(",
        ")",
        ",",
        ":",
        "?",
        "+",
        "-",
        "*",
        "/",
        "%",
        "==",
        "!=",
        "<",
        ">=",
        "&&",
        "||",
        "!",
        ".",
        " in ",
        " ",
        "x",
        "\\",
        "\n",
    ]);
    let soup = prop::collection::vec(tokens, 1..14).prop_map(|t| t.concat());
    // Well-formed `a op b` shapes, so many cases reach evaluation with
    // edge values (overflow, division by zero, wrong types).
    let operand = prop::sample::select(vec![
        "input.question",
        "size(input.question)",
        "outputs.r.hits",
        "size(outputs.r.hits)",
        "input.x",
        "int(input.x)",
        "double(input.x)",
        "string(input.x)",
        "1",
        "0",
        "-1",
        "1.5",
        "'a'",
        "\"\"",
        "[1, 2]",
        "{'a': 1}",
        "true",
        "null",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615u",
        "input.question.contains('p')",
        "input.question.matches('^(a|aa)+$')",
        "labels.route",
    ]);
    let op = prop::sample::select(vec![
        "==", "!=", "<", ">=", "+", "-", "*", "/", "%", "&&", "||", " in ",
    ]);
    let shaped = (operand.clone(), op.clone(), operand.clone(), op, operand)
        .prop_map(|(a, o1, b, o2, c)| format!("({a} {o1} {b}) {o2} {c}"));
    prop_oneof![soup, shaped]
}

/// A request input with the fields conditions read, of random types.
fn input_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        prop::collection::vec(any::<char>(), 0..10)
            .prop_map(|c| serde_json::Value::from(c.into_iter().collect::<String>())),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(serde_json::Value::Array),
            prop::collection::vec(
                (prop::sample::select(vec!["question", "hits", "x"]), inner),
                0..3
            )
            .prop_map(|kv| serde_json::Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
            )),
        ]
    })
}

#[test]
fn cel_conditions_never_panic_when_parsed_or_evaluated() {
    use glassbox_topology::condition::Condition;
    let compiled = std::cell::Cell::new(0u32);
    let mut r = runner(23, 3000);
    r.run(
        &(cel_text(), input_json(), input_json()),
        |(text, input, hits)| {
            if let Ok(Condition::Expr(expr)) = Condition::parse(&text) {
                compiled.set(compiled.get() + 1);
                let _ = expr.read_paths();
                let mut outputs = serde_json::Map::new();
                outputs.insert("r".into(), serde_json::json!({ "hits": hits }));
                let labels = serde_json::Map::new();
                let _ = expr.evaluate(&input, &outputs, &labels);
                let _ = expr.evaluate_string(&input, &outputs, &labels);
            }
            Ok(())
        },
    )
    .unwrap();
    let compiled = compiled.get();
    println!("cel: 3000 cases, {compiled} compiled and evaluated");
    assert!(
        compiled > 1000,
        "only {compiled} of 3000 cases compiled: the generator misses CEL"
    );
}

/// Jinja-ish text over the variables a template node sees.
fn template_text() -> impl Strategy<Value = String> {
    let tokens = prop::sample::select(vec![
        "{{",
        "}}",
        "{%",
        "%}",
        "{#",
        "#}",
        " input.question ",
        " input ",
        " outputs ",
        " labels ",
        "|upper",
        "|length",
        "|join(',')",
        "|default('x')",
        "|tojson",
        "|safe",
        " if ",
        " else ",
        " endif ",
        " for x in input.question ",
        " endfor ",
        " set y = 1 ",
        " range(3) ",
        "x",
        "loop.index",
        "(",
        ")",
        "[",
        "]",
        "'",
        "\"",
        ".",
        ",",
        "+",
        "~",
        "*",
        "/",
        "%",
        "-",
        " is defined ",
        " not ",
        "1",
        "0",
        "é",
        "\n",
        "\\",
    ]);
    prop::collection::vec(tokens, 1..16).prop_map(|t| t.concat())
}

#[test]
fn templates_never_panic_and_every_run_leaves_a_trace() {
    use std::sync::Arc;

    use glassbox_engine::{BuildContext, Pipeline, PipelineOptions, RunOptions};

    let registry = glassbox_nodes::registry();
    let kinds = registry.kind_set();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ran = std::cell::Cell::new(0u32);
    let mut r = runner(29, 600);
    r.run(&(template_text(), input_json()), |(template, input)| {
        let topology = serde_json::json!({
            "topology_id": "fuzz",
            "version": "1.0.0",
            "nodes": [{
                "id": "t",
                "type": "template",
                "timeout_ms": 2000,
                "config": { "template": template }
            }]
        });
        let source = Source::new("fuzz.json", topology.to_string());
        let Ok(validated) = glassbox_topology::load_source(source, &kinds) else {
            return Ok(());
        };
        let topology = Arc::new(validated.topology);
        let cx = BuildContext::new(topology.clone());
        let Ok(pipeline) = Pipeline::build(topology, &registry, &cx, PipelineOptions::default())
        else {
            return Ok(());
        };
        let outcome = rt.block_on(pipeline.run(input, RunOptions::default()));
        // A failed render is an error with a complete trace, never a panic.
        prop_assert_eq!(outcome.trace.spans.len(), 1);
        prop_assert_eq!(outcome.trace.record.span_count, 1);
        ran.set(ran.get() + 1);
        Ok(())
    })
    .unwrap();
    let ran = ran.get();
    println!("templates: 600 cases, {ran} built and ran");
    assert!(
        ran > 50,
        "only {ran} of 600 templates were valid: the generator misses Jinja"
    );
}
