//! The `usage` object of chat completions, buffered and streamed alike.

use serde::Serialize;
use utoipa::ToSchema;

use crate::service::TokenUsage;

/// Tokens of one chat completion, as OpenAI counts them.
#[derive(Debug, Clone, Copy, Default, Serialize, ToSchema)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

impl From<TokenUsage> for Usage {
    /// A chat's usage is its LLMs' tokens.
    fn from(u: TokenUsage) -> Usage {
        Usage {
            prompt_tokens: u.prompt,
            completion_tokens: u.completion,
            total_tokens: u.generated_total(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_usage_is_its_llm_tokens() {
        let u = Usage::from(TokenUsage {
            prompt: 7,
            completion: 5,
            embedded: 100,
        });
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.total_tokens),
            (7, 5, 12)
        );
    }
}
