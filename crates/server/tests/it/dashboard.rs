//! The web dashboard in headless Chromium, against the real server.
//!
//! The server runs with a temporary store and topologies directory; requests
//! are created through the run API; then every page is loaded in a fresh
//! document and checked for the elements it must show for those requests,
//! and for the absence of console errors, uncaught exceptions and failed
//! loads. Chromium is driven over the DevTools protocol ([`cdp`]). A machine
//! without Chromium fails these tests with a message naming
//! `scripts/install-deps.sh`; they never skip.

mod cdp;

use glassbox_server::Config;
use serde_json::{Value, json};

use crate::support::{MODERATION, TestServer};
use cdp::Browser;

/// The real server with `examples/moderation.yaml` (no model needed).
fn serve(config: Config) -> TestServer {
    TestServer::start(&[("moderation.yaml", MODERATION)], config)
}

/// `GET path` as JSON, failing on anything but 200.
fn get_json(server: &TestServer, path: &str) -> Value {
    let r = server.get(path, None);
    assert_eq!(r.status, 200, "GET {path}: {}", r.text);
    r.json()
}

/// Three questions, one per branch of `examples/moderation.yaml`.
const QUESTIONS: [&str; 3] = ["What is the price of Pro?", "you idiot", "hello there"];

/// A served topology, traces created through the API, and a browser.
struct Fixture {
    server: TestServer,
    browser: Browser,
    /// The run responses, in `QUESTIONS` order.
    runs: Vec<Value>,
}

impl Fixture {
    fn start() -> Fixture {
        // Check for the browser first: a missing one is the likeliest failure.
        cdp::chromium_path();
        let server = serve(Config::default());
        let runs = QUESTIONS
            .iter()
            .map(|q| {
                let body = json!({ "question": q }).to_string();
                let r = server.post("/v1/topologies/moderation/runs", None, &body);
                assert_eq!(r.status, 200, "run {q:?}: {}", r.text);
                r.json()
            })
            .collect();
        Fixture {
            server,
            browser: Browser::launch(),
            runs,
        }
    }

    fn url(&self, hash: &str) -> String {
        format!("{}/{hash}", self.server.base)
    }

    /// Opens a page and waits until it has rendered (or failed).
    fn open(&mut self, hash: &str) {
        let url = self.url(hash);
        self.browser.open(&url);
        let state = self.browser.wait_for(
            "(() => { const s = document.querySelector('main')?.dataset.state; \
             return s && s !== 'loading' ? s : null; })()",
            &format!("{hash} to render"),
        );
        let text = self
            .browser
            .eval("document.querySelector('main').innerText.slice(0, 600)");
        assert_eq!(state, "ready", "{hash} did not render: {text}");
    }

    /// Fails on any console error, exception or failed load since the last check.
    fn assert_clean(&mut self, page: &str) {
        let problems = self.browser.problems();
        assert!(
            problems.is_empty(),
            "{page}: the browser reported problems:\n{}",
            problems.join("\n")
        );
    }

    fn count(&mut self, selector: &str) -> u64 {
        let expr = format!("document.querySelectorAll({}).length", json!(selector));
        self.browser.eval(&expr).as_u64().unwrap_or(0)
    }

    fn texts(&mut self, selector: &str, attr: Option<&str>) -> Vec<String> {
        let pick = match attr {
            Some(a) => format!("e.getAttribute({})", json!(a)),
            None => "e.textContent.trim()".to_owned(),
        };
        let expr = format!(
            "Array.from(document.querySelectorAll({})).map(e => {pick})",
            json!(selector)
        );
        serde_json::from_value(self.browser.eval(&expr)).unwrap_or_default()
    }

    fn request_id(&self, i: usize) -> String {
        self.runs[i]["request_id"]
            .as_str()
            .unwrap_or_else(|| panic!("run {i} answered no request_id: {}", self.runs[i]))
            .to_owned()
    }
}

