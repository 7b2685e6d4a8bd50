//! Registration and watch against real etcd: join, load, leave on
//! shutdown, leave when the lease expires, rejoin under a new lease after
//! etcd comes back, and one member of three killed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use glassbox_cluster::etcd_temp::TempEtcd;
use glassbox_cluster::{
    EtcdOptions, Hardware, Load, Pool, Registration, RegistrationEvent, RegistrationOptions,
    WatchEvent, WorkerRecord, watch,
};

fn etcd(members: usize) -> TempEtcd {
    match TempEtcd::start(members) {
        Ok(e) => e,
        Err(e) => panic!("the cluster tests need etcd and it did not start: {e}"),
    }
}

fn record(id: &str) -> WorkerRecord {
    WorkerRecord {
        id: id.into(),
        address: format!("http://127.0.0.1:1/{id}"),
        engine: "glassbox".into(),
        hardware: Hardware {
            cpu_model: "test cpu".into(),
            cpu_cores: 2,
            ..Hardware::default()
        },
        models: vec!["smollm2".into()],
        node_kinds: vec!["llm_inference".into()],
        labels: [("zone".to_owned(), "a".to_owned())].into(),
        started_at: 1,
    }
}

fn options(endpoints: Vec<String>, prefix: &str) -> EtcdOptions {
    let mut o = EtcdOptions::new(endpoints);
    o.prefix = prefix.into();
    o.timeout = Duration::from_secs(1);
    o
}

fn register(etcd: EtcdOptions, id: &str, running: u64) -> (Registration, Log<RegistrationEvent>) {
    let log = Log::default();
    let events = log.clone();
    let mut options = RegistrationOptions::new(etcd);
    options.ttl = Duration::from_secs(2);
    options.load_every = Duration::from_millis(200);
    let r = Registration::start(
        options,
        record(id),
        move || Load {
            running,
            ..Load::default()
        },
        move |e| events.push(e),
    )
    .unwrap();
    (r, log)
}

/// Events seen by a callback, shared with the test.
#[derive(Debug)]
struct Log<T>(Arc<Mutex<Vec<T>>>);

impl<T> Default for Log<T> {
    fn default() -> Self {
        Log(Arc::default())
    }
}

impl<T> Clone for Log<T> {
    fn clone(&self) -> Self {
        Log(self.0.clone())
    }
}

impl<T: Clone> Log<T> {
    fn push(&self, e: T) {
        self.0.lock().unwrap().push(e);
    }
    fn all(&self) -> Vec<T> {
        self.0.lock().unwrap().clone()
    }
}

/// Polls `cond` every 50 ms until it holds, or fails naming `what`.
fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ids(pool: &Pool) -> Vec<String> {
    pool.snapshot().into_iter().map(|m| m.record.id).collect()
}

#[test]
fn workers_join_report_load_and_leave_on_shutdown() {
    let etcd = etcd(1);
    let opts = options(etcd.endpoints(), "/t1");
    let (a, _) = register(opts.clone(), "a", 3);
    let pool = Pool::new();
    let seen = Log::default();
    let events = seen.clone();
    let _watch = watch(opts.clone(), pool.clone(), move |e| events.push(e)).unwrap();
    // `a` registered before the watch started: the first read has it.
    assert_eq!(ids(&pool), vec!["a"]);
    let member = pool.get("a").unwrap();
    assert_eq!(member.record, record("a"));
    let (b, _) = register(opts.clone(), "b", 1);
    wait_for("b joins through the watch", Duration::from_secs(5), || {
        pool.get("b").is_some_and(|m| m.load.is_some())
    });
    assert_eq!(pool.get("a").unwrap().load.unwrap().running, 3);
    assert_eq!(pool.get("b").unwrap().load.unwrap().running, 1);
    assert!(b.lease() != 0 && b.lease() != a.lease());
    a.shutdown();
    wait_for(
        "a leaves when its lease is revoked",
        Duration::from_secs(2),
        || pool.get("a").is_none(),
    );
    assert_eq!(ids(&pool), vec!["b"]);
    let events = seen.all();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, WatchEvent::Joined(r) if r.id == "b"))
    );
    assert!(
        events.contains(&WatchEvent::Left { id: "a".into() }),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, WatchEvent::Interrupted { .. })),
        "a healthy etcd never breaks the watch: {events:?}"
    );
    // Another prefix is another pool.
    let other = Pool::new();
    let _w2 = watch(
        options(etcd.endpoints(), "/t1-other"),
        other.clone(),
        |_| {},
    )
    .unwrap();
    assert!(other.is_empty());
}

