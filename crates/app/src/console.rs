//! Lines a long-running process (`glassbox serve`, `glassbox worker`) writes
//! to standard error: reloads, warnings, failures of a background loop.
//!
//! `eprintln!` panics when standard error is closed (`glassbox serve 2>&1 |
//! tee log` after `tee` exits), and a panic there would end the loop that
//! printed: the file watcher, the alert evaluator, the accept loop. A line
//! that cannot be written is dropped instead; the server goes on.

use std::io::Write;

/// Writes `glassbox serve: TEXT` and a newline to standard error, dropping
/// it if standard error cannot take it.
pub fn serve_line(text: impl std::fmt::Display) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "glassbox serve: {text}").and_then(|()| err.flush());
}
