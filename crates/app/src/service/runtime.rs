//! The engine runtime: where every pipeline runs, apart from the HTTP
//! workers. A handler waits for its run without holding an HTTP worker, so
//! while CPU-bound pipelines (router, template, guard) keep every core busy,
//! new requests are still parsed and refused with 429 once their topology is
//! full, instead of piling up unseen in the HTTP runtime.

use std::future::Future;

/// The pipelines' runtime. Shut down in the background when dropped, which
/// is allowed from inside another runtime (a plain drop is not).
#[derive(Debug)]
pub struct EngineRuntime(Option<tokio::runtime::Runtime>);

impl EngineRuntime {
    /// One worker thread per core, named `glassbox-engine`.
    pub fn new() -> std::io::Result<EngineRuntime> {
        let threads = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("glassbox-engine")
            .enable_all()
            .build()
            .map(|rt| EngineRuntime(Some(rt)))
    }

    /// Starts `job` on the engine runtime.
    pub fn spawn<F>(&self, job: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.0 {
            Some(rt) => rt.spawn(job),
            None => tokio::spawn(job),
        }
    }

    /// Runs `job` on the engine runtime and waits for it; a panic in the
    /// job goes on in the caller.
    pub async fn run<F>(&self, job: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self.spawn(job).await {
            Ok(output) => output,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

impl Drop for EngineRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}
