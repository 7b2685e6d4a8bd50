//! How many prompt tokens a step may evaluate while other requests are
//! generating, when the `llm` node does not say (`prefill_chunk` unset):
//! sized for the CPU the engine runs on, from the prompt tokens per second
//! its own prefill steps reach.
//!
//! A prompt entering the batch delays every running stream's next token by
//! the time its chunk takes, so the chunk is what this machine evaluates in
//! about [`STALL`]. On the 2-core Xeon the benchmarks run on (~200 prompt
//! tokens a second) that is ~100 tokens: the measured 128-token chunk cut
//! running streams' P99 gap 3.4× for 4% of throughput, and chunks of 32
//! cost 14% (docs/BENCHMARKS.md, "Chunked prefill with the CPU to
//! itself"). A machine four times faster gets chunks four times larger, up
//! to `n_batch`.
//!
//! Chunking protects a pace someone is watching: it applies only while a
//! generating request streams its tokens to its caller. When every running
//! request is read back whole (a topology whose `output_guard` buffers the
//! answer, an API call without `stream`, an agent's tool call), nobody sees
//! their gaps, only their end-to-end time, and a step takes up to `n_batch`
//! prompt tokens: fewer steps, and a new prompt no longer waits behind
//! chunks (rag-chat as shipped, 4 clients, ggml's AVX2 kernels: 4% more
//! requests a second over three alternating rounds; docs/BENCHMARKS.md,
//! "Chunked prefill only for watched streams").

use std::time::Duration;

/// How long a prompt chunk may hold running streams back.
const STALL: Duration = Duration::from_millis(500);
/// Below this a chunk's fixed cost per step dominates (the 32-token row).
const MIN_CHUNK: usize = 64;
/// The chunk before any prefill step has been timed.
const FIRST_CHUNK: usize = 128;
/// Steps shorter than this say more about per-call overhead than about
/// the rate, and are not counted.
const MIN_TIMED_TOKENS: usize = 32;
/// Weight of the newest step in the running rate.
const WEIGHT: f64 = 0.2;

/// The measured prefill rate and the chunk it gives.
#[derive(Debug, Clone, Default)]
pub(super) struct PrefillPace {
    tokens_per_s: Option<f64>,
}

impl PrefillPace {
    /// Counts one prefill call of `tokens` prompt tokens that took `took`.
    pub(super) fn observe(&mut self, tokens: usize, took: Duration) {
        let secs = took.as_secs_f64();
        if tokens < MIN_TIMED_TOKENS || secs <= 0.0 {
            return;
        }
        let rate = tokens as f64 / secs;
        self.tokens_per_s = Some(match self.tokens_per_s {
            Some(r) => r + WEIGHT * (rate - r),
            None => rate,
        });
    }

    /// Prompt tokens a step may evaluate: `n_batch`, unless a generating
    /// request is `watched` (streamed to its caller); then the node's fixed
    /// `prefill_chunk`, or else the measured [`chunk`](Self::chunk).
    pub(super) fn room(&self, watched: bool, fixed: Option<usize>, n_batch: usize) -> usize {
        match (watched, fixed) {
            (false, _) => n_batch,
            (true, Some(chunk)) => chunk,
            (true, None) => self.chunk(n_batch),
        }
    }

    /// Prompt tokens per step while others generate, at most `n_batch`.
    pub(super) fn chunk(&self, n_batch: usize) -> usize {
        let chunk = match self.tokens_per_s {
            None => FIRST_CHUNK,
            Some(rate) => (rate * STALL.as_secs_f64()) as usize,
        };
        chunk.clamp(MIN_CHUNK.min(n_batch), n_batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chunk_is_what_the_machine_evaluates_in_half_a_second() {
        let mut pace = PrefillPace::default();
        assert_eq!(pace.chunk(512), FIRST_CHUNK);
        pace.observe(400, Duration::from_secs(2)); // 200 tokens/s
        assert_eq!(pace.chunk(512), 100);
        let mut fast = PrefillPace::default();
        fast.observe(512, Duration::from_millis(256)); // 2,000 tokens/s
        assert_eq!(fast.chunk(512), 512, "capped at n_batch");
        let mut slow = PrefillPace::default();
        slow.observe(64, Duration::from_secs(2)); // 32 tokens/s
        assert_eq!(slow.chunk(512), MIN_CHUNK, "never below the floor");
        assert_eq!(slow.chunk(48), 48, "nor above a small n_batch");
    }

    #[test]
    fn prompts_are_chunked_only_while_a_streamed_request_generates() {
        let mut pace = PrefillPace::default();
        pace.observe(400, Duration::from_secs(2)); // 200 tokens/s
        assert_eq!(pace.room(false, None, 512), 512, "nobody watches: whole");
        assert_eq!(pace.room(false, Some(32), 512), 512, "a fixed chunk too");
        assert_eq!(
            pace.room(true, None, 512),
            100,
            "watched: the measured chunk"
        );
        assert_eq!(
            pace.room(true, Some(32), 512),
            32,
            "watched: the node's chunk"
        );
    }

    #[test]
    fn short_steps_do_not_move_the_rate_and_long_ones_move_it_gradually() {
        let mut pace = PrefillPace::default();
        pace.observe(8, Duration::from_millis(1));
        assert_eq!(pace.chunk(512), FIRST_CHUNK, "an 8-token step is not timed");
        pace.observe(200, Duration::from_secs(1)); // 200 tokens/s
        pace.observe(400, Duration::from_secs(1)); // one step at 400 tokens/s
        let chunk = pace.chunk(512);
        assert!(chunk > 100 && chunk < 200, "moved part of the way: {chunk}");
    }
}
