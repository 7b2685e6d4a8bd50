//! `glassbox serve` as a process: the helpers other tests start it with, and
//! what a real SIGTERM does (in-flight requests finish, every trace is
//! flushed, exit code 0).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{glassbox, root, stderr, stdout, wait_for_exit};

/// A `glassbox serve` child, killed when dropped.
pub struct Server {
    pub child: Child,
    pub url: String,
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `glassbox serve` on `dir/topologies` (the moderation example) with
/// a store in `dir`, and waits until it accepts connections.
pub fn serve(dir: &Path) -> Server {
    serve_with(dir, &[])
}

/// Like [`serve`], with more topology files (name, text) beside the example.
pub fn serve_with(dir: &Path, extra: &[(&str, &str)]) -> Server {
    let store = format!("sqlite://{}", dir.join("traces.db").display());
    serve_on(dir, extra, &store, &[])
}

/// Like [`serve_with`], on the store `store` (a URL), with more `glassbox
/// serve` arguments.
pub fn serve_on(dir: &Path, extra: &[(&str, &str)], store: &str, args: &[&str]) -> Server {
    serve_on_with_env(dir, extra, store, args, &[])
}

/// Like [`serve_on`], with environment variables set for the server.
pub fn serve_on_with_env(
    dir: &Path,
    extra: &[(&str, &str)],
    store: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Server {
    let topologies = dir.join("topologies");
    std::fs::create_dir_all(&topologies).unwrap();
    std::fs::copy(
        root().join("examples/moderation.yaml"),
        topologies.join("moderation.yaml"),
    )
    .unwrap();
    for (name, text) in extra {
        std::fs::write(topologies.join(name), text).unwrap();
    }
    let port = free_port();
    let log = std::fs::File::create(dir.join("serve.log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_glassbox"))
        .args(["serve", "--topologies"])
        .arg(&topologies)
        .args(["--port", &port.to_string(), "--store", store])
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("GLASSBOX_API_KEY")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut server = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
        port,
    };
    // A generous bound on start-up (debug build, busy machine), not a timing
    // assertion.
    let until = Instant::now() + Duration::from_secs(120);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = server.child.try_wait().unwrap() {
            panic!(
                "glassbox serve exited with {status}: {}",
                std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default()
            );
        }
        assert!(Instant::now() < until, "glassbox serve did not start");
        thread::sleep(Duration::from_millis(100));
    }
    server
}

/// An HTTP upstream that answers its first request only when told to, so a
/// run stays in flight as long as the test needs.
fn held_upstream() -> (String, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/slow", listener.local_addr().unwrap());
    let (arrived_tx, arrived) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    thread::spawn(move || {
        let Ok((mut conn, _)) = listener.accept() else {
            return;
        };
        let mut reader = BufReader::new(conn.try_clone().unwrap());
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
            line.clear();
        }
        if arrived_tx.send(()).is_err() || release_rx.recv().is_err() {
            return;
        }
        let body = r#"{"ok":true}"#;
        let _ = write!(
            conn,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        );
    });
    (url, arrived, release)
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(300)))
        .build()
        .into()
}

