//! The benchmark examples (`target/<profile>/examples/`) find llama.cpp's
//! shared libraries one folder up, where cargo puts them (see the `glassbox`
//! binary's build script and docs/adr/0004-cpu-kernels.md).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "freebsd" {
        println!("cargo:rustc-link-arg-examples=-Wl,-rpath,$ORIGIN/..");
    } else if os == "macos" {
        println!("cargo:rustc-link-arg-examples=-Wl,-rpath,@executable_path/..");
    }
}
