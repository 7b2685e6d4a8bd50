//! A connection's clock: its phase (idle, reading a request head, busy
//! with requests) and the deadline each phase sets.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::config::Connections;

/// What a connection is doing, and since when.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for the first byte of a request.
    Idle { since: Instant },
    /// Reading a request's head (its first byte came at `since`).
    Head { since: Instant },
    /// Requests handed to the router whose responses are not done.
    Busy { requests: usize },
}

/// Why the watchdog closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    Header,
    Idle,
}

/// One connection's phase and deadlines.
#[derive(Debug)]
pub struct Clock {
    phase: Mutex<Phase>,
    changed: Notify,
    header: Duration,
    idle: Duration,
}

impl Clock {
    pub(super) fn new(limits: &Connections) -> Clock {
        Clock {
            phase: Mutex::new(Phase::Idle {
                since: Instant::now(),
            }),
            changed: Notify::new(),
            header: limits.header_timeout(),
            idle: limits.idle_timeout(),
        }
    }

    fn update(&self, f: impl FnOnce(Phase) -> Phase) {
        let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        *phase = f(*phase);
        drop(phase);
        self.changed.notify_one();
    }

    /// Bytes arrived: an idle connection starts reading a head.
    pub(super) fn on_bytes(&self) {
        let idle = matches!(
            *self.phase.lock().unwrap_or_else(PoisonError::into_inner),
            Phase::Idle { .. }
        );
        if idle {
            self.update(|p| match p {
                Phase::Idle { .. } => Phase::Head {
                    since: Instant::now(),
                },
                other => other,
            });
        }
    }

    pub(super) fn request_started(self: &Arc<Self>) -> Busy {
        self.update(|p| match p {
            Phase::Busy { requests } => Phase::Busy {
                requests: requests + 1,
            },
            _ => Phase::Busy { requests: 1 },
        });
        Busy(self.clone())
    }

    pub(super) fn request_finished(&self) {
        self.update(|p| match p {
            Phase::Busy { requests } if requests > 1 => Phase::Busy {
                requests: requests - 1,
            },
            _ => Phase::Idle {
                since: Instant::now(),
            },
        });
    }

    fn deadline(&self) -> Option<(Instant, Expired)> {
        match *self.phase.lock().unwrap_or_else(PoisonError::into_inner) {
            Phase::Idle { since } => Some((since + self.idle, Expired::Idle)),
            Phase::Head { since } => Some((since + self.header, Expired::Header)),
            Phase::Busy { .. } => None,
        }
    }

    /// Resolves when the current phase outlives its limit.
    pub async fn expired(&self) -> Expired {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.deadline() {
                None => changed.await,
                Some((at, why)) if at <= Instant::now() => return why,
                Some((at, _)) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = changed => {}
                    }
                }
            }
        }
    }
}

/// Marks a request as in progress until dropped (with its response body).
#[derive(Debug)]
pub(super) struct Busy(Arc<Clock>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}
