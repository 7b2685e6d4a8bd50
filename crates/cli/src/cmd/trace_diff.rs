//! `glassbox trace diff A B`: two stored requests side by side, with the
//! first divergence explained (the diff itself is `glassbox_trace::diff`;
//! this module only loads the two traces and draws the tables).

use std::fmt::Write as _;
use std::process::ExitCode;

use glassbox_trace::Lang;
use glassbox_trace::diff::{NodeSide, Side, TraceDiff};
use serde_json::json;

use super::common::{LangArg, OutputFormat};
use super::store::{StoreArg, load_trace, ms};
use crate::out;
use crate::out::table::{Align, Table};

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The first request id (say, a normal answer).
    pub a: String,
    /// The second request id (say, the bad answer).
    pub b: String,
    /// Language of the explanation.
    #[arg(long, value_enum, default_value_t = LangArg::En)]
    pub lang: LangArg,
    #[command(flatten)]
    pub store: StoreArg,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

pub fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let mut store = args.store.open()?;
    let a = load_trace(&mut *store, &args.a)?;
    let b = load_trace(&mut *store, &args.b)?;
    let diff = TraceDiff::between(
        Side {
            record: &a.record,
            spans: &a.spans,
        },
        Side {
            record: &b.record,
            spans: &b.spans,
        },
    );
    let lang = Lang::from(args.lang);
    match args.format {
        OutputFormat::Json => {
            let mut v = serde_json::to_value(&diff)?;
            v["explanation"] = json!(diff.explain(lang));
            v["lang"] = json!(lang);
            out::print_json(&v)?;
        }
        OutputFormat::Table => out::print_text(&render(&diff, lang))?,
    }
    Ok(ExitCode::SUCCESS)
}

fn us(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |u| ms(i64::try_from(u).unwrap_or(i64::MAX)))
}

fn tokens(s: &NodeSide) -> String {
    match (s.input_tokens, s.output_tokens) {
        (None, None) => "-".into(),
        (i, o) => format!(
            "{}/{}",
            i.map_or("-".into(), |v| v.to_string()),
            o.map_or("-".into(), |v| v.to_string())
        ),
    }
}

fn state(s: Option<&NodeSide>) -> String {
    let Some(s) = s else {
        return "(absent)".into();
    };
    let mut out = s.status.as_str().to_string();
    if let Some(l) = &s.label {
        let _ = write!(out, " [{l}]");
    }
    if let Some(g) = s.guard {
        let _ = write!(out, " guard {g}");
    }
    if s.attempts > 1 {
        let _ = write!(out, " ×{}", s.attempts);
    }
    if let Some(f) = &s.fallback {
        let _ = write!(out, " → {f}");
    }
    out
}

/// The terminal view: header, first divergence, nodes, edges, node data.
pub fn render(d: &TraceDiff, lang: Lang) -> String {
    let mut out = String::new();
    for (name, r) in [("A", &d.a), ("B", &d.b)] {
        let _ = writeln!(
            out,
            "{name}  {}  {}@{}  {}{}  {}  {} {}",
            r.request_id,
            r.topology_id,
            r.version,
            r.status.as_str(),
            if r.degraded { " (degraded)" } else { "" },
            ms(i64::try_from(r.duration_us).unwrap_or(i64::MAX)),
            r.cost.normalize(),
            r.currency,
        );
        let _ = writeln!(
            out,
            "   input   {}",
            glassbox_trace::truncate(&r.input_summary, 100)
        );
        let _ = writeln!(
            out,
            "   output  {}",
            glassbox_trace::truncate(&r.output_summary, 100)
        );
    }
    let _ = writeln!(out, "\nfirst divergence\n  {}", d.explain(lang));
    let rows = d
        .nodes
        .iter()
        .map(|r| {
            let (a, b) = (r.a.as_ref(), r.b.as_ref());
            vec![
                format!("{} {}", if r.differs { "≠" } else { " " }, r.node),
                r.kind.to_string(),
                state(a),
                state(b),
                us(a.and_then(|s| s.duration_us)),
                us(b.and_then(|s| s.duration_us)),
                a.map_or("-".into(), tokens),
                b.map_or("-".into(), tokens),
                a.map_or("-".into(), |s| s.cost.normalize().to_string()),
                b.map_or("-".into(), |s| s.cost.normalize().to_string()),
            ]
        })
        .collect();
    out.push_str("\nnodes\n");
    out.push_str(
        &Table::new(&[
            "  NODE", "TYPE", "A", "B", "A TOOK", "B TOOK", "A TOKENS", "B TOKENS", "A COST",
            "B COST",
        ])
        .indent("  ")
        .align(&[
            Align::Left,
            Align::Left,
            Align::Left,
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
        ])
        .rows(rows)
        .render(),
    );
    let edge = |e: Option<&glassbox_trace::diff::EdgeSide>| {
        e.map_or("(absent)".into(), |e| {
            format!("{} {}", if e.taken { "✓" } else { "·" }, e.why)
        })
    };
    let rows = d
        .edges
        .iter()
        .map(|e| {
            vec![
                format!(
                    "{} {} → {}",
                    if e.differs { "≠" } else { " " },
                    e.from,
                    e.to
                ),
                edge(e.a.as_ref()),
                edge(e.b.as_ref()),
            ]
        })
        .collect();
    out.push_str("\nedges\n");
    out.push_str(
        &Table::new(&["  EDGE", "A", "B"])
            .indent("  ")
            .rows(rows)
            .render(),
    );
    let changed: Vec<_> = d.nodes.iter().filter(|r| r.differs).collect();
    if !changed.is_empty() {
        out.push_str("\nnode data (nodes that differ)\n");
        for r in changed {
            let _ = writeln!(out, "  {}", r.node);
            for (name, side) in [("A", &r.a), ("B", &r.b)] {
                let text = |v: Option<&std::sync::Arc<str>>| {
                    v.map_or("-".to_string(), |t| glassbox_trace::truncate(t, 90))
                };
                let Some(s) = side else {
                    let _ = writeln!(out, "    {name}  (absent)");
                    continue;
                };
                let _ = writeln!(out, "    {name} in   {}", text(s.input_summary.as_ref()));
                let _ = writeln!(out, "    {name} out  {}", text(s.output_summary.as_ref()));
                if let Some(e) = &s.error {
                    let _ = writeln!(out, "    {name} err  {} [{}]", e.message, e.code);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_store::synth::{SynthRequest, build};

    #[test]
    fn draws_both_sides_and_the_divergence() {
        let (ra, sa) = build(&SynthRequest::new(1, 1_796_040_000_000_000));
        let mut direct = SynthRequest::new(2, 1_796_040_000_000_000);
        direct.retrieval = false;
        let (rb, sb) = build(&direct);
        let d = TraceDiff::between(
            Side {
                record: &ra,
                spans: &sa,
            },
            Side {
                record: &rb,
                spans: &sb,
            },
        );
        let text = render(&d, Lang::En);
        assert!(text.contains("first divergence"), "{text}");
        assert!(text.contains("only A ran `embed`, `retrieve`"), "{text}");
        assert!(text.contains("≠ route → embed"), "{text}");
        assert!(text.contains("A TOKENS"), "{text}");
        let zh = render(&d, Lang::Zh);
        assert!(zh.contains("只有 A 执行了"), "{zh}");
    }
}
