//! Paragraphs of a document and their keys (docs/algorithm.md §10).
//!
//! A document is cut into paragraphs at a separator: every `\n` (`Newline`:
//! a paragraph is a line, blank lines included), or runs of blank lines
//! (`Blank`: a paragraph is a run of lines that are not blank; a blank line
//! holds only Python whitespace). A paragraph's span is `[start, end)` in code
//! points of the original text, separator excluded.
//!
//! Its canonical form is its normalized text (the run's normalization), split
//! as `str.split()` does and joined by one space. A paragraph whose canonical
//! form has fewer than `min_chars` code points (an empty one always) has no
//! keys: it is never looked up, inserted or removed. Otherwise its keys are
//! xxh3-64 (seeded) of the canonical form (`ngram` 0: exact), or of each of
//! its word `ngram`-grams joined by one space (a paragraph of fewer words:
//! one key of all of them), as DCLM's `bff` keys its n-grams.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::text::shingles::{is_py_whitespace, normalize, tokenize};

/// Where paragraphs end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Separator {
    Newline,
    Blank,
}

impl Separator {
    pub const NAMES: [&'static str; 2] = ["newline", "blank"];

    pub fn parse(name: &str) -> Option<Separator> {
        match name {
            "newline" => Some(Separator::Newline),
            "blank" => Some(Separator::Blank),
            _ => None,
        }
    }
}

/// How a document's paragraphs are cut and keyed.
#[derive(Debug, Clone, Copy)]
pub struct ParagraphSettings {
    pub separator: Separator,
    /// Code points of the canonical form below which a paragraph has no keys (at least 1).
    pub min_chars: usize,
    /// 0: one key of the whole canonical form; n: a key per word n-gram.
    pub ngram: usize,
    /// Normalization flags (`shingles::NORM_*`).
    pub flags: u32,
    pub seed: u64,
}

/// Many documents' paragraphs, flat: document `d` holds paragraphs
/// `counts[..d].sum()..` (`counts[d]` of them); paragraph `p` holds `nkeys[p]`
/// keys, in order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ParagraphKeys {
    pub counts: Vec<u32>,
    pub starts: Vec<u32>,
    pub ends: Vec<u32>,
    pub nkeys: Vec<u32>,
    pub keys: Vec<u64>,
}

/// Cuts and keys documents, reusing its buffers.
pub struct Paragrapher {
    settings: ParagraphSettings,
    tokens: Vec<(usize, usize)>,
    canonical: String,
    window: String,
}

impl Paragrapher {
    pub fn new(settings: ParagraphSettings) -> Self {
        assert!(settings.min_chars >= 1, "min_chars must be >= 1");
        Paragrapher { settings, tokens: Vec::new(), canonical: String::new(), window: String::new() }
    }

    /// Appends the paragraphs of `text` (None: no paragraphs) to `out`.
    pub fn add(&mut self, text: Option<&str>, out: &mut ParagraphKeys) {
        let Some(text) = text else {
            out.counts.push(0);
            return;
        };
        let mut count = 0u32;
        for (s, e) in spans(text, self.settings.separator) {
            let before = out.keys.len();
            self.keys(&text[s.byte..e.byte], &mut out.keys);
            out.starts.push(s.char as u32);
            out.ends.push(e.char as u32);
            out.nkeys.push((out.keys.len() - before) as u32);
            count += 1;
        }
        out.counts.push(count);
    }

    /// The keys of one paragraph's text, appended to `keys`.
    fn keys(&mut self, paragraph: &str, keys: &mut Vec<u64>) {
        let normalized = normalize(paragraph, self.settings.flags);
        tokenize(&normalized, &mut self.tokens);
        self.canonical.clear();
        for (i, &(s, e)) in self.tokens.iter().enumerate() {
            if i > 0 {
                self.canonical.push(' ');
            }
            self.canonical.push_str(&normalized[s..e]);
        }
        if self.canonical.is_empty() || self.canonical.chars().count() < self.settings.min_chars {
            return;
        }
        let seed = self.settings.seed;
        let n = self.settings.ngram;
        if n == 0 || self.tokens.len() <= n {
            keys.push(xxh3_64_with_seed(self.canonical.as_bytes(), seed));
            return;
        }
        for w in self.tokens.windows(n) {
            self.window.clear();
            for (i, &(s, e)) in w.iter().enumerate() {
                if i > 0 {
                    self.window.push(' ');
                }
                self.window.push_str(&normalized[s..e]);
            }
            keys.push(xxh3_64_with_seed(self.window.as_bytes(), seed));
        }
    }
}

