//! Priority bands, quotas and maximum run times over real HTTP: a topology
//! with one slot and a queue, held by a test upstream that answers one call
//! at a time, so the order requests get the slot in is the order they
//! finish in. Orders and counts are checked, never speed.

use std::sync::mpsc;

use glassbox_server::Config;
use glassbox_server::config::sha256_hex;
use serde_json::{Value, json};

use crate::support::{Reply, TestServer, Upstream, calls, echo};

/// A server with `slow` (one slot, held by `upstream`) and `config` added.
fn serve(upstream: &Upstream, config: &str) -> TestServer {
    let config =
        Config::parse(&format!("[topologies.slow]\nmax_concurrency = 1\n{config}")).unwrap();
    TestServer::start(&[("slow.yaml", &calls("slow", &upstream.url))], config)
}

/// What a background request sends when it ends: its name, status, body.
type Done = (&'static str, u16, String);

/// `POST /v1/topologies/slow/runs` in the band `priority` (by the header
/// when `by_header`, else the query parameter), on another thread.
fn run(
    s: &TestServer,
    done: &mpsc::Sender<Done>,
    name: &'static str,
    priority: &str,
    by_header: bool,
) {
    let mut url = format!("{}/v1/topologies/slow/runs", s.base);
    if !by_header {
        url.push_str(&format!("?priority={priority}"));
    }
    let header = by_header.then(|| priority.to_string());
    let done = done.clone();
    std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut req = agent.post(url).content_type("application/json");
        if let Some(p) = header {
            req = req.header("X-Glassbox-Priority", p);
        }
        let mut r = req.send("{}").unwrap();
        let text = r.body_mut().read_to_string().unwrap();
        let _ = done.send((name, r.status().as_u16(), text));
    });
}

/// A gauge of `/metrics` by topology and band.
fn band(s: &TestServer, gauge: &str, priority: &str) -> u64 {
    let prefix = format!("glassbox_{gauge}{{topology=\"slow\",priority=\"{priority}\"}} ");
    let metrics = s.get("/metrics", None).text;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in {metrics}"))
        .parse()
        .unwrap()
}

fn waiting(s: &TestServer) -> u64 {
    ["interactive", "online", "offline"]
        .iter()
        .map(|p| band(s, "requests_waiting", p))
        .sum()
}

