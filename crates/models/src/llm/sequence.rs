//! One request in the running batch: its prompt, sampler, text so far,
//! budget, timing and speculation state, and how a sampled token is taken
//! into it.

use std::ops::ControlFlow;
use std::time::Instant;

use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use super::lookup::PromptLookup;
use super::stop::TextAssembler;
use super::{FinishReason, GenerateRequest, Timing};

/// One request running in the batch.
pub(super) struct Sequence {
    /// The llama.cpp sequence id (its slot).
    pub(super) id: i32,
    pub(super) prompt: Vec<LlamaToken>,
    /// Prompt tokens evaluated so far.
    pub(super) fed: usize,
    /// The sampled token to evaluate in the next step.
    pub(super) next: Option<LlamaToken>,
    /// Where this sequence's logits are in the last batch, and how many
    /// rows it had there (its token, drafts and padding).
    pub(super) logits_at: Option<i32>,
    pub(super) rows: usize,
    pub(super) sampler: LlamaSampler,
    /// The grammar the text must follow, if the request gave one.
    pub(super) grammar: Option<super::constrain::Grammar>,
    pub(super) seed: u32,
    pub(super) text: TextAssembler,
    pub(super) budget: usize,
    pub(super) completion_tokens: u32,
    pub(super) finish: Option<FinishReason>,
    /// When the request was submitted, admitted (`started`), and produced
    /// its first and latest token.
    pub(super) arrived: Instant,
    /// The request's priority (lower runs earlier, see
    /// [`GenerateRequest::priority`](super::GenerateRequest::priority)).
    pub(super) priority: i32,
    /// Whether its tokens go to the caller as they come (a stream), so a
    /// prompt entering the batch is chunked to keep its pace (`pace`).
    pub(super) streamed: bool,
    pub(super) started: Instant,
    pub(super) first_token: Option<Instant>,
    pub(super) last_token: Option<Instant>,
    pub(super) prompt_ms: f64,
    pub(super) decode_started: Option<Instant>,
    /// Prompt tokens whose KV came from the prefix cache.
    pub(super) reused: usize,
    /// Prompt lookup: its settings, the tokens so far (prompt, then
    /// output), this step's draft, and draft tokens proposed and accepted.
    pub(super) lookup: Option<PromptLookup>,
    pub(super) history: Vec<LlamaToken>,
    pub(super) draft: Vec<LlamaToken>,
    pub(super) drafted: u32,
    pub(super) accepted: u32,
    /// Every output token so far (to recompute the KV after preemption).
    pub(super) output: Vec<LlamaToken>,
    /// After a preemption: the output tokens whose KV is evaluated again,
    /// after the prompt, before generation goes on.
    pub(super) refeed: Vec<LlamaToken>,
    pub(super) preemptions: u32,
    /// Engine steps that evaluated part of the prompt (more than one when
    /// chunked prefill split it, or `batch_invariant`'s short chunks).
    pub(super) prompt_steps: u32,
    /// Per-chunk reuse: the prompt's retrieved chunks (token ranges, in
    /// order), the next one not yet saved, and prompt tokens placed.
    pub(super) spans: Vec<std::ops::Range<usize>>,
    pub(super) saved: usize,
    pub(super) placed: usize,
    /// The spans (indexes) whose KV waits in the slot's staging sequence.
    pub(super) staged: Vec<usize>,
}

impl Sequence {
    /// The prompt's tokens.
    pub(super) fn prompt(&self) -> &[LlamaToken] {
        &self.prompt
    }

    /// Tokens to evaluate before generating: the prompt, then after a
    /// preemption the output whose KV was freed.
    pub(super) fn feed_len(&self) -> usize {
        self.prompt.len() + self.refeed.len()
    }

    /// The token to evaluate at `pos` (< [`feed_len`](Self::feed_len)).
    pub(super) fn feed_token(&self, pos: usize) -> LlamaToken {
        match pos.checked_sub(self.prompt.len()) {
            Some(i) => self.refeed[i],
            None => self.prompt[pos],
        }
    }

    /// Whether the sequence still evaluates its prompt (or recomputes).
    pub(super) fn in_prefill(&self) -> bool {
        self.fed < self.feed_len()
    }

    /// KV cells the sequence holds now.
    pub(super) fn held(&self) -> usize {
        if self.in_prefill() {
            self.fed
        } else {
            self.position()
        }
    }