#[test]
fn dashboard_pages_show_topologies_traces_and_reports_without_console_errors() {
    let mut f = Fixture::start();

    // Topologies list.
    f.open("#/");
    f.browser.wait_for(
        "document.querySelector('[data-testid=topology-row][data-topology=moderation]')",
        "the moderation topology in the list",
    );
    f.assert_clean("topologies");

    // Topology graph: one SVG node per topology node, one path per edge,
    // a label per conditional edge.
    let topo = get_json(&f.server, "/v1/topologies/moderation");
    let graph = topo.get("graph").unwrap_or(&topo);
    let mut want_nodes: Vec<String> = graph["nodes"]
        .as_array()
        .expect("graph nodes")
        .iter()
        .map(|n| n["id"].as_str().expect("node id").to_owned())
        .collect();
    want_nodes.sort();
    let edges = graph["edges"].as_array().expect("graph edges");
    let conditional = edges.iter().filter(|e| e["condition"].is_string()).count();
    f.open("#/topologies/moderation");
    f.browser.wait_for(
        "document.querySelector('[data-testid=topology-graph]')",
        "the topology graph",
    );
    let mut drawn = f.texts(
        "[data-testid=topology-graph] [data-testid=graph-node]",
        Some("data-node"),
    );
    drawn.sort();
    assert_eq!(drawn, want_nodes, "one SVG node per topology node");
    assert_eq!(
        f.count("[data-testid=topology-graph] [data-testid=graph-edge]"),
        edges.len() as u64
    );
    assert_eq!(
        f.count("[data-testid=topology-graph] [data-testid=graph-edge-label]"),
        conditional as u64
    );
    let labels = f.texts("[data-testid=graph-node] text", None).join(" ");
    for word in ["route", "router", "check", "output_guard", "cpu"] {
        assert!(labels.contains(word), "node labels lack `{word}`: {labels}");
    }
    f.assert_clean("topology");

    // Trace list: every created request, then a filter that matches none.
    f.open("#/traces?topology=moderation");
    let listed = f.texts("[data-testid=trace-row]", Some("data-request-id"));
    for i in 0..QUESTIONS.len() {
        let id = f.request_id(i);
        assert!(
            listed.contains(&id),
            "{id} not in the trace list {listed:?}"
        );
    }
    let row = f.texts(
        &format!(
            "[data-testid=trace-row][data-request-id='{}'] td",
            f.request_id(0)
        ),
        None,
    );
    assert!(
        row.iter().any(|c| c.starts_with("moderation@")),
        "topology@version column: {row:?}"
    );
    assert!(
        row.iter()
            .any(|c| c.contains("route → pricing_answer → check")),
        "path column: {row:?}"
    );
    f.open("#/traces?status=failed");
    assert_eq!(f.count("[data-testid=trace-row]"), 0, "no failed requests");
    f.assert_clean("trace list");

    // Trace page of the pricing question.
    let id = f.request_id(0);
    let stored = get_json(&f.server, &format!("/v1/traces/{id}"));
    let record = &stored["request"];
    let spans = stored["spans"].as_array().expect("spans").len();
    f.open(&format!("#/traces/{id}"));
    assert_eq!(
        f.count("[data-testid=waterfall-bar]"),
        spans as u64,
        "a waterfall bar per span"
    );
    let taken = f.texts(
        "[data-testid=path-graph] [data-testid=graph-node][data-state=taken]",
        Some("data-node"),
    );
    assert_eq!(
        taken,
        ["route", "pricing_answer", "check"].map(String::from)
    );
    let skipped = f.texts(
        "[data-testid=path-graph] [data-testid=graph-node][data-state=skipped]",
        Some("data-node"),
    );
    assert!(
        skipped.contains(&"general_answer".to_owned()) && skipped.contains(&"refuse".to_owned()),
        "skipped nodes: {skipped:?}"
    );
    // Greyed out: drawn translucent; the taken path drawn thicker.
    let opacity = f.browser.eval(
        "getComputedStyle(document.querySelector('[data-testid=path-graph] [data-node=general_answer]')).opacity",
    );
    assert!(
        opacity
            .as_str()
            .and_then(|o| o.parse::<f64>().ok())
            .is_some_and(|o| o < 1.0),
        "a skipped node is greyed out (opacity {opacity})"
    );
    let widths = f.browser.eval(
        "['pricing_answer','general_answer'].map(to => parseFloat(getComputedStyle(document.querySelector(\
         `[data-testid=path-graph] [data-testid=graph-edge][data-from=route][data-to=${to}]`)).strokeWidth))",
    );
    assert!(
        widths[0].as_f64() > widths[1].as_f64(),
        "the taken edge is highlighted: {widths}"
    );
    assert_eq!(
        f.texts("[data-testid=waterfall-idle]", Some("data-node"))
            .len(),
        2,
        "the two skipped nodes are listed greyed in the waterfall"
    );
    // The critical path (from the API) is named above the waterfall, and
    // exactly the spans of its nodes are marked in it.
    let steps: Vec<String> = stored["critical_path"]["steps"]
        .as_array()
        .expect("critical_path.steps")
        .iter()
        .map(|s| s["node"].as_str().expect("node").to_owned())
        .collect();
    assert_eq!(steps, ["route", "pricing_answer", "check"]);
    let summary = f.texts("[data-testid=critical-path]", None);
    assert_eq!(summary.len(), 1, "{summary:?}");
    assert!(
        summary[0].contains("route → pricing_answer → check"),
        "{summary:?}"
    );
    let marked = f.texts(
        "[data-testid=waterfall-row][data-critical=true]",
        Some("data-node"),
    );
    assert_eq!(
        marked.len(),
        spans,
        "every span here is on the path: {marked:?}"
    );
    assert!(marked.iter().all(|n| steps.contains(n)), "{marked:?}");
    let ring = f.browser.eval(
        "getComputedStyle(document.querySelector('[data-testid=waterfall-row][data-critical=true] [data-testid=waterfall-bar]')).boxShadow",
    );
    assert!(
        ring.as_str().is_some_and(|s| s != "none"),
        "critical bars carry a ring: {ring}"
    );
    let total = record["receipt"]["total"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| record["receipt"]["total"].to_string());
    assert_eq!(f.texts("[data-testid=receipt-total]", None), [total]);
    assert_eq!(
        f.count("[data-testid=receipt-line]"),
        record["receipt"]["lines"].as_array().map_or(0, Vec::len) as u64
    );
    let explanation = record["explanation"]["text"].as_str().expect("explanation");
    assert!(explanation.contains("pricing"), "{explanation}");
    assert_eq!(f.texts("[data-testid=explanation]", None), [explanation]);
    // Each node's input and output summaries, behind an expandable row.
    let hidden = f.browser.eval(
        "document.querySelector('[data-testid=waterfall-row][data-node=route] [data-testid=span-input]').checkVisibility()",
    );
    assert_eq!(hidden, false, "summaries start collapsed");
    f.browser.eval(
        "document.querySelector('[data-testid=waterfall-row][data-node=route] summary').click()",
    );
    let input = f.browser.wait_for(
        "(() => { const e = document.querySelector('[data-testid=waterfall-row][data-node=route] [data-testid=span-input]'); \
         return e.checkVisibility() ? e.textContent : null; })()",
        "the route node's input summary after expanding its row",
    );
    assert!(
        input.as_str().is_some_and(|t| t.contains(QUESTIONS[0])),
        "input summary: {input}"
    );
    f.assert_clean("trace");

    // Reports: cost and latency charts with P50/P95/P99 series.
    f.open("#/reports?topology=moderation");
    for chart in ["cost-chart", "latency-chart"] {
        for series in ["p50", "p95", "p99"] {
            let sel = format!(
                "[data-testid=report-topology][data-topology=moderation] [data-testid={chart}] [data-testid=series-{series}] circle"
            );
            assert!(f.count(&sel) >= 1, "{chart} has a {series} point");
            let legend = format!("[data-testid={chart}] [data-testid=legend-{series}]");
            assert_eq!(
                f.texts(&legend, None),
                [series.to_uppercase()],
                "{chart} legend"
            );
        }
    }
    let axis = f.texts("[data-testid=latency-chart] .axis-label", None);
    assert!(
        axis.contains(&"Latency (ms)".to_owned()),
        "axis labels {axis:?}"
    );
    f.assert_clean("reports");

    // Every page above ran under the dashboard's Content-Security-Policy
    // with no violation; an inline script is refused, and reported.
    f.browser.eval(
        "(() => { const s = document.createElement('script'); \
         s.textContent = 'window.inlineRan = true'; document.body.append(s); })()",
    );
    assert_eq!(f.browser.eval("window.inlineRan === true"), json!(false));
    let problems = f.browser.problems();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("Content Security Policy")),
        "the inline script was not reported as a CSP violation: {problems:#?}"
    );
}

