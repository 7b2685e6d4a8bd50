//! The bounded queue between the engine and the encoder thread.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::msg::Msg;

/// The bounded queue between the engine and the encoder thread.
///
/// Not a channel: a channel hands over one message per receive, so once it is
/// full every receive wakes a blocked sender for a single slot, and the two
/// threads ping-pong through the scheduler per record. Here the encoder takes
/// everything queued (up to a batch) under one lock, and blocked senders are
/// woken once per take.
pub(super) struct Queue {
    state: Mutex<QueueState>,
    /// Signalled when a message arrives for a waiting encoder.
    not_empty: Condvar,
    /// Signalled when a take frees room for waiting senders.
    not_full: Condvar,
    pub(super) capacity: usize,
}

#[derive(Default)]
pub(super) struct QueueState {
    items: VecDeque<Msg>,
    closed: bool,
    encoder_waiting: bool,
    senders_waiting: usize,
}

/// Why a push did not happen.
pub(super) enum Refused {
    Full(Msg),
    Closed,
}

impl Queue {
    pub(super) fn new(capacity: usize) -> Queue {
        Queue {
            state: Mutex::new(QueueState::default()),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `msg` and returns the depth after it, if there is room now.
    pub(super) fn try_push(&self, msg: Msg) -> std::result::Result<usize, Refused> {
        let mut state = self.lock();
        if state.closed {
            return Err(Refused::Closed);
        }
        if state.items.len() >= self.capacity {
            return Err(Refused::Full(msg));
        }
        Ok(self.push_locked(&mut state, msg))
    }

    /// Waits for room, then queues `msg`; `None` if the queue closed.
    pub(super) fn push_waiting(&self, msg: Msg) -> Option<usize> {
        let mut state = self.lock();
        while !state.closed && state.items.len() >= self.capacity {
            state.senders_waiting += 1;
            state = self
                .not_full
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.senders_waiting -= 1;
        }
        (!state.closed).then(|| self.push_locked(&mut state, msg))
    }

    fn push_locked(&self, state: &mut QueueState, msg: Msg) -> usize {
        state.items.push_back(msg);
        if state.encoder_waiting {
            state.encoder_waiting = false;
            self.not_empty.notify_one();
        }
        state.items.len()
    }

    /// Moves up to `max` queued messages into `out`, waiting for at least
    /// one; `false` once the queue is closed and empty.
    pub(super) fn take(&self, out: &mut Vec<Msg>, max: usize) -> bool {
        let mut state = self.lock();
        while state.items.is_empty() {
            if state.closed {
                return false;
            }
            state.encoder_waiting = true;
            state = self
                .not_empty
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        let n = state.items.len().min(max);
        out.extend(state.items.drain(..n));
        if state.senders_waiting > 0 {
            self.not_full.notify_all();
        }
        true
    }

    pub(super) fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Refuses further pushes and wakes everyone; queued messages can still
    /// be taken.
    pub(super) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        self.not_empty.notify_all();
        self.not_full.notify_all();
    }
}
