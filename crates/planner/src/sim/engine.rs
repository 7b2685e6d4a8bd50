//! The event loop: replicas of one serving engine under a stream of calls.
//!
//! Each replica runs steps back to back while it has work, the way vLLM-like
//! engines do (continuous batching). A step is planned when it starts:
//!
//! 1. every running sequence past its prefill decodes one token, oldest
//!    first; when the KV cache has no free block for it, the newest running
//!    sequence is preempted (its blocks freed, its prompt and generated
//!    tokens to be recomputed later, back to the head of the queue);
//! 2. sequences part-way through their prompt get the next chunk, then
//!    waiting ones are admitted (first come, first served) while fewer than
//!    `max_running` run, the step's token budget lasts and their chunk's
//!    blocks are free (chunked prefill).
//!
//! Its duration comes from the [`StepCost`]; its effects (tokens, first
//! tokens, finished calls, freed blocks) apply when it ends. A call reaches
//! the engine's queue [`StepCost::request_overhead_s`] after it was sent
//! (the server's own path: HTTP, tokenising, hand-off, streaming back), so
//! that time is in its TTFT and E2E but occupies no step. Where the engine's
//! server front end is one process ([`StepCost::frontend_s`]), each replica
//! has one front-end server: a call waits for it (first come, first served),
//! holds it that long, and reaches the engine's queue the server latency
//! after it was first served, so the front end caps the requests per second
//! a replica takes in whatever its GPU could do. Where the engine schedules
//! with overlap ([`StepCost::overlap_schedule`]), the batch of the next step
//! is formed when the current one starts: a call reaching the queue during a
//! step is admitted no earlier than the step after the next (at once when the
//! replica is idle). Arrivals go to
//! the replica with the fewest calls waiting or running (lowest index on a
//! tie). Events at the same instant run step ends first, then arrivals, in
//! the order they were created, so a run is a pure function of its inputs.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use super::cost::{Step, StepCost};
use super::limits::Limits;
use crate::error::PlannerError;

/// One LLM call and what happened to it.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub task: usize,
    pub arrival: f64,
    /// When it reached the engine's queue (set on arrival there).
    queued: f64,
    pub prompt: u64,
    pub output: u64,
    /// Prompt tokens served from the prefix cache.
    pub cached: u64,
    computed: u64,
    prefill_len: u64,
    generated: u64,
    blocks: u64,
    pub first_token: Option<f64>,
    pub finish: Option<f64>,
    pub preempted: u32,
    /// It could never fit in one replica's KV cache.
    pub rejected: bool,
}

impl Call {
    pub fn new(task: usize, arrival: f64, prompt: u64, output: u64, cached: u64) -> Self {
        Self {
            task,
            arrival,
            queued: arrival,
            prompt,
            output: output.max(1),
            cached: cached.min(prompt.saturating_sub(1)),
            computed: 0,
            prefill_len: prompt,
            generated: 0,
            blocks: 0,
            first_token: None,
            finish: None,
            preempted: 0,
            rejected: false,
        }
    }

    fn in_prefill(&self) -> bool {
        self.computed < self.prefill_len
    }
}

enum What {
    /// A call reaches the server's front end (only when it has a limit).
    Sent(usize),
    Arrive(usize),
    StepEnd(usize),
}

struct Event {
    t: f64,
    seq: u64,
    what: What,
}

impl Event {
    fn rank(&self) -> u8 {
        match self.what {
            What::StepEnd(_) => 0,
            What::Arrive(_) | What::Sent(_) => 1,
        }
    }
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// Reversed, so that `BinaryHeap` pops the earliest event.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .t
            .total_cmp(&self.t)
            .then(other.rank().cmp(&self.rank()))
            .then(other.seq.cmp(&self.seq))
    }
}

/// One step's work: decoding calls, and prefill chunks `(call, tokens)`.
type Planned = (Vec<usize>, Vec<(usize, u64)>);

#[derive(Default)]
struct Replica {
    waiting: VecDeque<usize>,
    running: Vec<usize>,
    free_blocks: u64,
    /// The step in progress: decoding calls, and prefill chunks.
    step: Option<Planned>,
    /// When the step in progress started.
    step_start: f64,
}

impl Replica {
    fn load(&self) -> usize {
        self.waiting.len() + self.running.len()
    }
}

/// What a run left behind, besides the calls.
#[derive(Debug, Clone, Default)]
pub(crate) struct Totals {
    pub preemptions: u64,
    pub steps: u64,
    /// Sum over steps of the sequences in the step.
    pub seqs_in_steps: u64,
    /// Sum over replicas of the time spent in steps, seconds.
    pub busy_s: f64,
    /// Time the last event happened.
    pub end_s: f64,
}

pub(crate) struct Sim<'a> {
    cost: &'a dyn StepCost,
    limits: Limits,
    pub calls: Vec<Call>,
    replicas: Vec<Replica>,
    events: BinaryHeap<Event>,
    seq: u64,
    /// Seconds from a call being sent (or, with a front-end limit, first
    /// served by the front end) to it reaching the engine's queue.
    front_s: f64,
    /// Seconds each call holds its replica's front-end server (0: no limit).
    frontend_s: f64,
    /// When each replica's front-end server is next free.
    frontend_free: Vec<f64>,
    /// Next batches are formed a step ahead ([`StepCost::overlap_schedule`]).
    overlap: bool,
    pub totals: Totals,
}

