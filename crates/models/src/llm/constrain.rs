//! Constrained sampling: a grammar (GBNF, e.g. from
//! [`crate::grammar::json_schema_to_gbnf`]) decides which tokens may come
//! next, so the text always stays a prefix of the grammar's language.
//!
//! Checking every token of the vocabulary against the grammar costs more
//! than the sampling itself, so the pick is made first without it and
//! checked alone (llama.cpp's `common_sampler` does the same): only when the
//! grammar rejects that token is the grammar applied to the whole
//! vocabulary and the token picked again. A token is accepted into the
//! grammar only after the grammar allowed it: llama.cpp aborts the process
//! on accepting a token its grammar rejects.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

use super::LlmError;

/// A compiled grammar for one request.
pub(super) struct Grammar(LlamaSampler);

impl Grammar {
    /// Compiles `gbnf` (root rule `root`) against the model's vocabulary.
    pub(super) fn new(model: &LlamaModel, gbnf: &str) -> Result<Grammar, LlmError> {
        LlamaSampler::grammar(model, gbnf, "root")
            .map(Grammar)
            .map_err(|e| LlmError::InvalidRequest {
                field: "grammar",
                message: format!("llama.cpp could not parse the grammar ({e})"),
            })
    }

    /// Whether the grammar allows `token` next.
    fn allows(&mut self, token: LlamaToken) -> bool {
        let mut one = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 0.0, 0.0)], false);
        self.0.apply(&mut one);
        one.data.first().is_some_and(|d| d.logit().is_finite())
    }

    /// Picks the next token from the logits at `idx` with `sampler`, within
    /// the grammar, and advances both. `None` when the grammar allows no
    /// token at all (a grammar that cannot be finished).
    pub(super) fn sample(
        &mut self,
        ctx: &LlamaContext<'_>,
        idx: i32,
        sampler: &mut LlamaSampler,
    ) -> Option<LlamaToken> {
        let mut all = ctx.token_data_array_ith(idx);
        sampler.apply(&mut all);
        let first = all.selected_token()?;
        let token = if self.allows(first) {
            first
        } else {
            let mut all = ctx.token_data_array_ith(idx);
            self.0.apply(&mut all);
            sampler.apply(&mut all);
            let picked = all.selected_token()?;
            let ok = all
                .data
                .iter()
                .find(|d| d.id() == picked)
                .is_some_and(|d| d.logit().is_finite());
            if !ok {
                return None;
            }
            picked
        };
        self.0.accept(token);
        sampler.accept(token);
        Some(token)
    }
}