fn post_run(agent: &ureq::Agent, url: &str, topology: &str, body: &Value) -> (u16, Value) {
    let mut reply = agent
        .post(format!("{url}/v1/topologies/{topology}/runs"))
        .content_type("application/json")
        .send(body.to_string())
        .unwrap();
    let status = reply.status().as_u16();
    let text = reply.body_mut().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[test]
fn sigterm_lets_in_flight_runs_finish_and_flushes_every_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, arrived, release) = held_upstream();
    let slow = format!(
        r#"topology_id: slow
version: 1.0.0
nodes:
  - id: fetch
    type: http
    resource: {{ type: cpu, cost_per_call: 0.001 }}
    config: {{ url: "{upstream}", method: GET, allow_hosts: ["127.0.0.1"], timeout_ms: 120000 }}
    timeout_ms: 120000
"#
    );
    let mut server = serve_with(dir.path(), &[("slow.yaml", &slow)]);
    let agent = agent();
    let mut ids = Vec::new();
    for question in [
        "What is the price of Pro?",
        "hello",
        "how do I get a refund?",
    ] {
        let (status, body) = post_run(
            &agent,
            &server.url,
            "moderation",
            &json!({ "question": question }),
        );
        assert_eq!(status, 200, "{body}");
        ids.push(body["request_id"].as_str().unwrap().to_owned());
    }

    // One run waits on the upstream while the server is told to stop.
    let in_flight = {
        let (agent, url) = (agent.clone(), server.url.clone());
        thread::spawn(move || post_run(&agent, &url, "slow", &json!({ "question": "wait" })))
    };
    arrived
        .recv_timeout(Duration::from_secs(120))
        .expect("the slow run never reached the upstream");
    // The shell's built-in `kill`: no procps needed, no unsafe `libc::kill`.
    let killed = Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", server.child.id())])
        .status()
        .unwrap();
    assert!(killed.success());
    // Shutdown has begun once the listener is closed; the run is still held.
    let until = Instant::now() + Duration::from_secs(120);
    while TcpStream::connect(("127.0.0.1", server.port)).is_ok() {
        assert!(
            Instant::now() < until,
            "the server kept accepting after SIGTERM"
        );
        thread::sleep(Duration::from_millis(50));
    }
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server exited with a run in flight"
    );
    release.send(()).unwrap();
    let (status, body) = in_flight.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ok", "{body}");
    ids.push(body["request_id"].as_str().unwrap().to_owned());

    let exit = wait_for_exit(
        &mut server.child,
        Duration::from_secs(120),
        "the server did not exit after SIGTERM",
    );
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert_eq!(exit.code(), Some(0), "{log}");
    assert!(
        log.contains("stopped; 4 requests and"),
        "the shutdown line should count every run: {log}"
    );

    // Every run, the one finished during shutdown included, is in the store.
    let store = format!("sqlite://{}", dir.path().join("traces.db").display());
    let o = glassbox(
        &["trace", "list", "--store", &store, "--format", "json"],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let listed: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let mut stored: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["request_id"].as_str().unwrap().to_owned())
        .collect();
    stored.sort();
    ids.sort();
    assert_eq!(stored, ids);
}

/// `glassbox serve 2>&1 | tee log` after `tee` has gone: every line the
/// server writes to standard error meets a closed pipe. The server must
/// still start, serve, and pick up each new topology file (the reload loop
/// prints a line per change; a panic there would end it after the first).
#[test]
fn a_closed_stderr_stops_neither_the_server_nor_its_reloads() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-closed-stderr");
    let _ = std::fs::remove_dir_all(&dir);
    let topologies = dir.join("topologies");
    std::fs::create_dir_all(&topologies).unwrap();
    let example = std::fs::read_to_string(root().join("examples/moderation.yaml")).unwrap();
    std::fs::write(topologies.join("moderation.yaml"), &example).unwrap();
    let port = free_port();
    let child = crate::support::spawn_with_closed_stderr(
        Command::new(env!("CARGO_BIN_EXE_glassbox"))
            .args(["serve", "--topologies"])
            .arg(&topologies)
            .args(["--port", &port.to_string()])
            .arg("--store")
            .arg(format!("sqlite://{}", dir.join("traces.db").display()))
            .env("NO_COLOR", "1")
            .env_remove("GLASSBOX_API_KEY"),
    );
    let server = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
        port,
    };
    let agent = agent();
    let served = |id: &str| {
        let mut reply = agent
            .get(format!("{}/v1/topologies", server.url))
            .call()
            .ok()?;
        let text = reply.body_mut().read_to_string().ok()?;
        Some(text.contains(&format!("\"id\":\"{id}\"")))
    };
    // Generous bounds (debug build, busy machine), not timing assertions.
    let wait_for = |id: &str| {
        let until = Instant::now() + Duration::from_secs(120);
        while served(id) != Some(true) {
            assert!(Instant::now() < until, "`{id}` never served");
            thread::sleep(Duration::from_millis(200));
        }
    };
    wait_for("moderation");
    for id in ["moderation-b", "moderation-c"] {
        let text = example.replace("topology_id: moderation", &format!("topology_id: {id}"));
        std::fs::write(topologies.join(format!("{id}.yaml")), text).unwrap();
        wait_for(id);
    }
}
