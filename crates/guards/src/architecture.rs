//! The crate graph as `docs/architecture.md` shows it, drawn from the
//! manifests.
//!
//! The doc carries two things the manifests decide:
//! - a generated block between [`BEGIN`] and [`END`]: every crate by layer
//!   (a crate's layer is one above the highest of its dependencies), each
//!   with the workspace crates it depends on; [`write`] regenerates it
//!   (`cargo run -p glassbox-guards -- architecture`);
//! - the crate table, whose last column ("depends on") must name exactly
//!   each crate's workspace dependencies, with a row for every crate.
//!
//! [`check`] reports every disagreement; the guard test fails on any.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use crate::GuardError;
use crate::workspace::Member;

/// Opens the generated block.
pub const BEGIN: &str = "<!-- crate-graph:begin -->";
/// Closes the generated block.
pub const END: &str = "<!-- crate-graph:end -->";

fn short(name: &str) -> &str {
    name.strip_prefix("glassbox-").unwrap_or(name)
}

/// Each member's layer: 0 without workspace dependencies, else one above
/// its highest dependency.
pub fn layers(members: &[Member]) -> BTreeMap<String, usize> {
    let deps: BTreeMap<&str, &BTreeSet<String>> =
        members.iter().map(|m| (m.name.as_str(), &m.deps)).collect();
    let mut layer: BTreeMap<String, usize> = BTreeMap::new();
    // The crate graph has no cycles (cargo rejects them), so repeating
    // `members.len()` times settles every layer.
    for _ in 0..=members.len() {
        for member in members {
            let above = member
                .deps
                .iter()
                .filter(|d| deps.contains_key(d.as_str()))
                .map(|d| layer.get(d).map_or(1, |l| l + 1))
                .max()
                .unwrap_or(0);
            layer.insert(member.name.clone(), above);
        }
    }
    layer
}

/// The generated block, markers included.
pub fn render(members: &[Member]) -> String {
    let layer = layers(members);
    let top = layer.values().copied().max().unwrap_or(0);
    let width = members.iter().map(|m| m.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(out, "{BEGIN}");
    let _ = writeln!(out, "```text");
    for level in (0..=top).rev() {
        for member in members.iter().filter(|m| layer[&m.name] == level) {
            let deps: Vec<&str> = member.deps.iter().map(|d| short(d)).collect();
            let arrow = if deps.is_empty() {
                "(no workspace crate)".to_string()
            } else {
                format!("→ {}", deps.join(", "))
            };
            let _ = writeln!(out, "layer {level}  {:width$}  {arrow}", member.name);
        }
    }
    let _ = writeln!(out, "```");
    let _ = write!(out, "{END}");
    out
}

/// Every way `doc` disagrees with the manifests.
pub fn check(doc: &str, members: &[Member]) -> Vec<String> {
    let mut problems = Vec::new();
    match generated_block(doc) {
        None => problems.push(format!("no generated crate graph between `{BEGIN}` and `{END}`")),
        Some(block) if block != render(members) => problems.push(format!(
            "the generated crate graph is stale; run `cargo run -p glassbox-guards -- architecture`; it should read:\n{}",
            render(members)
        )),
        Some(_) => {}
    }
    let rows = table_rows(doc);
    for member in members {
        let want: BTreeSet<String> = member.deps.iter().map(|d| short(d).to_string()).collect();
        match rows.get(&member.name) {
            None => problems.push(format!("the crate table has no row for `{}`", member.name)),
            Some(have) if *have != want => problems.push(format!(
                "the crate table says `{}` depends on [{}]; its manifest says [{}]",
                member.name,
                have.iter().cloned().collect::<Vec<_>>().join(", "),
                want.iter().cloned().collect::<Vec<_>>().join(", ")
            )),
            Some(_) => {}
        }
    }
    for name in rows.keys() {
        if !members.iter().any(|m| &m.name == name) {
            problems.push(format!(
                "the crate table has a row for `{name}`, which is no member"
            ));
        }
    }
    problems
}

fn generated_block(doc: &str) -> Option<&str> {
    let start = doc.find(BEGIN)?;
    let end = doc[start..].find(END)? + start + END.len();
    Some(&doc[start..end])
}

/// `| `glassbox-x` | what | a, b |` rows: name → the last column's crates
/// (`—` for none).
fn table_rows(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut rows = BTreeMap::new();
    for line in doc.lines() {
        let Some(rest) = line.strip_prefix("| `glassbox-") else {
            continue;
        };
        let Some(name_end) = rest.find('`') else {
            continue;
        };
        let name = format!("glassbox-{}", &rest[..name_end]);
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
        let Some(last) = cells.last() else { continue };
        let deps = last
            .split(',')
            .map(|d| d.trim().trim_matches('`').to_string())
            .filter(|d| !d.is_empty() && d != "—" && d != "-")
            .collect();
        rows.insert(name, deps);
    }
    rows
}

/// Rewrites the generated block of the doc at `path`.
pub fn write(path: &Path, members: &[Member]) -> Result<(), GuardError> {
    let doc = crate::read(path)?;
    let block = render(members);
    let updated = match generated_block(&doc) {
        Some(old) => doc.replacen(old, &block, 1),
        None => format!("{doc}\n{block}\n"),
    };
    std::fs::write(path, updated).map_err(|source| GuardError::Read {
        path: path.to_path_buf(),
        source,
    })
}
