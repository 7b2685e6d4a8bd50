//! Progress on standard error. Two shapes: a [`Bar`] fed by a counter the
//! work updates (the work, library code, only counts; this side draws;
//! shown only when [`Out::shows_progress`](super::Out::shows_progress) says
//! so), and bars driven by a library's progress events ([`events`],
//! [`style`]), which indicatif hides when standard error is not a terminal.
//! Every bar of the command is made here.

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

/// A bar of `len` steps (a spinner when `None`) for a command to drive
/// from its work's progress events.
pub fn events(len: Option<u64>) -> indicatif::ProgressBar {
    match len {
        Some(len) => indicatif::ProgressBar::new(len),
        None => indicatif::ProgressBar::new_spinner(),
    }
}

/// A bar style from an indicatif template; `spinner` picks the fallback
/// should the template not parse.
pub fn style(template: &str, spinner: bool) -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template(template).unwrap_or_else(|_| {
        if spinner {
            indicatif::ProgressStyle::default_spinner()
        } else {
            indicatif::ProgressStyle::default_bar()
        }
    })
}
