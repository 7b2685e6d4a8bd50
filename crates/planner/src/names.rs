//! How the catalogues read the names people paste.
//!
//! Users copy a device name from `nvidia-smi` ("NVIDIA A100-SXM4-80GB",
//! "Tesla T4") and a model name from its Hugging Face repository
//! ("meta-llama/Llama-3.1-8B-Instruct"). Both catalogues first look for the
//! exact id or alias, then compare *keys*: the name lowercased, split into
//! words, the words that name a vendor, a product line or a checkpoint
//! variant with the same shapes dropped, and the rest joined without
//! punctuation. The plan prints the entry it took, so a loose match is
//! never silent.

use crate::error::did_you_mean;

/// Vendor and product-line words that do not tell two devices apart.
const DEVICE_NOISE: &[&str] = &["nvidia", "geforce", "tesla", "amd", "instinct", "apple"];

/// Checkpoint variants that share the base model's shapes, and the
/// publisher's prefix ("Meta-Llama-3-8B").
const MODEL_NOISE: &[&str] = &["instruct", "chat", "hf", "it", "base", "meta"];

/// The comparison key of a device name: `NVIDIA GeForce RTX 4090` → `rtx4090`.
pub(crate) fn device_key(name: &str) -> String {
    key(name, DEVICE_NOISE)
}

/// The comparison key of a model name, without its Hugging Face owner:
/// `meta-llama/Llama-3.1-8B-Instruct` → `llama318b`.
pub(crate) fn model_key(name: &str) -> String {
    let repo = name.rsplit('/').next().unwrap_or(name);
    key(repo, MODEL_NOISE)
}

/// A catalogue entry people name: by its id, its aliases or its display name.
pub(crate) trait Named {
    fn id(&self) -> &str;
    fn aliases(&self) -> &[String];
    fn display_name(&self) -> &str;
}

/// The id, the aliases and the display name of an entry.
pub(crate) fn spellings<T: Named>(entry: &T) -> impl Iterator<Item = &str> {
    std::iter::once(entry.id())
        .chain(entry.aliases().iter().map(String::as_str))
        .chain(std::iter::once(entry.display_name()))
}

/// The entry `name` names: its exact id or an alias (any case), else the
/// first entry one of whose [`spellings`] has the same `key`.
pub(crate) fn find<'a, T: Named>(
    entries: &'a [T],
    name: &str,
    key: fn(&str) -> String,
) -> Option<&'a T> {
    let exact = name.trim().to_ascii_lowercase();
    let loose = key(name);
    entries
        .iter()
        .find(|e| e.id() == exact || e.aliases().iter().any(|a| a.to_ascii_lowercase() == exact))
        .or_else(|| {
            entries
                .iter()
                .find(|e| !loose.is_empty() && spellings(*e).any(|n| key(n) == loose))
        })
}

/// The closest id or alias to a name that found nothing, for the error's hint.
pub(crate) fn suggestion<T: Named>(entries: &[T], name: &str) -> Option<String> {
    did_you_mean(
        &name.trim().to_ascii_lowercase(),
        entries
            .iter()
            .flat_map(|e| std::iter::once(e.id()).chain(e.aliases().iter().map(String::as_str))),
    )
}

fn key(name: &str, noise: &[&str]) -> String {
    name.to_ascii_lowercase()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .filter(|word| !word.is_empty() && !noise.contains(word))
        .flat_map(|word| word.chars().filter(char::is_ascii_alphanumeric))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_from_nvidia_smi_lose_vendor_words_and_punctuation() {
        assert_eq!(device_key("NVIDIA GeForce RTX 4090"), "rtx4090");
        assert_eq!(device_key("rtx-4090"), "rtx4090");
        assert_eq!(device_key("Tesla T4"), "t4");
        assert_eq!(device_key("NVIDIA A100-SXM4-80GB"), "a100sxm480gb");
        assert_eq!(device_key("AMD Instinct MI300X"), "mi300x");
        assert_eq!(device_key("Apple M2 Max"), "m2max");
        // A word that only contains a vendor word is kept.
        assert_eq!(device_key("amdx"), "amdx");
    }

    #[test]
    fn model_names_lose_their_owner_and_variant_words() {
        assert_eq!(model_key("meta-llama/Llama-3.1-8B-Instruct"), "llama318b");
        assert_eq!(model_key("meta-llama/Meta-Llama-3-8B"), "llama38b");
        assert_eq!(model_key("llama-3.1-8b"), "llama318b");
        assert_eq!(model_key("Qwen/Qwen2.5-7B-Instruct"), "qwen257b");
        assert_eq!(model_key("google/gemma-2-9b-it"), "gemma29b");
        assert_eq!(model_key("meta-llama/Llama-2-7b-chat-hf"), "llama27b");
        // Weight formats are not noise: a GPTQ repository is not the base model.
        assert_eq!(model_key("TheBloke/Llama-2-7B-GPTQ"), "llama27bgptq");
        assert_eq!(model_key("microsoft/Phi-3-mini-4k-instruct"), "phi3mini4k");
    }
}
