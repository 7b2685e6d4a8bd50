//! Splitting Markdown and plain text into chunks.
//!
//! Chunks follow the document's own structure: paragraphs, list blocks and
//! fenced code stay whole where they fit, a heading starts a new block, and
//! blocks are packed up to `max_chars`. A block longer than that is cut at
//! sentence ends, then at spaces. The title travels with every chunk as
//! metadata, so a hit can always say which document it came from.

use super::Chunk;

/// How to chunk documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkOptions {
    /// Upper bound on a chunk's length, in characters. MiniLM reads at most
    /// 256 tokens, roughly 1,000 characters of English.
    pub max_chars: usize,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        Self { max_chars: 900 }
    }
}

/// Splits one document into chunks. The title is the document's first
/// `# Title` line, else `fallback_title` (usually the file stem); that line is
/// not repeated in the chunks' text. A document with no text gives no chunks.
pub fn chunk_document(
    doc_id: &str,
    fallback_title: &str,
    text: &str,
    options: &ChunkOptions,
) -> Vec<Chunk> {
    let (title, body) = split_title(text);
    let title = title.unwrap_or(fallback_title).to_owned();
    let max = options.max_chars.max(1);
    let mut pieces: Vec<String> = Vec::new();
    let mut current = String::new();
    for block in blocks(&body) {
        for part in split_long(&block, max) {
            let joined = current.chars().count() + 2 + part.chars().count();
            if !current.is_empty() && joined > max {
                pieces.push(std::mem::take(&mut current));
            }
            if !current.is_empty() {
                current.push_str("\n\n");
            }
            current.push_str(&part);
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, text)| Chunk {
            id: format!("{doc_id}#{i}"),
            doc_id: doc_id.to_owned(),
            title: title.clone(),
            ordinal: u32::try_from(i).unwrap_or(u32::MAX),
            text,
        })
        .collect()
}

/// The first level-1 heading (outside code fences) and the text without it.
fn split_title(text: &str) -> (Option<&str>, String) {
    let mut in_fence = false;
    let mut title = None;
    let mut body = String::with_capacity(text.len());
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        }
        if title.is_none()
            && !in_fence
            && let Some(t) = trimmed.strip_prefix("# ")
        {
            let t = t.trim().trim_end_matches('#').trim();
            if !t.is_empty() {
                title = Some(t);
                continue;
            }
        }
        body.push_str(line);
        body.push('\n');
    }
    (title, body)
}

/// Paragraph-level blocks: separated by blank lines; a heading starts a new
/// block; fenced code is one block.
fn blocks(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut in_fence = false;
    let flush = |current: &mut Vec<&str>, out: &mut Vec<String>| {
        let block = current.join("\n");
        let block = block.trim();
        if !block.is_empty() {
            out.push(block.to_owned());
        }
        current.clear();
    };
    for line in body.lines() {
        let trimmed = line.trim_start();
        let fence = trimmed.starts_with("```") || trimmed.starts_with("~~~");
        if in_fence {
            current.push(line);
            if fence {
                in_fence = false;
                flush(&mut current, &mut out);
            }
            continue;
        }
        if fence {
            flush(&mut current, &mut out);
            current.push(line);
            in_fence = true;
        } else if line.trim().is_empty() {
            flush(&mut current, &mut out);
        } else if trimmed.starts_with('#') {
            flush(&mut current, &mut out);
            current.push(line);
        } else {
            current.push(line);
        }
    }
    flush(&mut current, &mut out);
    out
}

/// Cuts a block longer than `max` characters at sentence ends, then spaces,
/// then anywhere.
fn split_long(block: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = block.trim();
    while rest.chars().count() > max {
        // Byte offset of the `max`-th character: the hard limit.
        let limit = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
        let window = &rest[..limit];
        let cut = [". ", "? ", "! ", "\n"]
            .iter()
            .filter_map(|sep| window.rfind(sep).map(|i| i + sep.len()))
            .max()
            .filter(|&i| i > limit / 2)
            .or_else(|| window.rfind(' ').filter(|&i| i > 0))
            .unwrap_or(limit);
        out.push(rest[..cut].trim().to_owned());
        rest = rest[cut..].trim_start();
    }
    if !rest.is_empty() {
        out.push(rest.to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(max_chars: usize) -> ChunkOptions {
        ChunkOptions { max_chars }
    }

    #[test]
    fn title_from_heading_and_small_doc_is_one_chunk() {
        let chunks = chunk_document(
            "faq",
            "faq",
            "# Pricing FAQ\n\nPlans start at $5.\n",
            &opts(900),
        );
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].title, "Pricing FAQ");
        assert_eq!(chunks[0].text, "Plans start at $5.");
        assert_eq!(chunks[0].id, "faq#0");
        assert_eq!(chunks[0].doc_id, "faq");
    }

    #[test]
    fn title_falls_back_to_the_stem() {
        let chunks = chunk_document("notes/a", "a", "just text\n## Sub\nmore", &opts(900));
        assert_eq!(chunks[0].title, "a");
        assert_eq!(chunks[0].text, "just text\n\n## Sub\nmore");
    }

    #[test]
    fn paragraphs_are_packed_up_to_the_limit() {
        let text = "# T\n\naaaa aaaa\n\nbbbb bbbb\n\ncccc cccc\n";
        let chunks = chunk_document("d", "d", text, &opts(20));
        let texts: Vec<_> = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, ["aaaa aaaa\n\nbbbb bbbb", "cccc cccc"]);
        assert!(chunks.iter().all(|c| c.title == "T"));
        assert_eq!(chunks[1].ordinal, 1);
    }

    #[test]
    fn long_paragraph_is_cut_at_sentences() {
        let text = "One sentence here. Two sentence here. Three sentence here.";
        let chunks = chunk_document("d", "d", text, &opts(40));
        let texts: Vec<_> = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "One sentence here. Two sentence here.",
                "Three sentence here."
            ]
        );
        assert!(chunks.iter().all(|c| c.text.chars().count() <= 40));
    }

    #[test]
    fn code_fences_stay_whole_and_hide_headings() {
        let text = "```\n# not a title\n\nstill code\n```\n";
        let chunks = chunk_document("d", "stem", text, &opts(900));
        assert_eq!(chunks[0].title, "stem");
        assert_eq!(chunks.len(), 1);
        assert!(chunks[0].text.contains("still code"));
    }

    #[test]
    fn empty_document_has_no_chunks() {
        assert!(chunk_document("d", "d", "# Only a title\n", &opts(900)).is_empty());
        assert!(chunk_document("d", "d", "", &opts(900)).is_empty());
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let text = "é".repeat(50);
        let chunks = chunk_document("d", "d", &text, &opts(16));
        assert!(chunks.iter().all(|c| c.text.chars().count() <= 16));
        assert_eq!(
            chunks.iter().map(|c| c.text.chars().count()).sum::<usize>(),
            50
        );
    }
}
