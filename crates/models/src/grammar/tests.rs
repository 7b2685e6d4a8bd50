use serde_json::json;

use super::*;

fn gbnf(schema: Value) -> String {
    json_schema_to_gbnf(&schema).unwrap_or_else(|e| panic!("{e}"))
}

fn rule<'a>(g: &'a str, name: &str) -> &'a str {
    g.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ::= ")))
        .unwrap_or_else(|| panic!("no rule `{name}` in\n{g}"))
}

#[test]
fn an_object_writes_required_properties_always_and_optional_ones_maybe() {
    let g = gbnf(json!({
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "unit": {"enum": ["c", "f"]}
        },
        "required": ["city"]
    }));
    assert_eq!(rule(&g, "root"), "json");
    let obj = rule(&g, "json");
    // `city` first (required), then `days` and `unit`, each optional.
    assert_eq!(
        obj,
        r#""{" ws "\"city\"" ws ":" ws string (ws "," ws "\"days\"" ws ":" ws integer)? (ws "," ws "\"unit\"" ws ":" ws ("\"c\"" | "\"f\""))? ws "}""#
    );
    for prim in ["ws", "string", "char", "integer"] {
        rule(&g, prim);
    }
    assert!(
        !g.contains("boolean ::="),
        "unused primitives are left out:\n{g}"
    );
}

