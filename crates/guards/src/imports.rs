//! Which module each module imports from.
//!
//! A path is resolved the way rustc resolves it, far enough to name the
//! module that defines the item: `crate::`, `self::`, `super::` (repeated),
//! a child module, or a name a `use` bound; then down through child modules,
//! and through re-exports (`pub use`, globs) to where the item really lives.
//! Paths that leave the crate (`std::`, other crates) are not edges.
//!
//! What counts as an import of module B by module A:
//! - a private `use` in A whose path resolves into B (a trait imported only
//!   for its methods is still a dependency), including `use super::*`;
//! - a path in A's code (types, expressions, patterns, macro arguments)
//!   that resolves into B, directly or through a name A's `use` bound.
//!
//! A re-export (`pub use b::X` in A) alone is not an import by A: whoever
//! names `a::X` is sent on to `b`. It becomes one when A's own code uses `X`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::modules::{ModuleId, Tree};

/// A imports from B: the first place that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The importing module.
    pub from: ModuleId,
    /// The module that defines what is imported.
    pub to: ModuleId,
    /// The line in `from`'s file.
    pub line: usize,
    /// The path as written, e.g. `crate::state::AppState`.
    pub via: String,
}

/// Deepest re-export chain followed before giving up (guards against
/// `use` loops that rustc itself would reject).
const MAX_DEPTH: usize = 32;

/// Every module-to-module import in the tree, one edge per pair (the
/// earliest line), sorted by (from, to).
pub fn edges(tree: &Tree) -> Vec<Edge> {
    let mut found: BTreeMap<(ModuleId, ModuleId), Edge> = BTreeMap::new();
    let mut add = |from: ModuleId, to: Option<ModuleId>, line: usize, path: &[String]| {
        let Some(to) = to else { return };
        if to == from {
            return;
        }
        let edge = Edge {
            from,
            to,
            line,
            via: path.join("::"),
        };
        found
            .entry((from, to))
            .and_modify(|e| {
                if line < e.line {
                    *e = edge.clone();
                }
            })
            .or_insert(edge);
    };
    for (id, module) in tree.modules.iter().enumerate() {
        for binding in module.uses.iter().filter(|b| !b.public) {
            add(
                id,
                resolve(tree, id, &binding.path, 0),
                binding.line,
                &binding.path,
            );
        }
        for code in &module.code_paths {
            let Some(first) = code.segments.first() else {
                continue;
            };
            let local = matches!(first.as_str(), "crate" | "self" | "super")
                // A lone name is never a module in code (modules are not
                // values or types): `edges` alone is a variable.
                || (module.children.contains_key(first) && code.segments.len() > 1)
                || module.uses.iter().any(|b| &b.name == first);
            if local {
                add(
                    id,
                    resolve(tree, id, &code.segments, 0),
                    code.line,
                    &code.segments,
                );
                continue;
            }
            // A name a glob brought in (`use super::*`, `pub use a::*`).
            for glob in module.uses.iter().filter(|b| b.name == "*") {
                let Some(source) = resolve(tree, id, &glob.path, 0) else {
                    continue;
                };
                let target = &tree.modules[source];
                if target.defines.contains(first)
                    || target.uses.iter().any(|b| &b.name == first)
                    || (target.children.contains_key(first) && code.segments.len() > 1)
                {
                    let mut full = target.path.clone();
                    full.extend(code.segments.iter().cloned());
                    add(id, resolve(tree, id, &full, 0), code.line, &code.segments);
                    break;
                }
            }
        }
    }
    found.into_values().collect()
}

/// The module that defines what `path`, written in module `at`, names;
/// `None` when it leaves the crate.
pub fn resolve(tree: &Tree, at: ModuleId, path: &[String], depth: usize) -> Option<ModuleId> {
    if depth > MAX_DEPTH {
        return None;
    }
    let (first, rest) = path.split_first()?;
    let module = &tree.modules[at];
    match first.as_str() {
        "crate" => walk(tree, 0, rest, depth),
        "self" => walk(tree, at, rest, depth),
        "super" => {
            let mut current = module.parent?;
            let mut rest = rest;
            while let Some((next, more)) = rest.split_first() {
                if next != "super" {
                    break;
                }
                current = tree.modules[current].parent?;
                rest = more;
            }
            walk(tree, current, rest, depth)
        }
        name => {
            if let Some(&child) = module.children.get(name) {
                return walk(tree, child, rest, depth);
            }
            if let Some(binding) = module
                .uses
                .iter()
                .find(|b| b.name == name && b.path.as_slice() != [name])
            {
                let mut full = binding.path.clone();
                full.extend(rest.iter().cloned());
                return resolve(tree, at, &full, depth + 1);
            }
            if module.defines.contains(name) {
                return Some(at);
            }
            None
        }
    }
}

/// From module `start`, follows `rest` down child modules and through
/// re-exports to the module defining the item.
fn walk(tree: &Tree, start: ModuleId, rest: &[String], depth: usize) -> Option<ModuleId> {
    let mut current = start;
    for (i, segment) in rest.iter().enumerate() {
        let module = &tree.modules[current];
        if let Some(&child) = module.children.get(segment) {
            current = child;
            continue;
        }
        if module.defines.contains(segment) {
            return Some(current);
        }
        let follow = |prefix: &[String]| {
            let mut full = prefix.to_vec();
            full.extend(rest[i + 1..].iter().cloned());
            full
        };
        if let Some(binding) = module.uses.iter().find(|b| &b.name == segment) {
            // A re-export of something outside the crate is no edge.
            return resolve(tree, current, &follow(&binding.path), depth + 1);
        }
        for glob in module.uses.iter().filter(|b| b.name == "*") {
            let Some(source) = resolve(tree, current, &glob.path, depth + 1) else {
                continue;
            };
            let target = &tree.modules[source];
            let there = target.children.contains_key(segment)
                || target.defines.contains(segment)
                || target.uses.iter().any(|b| &b.name == segment);
            if there && source != current {
                let mut full = target.path.clone();
                full.push(segment.clone());
                return resolve(tree, current, &follow(&full), depth + 1);
            }
        }
        // Not found (an item a macro defines, an enum variant path, …):
        // it lives here as far as the graph is concerned.
        return Some(current);
    }
    Some(current)
}

/// The same imports between files: a module's edges belong to the file it
/// is written in, and edges inside one file drop out. A circle here that
/// the module graph lacks runs through an inline module (`a.rs` imports
/// `b.rs`, which imports `a::inner`): still two files that need each other.
/// Returns the files (indexed by the edges) and the edges.
pub fn file_edges(tree: &Tree, edges: &[Edge]) -> (Vec<PathBuf>, Vec<Edge>) {
    let files: Vec<PathBuf> = tree.files().into_iter().collect();
    let index = |m: ModuleId| files.binary_search(&tree.modules[m].file).unwrap_or(0);
    let mut found: BTreeMap<(usize, usize), Edge> = BTreeMap::new();
    for edge in edges {
        let (from, to) = (index(edge.from), index(edge.to));
        if from != to {
            found.entry((from, to)).or_insert_with(|| Edge {
                from,
                to,
                ..edge.clone()
            });
        }
    }
    (files, found.into_values().collect())
}
