//! No non-test source file is over the line limit (see `sizes` for what
//! counts as test code).

use glassbox_guards::{sizes, workspace};

#[test]
fn no_source_file_is_over_the_line_limit() {
    let root = workspace::root();
    let mut over = Vec::new();
    let mut seen = 0;
    for member in workspace::members(&root).unwrap() {
        for file in sizes::files(&member).unwrap().code {
            seen += 1;
            let lines = sizes::line_count(&file).unwrap();
            if lines > sizes::MAX_LINES {
                over.push(format!(
                    "  {lines:5} lines  {}",
                    file.strip_prefix(&root).unwrap_or(&file).display()
                ));
            }
        }
    }
    assert!(seen > 100, "read only {seen} source files");
    assert!(
        over.is_empty(),
        "source files over {} lines (split each where its concerns part):\n{}",
        sizes::MAX_LINES,
        over.join("\n")
    );
}
