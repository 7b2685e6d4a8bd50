//! `glassbox explain ID [--lang en|zh]`: the plain-language account of a
//! stored request.
//!
//! A request is explained once, in the language asked for when it ran, and
//! the structured facts are stored next to the text. Asking for the other
//! language re-renders those facts with the engine's own composer
//! (`glassbox_engine::explain::compose`), so both languages say the same.

use std::process::ExitCode;

use glassbox_trace::Lang;
use serde_json::json;

use super::common::{LangArg, OutputFormat};
use super::store::{StoreArg, load_trace};
use crate::out;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 ok, 1 a store error, 2 usage, 69 the store cannot be \
                        reached, 78 a bad store URL or an unknown id."
)]
pub struct Args {
    /// Request id (as printed by `glassbox run` and `trace list`).
    pub id: String,
    /// Language of the explanation.
    #[arg(long, value_enum, default_value_t = LangArg::En)]
    pub lang: LangArg,
    #[command(flatten)]
    pub store: StoreArg,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut store = args.store.open()?;
    let trace = load_trace(&mut *store, &args.id)?;
    let lang = Lang::from(args.lang);
    let (text, rerendered) = explain(&trace.record, lang);
    match args.format {
        OutputFormat::Table => out::print_text(&format!("{text}\n"))?,
        OutputFormat::Json => out::print_json(&json!({
            "request_id": trace.record.request_id,
            "lang": lang,
            "text": text,
            "rerendered": rerendered,
            "facts": trace.record.explanation.facts,
        }))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The explanation in `lang`: the stored text when it is in that language,
/// else re-rendered from the stored facts. The flag says which.
pub fn explain(record: &glassbox_trace::RequestRecord, lang: Lang) -> (String, bool) {
    let stored = &record.explanation;
    if stored.lang == lang && !stored.text.is_empty() {
        return (stored.text.clone(), false);
    }
    let text =
        glassbox_engine::explain::compose(&stored.facts, &record.path, record.error.as_ref(), lang);
    (text, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_store::synth::{SynthRequest, build};

    #[test]
    fn keeps_the_stored_text_and_rerenders_the_other_language() {
        let (record, _) = build(&SynthRequest::new(1, 1_796_040_000_000_000));
        let (en, again) = explain(&record, Lang::En);
        assert_eq!(en, record.explanation.text);
        assert!(!again);
        let (zh, again) = explain(&record, Lang::Zh);
        assert!(again);
        assert!(
            zh.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
            "{zh}"
        );
        assert!(zh.contains("chat-7b"), "{zh}");
    }
}
