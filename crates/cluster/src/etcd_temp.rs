//! Throwaway etcd servers for tests: one member or a cluster of several,
//! each a real `etcd` process on loopback with free ports and a temporary
//! data directory, killed (SIGKILL) and deleted on drop.
//!
//! The binary is `$GLASSBOX_ETCD_BIN`, else `etcd` on `PATH`;
//! `scripts/install-etcd.sh` installs Debian's `etcd-server` when missing.
//! Timings are shortened (50 ms heartbeats, 500 ms elections) so a lost
//! member is replaced quickly and leases as short as 1 s are honoured.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const HINT: &str = "hint: run `scripts/install-etcd.sh` (Debian: apt-get install etcd-server) \
                    or set GLASSBOX_ETCD_BIN to the etcd binary";

/// A running throwaway etcd cluster.
#[derive(Debug)]
pub struct TempEtcd {
    dir: PathBuf,
    members: Vec<Member>,
}

#[derive(Debug)]
struct Member {
    client_port: u16,
    child: Option<Child>,
}

/// The etcd binary to run.
pub fn find_bin() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("GLASSBOX_ETCD_BIN") {
        let bin = PathBuf::from(bin);
        if bin.is_file() {
            return Ok(bin);
        }
        return Err(format!(
            "GLASSBOX_ETCD_BIN `{}` is not a file ({HINT})",
            bin.display()
        ));
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let bin = dir.join("etcd");
        if bin.is_file() {
            return Ok(bin);
        }
    }
    Err(format!("no `etcd` binary found ({HINT})"))
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// Whether `GET /health` on `port` says the member is healthy (it has a
/// leader).
fn healthy(port: u16) -> bool {
    get(port, "/health").is_some_and(|a| a.contains("\"health\":\"true\""))
}

/// The answer to `GET path` on a member's client port (headers included),
/// or `None` when it does not answer.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    )
    .ok()?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .ok()?;
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    Some(answer)
}

impl TempEtcd {
    /// Starts a cluster of `members` (1 or more) and waits until every
    /// member is healthy. Fails, never skips, with a hint.
    pub fn start(members: usize) -> Result<TempEtcd, String> {
        let ports: Vec<(u16, u16)> = (0..members.max(1))
            .map(|_| Ok::<_, String>((free_port()?, free_port()?)))
            .collect::<Result<_, _>>()?;
        TempEtcd::start_ports(&ports, &[])
    }

    /// Like [`start`](TempEtcd::start), with every member also listening
    /// for clients on `hosts` (addresses of this machine, such as the host
    /// end of a test network namespace's veth), at the same ports.
    pub fn start_also_on(members: usize, hosts: &[&str]) -> Result<TempEtcd, String> {
        let ports: Vec<(u16, u16)> = (0..members.max(1))
            .map(|_| Ok::<_, String>((free_port()?, free_port()?)))
            .collect::<Result<_, _>>()?;
        TempEtcd::start_ports(&ports, hosts)
    }

    /// Starts one new, empty member whose client URL is `endpoint` (as a
    /// replacement for a killed server, with none of its data).
    pub fn start_on(endpoint: &str) -> Result<TempEtcd, String> {
        let port = endpoint
            .rsplit_once(':')
            .and_then(|(_, p)| p.trim_end_matches('/').parse::<u16>().ok())
            .ok_or_else(|| format!("`{endpoint}` has no port"))?;
        TempEtcd::start_ports(&[(port, free_port()?)], &[])
    }

    fn start_ports(ports: &[(u16, u16)], hosts: &[&str]) -> Result<TempEtcd, String> {
        let bin = find_bin()?;
        let dir = std::env::temp_dir().join(format!(
            "glassbox-etcd-{}-{}",
            std::process::id(),
            crate::member::now_secs_nanos()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating `{}`: {e}", dir.display()))?;
        let cluster = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut etcd = TempEtcd {
            dir: dir.clone(),
            members: Vec::new(),
        };
        for (i, &(client, peer)) in ports.iter().enumerate() {
            let log = std::fs::File::create(dir.join(format!("m{i}.log")))
                .map_err(|e| format!("creating the log of member {i}: {e}"))?;
            let child = Command::new(&bin)
                .args(["--name", &format!("m{i}")])
                .arg("--data-dir")
                .arg(dir.join(format!("m{i}")))
                .args([
                    "--listen-client-urls",
                    &std::iter::once("127.0.0.1")
                        .chain(hosts.iter().copied())
                        .map(|h| format!("http://{h}:{client}"))
                        .collect::<Vec<_>>()
                        .join(","),
                    "--advertise-client-urls",
                    &format!("http://127.0.0.1:{client}"),
                    "--listen-peer-urls",
                    &format!("http://127.0.0.1:{peer}"),
                    "--initial-advertise-peer-urls",
                    &format!("http://127.0.0.1:{peer}"),
                    "--initial-cluster",
                    &cluster,
                    "--initial-cluster-state",
                    "new",
                    "--initial-cluster-token",
                    &format!("glassbox-test-{}", dir.display()),
                    "--heartbeat-interval",
                    "50",
                    "--election-timeout",
                    "500",
                    "--logger",
                    "zap",
                    "--log-level",
                    "warn",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .map_err(|e| format!("starting `{}`: {e} ({HINT})", bin.display()))?;
            etcd.members.push(Member {
                client_port: client,
                child: Some(child),
            });
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for i in 0..etcd.members.len() {
            while !healthy(etcd.members[i].client_port) {
                if let Some(child) = etcd.members[i].child.as_mut()
                    && let Ok(Some(status)) = child.try_wait()
                {
                    return Err(format!(
                        "etcd member {i} exited ({status}); its log:\n{}",
                        etcd.log(i)
                    ));
                }
                if Instant::now() > deadline {
                    return Err(format!(
                        "etcd member {i} not healthy within 30 s; its log:\n{}",
                        etcd.log(i)
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(etcd)
    }

    /// Member `i`'s log (stderr).
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("m{i}.log"))).unwrap_or_default()
    }

    /// Member `i`'s client URL.
    pub fn endpoint(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].client_port)
    }

    /// Every member's client URL on `host` (one given to
    /// [`start_also_on`](TempEtcd::start_also_on)).
    pub fn endpoints_on(&self, host: &str) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("http://{host}:{}", m.client_port))
            .collect()
    }

    /// Every member's client URL.
    pub fn endpoints(&self) -> Vec<String> {
        (0..self.members.len()).map(|i| self.endpoint(i)).collect()
    }

    /// Kills member `i` with SIGKILL (no goodbye to its peers).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Watchers member `i` serves now (its `etcd_debugging_mvcc_watcher_total`
    /// metric): which member a client's watch stream landed on. 0 when it
    /// does not answer.
    pub fn watchers(&self, i: usize) -> u64 {
        if self.members[i].child.is_none() {
            return 0;
        }
        get(self.members[i].client_port, "/metrics")
            .and_then(|metrics| {
                metrics.lines().find_map(|l| {
                    l.strip_prefix("etcd_debugging_mvcc_watcher_total ")
                        .and_then(|v| v.trim().parse::<f64>().ok())
                })
            })
            .map_or(0, |n| n as u64)
    }

    /// Whether member `i` says it is healthy.
    pub fn healthy(&self, i: usize) -> bool {
        self.members[i].child.is_some() && healthy(self.members[i].client_port)
    }
}

impl Drop for TempEtcd {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
