//! docs/architecture.md draws the crate graph the manifests declare.

use glassbox_guards::{architecture, workspace};

#[test]
fn the_architecture_doc_matches_the_manifests() {
    let root = workspace::root();
    let members = workspace::members(&root).unwrap();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let problems = architecture::check(&doc, &members);
    assert!(
        problems.is_empty(),
        "docs/architecture.md disagrees with the crates' manifests:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_wrong_dependency_column_is_reported() {
    let root = workspace::root();
    let members = workspace::members(&root).unwrap();
    let engine = members
        .iter()
        .find(|m| m.name == "glassbox-engine")
        .unwrap();
    assert!(engine.deps.contains("glassbox-topology"));
    let mut doc = architecture::render(&members);
    for member in &members {
        let deps: Vec<&str> = member
            .deps
            .iter()
            .map(|d| d.strip_prefix("glassbox-").unwrap())
            .collect();
        let deps = if member.name == "glassbox-engine" {
            "topology".to_string()
        } else if deps.is_empty() {
            "—".to_string()
        } else {
            deps.join(", ")
        };
        doc.push_str(&format!("\n| `{}` | a crate | {deps} |", member.name));
    }
    let problems = architecture::check(&doc, &members);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].contains("`glassbox-engine` depends on [topology]"),
        "{}",
        problems[0]
    );
}

#[test]
fn layers_put_each_crate_above_its_dependencies() {
    let root = workspace::root();
    let members = workspace::members(&root).unwrap();
    let layers = architecture::layers(&members);
    for member in &members {
        for dep in &member.deps {
            assert!(
                layers[&member.name] > layers[dep],
                "{} over {dep}",
                member.name
            );
        }
    }
}
