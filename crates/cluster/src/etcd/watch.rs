//! A coordinator's view of the pool: a get of every record and load, then
//! a watch from that revision that applies each put and delete to the
//! [`Pool`]. When the watch breaks (a member died, a partition, a
//! compaction) it starts over with a fresh get, so the pool converges on
//! what etcd holds, and a worker that left meanwhile is removed.

use std::collections::BTreeSet;

use etcd_client::{Client, EventType, GetOptions, KeyValue, WatchOptions};
use tokio::sync::oneshot;

use super::{Backoff, EtcdError, EtcdOptions, connect, runtime, timed};
use crate::member::{Load, WorkerRecord};
use crate::pool::Pool;

/// What the watch saw, for the coordinator's log.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent {
    /// A worker registered (or registered again after it was gone).
    Joined(WorkerRecord),
    /// A worker left: it shut down, or its lease expired.
    Left { id: String },
    /// The watch broke; it resumes with a fresh read when etcd answers.
    Interrupted { error: EtcdError },
    /// Back in step with etcd after an interruption.
    Resumed,
    /// A value under the prefix that is not a record or load; ignored.
    Skipped { key: String, reason: String },
}

/// A running watch; dropping it stops the watch (the pool keeps its last
/// view).
#[derive(Debug)]
pub struct Watch {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

type EventFn = Box<dyn FnMut(WatchEvent) + Send>;

/// Fills `pool` from etcd and keeps it in step until the returned handle is
/// dropped. Returns once the first read is in the pool, or with the error
/// that prevented it (etcd unreachable at start).
pub fn watch(
    options: EtcdOptions,
    pool: Pool,
    events: impl FnMut(WatchEvent) + Send + 'static,
) -> Result<Watch, EtcdError> {
    if options.endpoints.is_empty() {
        return Err(EtcdError::NoEndpoints);
    }
    let rt = runtime()?;
    let (stop_tx, stop_rx) = oneshot::channel();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let mut follower = Follower {
        prefix: options.clean_prefix(),
        options,
        pool,
        known: BTreeSet::new(),
        events: Box::new(events),
    };
    let thread = std::thread::Builder::new()
        .name("etcd-watch".into())
        .spawn(move || rt.block_on(follower.run(ready_tx, stop_rx)))
        .map_err(|e| EtcdError::Thread {
            reason: e.to_string(),
        })?;
    let mut handle = Watch {
        stop: Some(stop_tx),
        thread: Some(thread),
    };
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(e)) => {
            drop(handle.stop.take());
            Err(e)
        }
        Err(_) => Err(EtcdError::Thread {
            reason: "the watch thread ended before its first read".into(),
        }),
    }
}

/// Which of the pool's keys a key is.
#[derive(Debug, PartialEq)]
enum Key<'a> {
    Record(&'a str),
    Load(&'a str),
    Other,
}

fn classify<'a>(prefix: &str, key: &'a str) -> Key<'a> {
    let Some(rest) = key.strip_prefix(prefix).and_then(|r| r.strip_prefix('/')) else {
        return Key::Other;
    };
    match rest.split_once('/') {
        Some(("workers", id)) if !id.is_empty() => Key::Record(id),
        Some(("load", id)) if !id.is_empty() => Key::Load(id),
        _ => Key::Other,
    }
}

struct Follower {
    options: EtcdOptions,
    prefix: String,
    pool: Pool,
    /// Workers this watch put in the pool (entries added by others, such
    /// as configured pool entries, are never removed by it).
    known: BTreeSet<String>,
    events: EventFn,
}

