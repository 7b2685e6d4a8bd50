//! The engine's modules depend on each other one way: no module reaches,
//! directly or through others, back to itself. Read from the sources, so a
//! new `use crate::...` that closes a loop fails here, naming the loop.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module (file stem under `src/`, `lib` aside) and the modules it
/// names as `crate::<module>` outside comments.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs") && stem != "lib" {
            sources.insert(stem.to_string(), std::fs::read_to_string(&path).unwrap());
        }
    }
    let modules: BTreeSet<String> = sources.keys().cloned().collect();
    sources
        .iter()
        .map(|(module, text)| {
            let mut deps = BTreeSet::new();
            for line in text.lines().map(str::trim_start) {
                if line.starts_with("//") {
                    continue;
                }
                for (i, _) in line.match_indices("crate::") {
                    let rest = &line[i + "crate::".len()..];
                    let names: Vec<&str> = match rest.strip_prefix('{') {
                        Some(group) => group.split([',', '}']).collect(),
                        None => vec![rest],
                    };
                    for name in names {
                        let name: String = name
                            .trim()
                            .chars()
                            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                            .collect();
                        if modules.contains(&name) && &name != module {
                            deps.insert(name);
                        }
                    }
                }
            }
            (module.clone(), deps)
        })
        .collect()
}

/// A path from `from` back to `target`, if one exists.
fn path_to(
    graph: &BTreeMap<String, BTreeSet<String>>,
    from: &str,
    target: &str,
    seen: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    for next in &graph[from] {
        if next == target {
            return Some(vec![next.clone()]);
        }
        if seen.insert(next.clone())
            && let Some(mut rest) = path_to(graph, next, target, seen)
        {
            rest.insert(0, next.clone());
            return Some(rest);
        }
    }
    None
}

#[test]
fn engine_modules_depend_one_way() {
    let graph = module_graph();
    // The modules named in issue #13's import loop are all here.
    for m in [
        "pipeline", "executor", "attempt", "node_run", "finish", "node", "request",
    ] {
        assert!(graph.contains_key(m), "module `{m}` not found");
    }
    assert!(graph["executor"].contains("run_state"));
    for module in graph.keys() {
        if let Some(cycle) = path_to(&graph, module, module, &mut BTreeSet::new()) {
            panic!("import loop: {module} -> {}", cycle.join(" -> "));
        }
    }
}
