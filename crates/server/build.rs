//! Embeds every file under `assets/` (the dashboard) into the binary: writes
//! `$OUT_DIR/assets.rs` with one `(name, bytes)` entry per file, so files the
//! dashboard adds are served without touching Rust code.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().is_file())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
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
