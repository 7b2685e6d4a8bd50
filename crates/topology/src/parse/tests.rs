//! Parser tests: both formats, spans, limits, scalar resolution.

use super::builder::resolve_plain;
use super::*;
use crate::value::Kind;

fn yaml(text: &str) -> Result<Value, Vec<Diagnostic>> {
    parse(&Source::new("t.yaml", text))
}

fn json(text: &str) -> Result<Value, Vec<Diagnostic>> {
    parse(&Source::new("t.json", text))
}

#[test]
fn json_and_yaml_give_the_same_tree_shape() {
    let a = json(r#"{"a": [1, "x", true, null, 0.5]}"#)
        .unwrap()
        .to_json();
    let b = yaml("a: [1, x, true, ~, 0.5]").unwrap().to_json();
    assert_eq!(a, b);
}

#[test]
fn compact_json_keys_parse() {
    let v = json(r#"{"id":"route","n":{"k":1}}"#).unwrap();
    assert_eq!(v.to_json()["n"]["k"], 1);
}

#[test]
fn spans_point_at_values() {
    let src = Source::new("t.yaml", "a: 1\nb:\n  c: hello\n");
    let v = parse(&src).unwrap();
    let c = v
        .as_map()
        .unwrap()
        .get("b")
        .unwrap()
        .as_map()
        .unwrap()
        .get("c")
        .unwrap();
    assert_eq!(src.line_col(c.span.start), (3, 6));
    let j = Source::new("t.json", "{\n  \"a\": {\"b\": \"x\"}\n}");
    let v = parse(&j).unwrap();
    let b = v
        .as_map()
        .unwrap()
        .get("a")
        .unwrap()
        .as_map()
        .unwrap()
        .get("b")
        .unwrap();
    assert_eq!(j.line_col(b.span.start), (2, 14));
}

#[test]
fn quoted_scalars_stay_strings() {
    let v = yaml("a: '1'\nb: \"true\"\nc: !!str 2").unwrap().to_json();
    assert_eq!(v["a"], "1");
    assert_eq!(v["b"], "true");
    assert_eq!(v["c"], "2");
}

#[test]
fn duplicate_keys_are_errors() {
    let err = yaml("a: 1\na: 2").unwrap_err();
    assert_eq!(err[0].code, Code::DuplicateKey);
    assert_eq!(err[0].related.len(), 1);
}

#[test]
fn alias_bomb_is_bounded() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let p = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    let err = yaml(&text).unwrap_err();
    assert_eq!(err[0].code, Code::TooLarge);
}

#[test]
fn deep_nesting_is_bounded() {
    let deep = "[".repeat(100_000);
    assert_eq!(yaml(&deep).unwrap_err()[0].code, Code::TooDeep);
    let closed = "[".repeat(100_000) + &"]".repeat(100_000);
    assert_eq!(json(&closed).unwrap_err()[0].code, Code::TooDeep);
    assert_eq!(json(&deep).unwrap_err()[0].code, Code::SyntaxError);
    let deep_map = "{\"a\":".repeat(70) + "1" + &"}".repeat(70);
    assert_eq!(json(&deep_map).unwrap_err()[0].code, Code::TooDeep);
}

#[test]
fn empty_and_binary_inputs_are_errors() {
    assert_eq!(yaml("").unwrap_err()[0].code, Code::Empty);
    assert_eq!(yaml("# only a comment\n").unwrap_err()[0].code, Code::Empty);
    assert_eq!(yaml("a\0b").unwrap_err()[0].code, Code::NotText);
    assert_eq!(
        decode("x", vec![0xff, 0xfe, 0x00], None).unwrap_err().code,
        Code::NotText
    );
}

#[test]
fn json_syntax_errors_have_positions() {
    let src = Source::new("t.json", "{\n  \"a\": 1,\n}");
    let err = parse(&src).unwrap_err();
    assert_eq!(err[0].code, Code::SyntaxError);
    let span = err[0].span.unwrap();
    assert_eq!(src.line_col(span.start).0, 3);
}

#[test]
fn plain_scalar_resolution() {
    assert!(matches!(resolve_plain("12"), Kind::Number(_)));
    assert!(matches!(resolve_plain("-1.5e3"), Kind::Number(_)));
    assert!(matches!(resolve_plain("1.2.3"), Kind::Str(_)));
    assert!(matches!(resolve_plain("e5"), Kind::Str(_)));
    assert!(matches!(resolve_plain("0x1F"), Kind::Number(_)));
}
