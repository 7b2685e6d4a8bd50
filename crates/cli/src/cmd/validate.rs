//! `glassbox validate`: check topology files and report every problem.

use std::process::ExitCode;

use glassbox_topology::{Report, TopologyError};
use serde_json::json;

use super::common::{OutputFormat, kinds};
use crate::exit;
use crate::out::{self, color};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 all files valid, 78 a file is invalid or unreadable, 2 usage."
)]
pub struct Args {
    /// Topology files (JSON or YAML; `-` reads standard input and sniffs the format).
    #[arg(required_unless_present = "list_kinds")]
    pub files: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
    /// List the node kinds this build knows, with what they do.
    #[arg(long)]
    pub list_kinds: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let kinds = kinds();
    if args.list_kinds {
        let list: String = kinds
            .iter()
            .map(|k| format!("{:<14} {}\n", k.name(), k.summary()))
            .collect();
        out::print_text(&list)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut ok = true;
    let mut results = Vec::new();
    for file in &args.files {
        let outcome = glassbox_topology::load_path(file, &kinds);
        let (report, summary): (Option<Report>, Option<String>) = match outcome {
            Ok(v) => {
                let t = &v.topology;
                let line = format!(
                    "{}: {} v{}, {} nodes, {} edges ({} warnings)",
                    file,
                    t.id,
                    t.version,
                    t.nodes.len(),
                    t.edges.len(),
                    v.report.warning_count()
                );
                (Some(v.report), Some(line))
            }
            Err(TopologyError::Invalid(report)) => {
                ok = false;
                (Some(*report), None)
            }
            Err(TopologyError::Io { path, source }) => {
                ok = false;
                match args.format {
                    OutputFormat::Json => results.push(json!({
                        "file": path, "valid": false,
                        "diagnostics": [{"file": path, "code": "io", "severity": "error",
                            "message": format!("cannot read `{path}`: {source}"), "hint": "check the path"}]
                    })),
                    OutputFormat::Table => out::status(&format!(
                        "error: cannot read `{path}`: {source}\n  hint: check the path"
                    )),
                }
                continue;
            }
        };
        let Some(report) = report else { continue };
        match args.format {
            OutputFormat::Json => results.push(json!({
                "file": file,
                "valid": !report.has_errors(),
                "errors": report.error_count(),
                "warnings": report.warning_count(),
                "diagnostics": report.to_json(),
            })),
            OutputFormat::Table => {
                let verdict = match summary {
                    Some(line) => format!("ok  {line}\n"),
                    None => format!("invalid  {}: {}\n", file, report.summary()),
                };
                out::print_text(&(report.render(color(true)) + &verdict))?;
            }
        }
    }
    if args.format == OutputFormat::Json {
        out::print_json(&results)?;
    }
    Ok(ExitCode::from(if ok { exit::OK } else { exit::INVALID }))
}