/// Issue 16, item 7: the Reports page in time buckets from a minute to a
/// week, the path mix over time, per-node P50/P95/P99 and cost share, and a
/// click from a point to the traces behind it.
#[test]
fn reports_page_buckets_paths_nodes_and_links_points_to_their_traces() {
    let mut f = Fixture::start();
    let whole = get_json(
        &f.server,
        "/v1/reports?topology=moderation&group_by=all&nodes=true",
    );
    let nodes = whole["groups"][0]["nodes"]
        .as_array()
        .expect("node report")
        .clone();

    f.open("#/reports?topology=moderation&bucket=1m");
    f.assert_clean("reports by minute");
    let chosen = f
        .browser
        .eval("document.querySelector('[data-testid=filter-bucket]').value");
    assert_eq!(
        chosen, "1m",
        "the bucket selector shows the bucket in the URL"
    );
    let options = f.texts("[data-testid=filter-bucket] option", Some("value"));
    assert_eq!(options, ["1m", "5m", "15m", "1h", "6h", "1d", "1w"]);
    let axis = f.texts("[data-testid=latency-chart] .axis-label", None);
    assert!(
        axis.contains(&"Time (UTC, 1m buckets)".to_owned()),
        "{axis:?}"
    );

    // Every point links to the traces of its minute.
    let links = f.texts(
        "[data-testid=latency-chart] [data-testid=point-link]",
        Some("href"),
    );
    assert!(!links.is_empty(), "latency points are links");
    for link in &links {
        let q: std::collections::HashMap<String, String> = link
            .trim_start_matches("#/traces?")
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(
            q.get("topology").map(String::as_str),
            Some("moderation"),
            "{link}"
        );
        assert_eq!(q.get("range").map(String::as_str), Some("custom"), "{link}");
        let since: u64 = q["since"].parse().unwrap();
        let until: u64 = q["until"].parse().unwrap();
        assert_eq!(
            (since % 60, until - since),
            (0, 60),
            "one UTC minute: {link}"
        );
    }

    // The path mix: one segment per path per bucket; the three questions
    // took three paths.
    assert_eq!(
        f.count("[data-testid=path-chart] [data-testid=share-segment]"),
        3
    );
    assert_eq!(
        f.count("[data-testid=path-chart] [data-testid=share-legend]"),
        3
    );
    let legend = f.texts("[data-testid=path-chart] [data-testid=share-legend]", None);
    assert!(
        legend.iter().any(|l| l == "route → pricing_answer → check"),
        "path legend {legend:?}"
    );

    // Nodes: P50/P95/P99 and cost share as the API reports them.
    let rows = f.texts("[data-testid=node-row]", Some("data-node"));
    let mut want: Vec<String> = nodes
        .iter()
        .map(|n| n["node"].as_str().unwrap().to_owned())
        .collect();
    let mut got = rows.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want, "one row per node that ran");
    let headers = f.texts("[data-testid=node-table] th[scope=col]", None);
    for h in ["Latency P50", "Latency P95", "Latency P99", "Cost share"] {
        assert!(
            headers.contains(&h.to_owned()),
            "node table headers {headers:?}"
        );
    }
    let shares: Vec<f64> = f
        .texts("[data-testid=node-row] td[data-share]", Some("data-share"))
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let sum: f64 = shares.iter().sum();
    assert!(
        (sum - 1.0).abs() < 0.01,
        "cost shares add up to 100%: {shares:?}"
    );

    // A click on a point opens the Traces page with the requests behind it.
    f.browser.eval(
        "document.querySelector('[data-testid=latency-chart] [data-testid=point-link]')\
         .dispatchEvent(new MouseEvent('click', { bubbles: true, cancelable: true, view: window }))",
    );
    f.browser.wait_for(
        "location.hash.startsWith('#/traces?') && document.querySelector('main').dataset.state === 'ready' \
         && document.querySelectorAll('[data-testid=trace-row]').length > 0",
        "the traces behind the clicked point",
    );
    let listed = f.texts("[data-testid=trace-row]", Some("data-request-id"));
    let expect: u64 = get_json(
        &f.server,
        &format!(
            "/v1/traces?{}",
            f.browser
                .eval("location.hash.split('?')[1]")
                .as_str()
                .unwrap()
                .replace("range=custom&", "")
        ),
    )["traces"]
        .as_array()
        .map_or(0, |t| t.len() as u64);
    assert_eq!(
        listed.len() as u64,
        expect,
        "the page lists the traces of that minute"
    );
    assert!(
        listed
            .iter()
            .all(|id| (0..QUESTIONS.len()).any(|i| &f.request_id(i) == id)),
        "{listed:?}"
    );
    f.assert_clean("traces behind a point");

    // A week bucket holds every request in one point.
    f.open("#/reports?topology=moderation&bucket=1w");
    // The critical-path panel lists the nodes the report puts on it, with
    // their share of latency (the shares add up to the whole latency).
    let critical: Vec<String> = whole["groups"][0]["critical_path"]
        .as_array()
        .expect("critical-path report")
        .iter()
        .map(|c| c["node"].as_str().unwrap().to_owned())
        .collect();
    assert!(!critical.is_empty(), "{whole}");
    assert_eq!(
        f.texts("[data-testid=critical-row]", Some("data-node")),
        critical
    );
    let shares: f64 = f
        .texts(
            "[data-testid=critical-row] td[data-share]",
            Some("data-share"),
        )
        .iter()
        .map(|s| s.parse::<f64>().unwrap())
        .sum();
    assert!((shares - 1.0).abs() < 0.01, "latency shares: {shares}");
    // One version only: nothing to compare. No drift in a fresh store.
    assert_eq!(f.count("[data-testid=compare-panel]"), 0);
    assert_eq!(f.count("[data-testid=alerts-none]"), 1);
    assert_eq!(
        f.count("[data-testid=latency-chart] [data-testid=series-p50] circle"),
        1
    );
    f.assert_clean("reports by week");
}

