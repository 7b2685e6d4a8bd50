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
    /// Records in `items` (an encoded request carries its spans too).
    records: usize,
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
        if self.full(&state, &msg) {
            return Err(Refused::Full(msg));
        }
        Ok(self.push_locked(&mut state, msg))
    }

    /// Waits for room, then queues `msg`; `None` if the queue closed.
    pub(super) fn push_waiting(&self, msg: Msg) -> Option<usize> {
        let mut state = self.lock();
        while !state.closed && self.full(&state, &msg) {
            state.senders_waiting += 1;
            state = self
                .not_full
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.senders_waiting -= 1;
        }
        (!state.closed).then(|| self.push_locked(&mut state, msg))
    }

    /// No room for `msg`: the queue holds `capacity` records with it. A
    /// message larger than the whole queue goes in once the queue is empty.
    fn full(&self, state: &QueueState, msg: &Msg) -> bool {
        state.records > 0 && state.records + msg.records() > self.capacity
    }

    fn push_locked(&self, state: &mut QueueState, msg: Msg) -> usize {
        state.records += msg.records();
        state.items.push_back(msg);
        if state.encoder_waiting {
            state.encoder_waiting = false;
            self.not_empty.notify_one();
        }
        state.records
    }

    /// Moves queued messages into `out`, up to `max` records (at least one
    /// message), waiting for one; `false` once the queue is closed and
    /// empty.
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
        let mut n = 0;
        let mut records = 0;
        for msg in &state.items {
            if n > 0 && records + msg.records() > max {
                break;
            }
            records += msg.records();
            n += 1;
        }
        state.records -= records;
        out.extend(state.items.drain(..n));
        if state.senders_waiting > 0 {
            self.not_full.notify_all();
        }
        true
    }

    /// Records queued now.
    pub(super) fn len(&self) -> usize {
        self.lock().records
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
