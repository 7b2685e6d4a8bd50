//! etcd as a trust boundary (issue 33) against a real etcd: with etcd's
//! auth enabled only the pool's user reads and writes membership, and a
//! coordinator holding the pool key admits only records signed with it.

use std::time::Duration;

use glassbox_cluster::etcd_temp::TempEtcd;
use glassbox_cluster::{
    EtcdOptions, Hardware, Load, Pool, PoolKey, Registration, RegistrationOptions, WatchEvent,
    WorkerRecord, watch,
};

fn record(id: &str) -> WorkerRecord {
    WorkerRecord {
        id: id.into(),
        address: format!("http://127.0.0.1:1/{id}"),
        engine: "glassbox".into(),
        hardware: Hardware::default(),
        models: vec!["smollm2".into()],
        node_kinds: vec!["llm_inference".into()],
        labels: Default::default(),
        started_at: 1,
    }
}

fn options(endpoint: &str, prefix: &str) -> EtcdOptions {
    let mut o = EtcdOptions::new(vec![endpoint.to_owned()]);
    o.prefix = prefix.into();
    o.timeout = Duration::from_secs(1);
    o
}

fn register(options: EtcdOptions, id: &str) -> Registration {
    let mut r = RegistrationOptions::new(options);
    r.ttl = Duration::from_secs(3);
    Registration::start(r, record(id), Load::default, |_| {}).unwrap()
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(20), "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn with_etcd_auth_only_the_pools_user_reaches_membership() {
    let etcd = TempEtcd::start(1).unwrap_or_else(|e| panic!("needs etcd: {e}"));
    let endpoint = etcd.endpoint(0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut admin = etcd_client::Client::connect([endpoint.clone()], None)
            .await
            .unwrap();
        admin.user_add("root", "root-pw-3c1", None).await.unwrap();
        admin.user_grant_role("root", "root").await.unwrap();
        admin.auth_enable().await.unwrap();
    });
    // A stranger (no user) can neither watch nor register.
    let stranger = options(&endpoint, "/auth");
    let e = watch(stranger.clone(), Pool::new(), |_| {}).unwrap_err();
    assert_eq!(e.code(), "etcd_unavailable", "{e}");
    let mut r = RegistrationOptions::new(stranger);
    r.ttl = Duration::from_secs(3);
    assert!(Registration::start(r, record("x"), Load::default, |_| {}).is_err());
    // The pool's user can.
    let mut pool_user = options(&endpoint, "/auth");
    pool_user.auth.user = Some(("root".into(), "root-pw-3c1".into()));
    let _w = register(pool_user.clone(), "w-1");
    let pool = Pool::new();
    let _watch = watch(pool_user, pool.clone(), |_| {}).unwrap();
    wait_for("the worker is seen", || pool.get("w-1").is_some());
    // A wrong password is refused too.
    let mut wrong = options(&endpoint, "/auth");
    wrong.auth.user = Some(("root".into(), "guess".into()));
    assert!(watch(wrong, Pool::new(), |_| {}).is_err());
}

#[test]
fn a_coordinator_with_the_pool_key_admits_only_signed_records() {
    let etcd = TempEtcd::start(1).unwrap_or_else(|e| panic!("needs etcd: {e}"));
    let endpoint = etcd.endpoint(0);
    let key = PoolKey::new(b"pool-key-1");
    let mut signed = options(&endpoint, "/signed");
    signed.trust.key = Some(key.clone());
    let _rogue = register(options(&endpoint, "/signed"), "rogue");
    let mut other_key = options(&endpoint, "/signed");
    other_key.trust.key = Some(PoolKey::new(b"not-the-pool-key"));
    let _forger = register(other_key, "forger");
    let _honest = register(signed.clone(), "honest");
    let pool = Pool::new();
    let skipped = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = skipped.clone();
    let _watch = watch(signed, pool.clone(), move |e| {
        if let WatchEvent::Skipped { reason, .. } = e {
            log.lock().unwrap().push(reason);
        }
    })
    .unwrap();
    wait_for("the signed worker joins", || pool.get("honest").is_some());
    assert!(pool.get("rogue").is_none());
    assert!(pool.get("forger").is_none());
    let reasons = skipped.lock().unwrap().join("\n");
    assert!(
        reasons.contains("`rogue`") && reasons.contains("no credential"),
        "{reasons}"
    );
    assert!(
        reasons.contains("`forger`") && reasons.contains("invalid credential"),
        "{reasons}"
    );
    assert!(!reasons.contains("pool-key-1"), "{reasons}");
}
