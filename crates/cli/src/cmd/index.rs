//! `glassbox index`: build a vector index from a directory of documents, and
//! query it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use glassbox_models::embed::{EmbedError, Embedder, EmbedderOptions};
use glassbox_models::index::{BuildProgress, IndexError, VectorIndex, build_index};

use crate::exit::{Coded, INVALID, UNAVAILABLE};
use crate::out::{self, progress};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Split the Markdown and text files under DIR into chunks, embed them with
    /// the local MiniLM model and write a vector index.
    Build {
        /// Directory of documents (.md, .markdown, .txt; searched recursively).
        #[arg(value_name = "DIR")]
        docs: PathBuf,
        /// Index directory to write.
        #[arg(long, value_name = "INDEX")]
        out: PathBuf,
        /// Models directory [default: $GLASSBOX_MODELS, else ~/.cache/glassbox/models]
        #[arg(long, value_name = "DIR")]
        models: Option<PathBuf>,
    },
    /// Search an index: print the best chunks for a query.
    Search {
        /// Index directory written by `glassbox index build`.
        #[arg(value_name = "INDEX")]
        index: PathBuf,
        /// The query text.
        query: String,
        /// How many hits to return.
        #[arg(long, default_value_t = 5)]
        top_k: usize,
        /// Drop hits scoring below this cosine similarity.
        #[arg(long, default_value_t = 0.0)]
        min_score: f32,
        /// Models directory [default: $GLASSBOX_MODELS, else ~/.cache/glassbox/models]
        #[arg(long, value_name = "DIR")]
        models: Option<PathBuf>,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Build { docs, out, models } => build(docs, out, models),
        Command::Search {
            index,
            query,
            top_k,
            min_score,
            models,
        } => search(index, &query, top_k, min_score, models),
    }
}

fn load_embedder(models: Option<PathBuf>) -> anyhow::Result<Embedder> {
    let dir = glassbox_models::minilm_dir(&models.unwrap_or_else(glassbox_models::models_dir));
    Embedder::load(&dir, EmbedderOptions::default()).map_err(|err| match err {
        EmbedError::ModelMissing { .. } => anyhow::Error::new(Coded {
            code: UNAVAILABLE,
            message: err.to_string(),
        }),
        other => anyhow::Error::new(other)
            .context(format!("loading the embedder from `{}`", dir.display())),
    })
}

fn index_error(err: IndexError) -> anyhow::Error {
    match err {
        IndexError::NoDocuments { .. }
        | IndexError::Empty { .. }
        | IndexError::NotFound { .. }
        | IndexError::Corrupt { .. }
        | IndexError::InvalidQuery(_) => anyhow::Error::new(Coded {
            code: INVALID,
            message: err.to_string(),
        }),
        other => anyhow::Error::new(other),
    }
}

fn build(docs: PathBuf, out: PathBuf, models: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    // Before the embedding model loads: a mistyped folder is said at once.
    if !docs.is_dir() {
        return Err(Coded::invalid(format!(
            "`{}` is not a folder (hint: give the folder that holds the Markdown or text documents, e.g. examples/rag-chat/kb)",
            docs.display()
        )));
    }
    let embedder = load_embedder(models)?;
    // Its length is set once the documents are chunked.
    let bar = progress::events(Some(0));
    bar.set_style(progress::style(
        "{msg:>10} {bar:30} {pos}/{len} chunks {per_sec} eta {eta}",
        false,
    ));
    bar.set_message("embedding");
    let summary = build_index(&docs, &embedder, &out, &mut |event| match event {
        BuildProgress::Chunked { chunks, .. } => bar.set_length(chunks as u64),
        BuildProgress::Embedded { done, .. } => bar.set_position(done as u64),
        BuildProgress::Indexing => bar.set_message("indexing"),
        BuildProgress::Saved { .. } => {}
    });
    bar.finish_and_clear();
    let summary = summary
        .map_err(index_error)
        .with_context(|| format!("building an index of `{}`", docs.display()))?;
    out::print_text(&format!(
        "indexed {} documents as {} chunks ({}-d, {}) into {}\n",
        summary.documents,
        summary.chunks,
        summary.dimensions,
        summary.embedder,
        summary.path.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}

fn search(
    index: PathBuf,
    query: &str,
    top_k: usize,
    min_score: f32,
    models: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let loaded = VectorIndex::load(&index).map_err(index_error)?;
    let embedder = load_embedder(models)?;
    if let Some(built_with) = loaded.embedder()
        && built_with != embedder.version()
    {
        out::warn(&format!(
            "the index was built with `{built_with}`, the query is embedded with `{}`",
            embedder.version()
        ));
    }
    let vector = embedder.embed_one(query).context("embedding the query")?;
    let hits = loaded
        .search(&vector, top_k, min_score)
        .map_err(index_error)?;
    let mut text = String::new();
    for hit in &hits {
        let snippet: String = hit.text.chars().take(100).collect();
        text.push_str(&format!(
            "{:.3}  {}  ({})  {}\n",
            hit.score,
            hit.title,
            hit.chunk_id,
            snippet.replace('\n', " ")
        ));
    }
    if hits.is_empty() {
        text.push_str("no hits\n");
    }
    out::print_text(&text)?;
    Ok(ExitCode::SUCCESS)
}
