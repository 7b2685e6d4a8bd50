//! One build runs on any x86-64 machine: the `glassbox` binary this suite
//! built runs `glassbox doctor` (CPU kernels chosen, an 8-token generation and
//! one embedding with the real models) under `qemu-x86_64 -cpu MODEL` for CPUs
//! older than the build machine: Haswell (AVX2, no AVX-512) and Nehalem (no
//! AVX at all). glibc, llama.cpp and every Rust crate then see that CPU, so an
//! instruction it lacks anywhere on the path is a SIGILL here.
//!
//! Needs Debian's `qemu-user` (`scripts/install-deps.sh` installs it).

use std::process::{Command, Stdio};

use crate::support::{assert_exit, models_turn, root, stdout};

fn qemu() -> &'static str {
    let found = Command::new("qemu-x86_64")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "qemu-x86_64 not found: install Debian's `qemu-user` (scripts/install-deps.sh does)"
    );
    "qemu-x86_64"
}

/// Runs `glassbox doctor --format json` on an emulated `cpu`; returns the report.
fn doctor_on(cpu: &str) -> serde_json::Value {
    let tmp = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", tmp.path().join("traces.db").display());
    let out = Command::new(qemu())
        .args(["-cpu", cpu, env!("CARGO_BIN_EXE_glassbox")])
        .args([
            "doctor",
            "--format",
            "json",
            "--threads",
            "1",
            "--store",
            &store,
        ])
        .current_dir(root())
        .env_remove("GLASSBOX_CPU_VARIANT")
        .env_remove("GLASSBOX_GGML_BACKENDS")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit(&out, 0);
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn check<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no `{name}` check in {report}"))
}

fn details(check: &serde_json::Value) -> String {
    check["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_runs_on(cpu: &str, variant: &str) {
    let _turn = models_turn();
    let report = doctor_on(cpu);
    assert_eq!(report["ok"], true, "{report:#}");
    let kernels = details(check(&report, "cpu kernels"));
    assert!(
        kernels.contains(&format!("kernels: ggml-cpu-{variant} ")),
        "on {cpu} expected the {variant} kernels:\n{kernels}"
    );
    let generation = details(check(&report, "generation"));
    assert!(
        generation.contains("generated at"),
        "{cpu}: no generation:\n{generation}"
    );
    let embedding = details(check(&report, "embedding"));
    assert!(
        embedding.contains("384 dimensions"),
        "{cpu}: no embedding:\n{embedding}"
    );
}

#[test]
fn runs_on_a_cpu_without_avx512() {
    assert_runs_on("Haswell", "haswell");
}

#[test]
fn runs_on_a_cpu_without_avx() {
    assert_runs_on("Nehalem", "sse42");
}
