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
