//! Placement and failover with real workers: in-process worker servers
//! (`glassbox_server::worker`) on loopback, each serving SmolLM2 (a few
//! tokens) as the OpenAI model `smollm2` through its model door, put in a
//! pool by hand; a coordinator server whose GPU-tagged
//! LLM nodes are placed on them. Membership from etcd is another test's
//! business: here the pool is filled directly.

use std::io::Read;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use glassbox_cluster::member::now_secs;
use glassbox_cluster::{Gpu, Hardware, Load, Pool, WorkerRecord};
use glassbox_nodes::cluster::DispatchOptions;
use glassbox_server::Config;
use serde_json::{Value, json};

use crate::support::TestServer;
use crate::worker::TestWorker;

/// The coordinator's topology: one GPU-tagged LLM node.
const CHAT: &str = r#"topology_id: chat
version: 1.0.0
defaults: { timeout_ms: 60000, deadline_ms: 120000 }
nodes:
  - id: llm
    type: llm_inference
    resource: { type: gpu, model: smollm2, cost_per_1k_tokens: 0.004 }
    config: { prompt: '{{ input.question }}', max_tokens: 4, temperature: 0 }
"#;

/// Two GPU-tagged LLM nodes in a row, in one affinity group or none.
fn pair(id: &str, affinity: &str) -> String {
    format!(
        r#"topology_id: {id}
version: 1.0.0
defaults: {{ timeout_ms: 60000, deadline_ms: 120000 }}
nodes:
  - id: first
    type: llm_inference
    resource: {{ type: gpu, model: smollm2 }}
    {affinity}
    config: {{ prompt: '{{{{ input.question }}}}', max_tokens: 4 }}
  - id: second
    type: llm_inference
    resource: {{ type: gpu, model: smollm2 }}
    {affinity}
    config: {{ max_tokens: 4 }}
edges:
  - {{ from: first, to: second }}
"#
    )
}

/// The coordinator's embedding topology: one GPU-tagged embedding node.
const EMBED: &str = r#"topology_id: embed
version: 1.0.0
nodes:
  - id: embed
    type: embedding
    resource: { type: gpu, model: minilm, cost_per_1k_tokens: 0.0001 }
"#;

/// A worker serving SmolLM2 as the model `smollm2` through its model door.
fn worker() -> TestWorker {
    TestWorker::smollm2()
}

fn record(id: &str, address: &str) -> WorkerRecord {
    WorkerRecord {
        id: id.into(),
        address: address.into(),
        engine: "glassbox".into(),
        hardware: Hardware {
            gpus: vec![Gpu {
                name: "NVIDIA L4".into(),
                memory_bytes: 22 << 30,
                compute_capability: Some("8.9".into()),
            }],
            cpu_model: "test".into(),
            cpu_cores: 2,
            memory_bytes: 1 << 30,
        },
        models: vec!["smollm2".into()],
        node_kinds: vec!["llm_inference".into()],
        labels: Default::default(),
        started_at: now_secs(),
    }
}

fn load(pool: &Pool, id: &str, running: u64) {
    pool.set_load(
        id,
        Load {
            running,
            at: now_secs(),
            ..Load::default()
        },
    );
}

/// Options for tests: no probe during the test unless it wants one; loads
/// set once stay usable for the whole test; an open circuit stays open
/// however slow the machine.
fn options() -> DispatchOptions {
    let mut o = DispatchOptions {
        attempt_timeout: Duration::from_secs(30),
        probe_interval: Duration::from_secs(3600),
        ..DispatchOptions::default()
    };
    o.breaker.cool_down = Duration::from_secs(3600);
    o.placement.max_load_age = Duration::from_secs(3600);
    o.placement.fresh_for = Duration::from_secs(3600);
    o
}

fn coordinator(files: &[(&str, &str)], pool: &Pool, dispatch: DispatchOptions) -> TestServer {
    let pool = pool.clone();
    let config = Config {
        dispatch,
        ..Config::default()
    };
    TestServer::start_with(files, config, move |o| {
        o.cluster = Some(pool);
    })
}

