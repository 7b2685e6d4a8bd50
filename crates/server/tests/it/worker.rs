//! A cluster worker's own server (`glassbox_server::worker`), in-process on
//! loopback with real models (SmolLM2, MiniLM): the application layer's
//! model door answers its calls straight from the engines. No topology is
//! built: there is no topology API, an unknown model is the door's typed
//! error naming what is served, and the door counts what it answered.

use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use glassbox_app::models::door::{Admit, ChatAsk, ModelDoor};
use glassbox_app::models::{LlmSettings, ModelKind, Models};
use glassbox_server::Config;
use glassbox_server::worker::{WorkerOptions, WorkerServer};
use serde_json::{Value, json};

use crate::support::Reply;

/// A worker serving on an ephemeral loopback port until dropped.
pub struct TestWorker {
    pub base: String,
    /// What serves its calls.
    pub door: Arc<ModelDoor>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    agent: ureq::Agent,
}

impl TestWorker {
    pub fn start(models: Models, config: Config) -> TestWorker {
        let options = WorkerOptions {
            models,
            config,
            host: Some("127.0.0.1".into()),
            port: Some(0),
        };
        let (tx, rx) = mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let server = match WorkerServer::bind(options).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = tx.send(Ok((server.local_addr(), server.state().door.clone())));
                let _ = server
                    .run(async move {
                        let _ = stop_rx.await;
                    })
                    .await;
            });
        });
        let (addr, door) = rx.recv().unwrap().unwrap();
        TestWorker {
            base: format!("http://{addr}"),
            door,
            shutdown: Some(stop_tx),
            thread: Some(thread),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(600)))
                .build()
                .into(),
        }
    }

    /// SmolLM2 as `smollm2`, a few tokens an answer.
    pub fn smollm2() -> TestWorker {
        TestWorker::smollm2_with(Config::default())
    }

    /// [`TestWorker::smollm2`] under `config`.
    pub fn smollm2_with(config: Config) -> TestWorker {
        let mut models = Models::new(LlmSettings {
            max_tokens: 4,
            threads: Some(1),
            ..LlmSettings::default()
        });
        models
            .register(
                "smollm2",
                ModelKind::Llm,
                "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            )
            .unwrap();
        TestWorker::start(models, config)
    }

    /// MiniLM as `minilm`.
    pub fn minilm() -> TestWorker {
        let mut models = Models::new(LlmSettings::default());
        models
            .register("minilm", ModelKind::Embedding, "all-minilm-l6-v2")
            .unwrap();
        TestWorker::start(models, Config::default())
    }

    pub fn get(&self, path: &str) -> Reply {
        crate::support::reply(
            self.agent
                .get(format!("{}{path}", self.base))
                .call()
                .unwrap(),
        )
    }

    pub fn post(&self, path: &str, body: &Value) -> Reply {
        crate::support::reply(
            self.agent
                .post(format!("{}{path}", self.base))
                .content_type("application/json")
                .send(body.to_string())
                .unwrap(),
        )
    }

    /// Stops it: no more connections are accepted.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for TestWorker {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

#[test]
fn the_model_door_answers_chats_streams_and_names_what_it_serves() {
    let config = Config::parse("[topologies.smollm2]\nmax_concurrency = 1\n").unwrap();
    let w = TestWorker::smollm2_with(config);
    let chat = json!({"model": "smollm2", "temperature": 0,
        "messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "Say hello."}]});
    let r = w.post("/v1/chat/completions", &chat);
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "smollm2");
    assert!(v["choices"][0]["message"]["content"].is_string(), "{v}");
    // At most the worker's own 4 tokens; the engine's version is named.
    let completion = v["usage"]["completion_tokens"].as_u64().unwrap();
    assert!((1..=4).contains(&completion), "{v}");
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 3, "{v}");
    assert_eq!(
        v["system_fingerprint"].as_str(),
        w.door.version("smollm2"),
        "{v}"
    );
    // A call's `max_tokens` lowers the worker's (a coordinator's probe).
    let mut one = chat.clone();
    one["max_tokens"] = json!(1);
    let r = w.post("/v1/chat/completions", &one);
    assert_eq!(r.json()["usage"]["completion_tokens"], 1, "{}", r.text);

    let mut streamed = chat.clone();
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let r = w.post("/v1/chat/completions", &streamed);
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.text.contains("chat.completion.chunk"), "{}", r.text);
    assert!(r.text.contains("\"finish_reason\":"), "{}", r.text);
    assert!(r.text.contains("\"usage\":"), "{}", r.text);
    assert!(r.text.trim_end().ends_with("data: [DONE]"), "{}", r.text);
    assert_eq!(w.door.answered(), 3, "the door answered every call");

    // The door's typed error, over the wire: the model asked for and what
    // is served; nothing was answered for it.
    let mut unknown = chat.clone();
    unknown["model"] = json!("large");
    let r = w.post("/v1/chat/completions", &unknown);
    assert_eq!(r.status, 404, "{}", r.text);
    assert_eq!(r.code(), "model_not_found");
    assert_eq!(
        r.json()["error"]["message"],
        "this worker does not serve model `large`; it serves: smollm2"
    );
    let r = w.post(
        "/v1/embeddings",
        &json!({"model": "smollm2", "input": "hello"}),
    );
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.code(), "wrong_model_kind");
    let mut tool = chat.clone();
    tool["messages"] = json!([{"role": "tool", "content": "42"}]);
    assert_eq!(w.post("/v1/chat/completions", &tool).code(), "bad_input");
    assert_eq!(w.door.answered(), 3);

    // No topology, no pipeline: a worker has no topology API at all.
    let r = w.get("/v1/topologies");
    assert_eq!(r.status, 404, "{}", r.text);
    assert!(
        r.json()["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("coordinator")
    );
    let models = w.get("/v1/models").json();
    assert_eq!(models["data"][0]["id"], "smollm2", "{models}");
    assert_eq!(models["data"][0]["kind"], "llm_inference", "{models}");
    for path in ["/health", "/healthz", "/readyz"] {
        assert_eq!(w.get(path).status, 200, "{path}");
    }
    let metrics = w.get("/metrics").text;
    assert!(
        metrics.contains("glassbox_llm_generation_tokens"),
        "{metrics}"
    );

    // Admission is per model (`[topologies.smollm2] max_concurrency = 1`):
    // while a call holds its one slot, another is refused at once.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ask = ChatAsk {
        messages: vec![("user".into(), "Count to three.".into())],
        ..ChatAsk::default()
    };
    let held = rt
        .block_on(w.door.chat("smollm2", ask, Admit::default()))
        .unwrap();
    let r = w.post("/v1/chat/completions", &chat);
    assert_eq!(r.status, 429, "{}", r.text);
    assert_eq!(r.code(), "overloaded");
    assert_eq!(r.header("retry-after"), Some("1"), "{}", r.text);
    let done = rt.block_on(held.finish()).unwrap();
    assert!(done.completion_tokens <= 4, "{done:?}");
    assert_eq!(w.post("/v1/chat/completions", &chat).status, 200);
}

#[test]
fn an_embedding_model_embeds_and_does_nothing_else() {
    let w = TestWorker::minilm();
    let r = w.post(
        "/v1/embeddings",
        &json!({"model": "minilm", "input": ["a cat", "a dog"]}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["data"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["data"][1]["index"], 1);
    assert_eq!(v["data"][0]["embedding"].as_array().unwrap().len(), 384);
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() >= 4, "{v}");
    let r = w.post("/v1/embeddings", &json!({"model": "minilm", "input": []}));
    assert_eq!(r.code(), "bad_input", "{}", r.text);
    let r = w.post(
        "/v1/chat/completions",
        &json!({"model": "minilm", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(r.code(), "wrong_model_kind", "{}", r.text);
    // A band that is no band is refused before anything runs.
    let r = w.post(
        "/v1/embeddings",
        &json!({"model": "minilm", "input": "x", "priority": "soon"}),
    );
    assert_eq!(r.code(), "bad_priority", "{}", r.text);
}