    /// Frees nothing itself: resets the sequence to evaluate its prompt and
    /// output again from a new slot (recompute preemption). The sampler,
    /// the text so far and the timing are kept, so nothing is sent twice.
    pub(super) fn preempt(&mut self) {
        self.refeed = match self.next {
            // The KV held the prompt and every output token but the last.
            Some(_) => self.output[..self.output.len().saturating_sub(1)].to_vec(),
            None => Vec::new(),
        };
        self.id = -1;
        self.fed = 0;
        self.saved = 0;
        self.placed = 0;
        self.staged.clear();
        self.logits_at = None;
        self.rows = 0;
        self.draft.clear();
        self.preemptions += 1;
    }

    /// The position of the next token to feed (the last one sampled).
    pub(super) fn position(&self) -> usize {
        (self.prompt.len() + self.completion_tokens as usize).saturating_sub(1)
    }

    /// KV cells this sequence may fill: its prompt and its token budget.
    pub(super) fn reserve(&self) -> usize {
        self.prompt.len() + self.budget
    }

    pub(super) fn is_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// Stops the sequence at the next step (its caller went away).
    pub(super) fn cancel(&mut self) {
        self.finish.get_or_insert(FinishReason::Cancelled);
    }

    /// Queue time, time to first token and time per output token so far.
    pub(super) fn timing(&self) -> Timing {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let tpot_ms = match (self.first_token, self.last_token) {
            (Some(first), Some(last)) if self.completion_tokens > 1 => {
                Some(ms(last - first) / f64::from(self.completion_tokens - 1))
            }
            _ => None,
        };
        Timing {
            queue_ms: ms(self.started - self.arrived),
            ttft_ms: self.first_token.map(|t| ms(t - self.arrived)),
            tpot_ms,
            e2e_ms: ms(self.arrived.elapsed()),
        }
    }
}

/// Takes one sampled token into `seq`: ends it at an end-of-generation
/// token, a stop sequence, its budget or a cancelled stream; otherwise
/// passes its text on. Returns whether the sequence goes on.
pub(super) fn emit(
    model: &LlamaModel,
    seq: &mut Sequence,
    token: LlamaToken,
    on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
) -> bool {
    // The end-of-sequence token took a step like any other: it counts as
    // generated (as vLLM and llama-server count it), without text.
    let now = Instant::now();
    seq.first_token.get_or_insert(now);
    seq.last_token = Some(now);
    seq.completion_tokens += 1;
    if model.vocab().is_eog(token) {
        seq.finish = Some(FinishReason::Stop);
        return false;
    }
    seq.output.push(token);
    if seq.lookup.is_some() {
        seq.history.push(token);
    }
    let piece = model.vocab().token_to_piece(token, false, None);
    let (out, stopped) = seq.text.push(&piece);
    if !out.is_empty() && on_text(out).is_break() {
        seq.finish = Some(FinishReason::Cancelled);
    } else if stopped {
        seq.finish = Some(FinishReason::Stop);
    } else if seq.completion_tokens as usize >= seq.budget {
        seq.finish = Some(FinishReason::Length);
    }
    seq.finish.is_none()
}

/// The sampler chain for a request, and the seed it uses.
pub(super) fn sampler(request: &GenerateRequest) -> (LlamaSampler, u32) {
    // The frequency and presence penalties (llama.cpp's, over the last
    // PENALTY_LAST_N tokens) go first, then greedy or nucleus sampling.
    let penalties =
        (request.frequency_penalty != 0.0 || request.presence_penalty != 0.0).then(|| {
            LlamaSampler::penalties(
                -1,
                PENALTY_LAST_N,
                1.0,
                request.frequency_penalty,
                request.presence_penalty,
            )
        });
    if request.temperature <= 0.0 {
        return match penalties {
            None => (LlamaSampler::greedy(), 0),
            Some(p) => (LlamaSampler::chain_simple([p, LlamaSampler::greedy()]), 0),
        };
    }
    let seed = request.seed.unwrap_or_else(random_seed);
    let chain = LlamaSampler::chain_simple(penalties.into_iter().chain([
        LlamaSampler::top_p(request.top_p, 1),
        LlamaSampler::temp(request.temperature),
        LlamaSampler::dist(seed),
    ]));
    (chain, seed)
}

/// How many of the last tokens the repetition penalties look at.
const PENALTY_LAST_N: i32 = 64;

/// A seed from the clock and a counter: unpredictable enough for sampling,
/// and reported back so a surprising answer can be reproduced.
fn random_seed() -> u32 {
    use std::hash::{BuildHasher, RandomState};
    let state = RandomState::new();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (state.hash_one(nanos) & u64::from(u32::MAX)) as u32
}