/// Runs `topology` and returns the run's body and its stored trace.
fn run(c: &TestServer, topology: &str, question: &str) -> (Value, Value) {
    let r = c.post(
        &format!("/v1/topologies/{topology}/runs"),
        None,
        &json!({ "question": question }).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    let id = body["request_id"].as_str().unwrap().to_string();
    let t = c.get(&format!("/v1/traces/{id}"), None);
    assert_eq!(t.status, 200, "{}", t.text);
    (body, t.json())
}

/// (node, worker) of every span.
fn workers(trace: &Value) -> Vec<(String, String)> {
    trace["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["node"].as_str().unwrap().to_string(),
                s["worker"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Asserts that a worker's model door answered `n` calls (it counts a
/// call when its engine starts it; the coordinator's run ends after).
fn served(w: &TestWorker, n: u64) {
    assert_eq!(w.door.answered(), n, "calls {} answered", w.base);
}

#[test]
fn placement_follows_load_and_the_trace_says_why() {
    let (w1, w2) = (worker(), worker());
    let pool = Pool::new();
    pool.upsert_record(record("w1", &w1.base));
    let mut lacks = record("w3", "http://127.0.0.1:9");
    lacks.models = vec!["other".into()];
    pool.upsert_record(lacks);
    pool.upsert_record(record("w2", &w2.base));
    load(&pool, "w1", 5);
    load(&pool, "w2", 0);
    load(&pool, "w3", 0);
    let c = coordinator(&[("chat.yaml", CHAT)], &pool, options());

    let (body, trace) = run(&c, "chat", "Say hi.");
    assert_eq!(workers(&trace), [("llm".to_string(), "w2".to_string())]);
    let why = body["explanation"].as_str().unwrap();
    assert!(
        why.contains(
            "`llm` ran on worker w2 (least loaded for smollm2 on its hardware, NVIDIA L4; w1 busier, w3 lacks the model)"
        ),
        "{why}"
    );
    assert!(
        !body["output"]["text"].as_str().unwrap().is_empty(),
        "{body}"
    );
    assert_eq!(
        trace["spans"][0]["tags"]["worker"], "w2",
        "{}",
        trace["spans"][0]
    );
    served(&w2, 1);
    served(&w1, 0);

    // The load turns: so does placement.
    load(&pool, "w1", 0);
    load(&pool, "w2", 7);
    let (_, trace) = run(&c, "chat", "Say hi again.");
    assert_eq!(workers(&trace), [("llm".to_string(), "w1".to_string())]);
    served(&w1, 1);
    served(&w2, 1);
}

#[test]
fn the_config_file_switches_placement_to_plain_round_robin() {
    let (w1, w2) = (worker(), worker());
    let pool = Pool::new();
    pool.upsert_record(record("w1", &w1.base));
    pool.upsert_record(record("w2", &w2.base));
    load(&pool, "w1", 0);
    load(&pool, "w2", 9);
    // As `options()`, but through the `[cluster]` section of the file.
    let config = Config::parse(
        r#"
        [cluster]
        placement = "round_robin"
        attempt_timeout = "30s"
        probe_interval = "1h"
        cool_down = "1h"
        max_load_age = "1h"
        fresh_for = "1h"
        "#,
    )
    .unwrap();
    let p = pool.clone();
    let c = TestServer::start_with(&[("chat.yaml", CHAT)], config, move |o| {
        o.cluster = Some(p);
    });
    // Scored placement would send both to idle w1; a plain turn does not
    // look at load.
    let mut seen = Vec::new();
    for q in ["Say hi.", "Say hello."] {
        let (body, trace) = run(&c, "chat", q);
        seen.push(workers(&trace)[0].1.clone());
        let why = body["explanation"].as_str().unwrap();
        assert!(why.contains("its turn in plain round robin"), "{why}");
    }
    seen.sort();
    assert_eq!(seen, ["w1", "w2"]);
    served(&w1, 1);
    served(&w2, 1);
}

#[test]
fn an_affinity_group_lands_on_one_worker_per_request() {
    let (w1, w2) = (worker(), worker());
    let pool = Pool::new();
    pool.upsert_record(record("w1", &w1.base));
    pool.upsert_record(record("w2", &w2.base));
    load(&pool, "w1", 0);
    load(&pool, "w2", 0);
    let together = pair("together", "affinity: gpu-a");
    let apart = pair("apart", "");
    let c = coordinator(
        &[("together.yaml", &together), ("apart.yaml", &apart)],
        &pool,
        options(),
    );
    // Equal loads tie, and ties take turns: without affinity the two
    // nodes of one request land on different workers...
    let (_, trace) = run(&c, "apart", "Name a colour.");
    let w = workers(&trace);
    assert_ne!(w[0].1, w[1].1, "{w:?}");
    // ...with it, on the same one, request after request.
    for q in ["Name a fruit.", "Name a tree."] {
        let (body, trace) = run(&c, "together", q);
        let w = workers(&trace);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[0].1, w[1].1, "{w:?}");
        let why = body["explanation"].as_str().unwrap();
        assert!(
            why.contains("`second` ran on worker")
                && why.contains("kept with its affinity group `gpu-a`"),
            "{why}"
        );
    }
}

#[test]
fn a_worker_shut_down_mid_run_fails_over_and_the_trace_shows_both_attempts() {
    let (w1, w2) = (worker(), worker());
    let pool = Pool::new();
    pool.upsert_record(record("w1", &w1.base));
    pool.upsert_record(record("w2", &w2.base));
    load(&pool, "w1", 0);
    load(&pool, "w2", 3);
    let c = coordinator(&[("chat.yaml", CHAT)], &pool, options());
    let (_, trace) = run(&c, "chat", "First question.");
    assert_eq!(workers(&trace)[0].1, "w1");

    // w1 goes away; its lease has not expired, so the pool still lists it.
    // A stream moves over, before its first byte.
    w1.stop();
    let r = c.post(
        "/v1/chat/completions",
        None,
        &json!({"model": "chat", "stream": true,
                "messages": [{"role": "user", "content": "Second question."}]})
        .to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.text.contains("[DONE]") && !r.text.contains("\"error\""),
        "{}",
        r.text
    );
    let id = r.header("x-request-id").unwrap().to_string();
    let t = c.get(&format!("/v1/traces/{id}"), None).json();
    let why = t["explanation"].as_str().unwrap();
    assert!(
        why.contains("`llm` ran on worker w2") && why.contains("after w1 failed ("),
        "{why}"
    );
    // It refused the connection: dead, so it is not tried again (a dead
    // worker leaves at once, before its lease says so).
    for q in ["Third question.", "Fourth question.", "Fifth question."] {
        let (body, trace) = run(&c, "chat", q);
        assert_eq!(body["status"], "ok", "{body}");
        assert_eq!(workers(&trace)[0].1, "w2");
        let why = body["explanation"].as_str().unwrap();
        assert!(
            why.contains("w1 unhealthy") && !why.contains("after w1 failed"),
            "{why}"
        );
    }
    served(&w2, 4);
}

/// A server that accepts connections and reads requests but never answers.
fn hung_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut buf = [0u8; 4096];
            let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = conn.read(&mut buf);
            held.push(conn);
        }
    });
    format!("http://{addr}")
}

