//! The planner's one error boundary.

use std::path::PathBuf;

/// Everything the planner can refuse. Each variant has a stable [`code`](Self::code)
/// for JSON output and metrics labels; messages are lowercase, name the value
/// given and, where one exists, carry a hint.
#[derive(Debug, thiserror::Error)]
pub enum PlannerError {
    /// A GPU id that is not in the catalogue.
    #[error("unknown gpu `{name}`{}", hint(.suggestion, LIST_GPUS))]
    UnknownGpu {
        name: String,
        suggestion: Option<String>,
    },
    /// A model id that is not in the catalogue and not a file.
    #[error("unknown model `{name}`{}", hint(.suggestion, LIST_MODELS))]
    UnknownModel {
        name: String,
        suggestion: Option<String>,
    },
    /// An unknown quantisation, engine or other enumerated value;
    /// `choices` lists the values taken.
    #[error("unknown {what} `{value}`{}", hint(.suggestion, &format!("one of: {choices}")))]
    UnknownValue {
        what: &'static str,
        value: String,
        suggestion: Option<String>,
        choices: String,
    },
    /// A KV-cache dtype the planner does not know.
    #[error("unknown kv dtype `{value}` (fp16, fp8 or fp32)")]
    UnknownKvDtype { value: String },
    /// A value outside its allowed range.
    #[error("invalid {field}: {message}")]
    Invalid { field: String, message: String },
    /// A file could not be read.
    #[error("cannot read `{}`", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A TOML catalogue, override or calibration file does not parse.
    #[error("cannot parse `{origin}`: {message}")]
    Toml { origin: String, message: String },
    /// A Hugging Face `config.json` is not usable.
    #[error("cannot use `{origin}` as a model config: {message}")]
    HfConfig { origin: String, message: String },
    /// A GGUF file is malformed, truncated or hostile.
    #[error("bad gguf file `{origin}` at byte {offset}: {message}")]
    Gguf {
        origin: String,
        offset: u64,
        message: String,
    },
    /// A measurements CSV row is malformed.
    #[error("{origin}:{line}: {message}")]
    Csv {
        origin: String,
        line: usize,
        message: String,
    },
    /// The model does not fit in the memory given.
    #[error("model does not fit: {message}")]
    DoesNotFit { message: String },
    /// A sealed holdout broke its rule: its file changed after its first
    /// score, or it holds a source the model was fitted on.
    #[error("sealed holdout `{file}`: {message}")]
    Sealed { file: String, message: String },
}

const LIST_GPUS: &str =
    "hint: `glassbox plan list-gpus` lists the catalogue; `--hardware-file` adds your own";
const LIST_MODELS: &str = "hint: `glassbox plan list-models` lists the catalogue; a Hugging Face repository id, a config.json or a .gguf path work too";

/// The close name when there is one, else where the names are listed.
fn hint(suggestion: &Option<String>, otherwise: &str) -> String {
    match suggestion {
        Some(s) => format!(" (did you mean `{s}`?)"),
        None => format!(" ({otherwise})"),
    }
}

impl PlannerError {
    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownGpu { .. } => "planner.unknown_gpu",
            Self::UnknownModel { .. } => "planner.unknown_model",
            Self::UnknownValue { .. } | Self::UnknownKvDtype { .. } => "planner.unknown_value",
            Self::Invalid { .. } => "planner.invalid",
            Self::Io { .. } => "planner.io",
            Self::Toml { .. } => "planner.toml",
            Self::HfConfig { .. } => "planner.hf_config",
            Self::Gguf { .. } => "planner.gguf",
            Self::Csv { .. } => "planner.csv",
            Self::DoesNotFit { .. } => "planner.does_not_fit",
            Self::Sealed { .. } => "planner.sealed",
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// The closest candidate by Jaro-Winkler similarity, if it is close enough to be
/// a plausible typo (0.8 keeps `h10` → `h100-sxm` but drops unrelated names).
pub fn did_you_mean<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let input = input.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&input, &c.to_ascii_lowercase()), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestion_for_typo() {
        let s = did_you_mean("h100-smx", ["h100-sxm", "a100-sxm-80gb", "l4"]);
        assert_eq!(s.as_deref(), Some("h100-sxm"));
        assert_eq!(did_you_mean("zzzz", ["h100-sxm"]), None);
    }

    #[test]
    fn message_carries_hint_and_code() {
        let e = PlannerError::UnknownGpu {
            name: "h10".into(),
            suggestion: Some("h100".into()),
        };
        assert_eq!(e.to_string(), "unknown gpu `h10` (did you mean `h100`?)");
        assert_eq!(e.code(), "planner.unknown_gpu");
        let far = PlannerError::UnknownModel {
            name: "zzzz".into(),
            suggestion: None,
        };
        assert!(
            far.to_string().contains("glassbox plan list-models"),
            "{far}"
        );
    }
}
