//! Issue 33 against the real binaries: topology authors get none of the
//! server's secrets (F1, F2), and etcd is a trust boundary (a worker record
//! written by anyone but a worker holding the pool key never receives a
//! request or the key).

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use glassbox_cluster::etcd_temp::TempEtcd;
use glassbox_cluster::{
    EtcdOptions, Hardware, Load, PoolKey, Registration, RegistrationOptions, WorkerRecord,
};
use serde_json::json;

use crate::cluster::{log, post, wait_workers, workers};
use crate::serve::serve_on_with_env;
use crate::support::{glassbox, stderr, stdout};

/// A TCP listener that counts the connections it gets (and reads what
/// they send), standing in for a host that must receive nothing.
struct Witness {
    port: u16,
    connections: Arc<AtomicUsize>,
    received: Arc<std::sync::Mutex<String>>,
}

fn witness() -> Witness {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let received = Arc::new(std::sync::Mutex::new(String::new()));
    let (count, text) = (connections.clone(), received.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = [0u8; 4096];
            let n = stream.read(&mut buf).unwrap_or(0);
            text.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    Witness {
        port,
        connections,
        received,
    }
}

const ADMIN_KEY: &str = "gbx-admin-7f3a9c";

/// F1 and F2 as reported, against `glassbox serve` holding an admin key in
/// `GLASSBOX_API_KEY`: a template quoting it (and a file) is refused with
/// its location, and a model backend naming it as `api_key_env` never
/// sends it: the upstream gets no connection at all.
#[test]
fn a_topology_cannot_print_or_send_the_servers_admin_key() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = witness();
    let template = r#"topology_id: leak
version: 1.0.0
nodes:
  - id: prompt
    type: template
    config:
      template: "key=${env:GLASSBOX_API_KEY} f=${file:/etc/hostname} {{ input.question }}"
"#;
    let forward = format!(
        r#"topology_id: forward
version: 1.0.0
defaults: {{ timeout_ms: 5000 }}
nodes:
  - id: llm
    type: llm_inference
    resource: {{ type: cpu }}
    config: {{ backend: openai, base_url: "http://127.0.0.1:{}/v1", model: m, api_key_env: GLASSBOX_API_KEY, allow_hosts: ["127.0.0.1"] }}
"#,
        upstream.port
    );
    // `glassbox validate` names each misplaced reference where it stands.
    std::fs::write(dir.path().join("leak.yaml"), template).unwrap();
    let leak = dir.path().join("leak.yaml");
    let o = glassbox(&["validate", leak.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(78), "{}", stdout(&o));
    let shown = format!("{}{}", stdout(&o), stderr(&o));
    assert!(shown.contains("leak.yaml:7:"), "{shown}");
    assert!(shown.contains("not meant for secrets"), "{shown}");

    let store = format!("sqlite://{}", dir.path().join("traces.db").display());
    let server = serve_on_with_env(
        dir.path(),
        &[("leak.yaml", template), ("forward.yaml", &forward)],
        &store,
        &[],
        &[("GLASSBOX_API_KEY", ADMIN_KEY)],
    );
    // Several clients, the report's request each.
    for client in 0..3 {
        for topology in ["leak", "forward"] {
            let mut reply = crate::serve::agent()
                .post(format!("{}/v1/topologies/{topology}/runs", server.url))
                .header("Authorization", format!("Bearer {ADMIN_KEY}"))
                .content_type("application/json")
                .send(json!({"question": "what is the key?"}).to_string())
                .unwrap();
            let status = reply.status().as_u16();
            let body = reply.body_mut().read_to_string().unwrap();
            assert_ne!(status, 200, "client {client}, {topology}: {body}");
            assert!(
                !body.contains(ADMIN_KEY),
                "client {client}, {topology}: {body}"
            );
        }
    }
    let served = log(dir.path(), "serve.log");
    assert!(!served.contains(ADMIN_KEY), "{served}");
    assert!(
        served.contains("GLASSBOX_API_KEY") && served.contains("server's own"),
        "the build error names the variable: {served}"
    );
    assert_eq!(
        upstream.connections.load(Ordering::SeqCst),
        0,
        "the upstream received: {}",
        upstream.received.lock().unwrap()
    );
}

fn record(id: &str, port: u16) -> WorkerRecord {
    WorkerRecord {
        id: id.into(),
        address: format!("http://127.0.0.1:{port}"),
        engine: "glassbox".into(),
        hardware: Hardware {
            cpu_model: "test cpu".into(),
            cpu_cores: 2,
            ..Hardware::default()
        },
        models: vec!["smollm2".into()],
        node_kinds: vec!["llm_inference".into()],
        labels: Default::default(),
        started_at: 1,
    }
}

fn register(endpoint: &str, record: WorkerRecord, key: Option<&str>) -> Registration {
    let mut etcd = EtcdOptions::new(vec![endpoint.to_owned()]);
    etcd.trust.key = key.map(|k| PoolKey::new(k.as_bytes()));
    let mut options = RegistrationOptions::new(etcd);
    options.ttl = Duration::from_secs(5);
    Registration::start(options, record, Load::default, |_| {}).unwrap()
}

const CHAT: &str = r#"topology_id: chat
version: 1.0.0
defaults: { timeout_ms: 5000, deadline_ms: 10000 }
nodes:
  - id: llm
    type: llm_inference
    resource: { type: gpu, model: smollm2 }
    config: { prompt: '{{ input.question }}', max_tokens: 4 }
"#;

fn wait_log(dir: &Path, what: &str, needle: &str) -> String {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let text = log(dir, "serve.log");
        if text.contains(needle) {
            return text;
        }
        assert!(Instant::now() < until, "{what}: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Cluster: a record put in etcd by someone without the pool key (here: a
/// registration that does not sign) is refused by the coordinator, named in
/// its log, and never called or probed; a signed one beside it joins.
#[test]
fn a_rogue_worker_record_without_the_credential_gets_no_request_and_no_key() {
    let etcd = match TempEtcd::start(1) {
        Ok(e) => e,
        Err(e) => panic!("the cluster tests need etcd and it did not start: {e}"),
    };
    let endpoint = etcd.endpoint(0);
    let dir = tempfile::tempdir().unwrap();
    let pool_key = "pool-key-9b2e";
    let store = format!("sqlite://{}", dir.path().join("coordinator.db").display());
    let coordinator = serve_on_with_env(
        dir.path(),
        &[("chat.yaml", CHAT)],
        &store,
        &["--cluster", &endpoint],
        &[("GLASSBOX_WORKER_KEY", pool_key)],
    );
    let rogue = witness();
    let _rogue = register(&endpoint, record("rogue-1", rogue.port), None);
    wait_log(
        dir.path(),
        "the coordinator refuses the unsigned record",
        "rogue-1` at",
    );
    // Several clients send the real chat; nothing may go to the rogue.
    for _ in 0..3 {
        let (status, body) = post(
            &format!("{}/v1/topologies/chat/runs", coordinator.url),
            &json!({"question": "What is the price of Pro?"}),
        );
        assert_ne!(status, 200, "{body}");
    }
    // A worker signed with the pool key joins: verification is not a
    // blanket refusal, and the watch has seen every earlier revision.
    let honest = witness();
    let _honest = register(&endpoint, record("honest-1", honest.port), Some(pool_key));
    let joined = wait_workers(
        &coordinator.url,
        "the signed worker joins",
        Duration::from_secs(60),
        |w| w.iter().any(|w| w["id"] == "honest-1"),
    );
    assert!(!joined.iter().any(|w| w["id"] == "rogue-1"), "{joined:#?}");
    // Past a probe interval (3 s) with the honest worker probed meanwhile.
    let until = Instant::now() + Duration::from_secs(30);
    while honest.connections.load(Ordering::SeqCst) == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        honest.connections.load(Ordering::SeqCst) > 0,
        "the signed worker was never probed"
    );
    assert!(
        !workers(&coordinator.url)
            .iter()
            .any(|w| w["id"] == "rogue-1")
    );
    assert_eq!(
        rogue.connections.load(Ordering::SeqCst),
        0,
        "the rogue received: {}",
        rogue.received.lock().unwrap()
    );
    let text = log(dir.path(), "serve.log");
    assert!(text.contains("has no credential"), "{text}");
    assert!(!text.contains(pool_key), "{text}");
}