/// Two versions of one topology in the range: the Reports page sets them
/// side by side with the numbers `/v1/reports/compare` gives.
#[test]
fn reports_page_compares_two_versions() {
    cdp::chromium_path();
    let server = TestServer::start(
        &[
            ("a-echo.yaml", &crate::support::echo("echo", "1.0.0")),
            ("b-echo.yaml", &crate::support::echo("echo", "1.1.0")),
        ],
        Config::default(),
    );
    let r = server.send(
        "PUT",
        "/v1/topologies/echo/split",
        &[],
        r#"{"weights": {"1.0.0": 50, "1.1.0": 50}}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    for k in 0..24 {
        let key = format!("user-{k}");
        let r = server.send(
            "POST",
            "/v1/topologies/echo/runs",
            &[("x-glassbox-key", key.as_str())],
            r#"{"question": "hi"}"#,
        );
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let cmp = get_json(&server, "/v1/reports/compare?topology=echo&a=1.0.0&b=1.1.0");
    let mut f = Fixture {
        server,
        browser: Browser::launch(),
        runs: Vec::new(),
    };
    f.open("#/reports?topology=echo");
    f.assert_clean("reports with two versions");
    assert_eq!(f.count("[data-testid=compare-panel]"), 1);
    let sides = (
        f.texts("[data-testid=compare-panel]", Some("data-a")),
        f.texts("[data-testid=compare-panel]", Some("data-b")),
    );
    assert_eq!(sides, (vec!["1.0.0".to_owned()], vec!["1.1.0".to_owned()]));
    let requests = f.texts(
        "[data-testid=compare-row][data-measure=Requests] td.num",
        None,
    );
    assert_eq!(
        requests[..2],
        [
            cmp["requests"]["a"].to_string(),
            cmp["requests"]["b"].to_string()
        ],
        "{cmp}"
    );
    let n: u64 = requests[..2]
        .iter()
        .map(|v| v.parse::<u64>().unwrap())
        .sum();
    assert_eq!(n, 24, "every request on one side or the other");
    // The marks are the API's: a measure is marked exactly when its test is.
    let marked = f.count("[data-testid=compare-mark]");
    let api_marked = [&cmp["latency_ms"], &cmp["cost"]]
        .into_iter()
        .chain(cmp["rates"].as_array().unwrap())
        .chain(
            cmp["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|n| [&n["latency_ms"], &n["error_rate"]]),
        )
        .filter(|d| d["test"]["significant"] == true)
        .count() as u64
        + u64::from(cmp["requests"]["test"]["significant"] == true);
    assert_eq!(marked, api_marked, "{cmp}");
}

/// Issue 14, item 9: the dashboard sent no CSP or framing headers.
/// The diff page: two requests that took different branches, the first
/// divergence explained in both languages, the differing rows marked; the
/// trace page's compare form leads there.
#[test]
fn the_diff_page_sets_two_requests_side_by_side() {
    let mut f = Fixture::start();
    let (a, b) = (f.request_id(0), f.request_id(1));
    f.open(&format!("#/traces/{a}"));
    let typed = format!(
        "(() => {{ const i = document.querySelector('[data-testid=compare-input]'); i.value = {}; \
         document.querySelector('[data-testid=compare-form]').requestSubmit(); return true; }})()",
        json!(b)
    );
    f.browser.eval(&typed);
    f.browser.wait_for(
        "(() => { const m = document.querySelector('main'); \
         return m.dataset.state === 'ready' && document.querySelector('[data-testid=diff-explanation]') ? true : null; })()",
        "the diff page after submitting the compare form",
    );
    f.assert_clean("diff page");
    let text = f.texts("[data-testid=diff-explanation]", None);
    assert!(text[0].contains("part at `route`"), "{text:?}");
    assert_eq!(
        f.texts("[data-testid=diff-explanation]", Some("data-kind")),
        ["label"]
    );
    let differs = f.texts(
        "[data-testid=diff-node][data-differs=true]",
        Some("data-node"),
    );
    for node in ["route", "pricing_answer", "refuse"] {
        assert!(
            differs.contains(&node.to_owned()),
            "{node} not marked: {differs:?}"
        );
    }
    assert_eq!(f.count("[data-testid=diff-edge][data-differs=true]"), 4);

    f.open(&format!("#/traces/{a}/diff/{b}?lang=zh"));
    f.assert_clean("diff page in Chinese");
    let zh = f.texts("[data-testid=diff-explanation]", None);
    assert!(zh[0].contains("分道"), "{zh:?}");
}

#[test]
fn dashboard_responses_forbid_framing_inline_code_and_sniffing() {
    let server = serve(Config::default());
    for path in [
        "/",
        "/assets/app.js",
        "/assets/style.css",
        "/assets/missing.js",
    ] {
        let r = server.get(path, None);
        let csp = r
            .header("content-security-policy")
            .unwrap_or_else(|| panic!("{path}: no Content-Security-Policy"));
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(r.header("referrer-policy"), Some("no-referrer"), "{path}");
        assert_eq!(r.header("x-frame-options"), Some("DENY"), "{path}");
    }
}

/// The graph layout puts every edge downwards (longest-path layers) and
/// orders layers to remove crossings that declaration order would draw.
#[test]
fn graph_layout_layers_by_longest_path_and_removes_crossings() {
    let server = serve(Config::default());
    let mut b = Browser::launch();
    b.open(&format!("{}/#/", server.base));
    let result = b.wait_for(
        r#"import('/assets/graph.js').then(({ layout }) => {
            // a→b→c→d and a→d: d is layered below c, not next to b.
            const long = layout(['a','b','c','d'].map(id => ({ id })),
                [['a','b'],['b','c'],['c','d'],['a','d']].map(([from, to]) => ({ from, to })));
            // Declaration order draws b→c across a→f; the sweeps must not.
            const cross = layout(['a','b','c','d','e','f'].map(id => ({ id })),
                [['a','f'],['b','c'],['b','f'],['d','e']].map(([from, to]) => ({ from, to })));
            return {
                layers: ['a','b','c','d'].map(id => long.nodes.get(id).layer),
                crossings: cross.crossings,
                edges: cross.edges.length,
            };
        })"#,
        "the layout module",
    );
    assert_eq!(result["layers"], json!([0, 1, 2, 3]));
    assert_eq!(result["crossings"], 0);
    assert_eq!(result["edges"], 4);
    let problems = b.problems();
    assert!(problems.is_empty(), "{problems:?}");
}

