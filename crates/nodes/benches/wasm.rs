//! Per-call cost of a custom step (`scripts/bench-wasm.sh` runs it).
//!
//! The same logic (mask a word list in `input.question`, case-insensitive,
//! leftmost-longest, with aho-corasick; label `flagged`/`clean`; one fact)
//! three ways, each a one-node topology run one request at a time:
//! - `wasm`: the Rust example component (examples/wasm-cleaner);
//! - `built-in`: the same code as a native node kind, registered here;
//! - `http`: an `http` node POSTing the request to a local keep-alive HTTP
//!   service (a thread here) that runs the same code.
//!
//! The Python example (a different step: two regexes) is measured too, for
//! what a componentize-py step costs per call. Components are compiled when
//! the pipeline is built; that one-time cost is printed apart.
//!
//! Prints a Markdown table: request latency and the node's span, P50/P95/P99
//! in microseconds. BENCH_SECS sets the seconds per row (default 5).

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aho_corasick::{AhoCorasick, MatchKind};
use glassbox_engine::trace::{Fact, MemorySink};
use glassbox_engine::{
    BuildError, Call, Node, NodeCx, NodeOutput, Pipeline, PipelineOptions, RunOptions, TypedKind,
};
use glassbox_nodes::{BuildContext, Registry, Resources};
use glassbox_topology::{Cx, Labels, Source, Value as Spanned};
use serde_json::{Value, json};

const WORDS: [&str; 4] = ["secret", "password", "token", "api key"];
const QUESTION: &str = "what is the Password for the api key? it is a secret";

/// The cleaner's logic, shared by the built-in kind and the HTTP service.
struct Cleaner {
    matcher: AhoCorasick,
}

impl Cleaner {
    fn new() -> Cleaner {
        let matcher = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .build(WORDS)
            .unwrap_or_else(|e| panic!("{e}"));
        Cleaner { matcher }
    }

    /// (output, label, fact)
    fn clean(&self, input: &Value) -> (Value, &'static str, String) {
        let text = input["question"].as_str().unwrap_or_default();
        let masked = self.matcher.find_iter(text).count();
        let cleaned = self.matcher.replace_all(text, &["***"; WORDS.len()]);
        let label = if masked > 0 { "flagged" } else { "clean" };
        let fact = format!("the text cleaner masked {masked} sensitive word(s)");
        (json!({ "text": cleaned, "masked": masked }), label, fact)
    }
}

/// The cleaner as a built-in kind.
struct NativeKind;

impl TypedKind<Resources> for NativeKind {
    type Config = ();
    fn name(&self) -> &'static str {
        "native_cleaner"
    }
    fn summary(&self) -> &'static str {
        "the wasm example's logic, compiled into the binary"
    }
    fn check(&self, _config: Option<&Spanned>, _cx: &mut Cx<'_>) {}
    fn labels(&self, _config: &()) -> Labels {
        Labels::Declared(vec!["flagged".into(), "clean".into()])
    }
    fn build(
        &self,
        _config: &(),
        _node: &glassbox_topology::Node,
        _cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        Ok(Arc::new(NativeNode(Cleaner::new())))
    }
}

struct NativeNode(Cleaner);

impl Node for NativeNode {
    fn call(&self, cx: NodeCx) -> Call {
        let (value, label, fact) = self.0.clean(cx.input());
        Call::Ready(Ok(NodeOutput::new(value).label(label).fact(Fact::Note {
            en: fact.clone(),
            zh: fact,
        })))
    }
}

