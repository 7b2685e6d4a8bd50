//! A small Chrome DevTools Protocol client for the dashboard tests.
//!
//! Headless Chromium is started with `--remote-debugging-port=0`; it prints
//! the browser's WebSocket address on stderr. One page target is created and
//! attached in "flat" mode, so every command goes over that one socket with a
//! `sessionId`. `Runtime` and `Log` are enabled from the start: console
//! errors, uncaught exceptions and failed resource loads are collected as
//! they arrive and handed to the test by [`Browser::problems`].
//!
//! Waiting is by polling `Runtime.evaluate` until an expression is truthy,
//! with a generous deadline that only bounds a failing test; nothing here
//! asserts on time.

use std::io::{BufRead, BufReader, ErrorKind};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

/// Where Debian's `chromium` package puts the browser.
const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";
/// Bounds a failing wait; a passing test is done long before.
const DEADLINE: Duration = Duration::from_secs(60);

/// The browser to drive: `GLASSBOX_CHROMIUM` or Debian's `/usr/bin/chromium`.
/// Fails (never skips) when it is missing, naming the script that installs it.
pub fn chromium_path() -> PathBuf {
    let path = std::env::var_os("GLASSBOX_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CHROMIUM));
    assert!(
        path.is_file(),
        "headless Chromium is needed for the dashboard tests and was not found at `{}`; \
         run `scripts/install-deps.sh` (it installs Debian's `chromium`), or point \
         GLASSBOX_CHROMIUM at a Chromium binary",
        path.display()
    );
    path
}

/// The browser process, killed when dropped (also when launching fails).
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub struct Browser {
    // Field order matters: the socket closes before the process is killed.
    ws: WebSocket<TcpStream>,
    _child: Process,
    _profile: tempfile::TempDir,
    session: String,
    next_id: u64,
    problems: Vec<String>,
    stderr_tail: Arc<Mutex<Vec<String>>>,
}

impl Browser {
    /// Starts headless Chromium with a fresh profile and opens one page.
    pub fn launch() -> Browser {
        let exe = chromium_path();
        let profile = tempfile::tempdir().expect("temp profile dir");
        let child = Command::new(&exe)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
                "--window-size=1280,1000",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting `{}`: {e}", exe.display()));
        let mut child = Process(child);
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let ws_url = devtools_url(&mut child.0, &exe, &stderr_tail);
        let ws = connect(&ws_url);
        let mut browser = Browser {
            ws,
            _child: child,
            _profile: profile,
            session: String::new(),
            next_id: 0,
            problems: Vec::new(),
            stderr_tail,
        };
        let target = browser.call("Target.createTarget", json!({ "url": "about:blank" }));
        let target_id = target["targetId"].as_str().expect("targetId").to_owned();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({ "targetId": target_id, "flatten": true }),
        );
        browser.session = attached["sessionId"]
            .as_str()
            .expect("sessionId")
            .to_owned();
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            browser.call(domain, json!({}));
        }
        browser
    }

    /// Loads `url` as a fresh document (via `about:blank`, so a hash-only
    /// change still reloads the page and each page is tested from cold).
    pub fn open(&mut self, url: &str) {
        for u in ["about:blank", url] {
            let r = self.call("Page.navigate", json!({ "url": u }));
            if let Some(err) = r.get("errorText").and_then(Value::as_str) {
                panic!("navigating to {u}: {err}");
            }
        }
    }

    /// Evaluates `expr` in the page and returns its value (JSON-serialisable
    /// results only). An exception in `expr` fails the test.
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        );
        if let Some(ex) = r.get("exceptionDetails") {
            panic!("evaluating `{expr}` threw: {}", exception_text(ex));
        }
        r["result"].get("value").cloned().unwrap_or(Value::Null)
    }

    /// Polls `expr` until it is truthy and returns its value; fails with
    /// `what`, the page's state and any problems seen if it never is.
    pub fn wait_for(&mut self, expr: &str, what: &str) -> Value {
        let start = Instant::now();
        loop {
            let v = self.eval(expr);
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty(),
                Value::Object(_) => true,
            };
            if truthy {
                return v;
            }
            if start.elapsed() > DEADLINE {
                let state = self.eval(
                    "JSON.stringify({hash: location.href, state: document.querySelector('main')?.dataset.state, \
                     text: document.querySelector('main')?.innerText.slice(0, 800)})",
                );
                panic!(
                    "waiting for {what} (`{expr}`): not there after {DEADLINE:?}\npage: {state}\nproblems: {:#?}\nchromium stderr (tail): {:#?}",
                    self.problems,
                    self.stderr_tail
                        .lock()
                        .map(|t| t.clone())
                        .unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Console errors, uncaught exceptions and failed loads seen since the
    /// last call (after a round trip, so every event sent before it is in).
    pub fn problems(&mut self) -> Vec<String> {
        self.eval("1");
        std::mem::take(&mut self.problems)
    }

    /// Sends a command to the page session (or the browser before one is
    /// attached) and waits for its answer, collecting events on the way.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            msg["sessionId"] = Value::String(self.session.clone());
        }
        self.ws
            .send(Message::text(msg.to_string()))
            .unwrap_or_else(|e| panic!("sending {method} to chromium: {e}"));
        let start = Instant::now();
        loop {
            let frame = match self.ws.read() {
                Ok(f) => f,
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    assert!(
                        start.elapsed() < DEADLINE,
                        "chromium did not answer {method} within {DEADLINE:?}"
                    );
                    continue;
                }
                Err(e) => panic!("reading from chromium during {method}: {e}"),
            };
            let Message::Text(text) = frame else {
                continue;
            };
            let v: Value = serde_json::from_str(text.as_str())
                .unwrap_or_else(|e| panic!("chromium sent bad JSON ({e}): {text}"));
            if v["id"].as_u64() == Some(id) {
                if let Some(err) = v.get("error") {
                    panic!("chromium refused {method}: {err}");
                }
                return v["result"].clone();
            }
            self.record_event(&v);
        }
    }

    fn record_event(&mut self, v: &Value) {
        let p = &v["params"];
        match v["method"].as_str() {
            Some("Runtime.exceptionThrown") => {
                self.problems.push(format!(
                    "uncaught exception: {}",
                    exception_text(&p["exceptionDetails"])
                ));
            }
            Some("Runtime.consoleAPICalled")
                if matches!(p["type"].as_str(), Some("error" | "assert")) =>
            {
                let args: Vec<String> = p["args"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|x| {
                                x.get("value")
                                    .map(|v| v.to_string())
                                    .or_else(|| x["description"].as_str().map(str::to_owned))
                                    .unwrap_or_default()
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                self.problems.push(format!(
                    "console.{}: {}",
                    p["type"].as_str().unwrap_or(""),
                    args.join(" ")
                ));
            }
            Some("Log.entryAdded") if p["entry"]["level"] == "error" => {
                self.problems.push(format!(
                    "log error ({}): {} {}",
                    p["entry"]["source"].as_str().unwrap_or(""),
                    p["entry"]["text"].as_str().unwrap_or(""),
                    p["entry"]["url"].as_str().unwrap_or("")
                ));
            }
            _ => {}
        }
    }
}

fn exception_text(ex: &Value) -> String {
    let desc = ex["exception"]["description"].as_str();
    let text = ex["text"].as_str().unwrap_or("");
    format!(
        "{} ({}:{}:{})",
        desc.unwrap_or(text),
        ex["url"].as_str().unwrap_or(""),
        ex["lineNumber"],
        ex["columnNumber"]
    )
}

/// Reads chromium's stderr up to `DevTools listening on ws://...`, then keeps
/// draining it (so chromium never blocks on a full pipe), keeping the last
/// lines in `tail` for failure messages.
fn devtools_url(child: &mut Child, exe: &Path, tail: &Arc<Mutex<Vec<String>>>) -> String {
    let stderr = child.stderr.take().expect("piped stderr");
    let tail = Arc::clone(tail);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = String::new();
        let mut sent = false;
        while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
            if !sent && let Some(at) = line.find("ws://") {
                sent = tx.send(Ok(line[at..].trim().to_owned())).is_ok();
            }
            if let Ok(mut t) = tail.lock() {
                t.push(line.trim_end().to_owned());
                if t.len() > 40 {
                    t.remove(0);
                }
            }
            line.clear();
        }
        if !sent {
            let seen = tail.lock().map(|t| t.join("\n")).unwrap_or_default();
            let _ = tx.send(Err(seen));
        }
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(Ok(url)) => url,
        Ok(Err(seen)) => panic!(
            "`{}` exited before opening its DevTools port; its stderr:\n{seen}",
            exe.display()
        ),
        Err(_) => panic!(
            "`{}` did not print its DevTools address within {DEADLINE:?}",
            exe.display()
        ),
    }
}

fn connect(ws_url: &str) -> WebSocket<TcpStream> {
    let authority = ws_url
        .strip_prefix("ws://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("unexpected DevTools address {ws_url}"));
    let stream = TcpStream::connect(authority)
        .unwrap_or_else(|e| panic!("connecting to chromium at {authority}: {e}"));
    stream
        .set_read_timeout(Some(DEADLINE))
        .expect("read timeout");
    let (ws, _) = tungstenite::client(ws_url, stream)
        .unwrap_or_else(|e| panic!("WebSocket handshake with chromium at {ws_url}: {e}"));
    // From here reads wake up twice a second, so a silent browser is noticed.
    ws.get_ref()
        .set_read_timeout(Some(Duration::from_millis(500)))
        .expect("read timeout");
    ws
}