/// The paragraphs of `texts`, in order.
pub fn paragraph_keys(texts: &[Option<&str>], settings: ParagraphSettings) -> ParagraphKeys {
    let mut out = ParagraphKeys::default();
    let mut p = Paragrapher::new(settings);
    for text in texts {
        p.add(*text, &mut out);
    }
    out
}

/// A position in a text: its byte and code point offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub byte: usize,
    pub char: usize,
}

/// The lines of `text` (split at `\n`, which they exclude) as `(start, end)` positions.
fn lines(text: &str) -> Vec<(Pos, Pos)> {
    let mut out = Vec::new();
    let mut start = Pos { byte: 0, char: 0 };
    let mut chars = 0usize;
    for (i, &b) in text.as_bytes().iter().enumerate() {
        if b & 0xC0 != 0x80 {
            chars += 1;
        }
        if b == b'\n' {
            out.push((start, Pos { byte: i, char: chars - 1 }));
            start = Pos { byte: i + 1, char: chars };
        }
    }
    out.push((start, Pos { byte: text.len(), char: chars }));
    out
}

/// The paragraphs' spans of `text` under `separator`.
pub fn spans(text: &str, separator: Separator) -> Vec<(Pos, Pos)> {
    let all = lines(text);
    if separator == Separator::Newline {
        return all;
    }
    let mut out: Vec<(Pos, Pos)> = Vec::new();
    let mut open: Option<(Pos, Pos)> = None;
    for (s, e) in all {
        let blank = text[s.byte..e.byte].chars().all(is_py_whitespace);
        match (&mut open, blank) {
            (Some(_), true) => out.extend(open.take()),
            (Some(p), false) => p.1 = e,
            (None, false) => open = Some((s, e)),
            (None, true) => {}
        }
    }
    out.extend(open);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::shingles::{NORM_LOWER, NORM_NFKC, NORM_PUNCT};

    fn settings(separator: Separator, ngram: usize) -> ParagraphSettings {
        ParagraphSettings { separator, min_chars: 1, ngram, flags: NORM_NFKC | NORM_LOWER | NORM_PUNCT, seed: 7 }
    }

    fn char_spans(text: &str, sep: Separator) -> Vec<(usize, usize)> {
        spans(text, sep).iter().map(|(s, e)| (s.char, e.char)).collect()
    }

    #[test]
    fn newline_paragraphs_are_lines_in_code_points() {
        assert_eq!(char_spans("é a\n\n日本\n", Separator::Newline), vec![(0, 3), (4, 4), (5, 7), (8, 8)]);
        assert_eq!(char_spans("", Separator::Newline), vec![(0, 0)]);
    }

    #[test]
    fn blank_paragraphs_are_runs_of_lines_that_are_not_blank() {
        let text = "a\nb\n \t\n\nc\u{2028}\n\u{3000}\nd";
        assert_eq!(char_spans(text, Separator::Blank), vec![(0, 3), (8, 10), (13, 14)]);
        assert_eq!(char_spans("\n \n", Separator::Blank), vec![]);
    }

    #[test]
    fn equal_canonical_forms_share_a_key_and_short_ones_have_none() {
        let text = "Hello, World!\nhello   world\n\n  \nHello World?!\nother words here";
        let out = paragraph_keys(&[Some(text), None], settings(Separator::Newline, 0));
        assert_eq!(out.counts, vec![6, 0]);
        assert_eq!(out.nkeys, vec![1, 1, 0, 0, 1, 1]);
        assert!(out.keys[0] == out.keys[1] && out.keys[1] == out.keys[2] && out.keys[2] != out.keys[3]);
        let mut s = settings(Separator::Newline, 0);
        s.min_chars = 12;
        let short = paragraph_keys(&[Some(text)], s);
        assert_eq!(short.nkeys, vec![0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn ngram_keys_are_the_word_windows() {
        let out = paragraph_keys(&[Some("a b c d\nA B C\nx")], settings(Separator::Newline, 3));
        assert_eq!(out.nkeys, vec![2, 1, 1]);
        // "a b c" is the first window of the first paragraph and the whole second one.
        assert_eq!(out.keys[0], out.keys[2]);
        assert_eq!(out.keys[0], xxh3_64_with_seed(b"a b c", 7));
        assert_eq!(out.keys[1], xxh3_64_with_seed(b"b c d", 7));
    }
}