#[test]
fn a_hung_worker_times_out_is_probed_out_and_avoided() {
    // Embeddings: a real worker answers them in milliseconds even on a
    // loaded machine, so the silence allowed can be short.
    let w2 = TestWorker::minilm();
    let pool = Pool::new();
    for (id, address) in [("hung", hung_server()), ("w2", w2.base.clone())] {
        let mut r = record(id, &address);
        r.models = vec!["minilm".into()];
        r.node_kinds = vec!["embedding".into()];
        pool.upsert_record(r);
    }
    load(&pool, "hung", 0);
    load(&pool, "w2", 3);
    let mut o = options();
    o.attempt_timeout = Duration::from_secs(2);
    o.probe_interval = Duration::from_secs(3);
    o.probe_timeout = Duration::from_secs(2);
    // Only a probe can mark it unhealthy here, not its failed calls.
    o.breaker.failures_to_open = 100;
    let c = coordinator(&[("embed.yaml", EMBED)], &pool, o);

    // Before any probe: the call waits for the hung worker, gives up after
    // two seconds of silence and moves on.
    let started = Instant::now();
    let (body, trace) = run(&c, "embed", "Are you there?");
    assert_eq!(workers(&trace)[0].1, "w2");
    assert_eq!(body["output"]["dim"], 384, "{body}");
    let why = body["explanation"].as_str().unwrap();
    assert!(
        why.contains("`embed` ran on worker w2") && why.contains("after hung failed ("),
        "{why}"
    );
    assert!(why.contains("timeout"), "{why}");
    assert!(started.elapsed() >= Duration::from_secs(2));

    // The probes find it hung: placement leaves it out without trying it.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (body, trace) = run(&c, "embed", "Still there?");
        assert_eq!(workers(&trace)[0].1, "w2");
        let why = body["explanation"].as_str().unwrap().to_string();
        if why.contains("hung unhealthy") {
            assert!(!why.contains("after hung failed"), "{why}");
            break;
        }
        assert!(Instant::now() < deadline, "never probed out: {why}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_failover_the_retry_budget_refuses_is_named_in_the_trace_and_the_explanation() {
    // w2 could answer, but the budget allows no failover at all, so the
    // call that meets the dead worker first ends there.
    let w2 = TestWorker::minilm();
    let gone = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let pool = Pool::new();
    for (id, address) in [("gone", gone.as_str()), ("w2", w2.base.as_str())] {
        let mut r = record(id, address);
        r.models = vec!["minilm".into()];
        r.node_kinds = vec!["embedding".into()];
        pool.upsert_record(r);
    }
    load(&pool, "gone", 0);
    load(&pool, "w2", 3);
    let mut o = options();
    o.budget.ratio = 0.0;
    o.budget.min_per_second = 0.0;
    let c = coordinator(&[("embed.yaml", EMBED)], &pool, o);

    let r = c.post(
        "/v1/topologies/embed/runs",
        None,
        &json!({ "question": "Are you there?" }).to_string(),
    );
    assert_eq!(r.status, 503, "{}", r.text);
    let said = "no failover: the retry budget is spent: 0 failovers for 1 calls in the last 10 s, 0 allowed";
    let body = r.json();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`embed` failed on gone (") && message.contains(said),
        "{message}"
    );
    let id = body["request_id"].as_str().unwrap();
    let t = c.get(&format!("/v1/traces/{id}"), None);
    assert_eq!(t.status, 200, "{}", t.text);
    let t = t.json();
    let why = t["explanation"].as_str().unwrap();
    assert!(why.contains(said), "the stored explanation: {why}");
    let span = t["spans"][0]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(span.contains(said), "the stored span: {}", t["spans"][0]);
    assert!(!message.contains("w2"), "never sent to w2: {message}");
    // The budget only stopped the failover: w2 itself is fine, and the
    // dead worker is left out of the next call without spending any.
    let (_, trace) = run(&c, "embed", "And now?");
    assert_eq!(workers(&trace)[0].1, "w2");
}
