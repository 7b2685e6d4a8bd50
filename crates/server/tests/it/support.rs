//! A real server on an ephemeral port, with a temp SQLite store and a temp
//! topologies directory, and a small HTTP client.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use glassbox_server::{Config, Server, ServerOptions};
use glassbox_store::{StoreUrl, WriterStats};
use serde_json::Value;

/// A model-free topology: route, template, output guard.
pub const MODERATION: &str = include_str!("../../../../examples/moderation.yaml");

/// A one-node template topology.
pub fn echo(id: &str, version: &str) -> String {
    format!(
        r#"topology_id: {id}
version: {version}
nodes:
  - id: answer
    type: template
    resource: {{ type: cpu, cost_per_call: 0.001 }}
    config:
      template_id: echo-v1
      template: "{version}: {{{{ input.question }}}}"
"#
    )
}

/// A topology whose only node calls `url` (a test upstream) over HTTP.
pub fn calls(id: &str, url: &str) -> String {
    format!(
        r#"topology_id: {id}
version: 1.0.0
nodes:
  - id: fetch
    type: http
    resource: {{ type: cpu, cost_per_call: 0.001 }}
    config: {{ url: "{url}", method: GET, allow_hosts: ["127.0.0.1"], timeout_ms: 120000 }}
    timeout_ms: 120000
"#
    )
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The error code of a `{"error": {...}}` body.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error code in {}", self.text))
            .to_string()
    }
}

pub struct TestServer {
    pub base: String,
    pub dir: tempfile::TempDir,
    pub store: PathBuf,
    store_dir: Option<tempfile::TempDir>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<WriterStats, String>>>,
    agent: ureq::Agent,
}

impl TestServer {
    pub fn start(files: &[(&str, &str)], config: Config) -> TestServer {
        TestServer::start_with(files, config, |_| {})
    }