impl<'a> Sim<'a> {
    pub fn new(cost: &'a dyn StepCost, limits: Limits, replicas: u32) -> Self {
        let replicas: Vec<Replica> = (0..replicas.max(1))
            .map(|_| Replica {
                free_blocks: limits.kv_blocks,
                ..Replica::default()
            })
            .collect();
        Self {
            cost,
            limits,
            calls: Vec::new(),
            frontend_free: vec![f64::NEG_INFINITY; replicas.len()],
            replicas,
            events: BinaryHeap::new(),
            seq: 0,
            front_s: cost.request_overhead_s().max(cost.frontend_s()).max(0.0),
            frontend_s: cost.frontend_s().max(0.0),
            overlap: cost.overlap_schedule(),
            totals: Totals::default(),
        }
    }

    fn push(&mut self, t: f64, what: What) {
        self.seq += 1;
        self.events.push(Event {
            t,
            seq: self.seq,
            what,
        });
    }

    /// Adds a call sent at `call.arrival`; returns its index.
    pub fn submit(&mut self, call: Call) -> usize {
        let id = self.calls.len();
        let t = call.arrival;
        self.calls.push(call);
        if self.frontend_s > 0.0 {
            self.push(t, What::Sent(id));
        } else {
            self.push(t + self.front_s, What::Arrive(id));
        }
        id
    }

    fn blocks_for(&self, tokens: u64) -> u64 {
        tokens.div_ceil(u64::from(self.limits.block_tokens.max(1)))
    }

    /// Runs to the end. `next` is told of each finished or rejected call and
    /// may return a follow-up call (agent loops, closed-loop users).
    pub fn run(&mut self, next: &mut dyn FnMut(&Call) -> Option<Call>) -> Result<(), PlannerError> {
        while let Some(ev) = self.events.pop() {
            self.totals.end_s = ev.t;
            match ev.what {
                What::Sent(id) => {
                    // First come, first served by the front end that frees
                    // first (one per replica).
                    let (i, free) = self
                        .frontend_free
                        .iter()
                        .copied()
                        .enumerate()
                        .min_by(|a, b| a.1.total_cmp(&b.1))
                        .unwrap_or((0, f64::NEG_INFINITY));
                    let start = free.max(ev.t);
                    self.frontend_free[i] = start + self.frontend_s;
                    self.push(start + self.front_s, What::Arrive(id));
                }
                What::Arrive(id) => {
                    let c = &self.calls[id];
                    if self.blocks_for(c.prompt + c.output) > self.limits.kv_blocks {
                        self.calls[id].rejected = true;
                        if let Some(call) = next(&self.calls[id]) {
                            self.submit(call);
                        }
                        continue;
                    }
                    self.calls[id].queued = ev.t;
                    let r = (0..self.replicas.len())
                        .min_by_key(|&i| (self.replicas[i].load(), i))
                        .unwrap_or(0);
                    self.replicas[r].waiting.push_back(id);
                    if self.replicas[r].step.is_none() {
                        self.start_step(r, ev.t, None)?;
                    }
                }
                What::StepEnd(r) => {
                    // With overlap scheduling this step's successor was
                    // formed when this step started (before any call that
                    // reached the queue at that same instant).
                    let formed = self.overlap.then_some(self.replicas[r].step_start);
                    for done in self.end_step(r, ev.t) {
                        if let Some(call) = next(&self.calls[done]) {
                            self.submit(call);
                        }
                    }
                    self.start_step(r, ev.t, formed)?;
                }
            }
        }
        Ok(())
    }

    /// Frees `victim`'s blocks and puts it back at the head of the queue.
    fn preempt(&mut self, r: usize, victim: usize) {
        let rep = &mut self.replicas[r];
        rep.running.retain(|&x| x != victim);
        rep.waiting.push_front(victim);
        let c = &mut self.calls[victim];
        rep.free_blocks += c.blocks;
        c.blocks = 0;
        c.computed = 0;
        c.prefill_len = c.prompt + c.generated;
        c.preempted += 1;
        self.totals.preemptions += 1;
    }