impl Follower {
    async fn run(
        &mut self,
        ready: std::sync::mpsc::Sender<Result<(), EtcdError>>,
        mut stop: oneshot::Receiver<()>,
    ) {
        // The first read is retried for two request timeouts: an election
        // under way (a member just died) delays etcd's answers.
        let deadline = std::time::Instant::now() + self.options.timeout * 2;
        let first = async {
            let mut backoff = Backoff::new();
            loop {
                let attempt = async {
                    let mut client = connect(&self.options).await?;
                    let revision = self.read_all(&mut client).await?;
                    Ok::<_, EtcdError>((client, revision))
                };
                match attempt.await {
                    Ok(v) => return Ok(v),
                    Err(e) if std::time::Instant::now() >= deadline => return Err(e),
                    Err(_) => tokio::time::sleep(backoff.next()).await,
                }
            }
        };
        let (mut client, mut revision) = match first.await {
            Ok(v) => v,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        let mut backoff = Backoff::new();
        loop {
            let broke = tokio::select! {
                _ = &mut stop => return,
                broke = self.follow(&mut client, revision) => broke,
            };
            (self.events)(WatchEvent::Interrupted { error: broke });
            loop {
                tokio::select! {
                    _ = &mut stop => return,
                    _ = tokio::time::sleep(backoff.next()) => {}
                }
                // A fresh client over the members that answer now.
                let attempt = async {
                    let mut fresh = connect(&self.options).await?;
                    let r = self.read_all(&mut fresh).await?;
                    Ok::<_, EtcdError>((fresh, r))
                };
                match attempt.await {
                    Ok((fresh, r)) => {
                        client = fresh;
                        revision = r;
                        backoff.reset();
                        (self.events)(WatchEvent::Resumed);
                        break;
                    }
                    Err(_) => continue,
                }
            }
        }
    }

    /// Reads every record and load at one revision into the pool; returns
    /// that revision.
    async fn read_all(&mut self, client: &mut Client) -> Result<i64, EtcdError> {
        let options = self.options.clone();
        let workers = timed(
            &options,
            "get workers",
            client.get(
                format!("{}/workers/", self.prefix),
                Some(GetOptions::new().with_prefix()),
            ),
        )
        .await?;
        let revision = workers.header().map_or(0, |h| h.revision());
        let loads = timed(
            &options,
            "get loads",
            client.get(
                format!("{}/load/", self.prefix),
                Some(GetOptions::new().with_prefix().with_revision(revision)),
            ),
        )
        .await?;
        let mut seen = BTreeSet::new();
        for kv in workers.kvs() {
            if let Some(id) = self.put(kv) {
                seen.insert(id);
            }
        }
        let gone: Vec<String> = self.known.difference(&seen).cloned().collect();
        for id in gone {
            self.remove(&id);
        }
        for kv in loads.kvs() {
            self.put(kv);
        }
        Ok(revision)
    }

    /// Follows changes after `revision` until the watch breaks.
    async fn follow(&mut self, client: &mut Client, revision: i64) -> EtcdError {
        let options = self.options.clone();
        let broken = |reason: String| EtcdError::Unavailable {
            endpoints: options.endpoints_text(),
            op: "watch",
            reason,
        };
        let watch = WatchOptions::new()
            .with_prefix()
            .with_start_revision(revision + 1);
        let mut stream = match timed(
            &options,
            "watch",
            client.watch(format!("{}/", self.prefix), Some(watch)),
        )
        .await
        {
            Ok(s) => s,
            Err(e) => return e,
        };
        loop {
            let answer = match stream.message().await {
                Ok(Some(a)) => a,
                Ok(None) => return broken("the watch stream closed".into()),
                Err(e) => return broken(e.to_string()),
            };
            if answer.canceled() {
                let reason = if answer.compact_revision() > 0 {
                    format!(
                        "revision {} was compacted (now {})",
                        revision + 1,
                        answer.compact_revision()
                    )
                } else {
                    format!("etcd cancelled the watch: {}", answer.cancel_reason())
                };
                return broken(reason);
            }
            for event in answer.events() {
                let Some(kv) = event.kv() else { continue };
                match event.event_type() {
                    EventType::Put => {
                        self.put(kv);
                    }
                    EventType::Delete => {
                        let key = String::from_utf8_lossy(kv.key()).into_owned();
                        if let Key::Record(id) = classify(&self.prefix, &key) {
                            let id = id.to_owned();
                            self.remove(&id);
                        }
                    }
                }
            }
        }
    }

    /// Applies one put; returns the worker id for a record.
    fn put(&mut self, kv: &KeyValue) -> Option<String> {
        let key = String::from_utf8_lossy(kv.key()).into_owned();
        let skip = |events: &mut EventFn, reason: String| {
            events(WatchEvent::Skipped {
                key: key.clone(),
                reason,
            });
        };
        match classify(&self.prefix, &key) {
            Key::Record(id) => match super::trust::decode(kv.value(), &self.options.trust) {
                Ok(record) if record.id == id => {
                    let id = id.to_owned();
                    let joined = self.pool.get(&id).is_none();
                    self.known.insert(id.clone());
                    self.pool.upsert_record(record.clone());
                    if joined {
                        (self.events)(WatchEvent::Joined(record));
                    }
                    Some(id)
                }
                Ok(record) => {
                    skip(
                        &mut self.events,
                        format!("the record's id `{}` differs from its key's", record.id),
                    );
                    None
                }
                Err(why) => {
                    // A record that was accepted before (key rotated, record
                    // rewritten by someone else) leaves the pool.
                    let id = id.to_owned();
                    if self.known.contains(&id) {
                        self.remove(&id);
                    }
                    skip(&mut self.events, why);
                    None
                }
            },
            Key::Load(id) => {
                match serde_json::from_slice::<Load>(kv.value()) {
                    Ok(load) => self.pool.set_load(id, load),
                    Err(e) => skip(&mut self.events, format!("not a worker load: {e}")),
                }
                None
            }
            Key::Other => None,
        }
    }

    fn remove(&mut self, id: &str) {
        self.known.remove(id);
        if self.pool.get(id).is_some() {
            self.pool.remove(id);
            (self.events)(WatchEvent::Left { id: id.to_owned() });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_told_apart_by_their_folder() {
        assert_eq!(
            classify("/glassbox", "/glassbox/workers/w-1"),
            Key::Record("w-1")
        );
        assert_eq!(
            classify("/glassbox", "/glassbox/load/w-1"),
            Key::Load("w-1")
        );
        assert_eq!(classify("/glassbox", "/glassbox/workers/"), Key::Other);
        assert_eq!(classify("/glassbox", "/glassbox/profiles/x"), Key::Other);
        assert_eq!(classify("/glassbox", "/glassboxes/workers/w"), Key::Other);
    }
}
