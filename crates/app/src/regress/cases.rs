//! Case files: what `glassbox test` runs and what it expects.
//!
//! A case file is YAML (or JSON) holding `cases:`, a list of requests with
//! expectations. It is read through the topology crate's spanned parser and
//! field decoder, so a mistake is reported like a topology mistake: every
//! problem at once, each at `file:line:column` with its field path, a
//! source snippet and a hint. Node ids are checked against the topology
//! under test (with a did-you-mean), regexes and JSON schemas are compiled
//! once here, so a case can only fail on what the pipeline did.

use std::collections::BTreeMap;

use glassbox_topology::decode::{Cx, Obj};
use glassbox_topology::diagnostic::did_you_mean;
use glassbox_topology::value::Kind;
use glassbox_topology::{Code, Diagnostic, Report, Source, Span, Topology, Value};
use rust_decimal::Decimal;

use glassbox_trace::GuardOutcome;

/// One case, read and checked.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    /// `file:line` of the case, for reports.
    pub location: String,
    pub input: serde_json::Value,
    pub expect: Expect,
}

/// What a case expects; every field is optional.
#[derive(Debug, Clone, Default)]
pub struct Expect {
    /// `ok`, `failed` or `cancelled` (default: `ok`).
    pub status: Option<String>,
    /// The nodes that ran, exactly, in path order.
    pub path: Option<Vec<String>>,
    /// Nodes that must have run.
    pub visits: Vec<String>,
    /// Nodes that must not have run.
    pub skips: Vec<String>,
    /// The label each listed node emitted.
    pub labels: BTreeMap<String, String>,
    /// Per guard node (`None`: every guard that judged), the outcome.
    pub guards: Vec<(Option<String>, GuardOutcome)>,
    pub output: OutputChecks,
    pub max_cost: Option<Decimal>,
    pub max_latency_ms: Option<f64>,
}

/// Checks on the answer.
#[derive(Debug, Clone, Default)]
pub struct OutputChecks {
    pub contains: Vec<String>,
    pub not_contains: Vec<String>,
    pub regex: Vec<regex::Regex>,
    pub json_schema: Option<serde_json::Value>,
    pub equals: Option<serde_json::Value>,
}

const CASE_FIELDS: &[&str] = &["name", "question", "input", "expect"];
const EXPECT_FIELDS: &[&str] = &[
    "status",
    "path",
    "visits",
    "skips",
    "labels",
    "guard",
    "output",
    "max_cost",
    "max_latency_ms",
];
const OUTPUT_FIELDS: &[&str] = &["contains", "not_contains", "regex", "json_schema", "equals"];
const OUTCOMES: &[GuardOutcome] = &[
    GuardOutcome::Passed,
    GuardOutcome::PassedAfterRerun,
    GuardOutcome::Replaced,
    GuardOutcome::Flagged,
    GuardOutcome::Rejected,
];

/// Reads a case file's text; the report lists every problem when it fails.
pub fn read(source: Source, topology: &Topology) -> Result<Vec<Case>, Report> {
    if source.text().trim().is_empty() {
        let d = Diagnostic::error(Code::Empty, None, "the case file is empty")
            .hint("write `cases:` with a list of cases (see docs/lifecycle.md)");
        return Err(Report::new(source, vec![d]));
    }
    let root = match glassbox_topology::parse::parse(&source) {
        Ok(v) => v,
        Err(diags) => return Err(Report::new(source, diags)),
    };
    let mut diags = Vec::new();
    let cases = {
        let mut cx = Cx::new(&mut diags);
        decode(&root, &source, topology, &mut cx)
    };
    if diags.iter().any(Diagnostic::is_error) {
        return Err(Report::new(source, diags));
    }
    Ok(cases)
}

fn decode(root: &Value, source: &Source, topology: &Topology, cx: &mut Cx<'_>) -> Vec<Case> {
    let Some(top) = Obj::expect(root, cx, "a case file") else {
        return Vec::new();
    };
    top.deny_unknown(cx, &["cases"]);
    let Some(items) = top.get("cases") else {
        top.missing(cx, "cases", "add `cases:` with a list of cases, each with `name`, `question` or `input`, and `expect`");
        return Vec::new();
    };
    let mut cx = cx.field("cases");
    let Kind::Seq(items) = &items.kind else {
        cx.error(
            Code::WrongType,
            items.span,
            format!("`cases` must be a list, found {}", items.type_name()),
            "write each case as a list item starting with `- name:`",
        );
        return Vec::new();
    };
    if items.is_empty() {
        cx.error(
            Code::InvalidValue,
            top.key_span("cases"),
            "`cases` is empty",
            "add at least one case",
        );
    }
    let mut seen: BTreeMap<String, Span> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let mut cx = cx.field(&format!("[{i}]"));
        let name = item.as_map().and_then(|m| m.get("name"));
        if let Some((name, span)) = name.and_then(|v| v.as_str().map(|s| (s, v.span))) {
            match seen.get(name) {
                Some(first) => {
                    let (line, _) = source.line_col(first.start);
                    cx.report(
                        Diagnostic::error(
                            Code::DuplicateId,
                            span,
                            format!("two cases are named `{name}`"),
                        )
                        .at(cx.path_of("name"))
                        .hint(format!(
                            "the first is on line {line}; give each case its own name"
                        )),
                    );
                }
                None => {
                    seen.insert(name.to_string(), span);
                }
            }
        }
        if let Some(case) = case(item, source, topology, &mut cx) {
            out.push(case);
        }
    }
    out
}

