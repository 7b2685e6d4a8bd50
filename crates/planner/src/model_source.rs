//! Where the model of a plan comes from: `--model` names a GGUF file, a
//! Hugging Face `config.json`, or an entry of the catalogue. Above the
//! readers of each, which all produce a [`ModelSpec`].

use std::path::Path;

use crate::error::PlannerError;
use crate::model::{ModelCatalogue, ModelSpec};
use crate::quant::Quant;
use crate::{gguf, hf_config};

/// A model ready to plan with, and the weight format its file implies (a
/// GGUF's measured one, a config's or the catalogue's published one).
#[derive(Debug, Clone)]
pub struct ResolvedModel {
    pub spec: ModelSpec,
    pub file_quant: Option<Quant>,
    /// Where it came from: `catalogue`, `config.json` or `gguf`.
    pub origin: &'static str,
}

/// Resolves `--model`: an existing `.gguf` or `.json` path, else a catalogue name.
pub fn resolve(arg: &str, catalogue: &ModelCatalogue) -> Result<ResolvedModel, PlannerError> {
    let path = Path::new(arg);
    let lower = arg.to_ascii_lowercase();
    if lower.ends_with(".gguf") {
        let info = gguf::read_file(path)?;
        let quant = info.quant();
        let spec = info.to_spec()?;
        return Ok(ResolvedModel {
            spec,
            file_quant: Some(quant),
            origin: "gguf",
        });
    }
    if lower.ends_with(".json") {
        let spec = hf_config::read_file(path)?;
        return Ok(ResolvedModel {
            file_quant: native(&spec)?,
            spec,
            origin: "config.json",
        });
    }
    let spec = catalogue.get(arg)?.clone();
    Ok(ResolvedModel {
        file_quant: native(&spec)?,
        spec,
        origin: "catalogue",
    })
}

/// The format the model is published in, where it says ([`ModelSpec::native_quant`]).
fn native(spec: &ModelSpec) -> Result<Option<Quant>, PlannerError> {
    spec.native_quant.as_deref().map(Quant::parse).transpose()
}
