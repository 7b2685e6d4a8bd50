//! The workspace's members as their manifests declare them: each crate's
//! name, folder, the workspace crates it depends on, and its build targets.
//!
//! Manifests are read directly (`toml`) rather than through `cargo metadata`:
//! the members are the `crates/*` folders the root manifest names, and the
//! dependency tables are all the guards need.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::{GuardError, read};

/// One workspace member.
#[derive(Debug, Clone)]
pub struct Member {
    /// The package name, e.g. `glassbox-engine`.
    pub name: String,
    /// The crate's folder.
    pub dir: PathBuf,
    /// Workspace crates in `[dependencies]` (not dev- or build-dependencies).
    pub deps: BTreeSet<String>,
}

impl Member {
    /// Every compiled root of the crate: the library, binaries, examples,
    /// benches and the build script, in a fixed order.
    pub fn roots(&self) -> Vec<PathBuf> {
        let mut roots = Vec::new();
        for file in ["src/lib.rs", "src/main.rs", "build.rs"] {
            let path = self.dir.join(file);
            if path.is_file() {
                roots.push(path);
            }
        }
        for folder in ["src/bin", "examples", "benches"] {
            roots.extend(rust_files_in(&self.dir.join(folder)));
        }
        roots
    }
}

/// The files directly in `dir` ending in `.rs`, and `main.rs` of its
/// subfolders (cargo's layout for multi-file binaries), sorted.
fn rust_files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter_map(|path| {
            if path.is_dir() {
                let main = path.join("main.rs");
                main.is_file().then_some(main)
            } else {
                (path.extension().is_some_and(|ext| ext == "rs")).then_some(path)
            }
        })
        .collect();
    files.sort();
    files
}

/// The workspace root: two folders above this crate's manifest.
pub fn root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .and_then(Path::parent)
        .map_or_else(|| here.to_path_buf(), Path::to_path_buf)
}

/// Every member under `root/crates/`, sorted by name.
pub fn members(root: &Path) -> Result<Vec<Member>, GuardError> {
    let crates = root.join("crates");
    let entries = std::fs::read_dir(&crates).map_err(|source| GuardError::Read {
        path: crates.clone(),
        source,
    })?;
    let mut members = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let manifest = entry.path().join("Cargo.toml");
        if manifest.is_file() {
            members.push(member(&manifest)?);
        }
    }
    members.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(members)
}

fn member(manifest: &Path) -> Result<Member, GuardError> {
    let text = read(manifest)?;
    let bad = |message: String| GuardError::Manifest {
        path: manifest.to_path_buf(),
        message,
    };
    let doc: toml::Table = text.parse().map_err(|e| bad(format!("{e}")))?;
    let name = doc
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(toml::Value::as_str)
        .ok_or_else(|| bad("no `package.name`".into()))?
        .to_string();
    let deps = doc
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .map(|table| {
            table
                .keys()
                .filter(|k| k.starts_with("glassbox-"))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let dir = manifest
        .parent()
        .map_or_else(PathBuf::new, Path::to_path_buf);
    Ok(Member { name, dir, deps })
}
