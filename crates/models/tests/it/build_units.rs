//! llama.cpp is built once per profile, whichever package a command selects.
//!
//! Cargo unifies dependency features over the packages one command selects,
//! and a dependency's hash covers its own dependencies' features. When
//! `cargo build -p glassbox-models --examples` turned on fewer features of
//! bindgen's dependencies than `cargo build -p glassbox-cli`, llama-cpp-sys-2
//! got a second hash, so a second llama.cpp build in the same `target/`, and
//! its build script panicked on the first build's library links ("File
//! exists"). The build dependencies pinned in `crates/models/Cargo.toml`
//! prevent that; this test fails when a selection the scripts and docs use
//! sees llama-cpp-sys-2 with another dependency tree than the whole workspace.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Each line of llama-cpp-sys-2's dependency tree (with features), as one
/// `cargo tree` selection resolves it.
fn llama_sys_tree(selection: &[&str]) -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&root)
        .args([
            "tree",
            "--locked",
            "--offline",
            "--no-dedupe",
            "--prefix",
            "depth",
        ])
        .args(["-e", "normal,build,dev", "-f", "{p} [{f}]"])
        .args(selection)
        .output()
        .expect("running `cargo tree`");
    assert!(
        out.status.success(),
        "`cargo tree {}` failed: {}",
        selection.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<(usize, &str)> = text
        .lines()
        .map(|l| {
            let name = l.trim_start_matches(|c: char| c.is_ascii_digit());
            let depth = l[..l.len() - name.len()].parse().unwrap_or(0);
            (depth, name)
        })
        .collect();
    let mut tree = BTreeSet::new();
    for (i, (depth, name)) in lines.iter().enumerate() {
        if !name.starts_with("llama-cpp-sys-2 ") {
            continue;
        }
        tree.insert((*name).to_string());
        for (d, dep) in &lines[i + 1..] {
            if d <= depth {
                break;
            }
            tree.insert(dep.to_string());
        }
    }
    tree
}

#[test]
fn every_package_selection_builds_llama_cpp_with_the_workspaces_features() {
    let workspace = llama_sys_tree(&["--workspace"]);
    assert!(
        workspace.iter().any(|l| l.starts_with("bindgen ")),
        "llama-cpp-sys-2's tree should include bindgen: {workspace:?}"
    );
    // The selections of scripts/*.sh and docs/BENCHMARKS.md that reach llama.cpp.
    for package in [
        "glassbox-bench",
        "glassbox-cli",
        "glassbox-models",
        "glassbox-nodes",
        "glassbox-server",
    ] {
        let tree = llama_sys_tree(&["-p", package]);
        let missing: Vec<_> = workspace.difference(&tree).collect();
        let extra: Vec<_> = tree.difference(&workspace).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "`-p {package}` resolves llama-cpp-sys-2's dependencies differently from the \
             workspace (a second llama.cpp build in target/): only in the workspace {missing:?}, \
             only in `-p {package}` {extra:?}; pin the feature in crates/models/Cargo.toml's \
             [build-dependencies]"
        );
    }
}