/// Waits until `n` requests wait for the slot (a hang guard, not a speed check).
fn until_waiting(s: &TestServer, n: u64) {
    let start = std::time::Instant::now();
    while waiting(s) != n {
        assert!(start.elapsed().as_secs() < 60, "never {n} waiting");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Lets the running request finish, `n` times, and returns the names in the
/// order they finished, each with its body.
fn drain(upstream: &Upstream, done: &mpsc::Receiver<Done>, n: usize) -> Vec<(&'static str, Value)> {
    let mut order = Vec::new();
    for i in 0..n {
        upstream.release_one();
        let (name, status, text) = done.recv().unwrap();
        assert_eq!(status, 200, "{name}: {text}");
        order.push((name, serde_json::from_str(&text).unwrap()));
        if i + 1 < n {
            upstream.wait_arrival();
        }
    }
    order
}

fn names(order: &[(&'static str, Value)]) -> Vec<&'static str> {
    order.iter().map(|(n, _)| *n).collect()
}

#[test]
fn under_overload_waiting_online_requests_get_the_slot_before_offline_ones() {
    let upstream = Upstream::start();
    let s = serve(
        &upstream,
        "max_queue = 10\n[priorities]\nmax_passed_over = 10",
    );
    let (tx, done) = mpsc::channel();
    run(&s, &tx, "first", "online", false);
    upstream.wait_arrival();
    for (i, (name, band_name, by_header)) in [
        ("off1", "offline", false),
        ("off2", "batch", true),
        ("on1", "online", true),
        ("on2", "online", false),
    ]
    .into_iter()
    .enumerate()
    {
        run(&s, &tx, name, band_name, by_header);
        until_waiting(&s, i as u64 + 1);
    }
    assert_eq!(band(&s, "requests_running", "online"), 1);
    assert_eq!(band(&s, "requests_waiting", "online"), 2);
    assert_eq!(band(&s, "requests_waiting", "offline"), 2);
    let order = drain(&upstream, &done, 5);
    assert_eq!(names(&order), ["first", "on1", "on2", "off1", "off2"]);
    // The offline requests say why they waited; the trace has their band.
    let (_, off1) = &order[3];
    let why = off1["explanation"].as_str().unwrap();
    assert!(
        why.contains("in the offline band for a free slot, behind 2 requests of higher bands"),
        "{why}"
    );
    let id = off1["request_id"].as_str().unwrap();
    let trace = s.get(&format!("/v1/traces/{id}"), None);
    assert_eq!(trace.status, 200, "{}", trace.text);
    let trace = trace.json();
    assert_eq!(trace["spans"][0]["tags"]["priority"], "offline", "{trace}");
    let facts = trace["request"]["explanation"]["facts"].to_string();
    assert!(facts.contains(r#""priority":"offline""#), "{facts}");
    assert_eq!(waiting(&s), 0);
    assert_eq!(band(&s, "requests_running", "offline"), 0);
}

#[test]
fn a_waiting_offline_request_is_served_after_at_most_max_passed_over_online_ones() {
    let upstream = Upstream::start();
    let s = serve(
        &upstream,
        "max_queue = 10\n[priorities]\nmax_passed_over = 2",
    );
    let (tx, done) = mpsc::channel();
    run(&s, &tx, "first", "online", false);
    upstream.wait_arrival();
    run(&s, &tx, "off", "offline", false);
    until_waiting(&s, 1);
    for (i, name) in ["on1", "on2", "on3", "on4"].into_iter().enumerate() {
        run(&s, &tx, name, "online", false);
        until_waiting(&s, i as u64 + 2);
    }
    let order = drain(&upstream, &done, 6);
    assert_eq!(names(&order), ["first", "on1", "on2", "off", "on3", "on4"]);
}

#[test]
fn a_full_queue_sheds_offline_requests_first_and_says_why() {
    let upstream = Upstream::start();
    let s = serve(&upstream, "max_queue = 2");
    let (tx, done) = mpsc::channel();
    run(&s, &tx, "first", "online", false);
    upstream.wait_arrival();
    run(&s, &tx, "off", "offline", false);
    until_waiting(&s, 1);
    run(&s, &tx, "on1", "online", false);
    until_waiting(&s, 2);
    // The queue is full: an online request takes the offline one's place.
    run(&s, &tx, "on2", "online", true);
    let (name, status, text) = done.recv().unwrap();
    assert_eq!((name, status), ("off", 429), "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], "shed", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("offline") && message.contains("online request"),
        "{message}"
    );
    until_waiting(&s, 2);
    // Full of online requests: an offline one is refused at once, and so is
    // an online one (nothing below it to shed).
    let refused = |priority: &str| -> Reply {
        s.send(
            "POST",
            "/v1/topologies/slow/runs",
            &[("X-Glassbox-Priority", priority)],
            "{}",
        )
    };
    for priority in ["offline", "online"] {
        let r = refused(priority);
        assert_eq!(
            (r.status, r.code().as_str()),
            (429, "overloaded"),
            "{}",
            r.text
        );
        assert_eq!(r.header("retry-after"), Some("1"));
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("queue of 2 is full"),
            "{}",
            r.text
        );
    }
    let metrics = s.get("/metrics", None).text;
    for reason in ["shed", "queue_full"] {
        let series = format!("glassbox_rejections_total{{topology=\"slow\",reason=\"{reason}\"}} ");
        assert!(
            metrics.lines().any(|l| l.starts_with(&series)),
            "no {series} in {metrics}"
        );
    }
    assert_eq!(names(&drain(&upstream, &done, 3)), ["first", "on1", "on2"]);
}

#[test]
fn a_key_over_its_requests_per_minute_gets_429_with_the_remaining_quota_in_headers() {
    let config = Config::parse(&format!(
        r#"
        [[keys]]
        name = "nightly"
        sha256 = "{}"
        scopes = ["run", "read"]
        max_priority = "offline"
        rate_limit = {{ requests_per_minute = 2, tokens_per_minute = 1000 }}
        "#,
        sha256_hex("nightly-key")
    ))
    .unwrap();
    let s = TestServer::start(&[("echo.yaml", &echo("echo", "1.0.0"))], config);
    let post = || {
        s.send(
            "POST",
            "/v1/topologies/echo/runs",
            &[
                ("Authorization", "Bearer nightly-key"),
                ("X-Glassbox-Priority", "online"),
            ],
            r#"{"question": "hi"}"#,
        )
    };
    let mut remaining = Vec::new();
    for _ in 0..2 {
        let r = post();
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.header("x-ratelimit-limit-requests"), Some("2"));
        assert_eq!(r.header("x-ratelimit-limit-tokens"), Some("1000"));
        assert!(r.header("x-ratelimit-remaining-tokens").is_some());
        remaining.push(
            r.header("x-ratelimit-remaining-requests")
                .unwrap()
                .to_string(),
        );
        // The key may use the offline band at most: asking online runs offline.
        let body = r.json();
        let why = body["explanation"].as_str().unwrap();
        assert!(
            why.contains("asked for the online band and ran in the offline band"),
            "{why}"
        );
    }
    assert_eq!(remaining, ["1", "0"]);
    let r = post();
    assert_eq!(
        (r.status, r.code().as_str()),
        (429, "rate_limited"),
        "{}",
        r.text
    );
    assert!(r.header("retry-after").is_some());
    assert_eq!(r.header("x-ratelimit-remaining-requests"), Some("0"));
    assert!(
        r.header("x-ratelimit-reset-requests")
            .is_some_and(|v| v.ends_with('s'))
    );
}

#[test]
fn a_request_over_its_max_run_time_ends_with_504_naming_the_limit_and_leaves_its_trace() {
    let upstream = Upstream::start();
    let s = {
        let config = Config::parse(&format!(
            r#"
            [topologies.slow]
            max_concurrency = 4
            max_run_time = "300ms"
            [[keys]]
            name = "tight"
            sha256 = "{}"
            scopes = ["run", "read"]
            max_run_time = "200ms"
            [[keys]]
            name = "plain"
            sha256 = "{}"
            scopes = ["run"]
            "#,
            sha256_hex("tight-key"),
            sha256_hex("plain-key")
        ))
        .unwrap();
        TestServer::start(&[("slow.yaml", &calls("slow", &upstream.url))], config)
    };
    // The upstream never answers: the run ends at the key's limit, the
    // smaller one.
    let r = s.post("/v1/topologies/slow/runs", Some("tight-key"), "{}");
    assert_eq!(r.status, 504, "{}", r.text);
    let body = r.json();
    assert_eq!(body["error"]["code"], "max_run_time_exceeded", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("200 ms") && message.contains("key `tight`"),
        "{message}"
    );
    let hint = body["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("`max_run_time` of key `tight`"), "{hint}");
    assert!(
        body["explanation"]
            .as_str()
            .unwrap()
            .contains("maximum run time of 200 ms"),
        "{body}"
    );
    let id = body["request_id"].as_str().unwrap();
    let trace = s.get(&format!("/v1/traces/{id}"), Some("tight-key"));
    assert_eq!(trace.status, 200, "{}", trace.text);
    let trace = trace.json();
    assert_eq!(trace["request"]["status"], "failed", "{trace}");
    assert_eq!(trace["spans"][0]["status"], "timeout", "{trace}");
    // A chat over the topology's own limit: 504 naming where it is set.
    let chat = json!({"model": "slow", "messages": [{"role": "user", "content": "hi"}]});
    let r = s.post("/v1/chat/completions", Some("plain-key"), &chat.to_string());
    assert_eq!(
        (r.status, r.code().as_str()),
        (504, "max_run_time_exceeded"),
        "{}",
        r.text
    );
    let error = &r.json()["error"];
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("300 ms, set for topology `slow`"),
        "{error}"
    );
    assert!(
        error["hint"]
            .as_str()
            .unwrap()
            .contains("`[topologies.slow] max_run_time`"),
        "{error}"
    );
    drop(s);
}