/// A loop's back edge stays out of the layering and is drawn up the right
/// of the graph, from the source's right side into the target's, with its bound.
#[test]
fn graph_draws_a_loops_back_edge_up_the_right_side_with_its_bound() {
    let server = serve(Config::default());
    let mut b = Browser::launch();
    b.open(&format!("{}/#/", server.base));
    let result = b.wait_for(
        r#"import('/assets/graph.js').then(({ layout, drawGraph }) => {
            const nodes = ['draft','check','publish'].map(id => ({ id, type: 'llm' }));
            const edges = [
                { from: 'draft', to: 'check' },
                { from: 'check', to: 'draft', condition: 'needs_work', max_iterations: 3 },
                { from: 'check', to: 'publish', condition: 'ok' },
            ];
            const g = layout(nodes, edges);
            const right = Math.max(...[...g.nodes.values()].map(p => p.x + 184));
            const svg = drawGraph({ nodes, edges, label: 'loop' });
            const back = svg.querySelectorAll('[data-testid=graph-edge][data-back=true]');
            return {
                layers: ['draft','check','publish'].map(id => g.nodes.get(id).layer),
                forward: g.edges.length,
                back: g.back.map(({ edge, points }) => ({
                    from: edge.from, to: edge.to,
                    outside: points[1].x > right && points[1].x < g.width,
                    up: points[2].y < points[1].y,
                })),
                drawn: [...back].map(p => [p.dataset.from, p.dataset.to]),
                edges: svg.querySelectorAll('[data-testid=graph-edge]').length,
                labels: [...svg.querySelectorAll('[data-testid=graph-edge-label] text')].map(t => t.textContent),
                title: back[0] && back[0].querySelector('title').textContent,
            };
        })"#,
        "the layout module",
    );
    assert_eq!(result["layers"], json!([0, 1, 2]));
    assert_eq!(result["forward"], 2);
    assert_eq!(
        result["back"],
        json!([{"from": "check", "to": "draft", "outside": true, "up": true}])
    );
    assert_eq!(result["drawn"], json!([["check", "draft"]]));
    assert_eq!(result["edges"], 3);
    assert_eq!(result["labels"], json!(["ok", "≤ 3×"]));
    assert_eq!(
        result["title"],
        "check back to draft (a loop, at most 3 times) when needs_work"
    );
    let problems = b.problems();
    assert!(problems.is_empty(), "{problems:?}");
}

