//! A worker's membership: its record and load under an etcd lease that a
//! background thread keeps alive, with the load refreshed about every
//! second. If etcd cannot be reached for longer than the lease's TTL the
//! lease is gone (and the worker with it, for every coordinator); when etcd
//! answers again the worker registers anew under a new lease, with the
//! same record (same id: it is the same process).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, LeaseKeepAliveStream, LeaseKeeper, PutOptions};
use tokio::sync::oneshot;

use super::{Backoff, EtcdError, EtcdOptions, connect, runtime, timed};
use crate::member::{Load, WorkerRecord, load_key, now_secs, record_key};

/// How a worker registers.
#[derive(Debug, Clone)]
pub struct RegistrationOptions {
    pub etcd: EtcdOptions,
    /// The lease's time to live: how long after its last keep-alive a worker
    /// that died is still listed. etcd rounds very short TTLs up (to about
    /// 2 s with its default timings).
    pub ttl: Duration,
    /// How often the load is refreshed.
    pub load_every: Duration,
}

impl RegistrationOptions {
    pub fn new(etcd: EtcdOptions) -> RegistrationOptions {
        RegistrationOptions {
            etcd,
            ttl: Duration::from_secs(5),
            load_every: Duration::from_secs(1),
        }
    }
}

/// What happened to a registration, for the worker's log.
#[derive(Debug, Clone, PartialEq)]
pub enum RegistrationEvent {
    /// The record and load were put under `lease`; `again` after the
    /// previous lease was lost.
    Registered { lease: i64, again: bool },
    /// etcd stopped answering; the worker keeps trying.
    Interrupted { error: EtcdError },
    /// The lease expired while etcd was out of reach: the worker was gone
    /// from the pool until it registers again.
    LeaseLost { lease: i64 },
    /// The lease was revoked on shutdown: the worker left the pool.
    Revoked { lease: i64 },
}

/// A live registration; dropping it revokes the lease (the worker leaves).
#[derive(Debug)]
pub struct Registration {
    id: String,
    lease: Arc<AtomicI64>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

type LoadFn = Box<dyn FnMut() -> Load + Send>;
type EventFn = Box<dyn FnMut(RegistrationEvent) + Send>;

impl Registration {
    /// Registers `record` (its load from `load`, called about every
    /// `load_every`) and keeps it registered until dropped. Returns once the
    /// first registration is in etcd, or the error that prevented it.
    pub fn start(
        options: RegistrationOptions,
        record: WorkerRecord,
        load: impl FnMut() -> Load + Send + 'static,
        events: impl FnMut(RegistrationEvent) + Send + 'static,
    ) -> Result<Registration, EtcdError> {
        if options.etcd.endpoints.is_empty() {
            return Err(EtcdError::NoEndpoints);
        }
        let rt = runtime()?;
        let lease = Arc::new(AtomicI64::new(0));
        let (stop_tx, stop_rx) = oneshot::channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let id = record.id.clone();
        let worker = Worker {
            options,
            record,
            load: Box::new(load),
            events: Box::new(events),
            lease: lease.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("etcd-register-{id}"))
            .spawn(move || rt.block_on(worker.run(ready_tx, stop_rx)))
            .map_err(|e| EtcdError::Thread {
                reason: e.to_string(),
            })?;
        let mut registration = Registration {
            id,
            lease,
            stop: Some(stop_tx),
            thread: Some(thread),
        };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(registration),
            Ok(Err(e)) => {
                registration.stop_and_join();
                Err(e)
            }
            Err(_) => {
                registration.stop_and_join();
                Err(EtcdError::Thread {
                    reason: "the registration thread ended before registering".into(),
                })
            }
        }
    }

    /// The worker's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The lease the record lives under now (0 while not registered).
    pub fn lease(&self) -> i64 {
        self.lease.load(Ordering::Acquire)
    }

