//! `glassbox doctor`: what to run when something is wrong.
//!
//! Flags → the checks of the application layer
//! (`glassbox_app::doctor::diagnose`) → one report, as a table or JSON.
//! Exit 0 when every check passes, 1 otherwise.

use std::path::PathBuf;
use std::process::ExitCode;

use glassbox_app::doctor::{Check, DoctorOptions, Status, diagnose, failed};

use super::common::OutputFormat;
use super::store::StoreArg;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Models directory [default: $GLASSBOX_MODELS, else ~/.cache/glassbox/models]
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArg,
    /// CPU threads for the generation and the embedding [default: one per physical core].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = DoctorOptions {
        models: args
            .models
            .clone()
            .unwrap_or_else(glassbox_models::models_dir),
        store: args.store.store.as_deref(),
        threads: args.threads,
    };
    let checks = diagnose(&options);
    let failed = failed(&checks);
    match args.format {
        OutputFormat::Json => crate::out::print_json(&serde_json::json!({
            "ok": failed == 0,
            "checks": checks,
        }))?,
        OutputFormat::Table => crate::out::print_text(&table(&checks, failed))?,
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::FAILED)
    })
}

fn table(checks: &[Check], failed: usize) -> String {
    let mut out = String::new();
    for c in checks {
        let mark = match c.status {
            Status::Ok => "ok  ",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!("[{mark}] {}\n", c.name));
        for d in &c.details {
            out.push_str(&format!("       {d}\n"));
        }
        if let Some(hint) = &c.hint {
            out.push_str(&format!("       hint: {hint}\n"));
        }
    }
    out.push('\n');
    if failed == 0 {
        out.push_str(&format!("all {} checks passed\n", checks.len()));
    } else {
        out.push_str(&format!("{failed} of {} checks failed\n", checks.len()));
    }
    out
}
