//! Progress bars on standard error, fed by a counter the work updates: the
//! work (library code) only counts, this side draws. A bar is shown only
//! when [`Out::shows_progress`](super::Out::shows_progress) says so.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// What the bar's length measures.
#[derive(Debug, Clone, Copy)]
pub enum Length {
    /// Milliseconds since the bar started, out of this many.
    Millis(u64),
    /// The counter's value, out of this many.
    Count(u64),
}

/// A bar that redraws from `done` five times a second, with the count as
/// its message (`N requests`), until [`finish`](Bar::finish).
pub struct Bar {
    stop: Arc<AtomicBool>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Bar {
    /// Starts drawing when `show`, else does nothing.
    pub fn start(show: bool, done: Arc<AtomicU64>, length: Length, unit: &'static str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let handle = show.then(|| {
            let stop = stop.clone();
            let start = Instant::now();
            let (len, by_time) = match length {
                Length::Millis(ms) => (ms, true),
                Length::Count(n) => (n, false),
            };
            thread::spawn(move || {
                let bar = indicatif::ProgressBar::new(len);
                let style = indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {msg}",
                );
                if let Ok(style) = style {
                    bar.set_style(style);
                }
                while !stop.load(Ordering::Relaxed) {
                    let n = done.load(Ordering::Relaxed);
                    bar.set_position(if by_time {
                        u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
                    } else {
                        n
                    });
                    bar.set_message(format!("{n} {unit}"));
                    thread::sleep(Duration::from_millis(200));
                }
                bar.finish_and_clear();
            })
        });
        Bar { stop, handle }
    }

    /// Stops and clears the bar.
    pub fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle {
            let _ = h.join();
        }
    }
}
