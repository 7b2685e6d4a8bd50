//! `glassbox diff`: what changed between two versions of a topology.

use std::process::ExitCode;

use super::common::{OutputFormat, load};
use crate::exit;
use crate::out;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 compared (or no changes with --exit-code), 1 changes found with --exit-code, 78 invalid input, 2 usage."
)]
pub struct Args {
    /// The old version.
    pub old: String,
    /// The new version.
    pub new: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
    /// Exit with 1 when the topologies differ (like `git diff --exit-code`).
    #[arg(long)]
    pub exit_code: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let old = load(&args.old)?;
    let new = load(&args.new)?;
    let diff = glassbox_topology::diff::diff(&old.spec, &new.spec);
    match args.format {
        OutputFormat::Table => out::print_text(&diff.render())?,
        OutputFormat::Json => out::print_json(&diff)?,
    }
    let code = if args.exit_code && !diff.is_empty() {
        exit::FAILED
    } else {
        exit::OK
    };
    Ok(ExitCode::from(code))
}
