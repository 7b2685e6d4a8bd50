//! `glassbox graph`: draw a topology, from its file or, for a pipeline
//! Glassbox does not run (traces ingested over OTLP), as discovered from
//! its stored requests (`--discovered ID`).

use std::process::ExitCode;

use anyhow::Context;
use glassbox_ingest::discover::{Discovered, discover, drawing};
use glassbox_store::{FilterInput, ListQuery, Sort};
use glassbox_topology::render::{GraphFormat, render};

use super::common::load;
use super::store::{StoreArg, store_error};
use crate::exit::Coded;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// Mermaid flowchart (renders in GitHub Markdown and the dashboard).
    Mermaid,
    /// Graphviz DOT (`dot -Tsvg`).
    Dot,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 ok, 1 a store error, 2 usage, 69 the store cannot be \
                        reached, 78 an invalid topology, a bad store URL or no stored requests \
                        of the discovered topology."
)]
pub struct Args {
    /// Topology file (JSON or YAML; `-` for standard input).
    #[arg(required_unless_present = "discovered", conflicts_with = "discovered")]
    pub file: Option<String>,
    /// Draw the topology discovered from stored requests of this topology
    /// id (`{service.name}/{root span}` for ingested traces; see
    /// `glassbox trace list`): the nodes and edges its requests walked.
    #[arg(long, value_name = "TOPOLOGY_ID")]
    pub discovered: Option<String>,
    /// With `--discovered`: only requests of this version (`service.version`).
    #[arg(
        long = "topology-version",
        value_name = "VERSION",
        requires = "discovered"
    )]
    pub topology_version: Option<String>,
    /// With `--discovered`: the most recent requests read.
    #[arg(long, default_value_t = 1000, requires = "discovered")]
    pub limit: u32,
    #[command(flatten)]
    pub store: StoreArg,
    /// Graph language.
    #[arg(long, value_enum, default_value = "mermaid")]
    pub format: Format,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let format = match args.format {
        Format::Mermaid => GraphFormat::Mermaid,
        Format::Dot => GraphFormat::Dot,
    };
    if let Some(id) = &args.discovered {
        let found = discovered(&args, id)?;
        crate::out::emit(&drawing(&found).render(format))?;
        return Ok(ExitCode::SUCCESS);
    }
    let topology = load(args.file.as_deref().unwrap_or("-"))?;
    crate::out::emit(&render(&topology, format))?;
    Ok(ExitCode::SUCCESS)
}

fn discovered(args: &Args, id: &str) -> anyhow::Result<Discovered> {
    let mut store = args.store.open()?;
    let filter = FilterInput {
        topology: Some(id.to_string()),
        version: args.topology_version.clone(),
        ..FilterInput::default()
    }
    .parse(glassbox_trace::unix_micros_now())
    .map_err(|e| Coded::invalid(e.to_string()))?;
    let query = ListQuery {
        filter,
        sort: Sort::Recent,
        limit: args.limit.max(1),
    };
    let list = store.list(&query).map_err(store_error)?;
    if list.is_empty() {
        return Err(Coded::invalid(format!(
            "no stored requests of topology `{id}`{} (hint: `glassbox trace list` shows the topology ids stored; ingested ones are `{{service.name}}/{{root span}}`)",
            args.topology_version
                .as_ref()
                .map(|v| format!(" version `{v}`"))
                .unwrap_or_default()
        )));
    }
    let mut records = Vec::with_capacity(list.len());
    for summary in &list {
        let rid = summary
            .request_id
            .parse()
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("reading request {}", summary.request_id))?;
        if let Some(t) = store.get(rid).map_err(store_error)? {
            records.push(t.record);
        }
    }
    Ok(discover(id, &records))
}
