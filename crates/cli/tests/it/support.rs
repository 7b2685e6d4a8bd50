//! Test harness: paths and a runner for the built binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Files under a directory (recursively) with a topology extension, sorted.
/// Folders that hold a vector index (what `glassbox index build` writes, e.g.
/// `examples/rag-chat/kb.index`) are data, never topologies, and are skipped;
/// so are `glassbox test` case files (`*.cases.yaml`).
pub fn topology_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if !glassbox_models::VectorIndex::is_index_dir(&path) {
                    todo.push(path);
                }
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("json" | "yaml" | "yml")
            ) && !is_case_file(&path)
            {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// A `glassbox test` case file: `NAME.cases.yaml` (or `.yml`, `.json`).
pub fn is_case_file(path: &Path) -> bool {
    path.file_stem()
        .and_then(|s| s.to_str())
        .is_some_and(|s| s.ends_with(".cases"))
}

/// Runs `glassbox ARGS` in the repository root, with `stdin` fed if given.
pub fn glassbox(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_glassbox"));
    // Runs record into the default store under XDG_DATA_HOME: keep that
    // inside the build's scratch space, never the user's home.
    cmd.args(args)
        .current_dir(root())
        .env("NO_COLOR", "1")
        .env("XDG_DATA_HOME", env!("CARGO_TARGET_TMPDIR"))
        .env_remove("GLASSBOX_STORE");
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    child.wait_with_output().unwrap()
}

/// Tests that run the local models through the binary take turns. Run side
/// by side on a 2-core machine, llama.cpp's spinning worker threads starve
/// each other (decode fell from ~60 to ~4 tok/s) and generations hit their
/// timeouts; one at a time, each takes seconds.
pub fn models_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How a process ended, in words: `exit code 1`, or `killed by signal 4
/// (SIGILL: illegal instruction)` when native code crashed.
pub fn how_it_ended(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => {
            let name = match sig {
                4 => "SIGILL: illegal instruction",
                6 => "SIGABRT: aborted",
                7 => "SIGBUS: bus error",
                8 => "SIGFPE: arithmetic exception",
                9 => "SIGKILL: killed",
                11 => "SIGSEGV: segmentation fault",
                _ => "see `kill -l`",
            };
            format!("killed by signal {sig} ({name})")
        }
        (None, None) => "an unknown end".to_owned(),
    }
}

/// Asserts the process exited with `code`; a crash is reported by its signal
/// with the process's output, so a SIGILL in native code reads as one.
#[track_caller]
pub fn assert_exit(o: &Output, code: i32) {
    assert!(
        o.status.code() == Some(code),
        "expected exit code {code}, got {}\n--- stdout\n{}\n--- stderr\n{}",
        how_it_ended(o.status),
        stdout(o),
        stderr(o)
    );
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Waits until `child` exits (at most `limit`; a hang fails the test with `what`).
pub fn wait_for_exit(
    child: &mut std::process::Child,
    limit: std::time::Duration,
    what: &str,
) -> std::process::ExitStatus {
    let until = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(std::time::Instant::now() < until, "{what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Starts `cmd` with its standard error already closed to the reader (the
/// `2>&1 | head -1` case): stdin and stdout null, stderr a pipe whose read
/// end is dropped before the child can write.
pub fn spawn_with_closed_stderr(cmd: &mut Command) -> std::process::Child {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    child
}
