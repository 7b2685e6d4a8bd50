//! No crate target of the workspace has an import circle among its modules.

use glassbox_guards::{cycles, modules, workspace};

#[test]
fn no_module_imports_itself_through_others() {
    let root = workspace::root();
    let mut report = String::new();
    let mut targets = 0;
    for member in workspace::members(&root).unwrap() {
        for target in member.roots() {
            targets += 1;
            let tree = modules::Tree::read(&target).unwrap();
            for circle in cycles::report(&tree, &root) {
                let file = target.strip_prefix(&root).unwrap_or(&target);
                report.push_str(&format!(
                    "{} ({}):\n{circle}\n",
                    member.name,
                    file.display()
                ));
            }
        }
    }
    assert!(
        targets >= 10,
        "found only {targets} crate targets under {}",
        root.display()
    );
    assert!(
        report.is_empty(),
        "import circles (break each by moving the shared piece below both, or by passing it in):\n{report}"
    );
}
