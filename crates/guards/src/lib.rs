//! Guards that keep Glassbox's structure as designed, run as ordinary tests
//! (`cargo test -p glassbox-guards`).
//!
//! - [`modules`] reads every crate's source the way rustc does (`mod`
//!   declarations, inline modules, `#[path]`, `use` trees, paths in code and
//!   in macro arguments) into a tree of modules; [`imports`] resolves each
//!   `crate::`, `super::`, `self::`, child-module and imported-name path to the
//!   module that defines the item (following re-exports), and [`cycles`] finds
//!   every import circle among modules, with the line that closes each step.
//! - [`sizes`] measures source files: no non-test file may pass
//!   [`sizes::MAX_LINES`].
//! - [`workspace`] reads the members' manifests; [`architecture`] draws the
//!   crate graph that `docs/architecture.md` shows and checks the doc against
//!   it.
//!
//! Why a crate of its own rather than a script: the checks need a real Rust
//! parser (`syn`), and as tests they run wherever the suite runs, so a circle
//! or an oversized file fails the build the day it appears, naming the files.

pub mod architecture;
pub mod cycles;
pub mod imports;
pub mod modules;
pub mod sizes;
pub mod workspace;

use std::path::PathBuf;

/// What can stop a guard from reading the workspace.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// A file could not be read.
    #[error("reading `{path}`: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A Rust file did not parse.
    #[error("parsing `{path}`:{line}:{column}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// A manifest did not parse or lacks what a member needs.
    #[error("manifest `{path}`: {message}")]
    Manifest { path: PathBuf, message: String },
    /// A `mod name;` declaration names no file.
    #[error("`{path}`: `mod {name};` has no file (looked for {looked})")]
    MissingModule {
        path: PathBuf,
        name: String,
        looked: String,
    },
}

pub(crate) fn read(path: &std::path::Path) -> Result<String, GuardError> {
    std::fs::read_to_string(path).map_err(|source| GuardError::Read {
        path: path.to_path_buf(),
        source,
    })
}
