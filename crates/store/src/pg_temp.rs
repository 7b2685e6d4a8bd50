//! A throwaway PostgreSQL server for tests and benchmarks.
//!
//! Runs the machine's own PostgreSQL binaries (`initdb`, `pg_ctl`) on a
//! temporary directory and a free loopback port, as the `postgres` system
//! user when running as root (PostgreSQL refuses to run as root). Stopped
//! (`pg_ctl stop -m immediate`) and deleted on drop.
//!
//! Binaries are looked up in `$GLASSBOX_PG_BIN`, then the newest
//! `/usr/lib/postgresql/*/bin`, then `PATH`. `scripts/install-postgres.sh`
//! installs them from Debian when missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::error::{Result, StoreError};

const HINT: &str = "hint: run `scripts/install-postgres.sh` (Debian: apt-get install postgresql) \
                    or set GLASSBOX_PG_BIN to the directory holding initdb and pg_ctl";

/// A running throwaway server.
#[derive(Debug)]
pub struct TempPostgres {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    run_as: Option<String>,
}

/// Settings of the throwaway server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TempPostgresOptions {
    /// Keep `fsync` and `synchronous_commit` on (benchmarks); off is faster
    /// and fine for tests.
    pub durable: bool,
}

fn fail(message: impl Into<String>) -> StoreError {
    StoreError::Open {
        url: "throwaway postgres".into(),
        message: format!("{} ({HINT})", message.into()),
    }
}

/// The directory holding `initdb` and `pg_ctl`.
pub fn find_bin() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("GLASSBOX_PG_BIN") {
        let dir = PathBuf::from(dir);
        if dir.join("initdb").is_file() {
            return Ok(dir);
        }
        return Err(fail(format!(
            "no `initdb` in GLASSBOX_PG_BIN `{}`",
            dir.display()
        )));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
            return Ok(dir);
        }
    }
    Err(fail(
        "PostgreSQL server binaries (`initdb`, `pg_ctl`) not found",
    ))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|source| StoreError::Io {
        context: "finding a free port".into(),
        source,
    })?;
    let port = listener
        .local_addr()
        .map_err(|source| StoreError::Io {
            context: "finding a free port".into(),
            source,
        })?
        .port();
    Ok(port)
}

impl TempPostgres {
    /// Initialises and starts a server; fails (never skips) with a hint.
    pub fn start(options: TempPostgresOptions) -> Result<TempPostgres> {
        let bin = find_bin()?;
        let run_as = is_root().then(|| "postgres".to_string());
        let dir = std::env::temp_dir().join(format!(
            "glassbox-pg-{}-{}",
            std::process::id(),
            glassbox_trace::unix_micros_now()
        ));
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Io {
            context: format!("creating `{}`", dir.display()),
            source,
        })?;
        let mut pg = TempPostgres {
            dir,
            bin,
            port: 0,
            run_as,
        };
        if let Some(user) = &pg.run_as {
            let out = Command::new("chown")
                .arg("-R")
                .arg(format!("{user}:"))
                .arg(&pg.dir)
                .output();
            check("chown", out, &pg.dir)?;
        }
        let data = pg.dir.join("data");
        let out = pg
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", "glassbox", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .args(["--locale=C", "--no-instructions"])
            .output();
        check("initdb", out, &pg.dir)?;
        // Another process may grab the port between probing and binding:
        // try a few.
        let mut last = None;
        for _ in 0..5 {
            pg.port = free_port()?;
            let mut settings = format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=50",
                pg.port,
                pg.dir.display()
            );
            if !options.durable {
                settings
                    .push_str(" -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
            }
            let out = pg
                .command("pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(pg.dir.join("server.log"))
                .args(["-w", "-t", "60", "-o", &settings, "start"])
                .output();
            match check("pg_ctl start", out, &pg.dir) {
                Ok(()) => return Ok(pg),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| fail("pg_ctl start failed")))
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(path);
                c
            }
            None => Command::new(path),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `db` on this server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://glassbox@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates a fresh database and returns its URL.
    pub fn create_database(&self, name: &str) -> Result<String> {
        let mut client = ::postgres::Client::connect(&self.url("postgres"), ::postgres::NoTls)
            .map_err(|e| fail(format!("connecting to the throwaway server: {e}")))?;
        client.batch_execute(&format!("CREATE DATABASE \"{name}\""))?;
        Ok(self.url(name))
    }

    /// Where the server keeps its data and log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

fn check(what: &str, out: std::io::Result<Output>, dir: &Path) -> Result<()> {
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => {
            let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
            Err(fail(format!(
                "`{what}` failed ({}): {}{}\n{}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim(),
                String::from_utf8_lossy(&o.stdout).trim(),
                log.lines().rev().take(5).collect::<Vec<_>>().join("\n")
            )))
        }
        Err(e) => Err(fail(format!("cannot run `{what}`: {e}"))),
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        if self.port != 0 {
            let _ = self
                .command("pg_ctl")
                .arg("-D")
                .arg(self.dir.join("data"))
                .args(["-m", "immediate", "-w", "stop"])
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
