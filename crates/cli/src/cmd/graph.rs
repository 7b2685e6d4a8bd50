//! `glassbox graph`: draw a topology.

use std::process::ExitCode;

use glassbox_topology::render::{GraphFormat, render};

use super::common::load;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// Mermaid flowchart (renders in GitHub Markdown and the dashboard).
    Mermaid,
    /// Graphviz DOT (`dot -Tsvg`).
    Dot,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Topology file (JSON or YAML; `-` for standard input).
    pub file: String,
    /// Graph language.
    #[arg(long, value_enum, default_value = "mermaid")]
    pub format: Format,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let topology = load(&args.file)?;
    let format = match args.format {
        Format::Mermaid => GraphFormat::Mermaid,
        Format::Dot => GraphFormat::Dot,
    };
    print!("{}", render(&topology, format));
    Ok(ExitCode::SUCCESS)
}
