//! The one output layer of the `glassbox` command.
//!
//! A command's shape is args → resolved configuration → work (library
//! code) → output, and everything it prints goes through here:
//!
//! - **results** to standard output, as the `--format` asks: [`Out::result`]
//!   writes JSON (pretty, one trailing newline) or the text a renderer
//!   builds (tables from [`table`]); a reader that stopped reading
//!   (`glassbox … | head`) ends the output quietly instead of panicking;
//! - **progress** on standard error ([`progress`]), only for text output
//!   on a terminal, so JSON runs and pipes stay quiet;
//! - **warnings, status lines and diagnostics** on standard error
//!   ([`warn`], [`status`], [`diagnostics`]), coloured only on a terminal
//!   without `NO_COLOR`;
//! - **errors** on standard error, once, in `main` ([`error`]), with the
//!   exit code the error carries (`crate::exit`).
//!
//! Why one layer: which stream a line goes to, whether it is coloured and
//! what JSON looks like were decided in each command; here they are
//! decided once, and a command's work never prints.

pub mod progress;
pub mod table;

use std::io::{IsTerminal, Write};

use serde::Serialize;
// Standard error never fails: a closed or full stderr (`glassbox diff a.yaml
// b.yaml 2>&1 | head -1`) drops the text, where `eprint!` would panic and
// turn the command's exit code into 101.
use glassbox_app::console::write_err as emit_err;

/// `--format` for commands that print either tables or JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum OutputFormat {
    /// Human-readable text.
    #[default]
    Table,
    /// Machine-readable JSON.
    Json,
}

/// Where a command's result goes, and in which format.
#[derive(Debug, Clone, Copy)]
pub struct Out {
    format: OutputFormat,
}

impl Out {
    /// Output in `format` (the command's `--format`).
    pub fn new(format: OutputFormat) -> Self {
        Out { format }
    }

    /// Whether the result is JSON.
    pub fn json(&self) -> bool {
        self.format == OutputFormat::Json
    }

    /// Whether progress may be shown: text output and a terminal on
    /// standard error.
    pub fn shows_progress(&self) -> bool {
        !self.json() && std::io::stderr().is_terminal()
    }

    /// Writes a result: `value` as pretty JSON, or the text `render` makes.
    pub fn result<T: Serialize + ?Sized>(
        &self,
        value: &T,
        render: impl FnOnce() -> String,
    ) -> anyhow::Result<()> {
        if self.json() {
            print_json(value)
        } else {
            print_text(&render())
        }
    }
}

/// Writes text to standard output as it is (no newline added).
pub fn print_text(text: &str) -> anyhow::Result<()> {
    Ok(emit(text)?)
}

/// Writes `value` as pretty JSON and a newline to standard output.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    print_text(&text)
}

/// Writes text to standard output. A reader that stopped reading
/// (`glassbox run ... | head`) is not an error of the command: the rest is
/// dropped and the command exits with its own code, where `print!` would
/// panic on the closed pipe.
pub fn emit(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Whether to colour output written to stdout (`true`) or stderr.
pub fn color(stdout: bool) -> bool {
    std::env::var_os("NO_COLOR").is_none()
        && if stdout {
            std::io::stdout().is_terminal()
        } else {
            std::io::stderr().is_terminal()
        }
}

/// A warning on standard error: `warning: TEXT`.
pub fn warn(text: &str) {
    emit_err(&format!("warning: {text}\n"));
}

/// A status line on standard error: what a long-running command (`serve`,
/// `worker`) or a side effect (a file written, a trace recorded) reports
/// beside its result.
pub fn status(text: &str) {
    emit_err(&format!("{text}\n"));
}

/// Text on standard error as it is (no prefix, no newline added).
pub fn note(text: &str) {
    emit_err(text);
}

/// Rendered diagnostics (of a topology or case file) on standard error.
pub fn diagnostics(report: &glassbox_topology::Report) {
    emit_err(&report.render(color(false)));
}

/// Reports a command's error on standard error (`error: ` and its context
/// chain) and returns its exit code.
pub fn error(err: &anyhow::Error) -> u8 {
    emit_err(&format!("error: {err:#}\n"));
    crate::exit::code_for(err)
}
