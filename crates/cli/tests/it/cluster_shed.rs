//! Capacity loss sheds by priority (issue 32, docs/cluster.md "Slow is not
//! dead"), with real processes: an etcd, a coordinator (`glassbox serve
//! --cluster`) and two `glassbox worker`s serving SmolLM2, each admitting
//! one call at a time (`max_concurrency = 1` in its config, so "full" is
//! a fact, not a timing). One worker is killed with SIGKILL: the pool's
//! capacity halves. Then, while interactive requests keep the survivor
//! full, offline requests arrive: they get 429 with `Retry-After` at once
//! (offline work goes first), the interactive ones wait for the survivor
//! and are all served, and nobody gets a 503 from a pool that is alive.
//!
//! Light on CPU: eight tokens an answer, and the workers' test throttle
//! (`--test-slowdown`) makes each call last seconds by sleeping, not by
//! computing. Counts and words are checked, never speed.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cluster::{Proc, wait_workers, worker_in};
use crate::cluster_pool::{etcd, has_load, ids, until_busy};
use crate::serve::{agent, free_port, serve_on_with_env};
use crate::support::models_turn;

/// One GPU-tagged LLM node: every call is placed on a worker. Its timeout
/// (how long an interactive call may wait for a worker) is a hang guard.
const CHAT: &str = r#"topology_id: chat
version: 1.0.0
defaults: { timeout_ms: 120000, deadline_ms: 240000 }
nodes:
  - id: llm
    type: llm_inference
    resource: { type: gpu, model: smollm2 }
    config: { prompt: '{{ input.question }}', max_tokens: 8, temperature: 0 }
"#;

fn start_worker(dir: &Path, id: &str, etcd: &str, config: &Path) -> (Proc, String) {
    let port = free_port().to_string();
    let address = format!("http://127.0.0.1:{port}");
    let args = [
        "--etcd",
        etcd,
        "--llm",
        "smollm2=smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "--threads",
        "1",
        "--max-tokens",
        "8",
        "--test-slowdown",
        "20",
        "--config",
        config.to_str().unwrap(),
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--advertise",
        &address,
        "--lease-ttl",
        "2",
        "--id",
        id,
    ];
    (
        worker_in(dir, &format!("{id}.log"), &args, None, &[]),
        address,
    )
}

/// What one request came to: its band, status, `Retry-After`, body, and
/// how long it took.
#[derive(Debug)]
struct Answer {
    band: &'static str,
    status: u16,
    retry_after: Option<String>,
    body: Value,
    took: Duration,
}

fn ask(url: &str, band: &'static str, question: &str) -> Answer {
    let started = Instant::now();
    let mut r = agent()
        .post(format!("{url}/v1/topologies/chat/runs"))
        .content_type("application/json")
        .header("X-Glassbox-Priority", band)
        .send(json!({ "question": question }).to_string())
        .unwrap();
    let retry_after = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let text = r.body_mut().read_to_string().unwrap_or_default();
    Answer {
        band,
        status: r.status().as_u16(),
        retry_after,
        body: serde_json::from_str(&text).unwrap_or(json!({ "raw": text })),
        took: started.elapsed(),
    }
}

#[test]
fn capacity_loss_sheds_offline_work_first_and_never_answers_503() {
    let _turn = models_turn();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let etcd = etcd(1, &[]);
    let endpoints = etcd.endpoints().join(",");
    let worker_config = d.join("worker.toml");
    std::fs::write(
        &worker_config,
        "[topologies.smollm2]\nmax_concurrency = 1\n",
    )
    .unwrap();
    let store = format!("sqlite://{}", d.join("c.db").display());
    let c = serve_on_with_env(
        &d.join("c"),
        &[("chat.yaml", CHAT)],
        &store,
        &["--cluster", &endpoints],
        &[],
    );
    let (mut w1, _) = start_worker(d, "w1", &endpoints, &worker_config);
    let (_w2, w2_address) = start_worker(d, "w2", &endpoints, &worker_config);
    wait_workers(&c.url, "w1 and w2 join", Duration::from_secs(300), |w| {
        has_load(w, "w1") && has_load(w, "w2")
    });

    // Capacity loss: w1 dies, and leaves when its lease expires.
    w1.0.kill().unwrap();
    w1.0.wait().unwrap();
    wait_workers(
        &c.url,
        "the killed w1 leaves",
        Duration::from_secs(30),
        |w| ids(w) == ["w2"],
    );

    // Three interactive requests at once: one runs on w2, two wait.
    let (tx, rx) = std::sync::mpsc::channel::<Answer>();
    let interactive: Vec<_> = (0..3)
        .map(|i| {
            let (url, tx) = (c.url.clone(), tx.clone());
            std::thread::spawn(move || {
                let a = ask(
                    &url,
                    "interactive",
                    &format!("Name a colour, please ({i})."),
                );
                tx.send(a).unwrap();
            })
        })
        .collect();
    drop(tx);
    until_busy(&w2_address, "w2 under the interactive requests");
    // Offline requests, one after another, while the interactive ones are
    // still out: w2 is full, so they are the ones turned away.
    let mut offline = Vec::new();
    let until = Instant::now() + Duration::from_secs(300);
    while !interactive.iter().all(|t| t.is_finished()) {
        offline.push(ask(&c.url, "offline", "Name a tree."));
        assert!(
            Instant::now() < until,
            "the interactive requests never ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for t in interactive {
        t.join().unwrap();
    }
    let mut answers: Vec<Answer> = rx.iter().collect();
    assert_eq!(answers.len(), 3, "{answers:#?}");
    answers.extend(offline);

    let summary: Vec<(&str, u16, u128)> = answers
        .iter()
        .map(|a| (a.band, a.status, a.took.as_millis()))
        .collect();
    assert!(
        answers.iter().all(|a| a.status != 503),
        "an alive pool answered 503: {summary:?}"
    );
    for a in answers.iter().filter(|a| a.band == "interactive") {
        assert_eq!(
            a.status, 200,
            "interactive work waits and is served: {a:#?}"
        );
    }
    let shed: Vec<&Answer> = answers.iter().filter(|a| a.status == 429).collect();
    assert!(
        !shed.is_empty(),
        "no offline request was shed while w2 was full: {summary:?}"
    );
    for a in &shed {
        assert_eq!(a.band, "offline", "only offline work is shed: {a:#?}");
        assert_eq!(a.retry_after.as_deref(), Some("1"), "{a:#?}");
        let message = a.body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("offline requests are shed first"),
            "{a:#?}"
        );
    }
    assert!(
        answers
            .iter()
            .all(|a| a.band == "interactive" || a.status == 200 || a.status == 429),
        "offline work is served or shed, nothing else: {summary:?}"
    );
}