    /// Starts replica `r`'s next step at `now`. `formed`: when its batch was
    /// formed, if before now (overlap scheduling): only calls queued before
    /// then are admitted, unless the engine has nothing else to run, which
    /// forms it now.
    fn start_step(
        &mut self,
        r: usize,
        now: f64,
        mut formed: Option<f64>,
    ) -> Result<(), PlannerError> {
        loop {
            let (decode, prefill) = self.plan_step(r, formed);
            if decode.is_empty() && prefill.is_empty() {
                if formed.is_some() && !self.replicas[r].waiting.is_empty() {
                    formed = None;
                    continue;
                }
                let running = self.replicas[r].running.len();
                if running > 1 {
                    // Every running call waits on blocks another holds.
                    if let Some(&victim) = self.replicas[r].running.last() {
                        self.preempt(r, victim);
                    }
                    continue;
                }
                self.replicas[r].step = None;
                return Ok(());
            }
            let ctx: u64 = decode.iter().map(|&i| self.calls[i].computed + 1).sum();
            let step = Step {
                decode_seqs: decode.len() as u32,
                decode_ctx: if decode.is_empty() {
                    0.0
                } else {
                    ctx as f64 / decode.len() as f64
                },
                prefill_tokens: prefill.iter().map(|&(_, n)| n).sum(),
                prefill_seqs: prefill.len() as u32,
            };
            let d = self.cost.step_s(&step);
            if !(d.is_finite() && d > 0.0) {
                return Err(PlannerError::invalid(
                    "step time",
                    format!("the cost model gave {d} s for {step:?}; it must be above 0"),
                ));
            }
            self.totals.steps += 1;
            self.totals.seqs_in_steps += (decode.len() + prefill.len()) as u64;
            self.totals.busy_s += d;
            self.replicas[r].step = Some((decode, prefill));
            self.replicas[r].step_start = now;
            self.push(now + d, What::StepEnd(r));
            return Ok(());
        }
    }

    /// Chooses the next step's work and reserves its blocks; with `formed`,
    /// only calls queued before it are admitted.
    fn plan_step(&mut self, r: usize, formed: Option<f64>) -> Planned {
        let mut budget = u64::from(self.limits.max_batched_tokens);
        let preemptions_before = self.totals.preemptions;
        let mut decode = Vec::new();
        let mut prefill = Vec::new();
        // 1. Decode, oldest first; preempt the newest when blocks run out.
        let mut i = 0;
        while i < self.replicas[r].running.len() && budget > 0 {
            let id = self.replicas[r].running[i];
            if self.calls[id].in_prefill() {
                i += 1;
                continue;
            }
            let need = self.blocks_for(self.calls[id].computed + 1) - self.calls[id].blocks;
            let mut gave_up = false;
            while self.replicas[r].free_blocks < need {
                let Some(&victim) = self.replicas[r].running.last() else {
                    gave_up = true;
                    break;
                };
                self.preempt(r, victim);
                if victim == id {
                    gave_up = true;
                    break;
                }
            }
            if gave_up {
                break;
            }
            self.replicas[r].free_blocks -= need;
            self.calls[id].blocks += need;
            budget -= 1;
            decode.push(id);
            i += 1;
        }
        // 2. Continue prompts already admitted.
        let running = self.replicas[r].running.clone();
        for id in running {
            if budget == 0 {
                break;
            }
            let c = &self.calls[id];
            if !c.in_prefill() {
                continue;
            }
            let chunk = (c.prefill_len - c.computed).min(budget);
            let need = self.blocks_for(c.computed + chunk) - c.blocks;
            if need > self.replicas[r].free_blocks {
                break;
            }
            self.replicas[r].free_blocks -= need;
            self.calls[id].blocks += need;
            budget -= chunk;
            prefill.push((id, chunk));
        }
        // 3. Admit waiting calls, first come first served (not in a step
        // that had to preempt: the cache is full).
        while budget > 0
            && self.totals.preemptions == preemptions_before
            && self.replicas[r].running.len() < self.limits.max_running as usize
        {
            let Some(&id) = self.replicas[r].waiting.front() else {
                break;
            };
            let c = &self.calls[id];
            if formed.is_some_and(|t| c.queued >= t) {
                break;
            }
            let start = c.cached;
            let chunk = (c.prefill_len - start).min(budget);
            let need = self.blocks_for(start + chunk);
            if need > self.replicas[r].free_blocks {
                break;
            }
            self.replicas[r].waiting.pop_front();
            self.replicas[r].running.push(id);
            self.replicas[r].free_blocks -= need;
            let c = &mut self.calls[id];
            c.computed = start;
            c.blocks = need;
            budget -= chunk;
            prefill.push((id, chunk));
        }
        (decode, prefill)
    }

    /// Applies the step that ends at `now`; returns the calls it finished.
    fn end_step(&mut self, r: usize, now: f64) -> Vec<usize> {
        let Some((decode, prefill)) = self.replicas[r].step.take() else {
            return Vec::new();
        };
        let mut finished = Vec::new();
        for id in decode {
            let c = &mut self.calls[id];
            c.computed += 1;
            c.generated += 1;
            if c.generated >= c.output {
                finished.push(id);
            }
        }
        for (id, chunk) in prefill {
            let c = &mut self.calls[id];
            c.computed += chunk;
            if !c.in_prefill() {
                c.first_token.get_or_insert(now);
                c.generated += 1;
                if c.generated >= c.output {
                    finished.push(id);
                }
            }
        }
        for &id in &finished {
            let c = &mut self.calls[id];
            c.finish = Some(now);
            self.replicas[r].free_blocks += c.blocks;
            c.blocks = 0;
        }
        self.replicas[r].running.retain(|x| !finished.contains(x));
        finished
    }
}
