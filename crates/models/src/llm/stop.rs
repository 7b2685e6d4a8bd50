//! Turning sampled token bytes into streamed text, honouring stop sequences.
//!
//! Tokens are byte pieces: one UTF-8 character may span two tokens, and a
//! stop sequence may span several. The assembler keeps back the bytes of an
//! incomplete character and any tail that could still grow into a stop
//! sequence, so a streaming client never sees text that is later retracted.

/// Assembles a completion from token pieces.
#[derive(Debug)]
pub(crate) struct TextAssembler {
    stops: Vec<String>,
    /// Bytes of an incomplete UTF-8 character.
    pending: Vec<u8>,
    text: String,
    /// How much of `text` has been handed out.
    emitted: usize,
    stopped: bool,
}

impl TextAssembler {
    pub(crate) fn new(stops: Vec<String>) -> Self {
        Self {
            stops,
            pending: Vec::new(),
            text: String::new(),
            emitted: 0,
            stopped: false,
        }
    }

    /// Adds a token's bytes. Returns the text that is now safe to stream
    /// (possibly empty), and whether a stop sequence matched.
    pub(crate) fn push(&mut self, piece: &[u8]) -> (&str, bool) {
        if self.stopped {
            return ("", true);
        }
        self.pending.extend_from_slice(piece);
        self.drain_pending(false);
        let start = self.emitted;
        if let Some(at) = self.find_stop() {
            self.text.truncate(at);
            self.stopped = true;
            self.emitted = self.text.len().max(start);
            return (&self.text[start.min(self.text.len())..], true);
        }
        let safe = self.text.len() - self.held_back();
        self.emitted = safe.max(start);
        (&self.text[start..self.emitted], false)
    }

    /// Ends the text: returns what has not been streamed yet, and the full text.
    pub(crate) fn finish(mut self) -> (String, String) {
        if !self.stopped {
            self.drain_pending(true);
        }
        let rest = self.text[self.emitted.min(self.text.len())..].to_owned();
        (rest, self.text)
    }

    fn drain_pending(&mut self, flush: bool) {
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    self.text.push_str(s);
                    self.pending.clear();
                    return;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    self.text
                        .push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        Some(bad) => {
                            self.text.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                        None => {
                            self.pending.drain(..valid);
                            if flush {
                                if !self.pending.is_empty() {
                                    self.text.push(char::REPLACEMENT_CHARACTER);
                                }
                                self.pending.clear();
                            }
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The byte offset of the earliest stop sequence in the unstreamed text.
    fn find_stop(&self) -> Option<usize> {
        let tail = &self.text[self.emitted..];
        self.stops
            .iter()
            .filter_map(|s| tail.find(s.as_str()))
            .min()
            .map(|i| self.emitted + i)
    }

    /// Length of the longest suffix of `text` that is a proper prefix of a stop
    /// sequence (it might still become one).
    fn held_back(&self) -> usize {
        let text = &self.text[self.emitted..];
        let mut best = 0;
        for stop in &self.stops {
            for (i, _) in text.char_indices() {
                let suffix = &text[i..];
                if suffix.len() < stop.len() && stop.starts_with(suffix) {
                    best = best.max(suffix.len());
                    break;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&[u8]]) -> (Vec<String>, String, bool) {
        let mut a = TextAssembler::new(stops.iter().map(|s| (*s).to_owned()).collect());
        let mut streamed = Vec::new();
        let mut stopped = false;
        for p in pieces {
            let (out, stop) = a.push(p);
            if !out.is_empty() {
                streamed.push(out.to_owned());
            }
            if stop {
                stopped = true;
                break;
            }
        }
        let (rest, text) = a.finish();
        if !rest.is_empty() {
            streamed.push(rest);
        }
        assert_eq!(
            streamed.concat(),
            text,
            "streamed text must equal the final text"
        );
        (streamed, text, stopped)
    }

    #[test]
    fn plain_text_streams_as_it_comes() {
        let (streamed, text, stopped) = run(&[], &[b"Hel", b"lo"]);
        assert_eq!(streamed, ["Hel", "lo"]);
        assert_eq!(text, "Hello");
        assert!(!stopped);
    }

    #[test]
    fn stop_sequence_across_tokens_is_cut_and_never_streamed() {
        let (streamed, text, stopped) = run(&["\n\n"], &[b"one", b"\n", b"\ntwo"]);
        assert_eq!(text, "one");
        assert_eq!(streamed, ["one"]);
        assert!(stopped);
    }

    #[test]
    fn held_back_prefix_is_released_when_it_does_not_match() {
        let (streamed, text, _) = run(&["END"], &[b"a E", b"N", b"d"]);
        assert_eq!(text, "a ENd");
        assert_eq!(streamed, ["a ", "ENd"]);
    }

    #[test]
    fn split_utf8_character_is_joined() {
        let snowman = "☃".as_bytes();
        let (streamed, text, _) = run(&[], &[&snowman[..1], &snowman[1..], b"!"]);
        assert_eq!(text, "☃!");
        assert_eq!(streamed, ["☃", "!"]);
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let (_, text, _) = run(&[], &[b"a\xff", b"b", b"\xe2"]);
        assert_eq!(text, "a\u{fffd}b\u{fffd}");
    }

    #[test]
    fn earliest_stop_wins() {
        let (_, text, stopped) = run(&["b", "a"], &[b"xab"]);
        assert_eq!(text, "x");
        assert!(stopped);
    }
}
