//! `glassbox worker` and `glassbox serve --cluster` as processes, against a
//! real etcd (`glassbox_cluster::etcd_temp`): a worker serves its model at
//! the address it registers, a coordinator sees it join, an attached server
//! joins beside it, a worker killed with SIGKILL leaves when its lease
//! expires, and a restarted one is a new member.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use glassbox_cluster::etcd_temp::TempEtcd;
use serde_json::{Value, json};

use crate::serve::{agent, free_port, serve_on};
use crate::support::{assert_exit, glassbox, models_turn, stderr};

/// A child process killed (SIGKILL) when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn etcd() -> TempEtcd {
    match TempEtcd::start(1) {
        Ok(e) => e,
        Err(e) => panic!("the cluster tests need etcd and it did not start: {e}"),
    }
}

fn worker(dir: &Path, log: &str, args: &[&str]) -> Proc {
    worker_in(dir, log, args, None, &[])
}

/// `glassbox worker ARGS`, inside network namespace `netns` when given
/// (`ip netns exec`), with `env` set; its output goes to `dir/log`.
pub fn worker_in(
    dir: &Path,
    log: &str,
    args: &[&str],
    netns: Option<&str>,
    env: &[(&str, &str)],
) -> Proc {
    let log = std::fs::File::create(dir.join(log)).unwrap();
    let bin = env!("CARGO_BIN_EXE_glassbox");
    let mut command = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, bin]);
            c
        }
        None => Command::new(bin),
    };
    let child = command
        .arg("worker")
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("GLASSBOX_API_KEY")
        .env_remove("GLASSBOX_STORE")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    Proc(child)
}