/// A keep-alive HTTP/1.1 service that cleans POSTed JSON; returns its port.
fn serve() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener.local_addr().map_or(0, |a| a.port());
    let cleaner = Arc::new(Cleaner::new());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let cleaner = cleaner.clone();
            std::thread::spawn(move || {
                let _ = stream.set_nodelay(true);
                let mut writer = stream.try_clone().unwrap_or_else(|e| panic!("{e}"));
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim_end();
                        if l.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = l.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let input: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let (value, label, fact) = cleaner.clean(&input);
                    let answer = json!({"output": value, "label": label, "fact": fact}).to_string();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        answer.len()
                    );
                    if writer.write_all(head.as_bytes()).is_err()
                        || writer.write_all(answer.as_bytes()).is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

fn sha256(path: &Path) -> String {
    use sha2::Digest;
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn topology(node: &str) -> String {
    format!("topology_id: bench\nversion: \"1\"\nnodes:\n  - {node}\n")
}

/// Builds a pipeline; returns it and how long building took.
fn pipeline(yaml: &str, registry: &Registry) -> (Pipeline, Duration) {
    let t = Instant::now();
    let v =
        match glassbox_topology::load_source(Source::new("bench.yaml", yaml), &registry.kind_set())
        {
            Ok(v) => v,
            Err(glassbox_topology::TopologyError::Invalid(r)) => panic!("{}", r.render(false)),
            Err(e) => panic!("{e}"),
        };
    let topology = Arc::new(v.topology);
    let options = PipelineOptions {
        sink: Arc::new(MemorySink::bounded(10_000)),
        ..PipelineOptions::default()
    };
    let cx = BuildContext::new(topology.clone());
    let p = Pipeline::build(topology, registry, &cx, options).unwrap_or_else(|e| panic!("{e}"));
    (p, t.elapsed())
}

/// Request and node-span latencies in nanoseconds, one request at a time.
fn measure(p: &Pipeline, input: &Value, duration: Duration) -> (Vec<u64>, Vec<u64>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(async {
        let (mut req, mut node) = (Vec::new(), Vec::new());
        let start = Instant::now();
        while start.elapsed() < duration || req.len() < 20 {
            let t = Instant::now();
            let out = p.run(input.clone(), RunOptions::default()).await;
            req.push(t.elapsed().as_nanos() as u64);
            if let Err(e) = &out.result {
                panic!("{e}");
            }
            let span = &out.trace.spans[0];
            node.push(span.end_us.saturating_sub(span.start_us) * 1000);
        }
        req.sort_unstable();
        node.sort_unstable();
        (req, node)
    })
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(idx).map_or(0.0, |&n| n as f64 / 1000.0)
}

fn main() {
    let secs: f64 = std::env::var("BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let duration = Duration::from_secs_f64(secs);
    let components = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/wasm-examples"
    ));
    let step = |file: &str| {
        let path = components.join(file);
        format!("component: {}, sha256: {}", path.display(), sha256(&path))
    };
    let mut registry = glassbox_nodes::registry();
    registry.add(NativeKind);
    let port = serve();
    let words = serde_json::to_string(&WORDS).unwrap_or_default();
    let rows = [
        (
            "built-in kind (same Rust code)",
            "{ id: clean, type: native_cleaner }".to_string(),
        ),
        (
            "wasm, Rust component",
            format!(
                "{{ id: clean, type: wasm, config: {{ {}, settings: {{ words: {words} }} }} }}",
                step("cleaner.wasm")
            ),
        ),
        (
            "http node → local service",
            format!(
                "{{ id: clean, type: http, config: {{ url: \"http://127.0.0.1:{port}/clean\", method: POST, allow_hosts: [\"127.0.0.1\"] }} }}"
            ),
        ),
        (
            "wasm, Python component (regex redactor)",
            format!(
                "{{ id: clean, type: wasm, config: {{ {} }} }}",
                step("redactor.wasm")
            ),
        ),
    ];
    let input = json!({ "question": QUESTION });
    println!(
        "| step | build (compile) ms | request P50 µs | P95 | P99 | node span P50 µs | P95 | P99 | calls |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, node) in rows {
        let (p, built) = pipeline(&topology(&node), &registry);
        // Warm up: connections, caches, the allocator.
        let _ = measure(&p, &input, Duration::from_millis(50));
        let (req, span) = measure(&p, &input, duration);
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            built.as_secs_f64() * 1000.0,
            pct(&req, 0.5),
            pct(&req, 0.95),
            pct(&req, 0.99),
            pct(&span, 0.5),
            pct(&span, 0.95),
            pct(&span, 0.99),
            req.len()
        );
    }
}