#[test]
fn leading_optional_properties_may_each_be_the_first_one_written() {
    let g = gbnf(json!({
        "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "number"}},
        "required": ["b"]
    }));
    let obj = rule(&g, "json");
    assert!(
        obj.contains(r#"("\"a\"" ws ":" ws boolean ws "," ws "\"b\"" ws ":" ws null (ws "," ws "\"c\"" ws ":" ws number)? | "\"b\"" ws ":" ws null (ws "," ws "\"c\"" ws ":" ws number)?)"#),
        "{obj}"
    );
    let none = gbnf(json!({"properties": {"a": {"type": "boolean"}}}));
    assert!(
        rule(&none, "json").contains(r#"("\"a\"" ws ":" ws boolean)?"#),
        "all optional: may be empty\n{none}"
    );
}

#[test]
fn nested_objects_and_arrays_get_their_own_rules() {
    let g = gbnf(json!({
        "type": "object",
        "properties": {
            "order": {
                "type": "object",
                "properties": {"id": {"type": "string", "minLength": 3, "maxLength": 8}},
                "required": ["id"]
            },
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}
        },
        "required": ["order", "tags"]
    }));
    assert_eq!(
        rule(&g, "json-order"),
        r#""{" ws "\"id\"" ws ":" ws "\"" char{3,8} "\"" ws "}""#
    );
    assert_eq!(rule(&g, "json-tags-item"), "string");
    assert_eq!(
        rule(&g, "json-tags"),
        r#""[" ws json-tags-item (ws "," ws json-tags-item){0,2} ws "]""#
    );
    let any = gbnf(json!({"type": "array"}));
    assert_eq!(
        rule(&any, "json"),
        r#""[" ws (value (ws "," ws value)*)? ws "]""#
    );
    for prim in ["value", "object", "array", "number", "boolean", "null"] {
        rule(&any, prim);
    }
}

#[test]
fn alternatives_consts_and_type_lists() {
    let g = gbnf(json!({
        "anyOf": [
            {"type": "object", "properties": {"name": {"const": "search"}}, "required": ["name"]},
            {"type": "object", "properties": {"answer": {"type": ["string", "null"]}}, "required": ["answer"]}
        ]
    }));
    assert_eq!(rule(&g, "root"), "(json | json-2)");
    assert!(rule(&g, "json").contains(r#""\"search\"""#), "{g}");
    assert!(rule(&g, "json-2").contains("(string | null)"), "{g}");
    assert_eq!(rule(&gbnf(json!({"const": 3})), "root"), r#""3""#);
    assert_eq!(
        rule(&gbnf(json!({"enum": ["a\"b", 1, null]})), "root"),
        r#"("\"a\\\"b\"" | "1" | "null")"#
    );
}

#[test]
fn an_empty_schema_or_true_admits_any_json() {
    assert_eq!(rule(&gbnf(json!({})), "root"), "value");
    assert_eq!(rule(&gbnf(json!(true)), "root"), "value");
    let closed = gbnf(json!({"type": "object", "additionalProperties": false}));
    assert_eq!(rule(&closed, "root"), r#""{" ws "}""#);
    let open = gbnf(json!({"type": "object", "description": "anything"}));
    assert_eq!(rule(&open, "root"), "object");
}

#[test]
fn unsupported_keywords_are_named_with_their_location() {
    let e = json_schema_to_gbnf(&json!({
        "type": "object",
        "properties": {"when": {"type": "string", "pattern": "^[0-9]+$"}}
    }))
    .unwrap_err();
    assert_eq!(e.path, "$.properties.when");
    assert!(e.message.contains("`pattern` is not supported"), "{e}");
    assert!(e.message.contains("hint:"), "{e}");
    let e = json_schema_to_gbnf(&json!({"allOf": [{}]})).unwrap_err();
    assert!(
        e.to_string().starts_with("$: JSON Schema keyword `allOf`"),
        "{e}"
    );
    let e = json_schema_to_gbnf(&json!({"$ref": "#/defs/x"})).unwrap_err();
    assert!(e.message.contains("`$ref`"), "{e}");
}

#[test]
fn malformed_schemas_are_refused_with_their_location() {
    let cases = [
        (json!(false), "$", "admits no value"),
        (json!(3), "$", "must be an object"),
        (json!({"type": "float"}), "$.type", "unknown type `float`"),
        (json!({"type": []}), "$.type", "non-empty list"),
        (json!({"enum": []}), "$.enum", "non-empty array"),
        (json!({"anyOf": {}}), "$.anyOf", "non-empty array"),
        (
            json!({"properties": {"a": {}}, "required": ["b"]}),
            "$.required",
            "names `b`",
        ),
        (
            json!({"type": "array", "items": [{}, {}]}),
            "$.items",
            "tuple `items`",
        ),
        (
            json!({"type": "array", "minItems": 3, "maxItems": 2}),
            "$",
            "below `minItems`",
        ),
        (
            json!({"type": "string", "maxLength": 100000}),
            "$.maxLength",
            "from 0 to 256",
        ),
        (
            json!({"properties": {"x": {"properties": {"y": {"type": "date"}}}}}),
            "$.properties.x.properties.y.type",
            "unknown type `date`",
        ),
    ];
    for (schema, path, words) in cases {
        let e = json_schema_to_gbnf(&schema).unwrap_err();
        assert_eq!(e.path, path, "{schema}: {e}");
        assert!(e.message.contains(words), "{schema}: {e}");
    }
}

#[test]
fn literals_escape_what_gbnf_would_read_specially() {
    assert_eq!(literal("a\"b\\c\nd\te"), r#""a\"b\\c\nd\te""#);
    assert_eq!(literal("\u{1}"), r#""\x01""#);
    assert_eq!(literal("héllo 你好"), "\"héllo 你好\"");
}

#[test]
fn rule_names_are_safe_and_unique() {
    let g = gbnf(json!({
        "type": "object",
        "properties": {
            "a b": {"type": "object", "properties": {"x": {"type": "integer"}}},
            "a-b": {"type": "object", "properties": {"y": {"type": "integer"}}}
        }
    }));
    let names: Vec<&str> = g.lines().filter_map(|l| l.split(" ::= ").next()).collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(names.len(), unique.len(), "{g}");
    assert!(
        names
            .iter()
            .all(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')),
        "{g}"
    );
}

#[test]
fn integers_are_written_without_a_negative_zero_and_numbers_keep_their_sign() {
    let g = gbnf(json!({"type": "object", "properties": {
        "n": {"type": "integer"}, "x": {"type": "number"}
    }, "required": ["n", "x"]}));
    // `-0` is read as a float by serde_json, so an `integer` must not be
    // written that way; `0`, `-7` and sixteen digits still can.
    assert_eq!(rule(&g, "integer"), r#""0" | "-"? [1-9] [0-9]{0,15}"#);
    assert!(
        rule(&g, "number").starts_with(r#""-"? ([0-9] | [1-9] [0-9]{1,15})"#),
        "{g}"
    );
    assert!(!rule(&g, "number").contains("integer"), "{g}");
}
