//! Embeds every file under `assets/` (the dashboard) into the binary: writes
//! `$OUT_DIR/assets.rs` with one `(name, bytes)` entry per file, so files the
//! dashboard adds are served without touching Rust code.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    // Read when the script runs, not baked in when it was compiled: a build
    // script binary reused from another checkout of the crate must still
    // embed this checkout's files.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let dir = Path::new(&manifest).join("assets");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .flatten()
            .filter(|e| e.path().is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect(),
        Err(e) => panic!(
            "cannot read the dashboard's files in {}: {e}",
            dir.display()
        ),
    };
    if !names.iter().any(|n| n == "index.html") {
        panic!(
            "{} has no index.html: the dashboard would be empty",
            dir.display()
        );
    }
    names.sort();
    let mut out = String::from("pub static ASSETS: &[(&str, &[u8])] = &[\n");
    for name in &names {
        println!("cargo:rerun-if-changed={}", dir.join(name).display());
        let _ = writeln!(
            out,
            "    ({name:?}, include_bytes!({:?})),",
            dir.join(name).display().to_string()
        );
    }
    out.push_str("];\n");
    let target =
        Path::new(&std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into())).join("assets.rs");
    if let Err(e) = std::fs::write(&target, out) {
        panic!("cannot write {}: {e}", target.display());
    }
}
