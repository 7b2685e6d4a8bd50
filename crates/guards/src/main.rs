//! `glassbox-guards`: the guards' findings at the command line.
//!
//! - `architecture`: rewrites the generated crate graph in
//!   `docs/architecture.md` from the manifests;
//! - `circles`: prints every import circle of every crate target;
//! - `sizes`: prints the non-test source files over the line limit.
//!
//! The tests in `tests/it/` check the same things and fail on any finding.

use std::process::ExitCode;

use glassbox_guards::{GuardError, architecture, cycles, modules, sizes, workspace};

fn main() -> ExitCode {
    let command = std::env::args().nth(1).unwrap_or_default();
    let result = match command.as_str() {
        "architecture" => write_architecture(),
        "circles" => print_circles(),
        "sizes" => print_sizes(),
        _ => {
            eprintln!("usage: glassbox-guards architecture | circles | sizes");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(78)
        }
    }
}

fn write_architecture() -> Result<usize, GuardError> {
    let root = workspace::root();
    let members = workspace::members(&root)?;
    architecture::write(&root.join("docs/architecture.md"), &members)?;
    Ok(0)
}

fn print_circles() -> Result<usize, GuardError> {
    let root = workspace::root();
    let mut count = 0;
    for member in workspace::members(&root)? {
        for target in member.roots() {
            let tree = modules::Tree::read(&target)?;
            for circle in cycles::report(&tree, &root) {
                count += 1;
                let file = target.strip_prefix(&root).unwrap_or(&target);
                println!("{} ({}):\n{circle}", member.name, file.display());
            }
        }
    }
    println!("{count} circle(s)");
    Ok(count)
}

fn print_sizes() -> Result<usize, GuardError> {
    let root = workspace::root();
    let mut count = 0;
    for member in workspace::members(&root)? {
        for file in sizes::files(&member)?.code {
            let lines = sizes::line_count(&file)?;
            if lines > sizes::MAX_LINES {
                count += 1;
                println!(
                    "{lines:5}  {}",
                    file.strip_prefix(&root).unwrap_or(&file).display()
                );
            }
        }
    }
    println!("{count} file(s) over {} lines", sizes::MAX_LINES);
    Ok(count)
}