pub fn log(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

pub fn workers(url: &str) -> Vec<Value> {
    let mut reply = agent()
        .get(format!("{url}/v1/cluster/workers"))
        .call()
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
    let v: Value = serde_json::from_str(&reply.body_mut().read_to_string().unwrap()).unwrap();
    v["workers"].as_array().cloned().unwrap_or_default()
}

/// Polls the coordinator until `cond` holds on its workers; a generous
/// bound (model loads on a busy machine), not a timing assertion.
pub fn wait_workers(
    url: &str,
    what: &str,
    limit: Duration,
    cond: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let until = Instant::now() + limit;
    loop {
        let w = workers(url);
        if cond(&w) {
            return w;
        }
        assert!(Instant::now() < until, "{what}: workers now {w:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn post(url: &str, body: &Value) -> (u16, String) {
    let mut reply = agent()
        .post(url)
        .content_type("application/json")
        .send(body.to_string())
        .unwrap();
    let status = reply.status().as_u16();
    (status, reply.body_mut().read_to_string().unwrap())
}

#[test]
fn workers_join_serve_die_and_return_as_new_members() {
    let _turn = models_turn();
    let etcd = etcd();
    let endpoint = etcd.endpoint(0);
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("coordinator.db").display());
    let coordinator = serve_on(dir.path(), &[], &store, &["--cluster", &endpoint]);
    assert!(workers(&coordinator.url).is_empty());

    let port = free_port().to_string();
    let args = [
        "--etcd",
        &endpoint,
        "--llm",
        "smollm2=smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "--threads",
        "2",
        "--max-tokens",
        "8",
        "--port",
        &port,
        "--lease-ttl",
        "2",
        "--label",
        "zone=a",
    ];
    let mut first = worker(dir.path(), "worker-1.log", &args);
    let joined = wait_workers(
        &coordinator.url,
        "the worker joins with its load",
        Duration::from_secs(180),
        |w| w.len() == 1 && w[0]["load"].is_object(),
    );
    let w = &joined[0];
    let address = format!("http://127.0.0.1:{port}");
    assert_eq!(w["address"], address.as_str(), "{w}");
    assert_eq!(w["engine"], "glassbox");
    assert_eq!(w["models"], json!(["smollm2"]));
    assert_eq!(w["node_kinds"], json!(["llm_inference"]));
    assert_eq!(w["labels"], json!({"zone": "a"}));
    assert!(w["hardware"]["cpu_cores"].as_u64().unwrap() >= 1);
    assert!(w["hardware"]["memory_bytes"].as_u64().unwrap() > 0);
    assert!(w["load_age_s"].as_u64().unwrap() <= 5, "{w}");
    let first_id = w["id"].as_str().unwrap().to_owned();
    assert!(first_id.contains(&first.0.id().to_string()), "{first_id}");

    // The contract: an OpenAI-compatible API at the registered address.
    let chat = json!({"model": "smollm2", "messages": [{"role": "user", "content": "Say hello."}]});
    let (status, body) = post(&format!("{address}/v1/chat/completions"), &chat);
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert!(
        answer["choices"][0]["message"]["content"].is_string(),
        "{answer}"
    );
    // A request's `max_tokens` lowers the worker's own (8 here): the
    // coordinators' one-token liveness probes rely on it.
    let mut short = chat.clone();
    short["max_tokens"] = json!(1);
    let (status, body) = post(&format!("{address}/v1/chat/completions"), &short);
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["usage"]["completion_tokens"], 1, "{answer}");
    let mut streamed = chat.clone();
    streamed["stream"] = json!(true);
    let (status, body) = post(&format!("{address}/v1/chat/completions"), &streamed);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("chat.completion.chunk") && body.contains("[DONE]"),
        "{body}"
    );
    for path in ["/health", "/metrics", "/v1/models"] {
        let reply = agent().get(format!("{address}{path}")).call().unwrap();
        assert_eq!(reply.status().as_u16(), 200, "{path}");
    }
    // The model door serves, not a pipeline: an unknown model is its
    // typed error naming what is served, and there are no topologies.
    let mut unknown = chat.clone();
    unknown["model"] = json!("large");
    let (status, body) = post(&format!("{address}/v1/chat/completions"), &unknown);
    assert_eq!(status, 404, "{body}");
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["error"]["code"], "model_not_found", "{err}");
    assert_eq!(
        err["error"]["message"], "this worker does not serve model `large`; it serves: smollm2",
        "{err}"
    );
    let topologies = agent()
        .get(format!("{address}/v1/topologies"))
        .call()
        .unwrap();
    assert_eq!(
        topologies.status().as_u16(),
        404,
        "a worker builds no topology"
    );

    // An existing server attached beside it (here: the worker's own API,
    // read through its glassbox_llm_* metrics).
    let _attached = worker(
        dir.path(),
        "attached.log",
        &[
            "--etcd",
            &endpoint,
            "--attach",
            &address,
            "--id",
            "attached-1",
            "--lease-ttl",
            "2",
        ],
    );
    let both = wait_workers(
        &coordinator.url,
        "the attached server joins",
        Duration::from_secs(60),
        |w| {
            w.iter()
                .any(|w| w["id"] == "attached-1" && w["load"].is_object())
        },
    );
    let attached = both.iter().find(|w| w["id"] == "attached-1").unwrap();
    assert_eq!(attached["engine"], "glassbox", "{attached}");
    assert_eq!(attached["address"], address.as_str());
    assert_eq!(attached["models"], json!(["smollm2"]));

    // SIGKILL: no goodbye; the lease (2 s) expires and the worker leaves.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    wait_workers(
        &coordinator.url,
        "the killed worker leaves",
        Duration::from_secs(20),
        |w| !w.iter().any(|w| w["id"] == first_id.as_str()),
    );

    // Restarted, it is a new member.
    let second = worker(dir.path(), "worker-2.log", &args);
    let back = wait_workers(
        &coordinator.url,
        "the restarted worker joins",
        Duration::from_secs(180),
        |w| {
            w.iter()
                .any(|w| w["address"] == address.as_str() && w["id"] != "attached-1")
        },
    );
    let again = back.iter().find(|w| w["id"] != "attached-1").unwrap();
    assert_ne!(
        again["id"],
        first_id.as_str(),
        "a restarted worker is a new member"
    );
    assert!(
        again["id"]
            .as_str()
            .unwrap()
            .contains(&second.0.id().to_string())
    );

    let coordinator_log = log(dir.path(), "serve.log");
    assert!(
        coordinator_log.contains(&format!("worker `{first_id}` joined")),
        "{coordinator_log}"
    );
    assert!(
        coordinator_log.contains(&format!("worker `{first_id}` left")),
        "{coordinator_log}"
    );
    let worker_log = log(dir.path(), "worker-1.log");
    assert!(worker_log.contains("registered"), "{worker_log}");
}

#[test]
fn bad_etcd_addresses_are_named() {
    let out = glassbox(
        &[
            "worker",
            "--etcd",
            "https://etcd:2379",
            "--attach",
            "http://127.0.0.1:1",
        ],
        None,
    );
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("`https://etcd:2379`"),
        "{}",
        stderr(&out)
    );
    let closed = format!("http://127.0.0.1:{}", free_port());
    let dir = tempfile::tempdir().unwrap();
    let out = glassbox(
        &[
            "serve",
            "--topologies",
            dir.path().to_str().unwrap(),
            "--port",
            "0",
            "--store",
            &format!("sqlite://{}", dir.path().join("t.db").display()),
            "--cluster",
            &closed,
        ],
        None,
    );
    assert_exit(&out, 69);
    let err = stderr(&out);
    assert!(
        err.contains(&closed) && err.contains("etcd_unavailable"),
        "{err}"
    );
}
