//! Lines a long-running process (`glassbox serve`, `glassbox worker`) writes
//! to standard error: reloads, warnings, failures of a background loop.
//!
//! `eprintln!` panics when standard error is closed (`glassbox serve 2>&1 |
//! tee log` after `tee` exits), and a panic there would end the loop that
//! printed: the file watcher, the alert evaluator, the accept loop. A line
//! that cannot be written is dropped instead; the server goes on.

use std::io::Write;

/// Writes `text` as it is to standard error, dropping it if standard error
/// cannot take it (the CLI's `out` module writes its stderr through this).
pub fn write_err(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
}

/// Writes `glassbox serve: TEXT` and a newline to standard error, as
/// [`write_err`] does.
pub fn serve_line(text: impl std::fmt::Display) {
    write_err(&format!("glassbox serve: {text}\n"));
}
