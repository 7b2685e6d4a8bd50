//! Lets the installed `glassbox` find llama.cpp's shared libraries beside it.
//!
//! llama.cpp is built as shared libraries so that its CPU kernels can be
//! chosen at run time (docs/adr/0004-cpu-kernels.md); cargo puts `libllama.so`
//! and `libggml*.so` next to the binary, and `$ORIGIN` in the run path makes
//! the binary look there wherever the folder is copied.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "freebsd" {
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,$ORIGIN");
    } else if os == "macos" {
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,@executable_path");
    }
}
