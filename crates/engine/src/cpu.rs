//! Thread CPU time: what CPU nodes are billed by.
//!
//! Wall time would bill a node for time it spent waiting for a core on a
//! busy machine; thread CPU time counts only the cycles its own code used.
//! Read with `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` (about 0.1–0.3 µs).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// CPU time the calling thread has used so far (None where unsupported).
#[cfg(unix)]
#[allow(unsafe_code)]
pub fn thread_cpu_time() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, exclusively borrowed timespec for the duration
    // of the call, and CLOCK_THREAD_CPUTIME_ID is a clock every supported
    // Unix provides; the call only writes into `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    Some(Duration::new(secs, nanos))
}

#[cfg(not(unix))]
pub fn thread_cpu_time() -> Option<Duration> {
    None
}

/// Runs `f`, returning its result and the thread CPU time it used.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Option<Duration>) {
    let start = thread_cpu_time();
    let out = f();
    let used = match (start, thread_cpu_time()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    (out, used)
}

/// A future that adds up the thread CPU time spent inside its polls, so an
/// async node is billed for its own work and not for the time it waited.
pub struct CpuTimed<F> {
    inner: Pin<Box<F>>,
    used: Option<Duration>,
}

impl<F: Future> CpuTimed<F> {
    pub fn new(inner: F) -> Self {
        CpuTimed {
            inner: Box::pin(inner),
            used: Some(Duration::ZERO),
        }
    }
}

impl<F: Future> Future for CpuTimed<F> {
    type Output = (F::Output, Option<Duration>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let (poll, used) = measure(|| this.inner.as_mut().poll(cx));
        this.used = match (this.used, used) {
            (Some(total), Some(u)) => Some(total + u),
            _ => None,
        };
        match poll {
            Poll::Ready(out) => Poll::Ready((out, this.used)),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_uses_cpu_time() {
        let (sum, used) = measure(|| (0..2_000_000u64).fold(0u64, |a, b| a.wrapping_add(b * b)));
        assert!(sum > 0);
        if cfg!(unix) {
            assert!(used.is_some());
        }
    }
}