/// With an API key configured, the dashboard asks for it on the first 401,
/// keeps asking while it is wrong, and once given keeps it across loads.
#[test]
fn dashboard_asks_for_the_api_key_and_keeps_it() {
    const KEY: &str = "gb-test-key-8c1f";
    cdp::chromium_path();
    let mut config = Config::default();
    config.add_env_key(KEY);
    let server = serve(config);
    let mut b = Browser::launch();
    let url = format!("{}/#/", server.base);
    let prompted = "document.querySelector('main[data-state=auth]') && document.getElementById('key-dialog').open";
    let rows = "document.querySelectorAll('[data-testid=topology-row]').length";

    b.open(&url);
    b.wait_for(prompted, "the key prompt");
    assert_eq!(b.eval(rows), 0, "nothing is shown without a key");

    let enter = |b: &mut Browser, key: &str| {
        b.eval(&format!(
            "document.getElementById('key-input').value = {}; \
             document.querySelector('[data-testid=key-save]').click()",
            json!(key)
        ));
    };
    enter(&mut b, "not-the-key");
    b.wait_for(prompted, "the key prompt again after a wrong key");

    enter(&mut b, KEY);
    b.wait_for(rows, "the topologies once the key is given");
    assert_eq!(b.eval("document.getElementById('key-dialog').open"), false);

    // A fresh load uses the stored key without asking.
    b.open(&url);
    b.wait_for(rows, "the topologies on a fresh load");
    assert_eq!(b.eval("document.getElementById('key-dialog').open"), false);
    assert_eq!(b.eval("localStorage.getItem('glassbox.apiKey')"), KEY);

    // The 401s of the first two loads are the only complaints.
    assert_only_problems(&mut b, "status of 401");
}

