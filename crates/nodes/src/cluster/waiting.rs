//! Calls waiting for a full pool, per (kind, model): while an interactive
//! or online call waits for a worker of a model to have room (every worker
//! answered 429), an offline call for that model is shed at once instead
//! of being sent. Without this, offline calls arriving between the waiting
//! call's tries take each slot as it frees, and the urgent call waits out
//! its whole timeout behind work that could have waited (docs/cluster.md,
//! "Slow is not dead": offline work is shed first).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// How many calls wait per (kind, model); shared by a dispatcher's clones.
#[derive(Debug, Clone, Default)]
pub struct Waiters {
    counts: Arc<Mutex<HashMap<(String, String), usize>>>,
}

impl Waiters {
    /// Counts a call as waiting until the guard drops.
    pub fn wait(&self, kind: &str, model: &str) -> Waiting {
        let key = (kind.to_string(), model.to_string());
        *self.lock().entry(key.clone()).or_default() += 1;
        Waiting {
            waiters: self.clone(),
            key,
        }
    }

    /// Calls waiting for a worker of (kind, model) now.
    pub fn count(&self, kind: &str, model: &str) -> usize {
        self.lock()
            .get(&(kind.to_string(), model.to_string()))
            .copied()
            .unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), usize>> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A call counted as waiting; dropping it ends the wait.
#[derive(Debug)]
pub struct Waiting {
    waiters: Waiters,
    key: (String, String),
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut counts = self.waiters.lock();
        if let Some(n) = counts.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_waits_until_its_guard_drops() {
        let w = Waiters::default();
        let a = w.wait("llm_inference", "smollm2");
        let b = w.clone().wait("llm_inference", "smollm2");
        assert_eq!(w.count("llm_inference", "smollm2"), 2);
        assert_eq!(w.count("llm_inference", "other"), 0);
        drop(a);
        assert_eq!(w.count("llm_inference", "smollm2"), 1);
        drop(b);
        assert_eq!(w.count("llm_inference", "smollm2"), 0);
    }
}
