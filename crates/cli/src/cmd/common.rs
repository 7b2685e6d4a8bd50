//! Pieces shared by subcommands: loading topologies, `--format`, `--lang`.

use glassbox_topology::{KindSet, Topology, TopologyError};

use crate::exit::Coded;
use crate::out;

/// `--format`, defined with the output layer that acts on it.
pub use crate::out::OutputFormat;

/// `--lang`: the language of an explanation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum LangArg {
    #[default]
    En,
    Zh,
}

impl From<LangArg> for glassbox_trace::Lang {
    fn from(lang: LangArg) -> Self {
        match lang {
            LangArg::En => glassbox_trace::Lang::En,
            LangArg::Zh => glassbox_trace::Lang::Zh,
        }
    }
}

/// The node kinds this binary knows.
pub fn kinds() -> KindSet {
    glassbox_nodes::builtin_kinds()
}

/// Loads a topology or fails with its rendered diagnostics (exit 78).
pub fn load(path: &str) -> anyhow::Result<Topology> {
    match glassbox_topology::load_path(path, &kinds()) {
        Ok(v) => {
            if !v.report.diagnostics.is_empty() {
                out::diagnostics(&v.report);
            }
            Ok(v.topology)
        }
        Err(err) => Err(topology_error(err)),
    }
}

/// Turns a load error into an exit-coded error, printing diagnostics.
pub fn topology_error(err: TopologyError) -> anyhow::Error {
    match err {
        TopologyError::Invalid(report) => {
            out::diagnostics(&report);
            Coded::invalid(format!(
                "`{}` is not a valid topology ({})",
                report.source.name(),
                report.summary()
            ))
        }
        TopologyError::Io { path, source } => {
            Coded::invalid(format!("cannot read `{path}`: {source} (check the path)"))
        }
    }
}

/// The request input of `--question TEXT` (as `{"question": TEXT}`) or
/// `--input JSON`; a usage error when neither is given.
pub fn request_input(
    question: Option<&str>,
    input: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    match (question, input) {
        (Some(q), _) => Ok(serde_json::json!({ "question": q })),
        (None, Some(text)) => serde_json::from_str(text)
            .map_err(|e| Coded::invalid(format!("`--input` is not valid JSON: {e}"))),
        (None, None) => Err(anyhow::Error::new(Coded {
            code: crate::exit::USAGE,
            message: "give `--question TEXT` or `--input JSON`".into(),
        })),
    }
}

/// Parses one subcommand's flags on their own, `base` (the program name and
/// the flags every case needs) then `extra`: the tests of each subcommand
/// check how its flags resolve without going through the whole command tree.
#[cfg(test)]
pub fn parse_flags<A: clap::Args>(base: &[&str], extra: &[&str]) -> A {
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Cli<A: clap::Args> {
        #[command(flatten)]
        args: A,
    }

    Cli::<A>::parse_from(base.iter().chain(extra)).args
}