/// Fails on any console error, exception or failed load except those
/// containing `expected` (the HTTP status a test provokes on purpose).
fn assert_only_problems(b: &mut Browser, expected: &str) {
    let unexpected: Vec<String> = b
        .problems()
        .into_iter()
        .filter(|p| !p.contains(expected))
        .collect();
    assert!(unexpected.is_empty(), "{unexpected:#?}");
}

#[test]
fn a_key_without_the_read_scope_is_told_so_not_shown_pages() {
    const RUN_ONLY: &str = "gb-run-only-key-51d2";
    cdp::chromium_path();
    let config = Config::parse(&format!(
        "[[keys]]\nname = \"runner\"\nsha256 = \"{}\"\nscopes = [\"run\"]\n",
        glassbox_server::config::sha256_hex(RUN_ONLY)
    ))
    .unwrap();
    let server = serve(config);
    let mut b = Browser::launch();
    let url = format!("{}/#/", server.base);
    b.open(&url);
    b.eval(&format!(
        "localStorage.setItem('glassbox.apiKey', {})",
        json!(RUN_ONLY)
    ));
    b.open(&url);
    // The key is valid (no 401) but lacks `read`: the page says what is
    // missing and offers to enter another key; nothing is listed.
    b.wait_for(
        "document.querySelector('main[data-state=auth]') && document.getElementById('key-dialog').open",
        "the key prompt after a 403",
    );
    let said = b.eval("document.querySelector('main').textContent");
    let said = said.as_str().unwrap_or_default().to_lowercase();
    assert!(
        said.contains("scope"),
        "the page should name the missing scope: {said}"
    );
    assert_eq!(
        b.eval("document.querySelectorAll('[data-testid=topology-row]').length"),
        0
    );
    assert_only_problems(&mut b, "status of 403");
}

/// Issue 18, item 6: the GPUs page shows a row per GPU `/v1/gpus` reports,
/// with its readings and alerts; on a machine without NVML (this test's
/// usual home) it says there are no GPUs, and why.
#[test]
fn gpu_page_shows_what_the_gpu_monitor_read() {
    cdp::chromium_path();
    let server = serve(Config::default());
    let snap = get_json(&server, "/v1/gpus");
    let gpus = snap["gpus"].as_array().expect("gpus").clone();
    let mut b = Browser::launch();
    b.open(&format!("{}/#/gpus", server.base));
    b.wait_for(
        "document.querySelector('main[data-state=ready] [data-testid=gpu-panel]')",
        "the GPU panel",
    );
    assert_eq!(
        b.eval("document.querySelector('[data-nav=gpus]').getAttribute('aria-current')"),
        "page"
    );
    let shown = b.eval("document.querySelector('[data-testid=gpu-panel]').dataset.gpus");
    assert_eq!(shown, json!(gpus.len().to_string()));
    let rows = b.eval(
        "Array.from(document.querySelectorAll('[data-testid=gpu-row]')).map(r => [r.dataset.worker, r.dataset.gpu])",
    );
    let want: Vec<Value> = gpus
        .iter()
        .map(|g| json!([g["worker"], g["index"].to_string()]))
        .collect();
    assert_eq!(rows, Value::Array(want));
    let none = b.eval("document.querySelectorAll('[data-testid=gpus-none]').length");
    if gpus.is_empty() {
        assert_eq!(none, 1, "an empty pool says so");
        let text = b.eval("document.querySelector('[data-testid=gpu-panel]').innerText");
        let text = text.as_str().unwrap_or_default();
        assert!(text.contains("No GPUs on this machine"), "{text}");
        if let Some(why) = snap["unavailable"].as_str() {
            assert!(text.contains(why), "the reason is shown: {text}");
        }
    } else {
        assert_eq!(none, 0);
        let temps = b.eval(
            "Array.from(document.querySelectorAll('[data-testid=gpu-temperature]')).map(c => c.textContent)",
        );
        for (g, t) in gpus.iter().zip(temps.as_array().expect("cells")) {
            if let Some(c) = g["temperature_celsius"].as_f64() {
                assert_eq!(t, &json!(format!("{c:.0} °C")));
            }
        }
        assert_eq!(
            b.eval("document.querySelectorAll('[data-testid=gpu-alert]').length"),
            snap["alerts"].as_array().map_or(0, Vec::len)
        );
    }
    let problems = b.problems();
    assert!(problems.is_empty(), "{problems:#?}");
}

