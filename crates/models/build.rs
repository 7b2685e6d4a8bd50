//! Lays llama.cpp's shared libraries out beside the binaries that need them.
//!
//! llama.cpp is built as shared libraries so that its CPU kernels can be
//! chosen at run time (docs/adr/0004-cpu-kernels.md). llama-cpp-sys-2 installs
//! them in its own build folder; this script copies what a program loads into
//! the profile folder (`target/<profile>/`), the layout an installed copy has:
//!
//! - `libllama.so.0`, `libggml.so.0`, `libggml-base.so.0`, ... (by the names the
//!   binaries ask for) beside `glassbox` and in `examples/`;
//! - `ggml-backends/libggml-cpu-<level>.so`, one per x86-64 level (the AMX
//!   one is loaded only when it carries the build's tile-configuration fix,
//!   `glassbox_models::cpu::AMX_MARK`).
//!
//! It also gives the benchmark examples a run path one folder up. Files are
//! replaced by rename, never rewritten in place, so a running program keeps
//! the copy it mapped.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DEP_LLAMA_BACKENDS_DIR");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "freebsd" {
        println!("cargo:rustc-link-arg-examples=-Wl,-rpath,$ORIGIN/..");
    } else if os == "macos" {
        println!("cargo:rustc-link-arg-examples=-Wl,-rpath,@executable_path/..");
    }
    let (Some(backends), Some(profile_dir)) = (
        std::env::var_os("DEP_LLAMA_BACKENDS_DIR").map(PathBuf::from),
        profile_dir(),
    ) else {
        println!(
            "cargo:warning=llama.cpp's backends folder is unknown; the binaries will look in the build folder"
        );
        return;
    };
    let Some(sys_out) = backends.parent() else {
        return;
    };
    for lib_dir in [sys_out.join("lib"), sys_out.join("lib64")] {
        for (name, file) in shared_libraries(&lib_dir) {
            println!("cargo:rerun-if-changed={}", file.display());
            for dest in [profile_dir.clone(), profile_dir.join("examples")] {
                place(&file, &dest, &name);
            }
        }
    }
    let variants = profile_dir.join("ggml-backends");
    for (name, file) in shared_libraries(&backends) {
        println!("cargo:rerun-if-changed={}", file.display());
        if name.starts_with("libggml-cpu-") {
            place(&file, &variants, &name);
        }
    }
    for dir in [profile_dir.join("deps"), profile_dir.join("examples")] {
        remove_dangling_links(&dir);
    }
}

/// Removes llama.cpp's library links in `dir` that point nowhere.
/// llama-cpp-sys-2's build script hard-links each installed library into
/// `deps/` and `examples/`, the `libggml.so -> libggml.so.0` links included,
/// whose targets it does not link there; when the script runs again (a
/// `GGML_*` variable changed, such as GGML_GLASSBOX_KERNELS in
/// .cargo/config.toml) it sees no file behind such a link and fails to
/// create it ("File exists"). Without them it runs again cleanly.
fn remove_dangling_links(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = name.starts_with("libggml") || name.starts_with("libllama");
        let link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
        if ours && link && !path.exists() {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// `target/<profile>`, three folders above this script's OUT_DIR.
fn profile_dir() -> Option<PathBuf> {
    let out = PathBuf::from(std::env::var_os("OUT_DIR")?);
    Some(out.ancestors().nth(3)?.to_path_buf())
}

/// The libraries in `dir` a program loads: every name that ends in `.so`
/// followed by at most one number (`libllama.so.0`, `libggml-cpu-x64.so`),
/// with the file it resolves to.
fn shared_libraries(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((_, suffix)) = name.split_once(".so") else {
            continue;
        };
        let soname = suffix.is_empty()
            || suffix
                .strip_prefix('.')
                .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
        if soname && let Ok(file) = std::fs::canonicalize(entry.path()) {
            out.push((name, file));
        }
    }
    out
}

/// Copies `file` to `dir/name` unless an identical copy is there.
fn place(file: &Path, dir: &Path, name: &str) {
    let dest = dir.join(name);
    let same = match (std::fs::metadata(file), std::fs::metadata(&dest)) {
        (Ok(a), Ok(b)) => a.len() == b.len() && a.modified().ok() <= b.modified().ok(),
        _ => false,
    };
    if same {
        return;
    }
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::copy(file, &tmp))
        .and_then(|_| std::fs::rename(&tmp, &dest));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        println!(
            "cargo:warning=copying {} to {}: {e}",
            file.display(),
            dest.display()
        );
    }
}
