//! Source file sizes.
//!
//! The rule: no non-test Rust file may be longer than [`MAX_LINES`] lines,
//! counted as `wc -l` counts them, tests written inline at its bottom
//! included. Non-test means every `.rs` file under a crate's `src/`,
//! `examples/`, `benches/` and its `build.rs`, except:
//! - files under the crate's `tests/` folder (integration tests), and
//! - files that the code declares only as `#[cfg(test)] mod …;` (unit tests
//!   kept beside their module, e.g. `#[path = "auth_tests.rs"]`): they are
//!   compiled into tests alone, so they are test code by construction.
//!
//! A long file is split where its concerns part, not by moving its tests
//! out: inline tests count toward the limit, so moving them to a sibling
//! file is only worth it when they are long, which keeps the code itself
//! under the limit anyway.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::GuardError;
use crate::modules::Tree;
use crate::workspace::Member;

/// The longest a non-test source file may be.
pub const MAX_LINES: usize = 600;

/// A member's Rust files, split into code and test-only files.
#[derive(Debug, Clone, Default)]
pub struct Files {
    /// Files compiled outside tests (and any file no target reaches).
    pub code: BTreeSet<PathBuf>,
    /// Files declared only under `#[cfg(test)]`.
    pub test_only: BTreeSet<PathBuf>,
}

/// Sorts `member`'s files into code and test-only.
pub fn files(member: &Member) -> Result<Files, GuardError> {
    let mut files = Files::default();
    for root in member.roots() {
        let tree = Tree::read(&root)?;
        files.code.extend(tree.files());
        files.test_only.extend(tree.test_files);
    }
    for folder in ["src", "examples", "benches"] {
        for file in rust_files_under(&member.dir.join(folder)) {
            if !files.test_only.contains(&file) {
                files.code.insert(file);
            }
        }
    }
    Ok(files)
}

/// The number of lines of `path`, as `wc -l` counts them.
pub fn line_count(path: &Path) -> Result<usize, GuardError> {
    Ok(crate::read(path)?.lines().count())
}

fn rust_files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                found.push(path);
            }
        }
    }
    found
}