fn case(item: &Value, source: &Source, topology: &Topology, cx: &mut Cx<'_>) -> Option<Case> {
    let obj = Obj::expect(item, cx, "a case")?;
    obj.deny_unknown(cx, CASE_FIELDS);
    let name = obj.req_str(
        cx,
        "name",
        "give the case a short name, e.g. `name: pricing question`",
    );
    let input = match (obj.get("question"), obj.get("input")) {
        (Some(_), Some(v)) => {
            cx.error(
                Code::InvalidValue,
                v.span,
                "a case has both `question` and `input`",
                "keep one: `question: TEXT` is short for `input: {question: TEXT}`",
            );
            None
        }
        (Some(_), None) => obj
            .str(cx, "question")
            .map(|q| serde_json::json!({ "question": q.value })),
        (None, Some(v)) => Some(v.to_json()),
        (None, None) => {
            obj.missing(
                cx,
                "question",
                "give `question: TEXT` or `input: {...}` (the request input)",
            );
            None
        }
    };
    let expect = match obj.obj(cx, "expect") {
        Some(e) => expect(e, topology, &mut cx.field("expect")),
        // Without `expect`, a case passes when the request ends `ok`.
        None if obj.get("expect").is_none() => Some(Expect::default()),
        None => None,
    };
    let (line, _) = source.line_col(item.span.start);
    Some(Case {
        name: name?.value,
        location: format!("{}:{line}", source.name()),
        input: input?,
        expect: expect?,
    })
}

/// A node id the topology has, or a diagnostic with the closest one.
fn node(topology: &Topology, id: &str, span: Span, field: String, cx: &mut Cx<'_>) -> bool {
    if topology.node_id(id).is_some() {
        return true;
    }
    let ids: Vec<&str> = topology.nodes.iter().map(|n| n.id.as_str()).collect();
    let hint = did_you_mean(id, ids.iter().copied())
        .unwrap_or_else(|| format!("the topology's nodes are: {}", ids.join(", ")));
    cx.report(
        Diagnostic::error(
            Code::UnknownNode,
            span,
            format!("unknown node `{id}` (topology `{}`)", topology.id),
        )
        .at(field)
        .hint(hint),
    );
    false
}

fn node_list(
    obj: Obj<'_>,
    name: &str,
    topology: &Topology,
    cx: &mut Cx<'_>,
) -> Option<Vec<String>> {
    let items = obj.str_list(cx, name)?;
    let mut ok = true;
    for (i, s) in items.iter().enumerate() {
        ok &= node(topology, s, s.span, cx.path_of(&format!("{name}[{i}]")), cx);
    }
    ok.then(|| items.into_iter().map(|s| s.value).collect())
}

fn outcome(value: &Value, field: String, cx: &mut Cx<'_>) -> Option<GuardOutcome> {
    let names: Vec<&str> = OUTCOMES.iter().map(|o| o.as_str()).collect();
    let found = value
        .as_str()
        .and_then(|s| OUTCOMES.iter().find(|o| o.as_str() == s).copied());
    if found.is_none() {
        let given = value
            .as_str()
            .map_or_else(|| value.type_name().to_string(), |s| format!("`{s}`"));
        let hint = value
            .as_str()
            .and_then(|s| did_you_mean(s, names.iter().copied()))
            .unwrap_or_else(|| format!("use one of: {}", names.join(", ")));
        cx.report(
            Diagnostic::error(
                Code::InvalidValue,
                value.span,
                format!("{given} is not a guard outcome"),
            )
            .at(field)
            .hint(hint),
        );
    }
    found
}