    /// [`TestServer::start`] with the options changed by `set` first.
    pub fn start_with(
        files: &[(&str, &str)],
        config: Config,
        set: impl FnOnce(&mut ServerOptions),
    ) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let store_dir = tempfile::tempdir().unwrap();
        let store = store_dir.path().join("traces.db");
        let mut options =
            ServerOptions::new(dir.path().to_path_buf(), StoreUrl::Sqlite(store.clone()));
        options.config = config;
        options.host = Some("127.0.0.1".into());
        options.port = Some(0);
        options.poll_interval = Duration::from_millis(100);
        set(&mut options);
        let (addr_tx, addr_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async move {
                let server = match Server::bind(options).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = addr_tx.send(Err(e.to_string()));
                        return Err(e.to_string());
                    }
                };
                let _ = addr_tx.send(Ok(server.local_addr()));
                server
                    .run(async move {
                        let _ = stop_rx.await;
                    })
                    .await
                    .map_err(|e| e.to_string())
            })
        });
        let addr = addr_rx.recv().unwrap().unwrap();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(600)))
            .build()
            .into();
        TestServer {
            base: format!("http://{addr}"),
            dir,
            store,
            store_dir: Some(store_dir),
            shutdown: Some(stop_tx),
            thread: Some(thread),
            agent,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn get(&self, path: &str, key: Option<&str>) -> Reply {
        let mut req = self.agent.get(format!("{}{path}", self.base));
        if let Some(k) = key {
            req = req.header("Authorization", format!("Bearer {k}"));
        }
        reply(req.call().unwrap())
    }

    /// `GET path` with extra headers.
    pub fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        let mut req = self.agent.get(format!("{}{path}", self.base));
        for (n, v) in headers {
            req = req.header(*n, *v);
        }
        reply(req.call().unwrap())
    }

    pub fn post(&self, path: &str, key: Option<&str>, body: &str) -> Reply {
        let mut req = self
            .agent
            .post(format!("{}{path}", self.base))
            .content_type("application/json");
        if let Some(k) = key {
            req = req.header("Authorization", format!("Bearer {k}"));
        }
        reply(req.send(body).unwrap())
    }

    /// `method path` with a JSON body (may be empty) and extra headers.
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let url = format!("{}{path}", self.base);
        let mut req = match method {
            "POST" => self.agent.post(url),
            "PUT" => self.agent.put(url),
            other => panic!("send: no {other}"),
        }
        .content_type("application/json");
        for (n, v) in headers {
            req = req.header(*n, *v);
        }
        reply(req.send(body).unwrap())
    }

    /// Polls `GET path` until `done` holds (the server reloads files
    /// asynchronously); fails after two minutes.
    pub fn wait_for(&self, path: &str, key: Option<&str>, done: impl Fn(&Reply) -> bool) -> Reply {
        let start = Instant::now();
        loop {
            let r = self.get(path, key);
            if done(&r) {
                return r;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "gave up waiting on {path}: last answer {} {}",
                r.status,
                r.text
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Graceful shutdown; returns the trace writer's final counters and the
    /// store's directory (kept until the caller drops it).
    pub fn stop(mut self) -> (WriterStats, tempfile::TempDir) {
        let stats = self.stop_inner().unwrap();
        (stats, self.store_dir.take().unwrap())
    }

    /// Graceful shutdown that may fail (e.g. the store lost writes).
    pub fn stop_result(mut self) -> Result<WriterStats, String> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.thread.take().unwrap().join().unwrap()
    }

    fn stop_inner(&mut self) -> Option<WriterStats> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.thread.take().map(|t| t.join().unwrap().unwrap())
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if self.thread.is_some() && !std::thread::panicking() {
            self.stop_inner();
        } else if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

pub fn reply(mut r: ureq::http::Response<ureq::Body>) -> Reply {
    let status = r.status().as_u16();
    let headers = r
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let text = r.body_mut().read_to_string().unwrap_or_default();
    Reply {
        status,
        headers,
        text,
    }
}

/// Writes a file so that the server sees a new version (content changes).
pub fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// An HTTP upstream that holds each request until released: lets a test keep
/// a request in flight for as long as it needs, without sleeping.
pub struct Upstream {
    pub url: String,
    arrived: mpsc::Receiver<()>,
    release: mpsc::Sender<()>,
}

impl Upstream {
    pub fn start() -> Upstream {
        Upstream::answering(r#"{"ok":true}"#)
    }

    /// Like [`Upstream::start`], answering every request with the JSON `body`.
    pub fn answering(body: &'static str) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/slow", listener.local_addr().unwrap());
        let (arrived_tx, arrived) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                let mut length = 0usize;
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap_or(0);
                    }
                    line.clear();
                }
                // Read the request body, so closing the connection does not
                // reset it under the answer.
                let mut request_body = vec![0u8; length];
                let _ = std::io::Read::read_exact(&mut reader, &mut request_body);
                if arrived_tx.send(()).is_err() || release_rx.recv().is_err() {
                    return;
                }
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Upstream {
            url,
            arrived,
            release,
        }
    }

    /// Blocks until a request reaches the upstream.
    pub fn wait_arrival(&self) {
        self.arrived
            .recv_timeout(Duration::from_secs(120))
            .expect("no request reached the upstream");
    }

    /// Lets one held request finish.
    pub fn release_one(&self) {
        self.release.send(()).unwrap();
    }
}

impl TestServer {
    /// `host:port` of the server.
    pub fn addr(&self) -> String {
        self.base.trim_start_matches("http://").to_string()
    }

    /// A plain TCP connection to the server, for requests a normal client
    /// would not send (odd `Host`s, slow headers, half a body).
    pub fn connect(&self) -> std::net::TcpStream {
        std::net::TcpStream::connect(self.addr()).unwrap()
    }

    /// Sends `head` (request line and headers, without the blank line) and
    /// `body` on a new connection with `Connection: close`, and reads the answer.
    pub fn raw(&self, head: &str, body: &str) -> Reply {
        let mut conn = self.connect();
        conn.set_read_timeout(Some(Duration::from_secs(120)))
            .unwrap();
        write!(
            conn,
            "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        read_reply(&mut conn).unwrap_or_else(|| panic!("no answer to {head:?}"))
    }
}

/// Reads one whole answer (until the server closes); None if it sent nothing.
pub fn read_reply(conn: &mut std::net::TcpStream) -> Option<Reply> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let _ = conn.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).to_string();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Some(Reply {
        status,
        headers,
        text: body.to_string(),
    })
}

/// Whether the server closed `conn` within `limit`, while `poke` is written
/// every 100 ms (a slow client); false if it was still open.
pub fn closed_within(conn: &mut std::net::TcpStream, limit: Duration, poke: &[u8]) -> bool {
    use std::io::{ErrorKind, Read};
    conn.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    while start.elapsed() < limit {
        if !poke.is_empty() && conn.write_all(poke).is_err() {
            return true;
        }
        match conn.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}
