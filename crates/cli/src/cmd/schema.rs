//! `glassbox schema`: print the topology format's JSON Schema.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Editors use it for completion: in YAML files add\n  # yaml-language-server: $schema=docs/topology.schema.json"
)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    crate::out::print_text(&glassbox_topology::schema::schema_text())?;
    Ok(ExitCode::SUCCESS)
}
