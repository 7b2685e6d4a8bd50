//! The live view of the pool: every worker whose lease is alive, with its
//! latest load. One per coordinator, filled from an etcd watch; cheap to
//! clone (shared).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::member::{Load, Member, WorkerRecord};

/// The workers a coordinator can place work on.
#[derive(Debug, Clone, Default)]
pub struct Pool {
    members: Arc<RwLock<BTreeMap<String, Member>>>,
}

impl Pool {
    pub fn new() -> Pool {
        Pool::default()
    }

    /// Adds or replaces a worker's record (its load is kept).
    pub fn upsert_record(&self, record: WorkerRecord) {
        let mut m = self.members.write().unwrap_or_else(|e| e.into_inner());
        let load = m.get(&record.id).and_then(|old| old.load.clone());
        m.insert(record.id.clone(), Member { record, load });
    }

    /// Sets a worker's load; ignored for a worker with no record (yet).
    pub fn set_load(&self, id: &str, load: Load) {
        let mut m = self.members.write().unwrap_or_else(|e| e.into_inner());
        if let Some(member) = m.get_mut(id) {
            member.load = Some(load);
        }
    }

    /// Forgets a worker (its lease expired or it left).
    pub fn remove(&self, id: &str) {
        let mut m = self.members.write().unwrap_or_else(|e| e.into_inner());
        m.remove(id);
    }

    /// Every member now, by id.
    pub fn snapshot(&self) -> Vec<Member> {
        let m = self.members.read().unwrap_or_else(|e| e.into_inner());
        m.values().cloned().collect()
    }

    pub fn get(&self, id: &str) -> Option<Member> {
        let m = self.members.read().unwrap_or_else(|e| e.into_inner());
        m.get(id).cloned()
    }

    pub fn len(&self) -> usize {
        let m = self.members.read().unwrap_or_else(|e| e.into_inner());
        m.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::Hardware;

    fn record(id: &str) -> WorkerRecord {
        WorkerRecord {
            id: id.into(),
            address: format!("http://{id}"),
            engine: "glassbox".into(),
            hardware: Hardware::default(),
            models: vec![],
            node_kinds: vec![],
            labels: Default::default(),
            started_at: 0,
        }
    }

    #[test]
    fn load_follows_its_record_and_leaves_with_it() {
        let pool = Pool::new();
        pool.set_load("a", Load::default());
        assert!(pool.is_empty(), "a load without a record is not a member");
        pool.upsert_record(record("a"));
        pool.set_load(
            "a",
            Load {
                running: 3,
                ..Load::default()
            },
        );
        pool.upsert_record(record("a"));
        assert_eq!(pool.get("a").unwrap().load.unwrap().running, 3);
        pool.remove("a");
        assert!(pool.get("a").is_none());
    }
}