fn expect(obj: Obj<'_>, topology: &Topology, cx: &mut Cx<'_>) -> Option<Expect> {
    let before = cx.error_count();
    obj.deny_unknown(cx, EXPECT_FIELDS);
    let mut e = Expect::default();
    if let Some(s) = obj.str(cx, "status") {
        if glassbox_store::STATUSES.contains(&s.value.as_str()) {
            e.status = Some(s.value);
        } else {
            cx.report(
                Diagnostic::error(
                    Code::InvalidValue,
                    s.span,
                    format!("`{}` is not a status", s.value),
                )
                .at(cx.path_of("status"))
                .hint("use ok, failed or cancelled"),
            );
        }
    }
    if obj.get("path").is_some() {
        e.path = node_list(obj, "path", topology, cx);
    }
    if obj.get("visits").is_some() {
        e.visits = node_list(obj, "visits", topology, cx).unwrap_or_default();
    }
    if obj.get("skips").is_some() {
        e.skips = node_list(obj, "skips", topology, cx).unwrap_or_default();
    }
    if let Some(labels) = obj.obj(cx, "labels") {
        for (key, value) in labels.map.iter() {
            let field = cx.path_of(&format!("labels.{}", key.name));
            node(topology, &key.name, key.span, field.clone(), cx);
            match value.as_str() {
                Some(l) => {
                    e.labels.insert(key.name.clone(), l.to_string());
                }
                None => cx.report(
                    Diagnostic::error(
                        Code::WrongType,
                        value.span,
                        format!("the label of `{}` must be a string", key.name),
                    )
                    .at(field)
                    .hint("write `labels: { route: pricing }`"),
                ),
            }
        }
    }
    if let Some(g) = obj.get("guard") {
        match &g.kind {
            Kind::Map(map) => {
                for (key, value) in map.iter() {
                    let field = cx.path_of(&format!("guard.{}", key.name));
                    node(topology, &key.name, key.span, field.clone(), cx);
                    if let Some(o) = outcome(value, field, cx) {
                        e.guards.push((Some(key.name.clone()), o));
                    }
                }
            }
            _ => {
                if let Some(o) = outcome(g, cx.path_of("guard"), cx) {
                    e.guards.push((None, o));
                }
            }
        }
    }
    if let Some(out) = obj.obj(cx, "output") {
        e.output = output(out, &mut cx.field("output"));
    }
    e.max_cost = obj.get("max_cost").and_then(|v| {
        let d = v
            .as_number()
            .and_then(|n| n.as_decimal())
            .filter(|d| !d.is_sign_negative());
        if d.is_none() {
            cx.report(
                Diagnostic::error(
                    Code::WrongType,
                    v.span,
                    "`max_cost` must be a number of zero or more",
                )
                .at(cx.path_of("max_cost"))
                .hint("write it in the topology's currency, e.g. `max_cost: 0.001`"),
            );
        }
        d
    });
    e.max_latency_ms = obj
        .number(cx, "max_latency_ms", 0.0, 86_400_000.0)
        .map(|n| n.value);
    (cx.error_count() == before).then_some(e)
}

/// A string or a list of strings.
fn strings(obj: Obj<'_>, name: &str, cx: &mut Cx<'_>) -> Vec<(String, Span)> {
    match obj.get(name).map(|v| &v.kind) {
        None => Vec::new(),
        Some(Kind::Str(s)) => vec![(s.clone(), obj.get(name).map_or(obj.span, |v| v.span))],
        Some(Kind::Seq(_)) => obj
            .str_list(cx, name)
            .unwrap_or_default()
            .into_iter()
            .map(|s| (s.value, s.span))
            .collect(),
        Some(_) => {
            let v = obj.get(name).map_or(obj.span, |v| v.span);
            cx.report(
                Diagnostic::error(
                    Code::WrongType,
                    v,
                    format!("`{name}` must be a string or a list of strings"),
                )
                .at(cx.path_of(name))
                .hint(format!("write `{name}: TEXT` or `{name}: [TEXT, ...]`")),
            );
            Vec::new()
        }
    }
}

fn output(obj: Obj<'_>, cx: &mut Cx<'_>) -> OutputChecks {
    obj.deny_unknown(cx, OUTPUT_FIELDS);
    let mut out = OutputChecks {
        contains: strings(obj, "contains", cx)
            .into_iter()
            .map(|s| s.0)
            .collect(),
        not_contains: strings(obj, "not_contains", cx)
            .into_iter()
            .map(|s| s.0)
            .collect(),
        ..OutputChecks::default()
    };
    for (pattern, span) in strings(obj, "regex", cx) {
        match regex::Regex::new(&pattern) {
            Ok(r) => out.regex.push(r),
            Err(err) => {
                let first = err.to_string();
                let last = first
                    .lines()
                    .last()
                    .unwrap_or("invalid pattern")
                    .trim()
                    .trim_start_matches("error: ")
                    .to_string();
                cx.report(
                    Diagnostic::error(Code::InvalidValue, span, format!("the regex does not compile: {last}"))
                        .at(cx.path_of("regex"))
                        .hint("Rust regex syntax (https://docs.rs/regex); quote it with single quotes in YAML"),
                );
            }
        }
    }
    if let Some(schema) = obj.get("json_schema") {
        let json = schema.to_json();
        match glassbox_nodes::schema_subset::check_schema(&json, "json_schema") {
            Ok(()) => out.json_schema = Some(json),
            Err(message) => cx.report(
                Diagnostic::error(Code::InvalidValue, schema.span, message)
                    .at(cx.path_of("json_schema"))
                    .hint("the supported JSON Schema keywords are listed in docs/lifecycle.md"),
            ),
        }
    }
    out.equals = obj.get("equals").map(Value::to_json);
    out
}