    /// Leaves the pool now: revokes the lease and waits for the thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// The registration thread's state.
struct Worker {
    options: RegistrationOptions,
    record: WorkerRecord,
    load: LoadFn,
    events: EventFn,
    lease: Arc<AtomicI64>,
}

type Keeper = (LeaseKeeper, LeaseKeepAliveStream);

impl Worker {
    async fn run(
        mut self,
        ready: std::sync::mpsc::Sender<Result<(), EtcdError>>,
        mut stop: oneshot::Receiver<()>,
    ) {
        // The first registration is retried for two request timeouts: an
        // election under way (a member just died) delays etcd's answers.
        let deadline = Instant::now() + self.options.etcd.timeout * 2;
        let first = async {
            let mut backoff = Backoff::new();
            loop {
                let attempt = async {
                    let mut client = connect(&self.options.etcd).await?;
                    let lease = self.register(&mut client).await?;
                    Ok::<_, EtcdError>((client, lease))
                };
                match attempt.await {
                    Ok(v) => return Ok(v),
                    Err(e) if Instant::now() >= deadline => return Err(e),
                    Err(_) => tokio::time::sleep(backoff.next()).await,
                }
            }
        };
        let (mut client, mut lease) = match first.await {
            Ok(v) => v,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        (self.events)(RegistrationEvent::Registered {
            lease,
            again: false,
        });
        let ttl = self.options.ttl.max(Duration::from_secs(1));
        let mut alive_tick = tokio::time::interval((ttl / 3).max(Duration::from_millis(100)));
        alive_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut load_tick = tokio::time::interval(self.options.load_every);
        load_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut keeper: Option<Keeper> = None;
        let mut last_alive = Instant::now();
        let mut interrupted = false;
        // After an error the next attempt starts from a fresh client over the
        // members that answer then (a dead member is left out).
        let mut reconnect = false;
        let mut backoff = Backoff::new();
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = alive_tick.tick() => {}
                _ = load_tick.tick() => {
                    if lease != 0 && !interrupted {
                        // A failed put is not fatal: the keep-alive decides.
                        let _ = self.put_load(&mut client, lease).await;
                    }
                    continue;
                }
            }
            if reconnect {
                match connect(&self.options.etcd).await {
                    Ok(c) => {
                        client = c;
                        keeper = None;
                        reconnect = false;
                    }
                    Err(error) => {
                        self.interrupted(error, &mut interrupted);
                        self.expire_if_silent(&mut lease, last_alive, ttl);
                        continue;
                    }
                }
            }
            if lease == 0 {
                match self.register(&mut client).await {
                    Ok(l) => {
                        lease = l;
                        last_alive = Instant::now();
                        interrupted = false;
                        backoff.reset();
                        (self.events)(RegistrationEvent::Registered { lease, again: true });
                    }
                    Err(error) => {
                        reconnect = true;
                        self.interrupted(error, &mut interrupted);
                        tokio::select! {
                            _ = &mut stop => break,
                            _ = tokio::time::sleep(backoff.next()) => {}
                        }
                    }
                }
                continue;
            }
            match self.keep_alive(&mut client, lease, &mut keeper).await {
                Ok(ttl_left) if ttl_left > 0 => {
                    last_alive = Instant::now();
                    interrupted = false;
                }
                Ok(_) => {
                    // etcd answered: the lease is gone (it expired).
                    (self.events)(RegistrationEvent::LeaseLost { lease });
                    lease = 0;
                    keeper = None;
                    self.lease.store(0, Ordering::Release);
                    alive_tick.reset_immediately();
                }
                Err(error) => {
                    keeper = None;
                    reconnect = true;
                    self.interrupted(error, &mut interrupted);
                    self.expire_if_silent(&mut lease, last_alive, ttl);
                }
            }
        }
        if lease != 0 {
            let options = self.options.etcd.clone();
            if timed(&options, "lease revoke", client.lease_revoke(lease))
                .await
                .is_ok()
            {
                (self.events)(RegistrationEvent::Revoked { lease });
            }
            self.lease.store(0, Ordering::Release);
        }
    }

    /// Tells of the first error of an interruption (later ones until etcd
    /// answers again are the same story).
    fn interrupted(&mut self, error: EtcdError, interrupted: &mut bool) {
        if !*interrupted {
            *interrupted = true;
            (self.events)(RegistrationEvent::Interrupted { error });
        }
    }

    /// Counts the lease as lost once no keep-alive went through for its
    /// whole TTL (etcd has expired it by now, whatever we hear next).
    fn expire_if_silent(&mut self, lease: &mut i64, last_alive: Instant, ttl: Duration) {
        if *lease != 0 && last_alive.elapsed() >= ttl {
            (self.events)(RegistrationEvent::LeaseLost { lease: *lease });
            *lease = 0;
            self.lease.store(0, Ordering::Release);
        }
    }

    /// Grants a lease and puts the record and the load under it.
    async fn register(&mut self, client: &mut Client) -> Result<i64, EtcdError> {
        let options = self.options.etcd.clone();
        let ttl = i64::try_from(self.options.ttl.as_secs().max(1)).unwrap_or(i64::MAX);
        let lease = timed(&options, "lease grant", client.lease_grant(ttl, None))
            .await?
            .id();
        // Signed with the pool key, so coordinators can tell it from a
        // record anyone with write access to etcd could put there.
        let record =
            super::trust::encode(&self.record, options.trust.key.as_ref()).map_err(|e| {
                EtcdError::Thread {
                    reason: format!("encoding the worker record: {e}"),
                }
            })?;
        let key = record_key(&options.clean_prefix(), &self.record.id);
        let put = PutOptions::new().with_lease(lease);
        timed(&options, "put record", client.put(key, record, Some(put))).await?;
        self.put_load(client, lease).await?;
        self.lease.store(lease, Ordering::Release);
        Ok(lease)
    }

    async fn put_load(&mut self, client: &mut Client, lease: i64) -> Result<(), EtcdError> {
        let mut load = (self.load)();
        if load.at == 0 {
            load.at = now_secs();
        }
        let options = self.options.etcd.clone();
        let value = serde_json::to_vec(&load).map_err(|e| EtcdError::Thread {
            reason: format!("encoding the load: {e}"),
        })?;
        let key = load_key(&options.clean_prefix(), &self.record.id);
        let put = PutOptions::new().with_lease(lease);
        timed(&options, "put load", client.put(key, value, Some(put))).await?;
        Ok(())
    }

    /// One keep-alive round trip; the TTL etcd says is left (0: expired).
    async fn keep_alive(
        &mut self,
        client: &mut Client,
        lease: i64,
        keeper: &mut Option<Keeper>,
    ) -> Result<i64, EtcdError> {
        let options = self.options.etcd.clone();
        let (k, stream) = match keeper {
            Some(k) => k,
            None => keeper
                .insert(timed(&options, "lease keep-alive", client.lease_keep_alive(lease)).await?),
        };
        timed(&options, "lease keep-alive", k.keep_alive()).await?;
        match timed(&options, "lease keep-alive", stream.message()).await? {
            Some(answer) => Ok(answer.ttl()),
            None => Err(EtcdError::Unavailable {
                endpoints: options.endpoints_text(),
                op: "lease keep-alive",
                reason: "the keep-alive stream closed".into(),
            }),
        }
    }
}
