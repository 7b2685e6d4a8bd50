//! CPU time: what CPU nodes are billed by.
//!
//! Wall time would bill a node for time it spent waiting (on I/O, on a
//! queue, on a core); CPU time counts only the cycles its own code used.
//!
//! Two clocks, chosen by [`CpuClock`]:
//! - the thread CPU clock, `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`: exact,
//!   but a system call (about 1 µs in a VM, more than a trivial node's work);
//! - the *slice* clock: the monotonic clock (vDSO, ~50 ns) around each
//!   synchronous slice of the node's own code (an inline call, one poll of
//!   its future). A slice never waits, so its wall time is its CPU time
//!   unless the OS preempts the thread mid-slice.
//!
//! Blocking-pool work (the heavy CPU nodes) always uses the thread clock;
//! inline calls and polls use the slice clock unless
//! [`CpuClock::Thread`] is asked for.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// CPU time the calling thread has used so far (None where unsupported).
#[cfg(unix)]
pub fn thread_cpu_time() -> Option<Duration> {
    clock_time(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time (user and system) the whole process, every thread, has used so
/// far (None where unsupported): what a benchmark reports as its cost.
#[cfg(unix)]
pub fn process_cpu_time() -> Option<Duration> {
    clock_time(libc::CLOCK_PROCESS_CPUTIME_ID)
}

#[cfg(unix)]
#[allow(unsafe_code)]
fn clock_time(clock: libc::clockid_t) -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, exclusively borrowed timespec for the duration
    // of the call, and both CPU-time clocks used here are ones every supported
    // Unix provides; the call only writes into `ts`.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
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

#[cfg(not(unix))]
pub fn process_cpu_time() -> Option<Duration> {
    None
}

/// How inline calls and polls are timed (blocking work always uses the
/// thread CPU clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CpuClock {
    /// Monotonic clock around each synchronous slice (cheap).
    #[default]
    Slice,
    /// The thread CPU clock everywhere (exact, a system call per slice).
    Thread,
}

impl CpuClock {
    /// Runs `f` and returns the CPU time it used, by this clock.
    pub fn measure<T>(self, f: impl FnOnce() -> T) -> (T, Option<Duration>) {
        match self {
            CpuClock::Thread => measure(f),
            CpuClock::Slice => {
                let start = std::time::Instant::now();
                let out = f();
                (out, Some(start.elapsed()))
            }
        }
    }
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
    clock: CpuClock,
}

impl<F: Future> CpuTimed<F> {
    pub fn new(inner: F, clock: CpuClock) -> Self {
        CpuTimed {
            inner: Box::pin(inner),
            used: Some(Duration::ZERO),
            clock,
        }
    }
}

impl<F: Future> Future for CpuTimed<F> {
    type Output = (F::Output, Option<Duration>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let (poll, used) = this.clock.measure(|| this.inner.as_mut().poll(cx));
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

    #[cfg(unix)]
    #[test]
    fn the_process_clock_counts_at_least_this_threads_work() {
        let before = process_cpu_time().expect("the process CPU clock");
        let (_, used) = measure(|| (0..2_000_000u64).fold(0u64, |a, b| a.wrapping_add(b * b)));
        let used = used.expect("the thread CPU clock");
        let after = process_cpu_time().expect("the process CPU clock");
        assert!(after - before >= used, "{before:?} {after:?} {used:?}");
    }
}