/// One OTLP/JSON export: `n` traces of a small RAG app (`shop-bot`), each
/// a root chain, a retriever and a model call.
fn otlp_export(n: u32) -> String {
    let now_ns = u128::from(glassbox_trace::unix_micros_now()) * 1000;
    let span = |t: u32, id: u8, parent: Option<u8>, name: &str, kind: &str, ms: (u128, u128)| {
        let parent = parent.map_or(String::new(), |p| format!(r#""parentSpanId":"{p:016x}","#));
        format!(
            r#"{{"traceId":"{:032x}","spanId":"{id:016x}",{parent}"name":"{name}","startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":[{{"key":"openinference.span.kind","value":{{"stringValue":"{kind}"}}}}]}}"#,
            0xd15c_0000_u128 + u128::from(t),
            now_ns + ms.0 * 1_000_000,
            now_ns + ms.1 * 1_000_000,
        )
    };
    let spans: Vec<String> = (0..n)
        .flat_map(|t| {
            [
                span(t, 1, None, "answer", "CHAIN", (0, 300)),
                span(t, 2, Some(1), "retrieve", "RETRIEVER", (5, 50)),
                span(t, 3, Some(1), "ChatCompletion", "LLM", (60, 290)),
            ]
        })
        .collect();
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"shop-bot"}}}},{{"key":"service.version","value":{{"stringValue":"1.4.0"}}}}]}},"scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    )
}

#[test]
fn discovered_topologies_are_listed_beside_served_ones_and_drawn() {
    let mut f = Fixture::start();
    let r = f.server.post("/v1/traces", None, &otlp_export(3));
    assert_eq!(r.status, 200, "{}", r.text);
    let list = get_json(&f.server, "/v1/discovered");
    let ids: Vec<&str> = list["topologies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["topology_id"].as_str().unwrap())
        .collect();
    // The served topology is not "discovered"; the ingested one is.
    assert_eq!(ids, ["shop-bot/answer"]);
    assert_eq!(list["topologies"][0]["requests"], 3);

    f.open("#/");
    f.browser.wait_for(
        "document.querySelector('[data-testid=discovered-row][data-topology=\"shop-bot/answer\"]')",
        "the discovered topology in the list",
    );
    assert_eq!(f.count("[data-testid=topology-row]"), 1);
    f.assert_clean("topologies with a discovered one");

    f.open("#/discovered/shop-bot%2Fanswer");
    let mut nodes = f.texts("[data-testid=graph-node]", Some("data-node"));
    nodes.sort();
    assert_eq!(nodes, ["ChatCompletion", "answer", "retrieve"]);
    let edges = f.texts("[data-testid=graph-edge]", Some("data-from"));
    assert!(edges.len() >= 2, "{edges:?}");
    let rows = f.texts("[data-testid=node-table] tbody tr", None);
    assert!(
        rows.iter()
            .any(|r| r.contains("retriever") && r.contains('3')),
        "{rows:?}"
    );
    f.assert_clean("discovered topology");

    // Its traces and reports pages work as for a served topology.
    f.open("#/traces?topology=shop-bot%2Fanswer");
    assert_eq!(f.count("[data-testid=trace-row]"), 3);
    f.assert_clean("traces of a discovered topology");
    f.open("#/reports?topology=shop-bot%2Fanswer");
    f.assert_clean("reports of a discovered topology");
}