#[test]
fn a_lost_etcd_costs_the_lease_and_the_worker_registers_again() {
    let mut etcd = etcd(1);
    let opts = options(etcd.endpoints(), "/t2");
    let (w, events) = register(opts.clone(), "w", 0);
    let first = w.lease();
    // etcd goes away for longer than the TTL; a new one (empty) comes up
    // on the same port, as after a data loss: the old lease is unknown.
    let port = etcd.endpoint(0);
    etcd.kill(0);
    wait_for("the worker notices", Duration::from_secs(8), || {
        events
            .all()
            .iter()
            .any(|e| matches!(e, RegistrationEvent::LeaseLost { .. }))
    });
    drop(etcd);
    let again = TempEtcd::start_on(&port).unwrap();
    let pool = Pool::new();
    wait_for(
        "the worker registers again",
        Duration::from_secs(10),
        || w.lease() != 0 && w.lease() != first,
    );
    let _watch = watch(options(again.endpoints(), "/t2"), pool.clone(), |_| {}).unwrap();
    assert_eq!(ids(&pool), vec!["w"], "same id, new lease");
    assert!(events.all().contains(&RegistrationEvent::Registered {
        lease: w.lease(),
        again: true
    }));
}

#[test]
fn unreachable_etcd_is_an_error_naming_the_endpoint() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let opts = options(vec![endpoint.clone()], "/t3");
    let err = watch(opts.clone(), Pool::new(), |_| {}).unwrap_err();
    assert_eq!(err.code(), "etcd_unavailable");
    assert!(err.to_string().contains(&endpoint), "{err}");
    let mut ro = RegistrationOptions::new(opts);
    ro.ttl = Duration::from_secs(2);
    let err = Registration::start(ro, record("x"), Load::default, |_| {}).unwrap_err();
    assert!(err.to_string().contains("install-etcd.sh"), "{err}");
}

/// Which member of three a run kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Victim {
    /// The member the watch's stream runs on: the watch must resume on
    /// another one.
    WatchStream,
    /// Another member: the stream is not touched.
    Other,
}

/// A three-member cluster loses one member while workers come and go;
/// returns what the watch saw.
fn lose_one_member_of_three(victim: Victim) -> Vec<WatchEvent> {
    let mut etcd = etcd(3);
    let mut opts = options(etcd.endpoints(), "/t4");
    // The product's default: an election after the kill may take a while
    // on a busy machine, and the first registration waits two of these.
    opts.timeout = Duration::from_secs(3);
    let pool = Pool::new();
    let seen = Log::default();
    let events = seen.clone();
    let _watch = watch(opts.clone(), pool.clone(), move |e| events.push(e)).unwrap();
    let (a, _) = register(opts.clone(), "a", 1);
    let (_b, _) = register(opts.clone(), "b", 2);
    wait_for("both join", Duration::from_secs(5), || pool.len() == 2);
    // The client balances over the members, so the stream's member is
    // found, not assumed.
    let mut stream = None;
    wait_for("the watch's member", Duration::from_secs(5), || {
        stream = (0..3).find(|&i| etcd.watchers(i) > 0);
        stream.is_some()
    });
    let stream = stream.expect("found above");
    let killed = match victim {
        Victim::WatchStream => stream,
        Victim::Other => (stream + 1) % 3,
    };
    etcd.kill(killed);
    let (c, _) = register(opts.clone(), "c", 3);
    wait_for(
        "c joins with one member down",
        Duration::from_secs(10),
        || pool.get("c").is_some(),
    );
    a.shutdown();
    wait_for(
        "a leaves with one member down",
        Duration::from_secs(10),
        || pool.get("a").is_none(),
    );
    // `b` outlives its TTL: its keep-alive went on through a live member.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(ids(&pool), vec!["b", "c"], "{victim:?} (member {killed})");
    assert!(c.lease() != 0);
    seen.all()
}

#[test]
fn one_etcd_member_of_three_killed_the_pool_carries_on() {
    for victim in [Victim::WatchStream, Victim::Other] {
        let events = lose_one_member_of_three(victim);
        let broke = events
            .iter()
            .position(|e| matches!(e, WatchEvent::Interrupted { .. }));
        let resumed = events.iter().rposition(|e| *e == WatchEvent::Resumed);
        if victim == Victim::WatchStream {
            assert!(
                matches!((broke, resumed), (Some(b), Some(r)) if b < r),
                "killing the watch's member did not break its stream and resume it: {events:#?}"
            );
        }
    }
}
