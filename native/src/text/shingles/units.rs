//! Shingle units: what one shingle of a normalized text is.
//!
//! - [`Unit::Words`]: word n-grams of Python's `str.split()` tokens, joined by
//!   one space (the tokenizer is `tokenize.rs`, the n-grams `Shingler`).
//! - [`Unit::Chars`]: every window of `ngram` consecutive code points of the
//!   text with all Python whitespace (`str.isspace()`) deleted. Deleting it
//!   makes words glued at lost line breaks, spaces put between CJK characters
//!   and re-flowed lines all disappear.
//! - [`Unit::Mixed`]: as `Chars`, but a code point of a dense script (Han,
//!   kana, Hangul, ...: [`DENSE_RANGES`]) weighs 3 and any other 1; the
//!   shingle starting at code point `i` is the shortest run `i..=j` of total
//!   weight `>= ngram`. A Han/kana/Hangul character carries roughly three
//!   Latin letters of information, so one `ngram` means a similar amount of
//!   text in every script.
//!
//! For both character units: a run that would pass the end of the text gives
//! nothing, except that a non-empty text too short for one full window gives
//! one shingle of all of it; an empty (or all-whitespace) text gives none.

use super::is_py_whitespace;

/// The shingle unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Words,
    Chars,
    Mixed,
}

impl Unit {
    pub(crate) const NAMES: [&'static str; 3] = ["words", "chars", "mixed"];

    pub(crate) fn parse(name: &str) -> Option<Unit> {
        match name {
            "words" => Some(Unit::Words),
            "chars" => Some(Unit::Chars),
            "mixed" => Some(Unit::Mixed),
            _ => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Unit::Words => "words",
            Unit::Chars => "chars",
            Unit::Mixed => "mixed",
        }
    }
}

/// How a text becomes shingles: the unit, the n-gram size in the unit's
/// measure (words, code points, or weight) and the normalization flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShingleSettings {
    pub unit: Unit,
    pub ngram: usize,
    pub flags: u32,
}

impl ShingleSettings {
    /// Word n-grams (the original shingling).
    pub(crate) fn words(ngram: usize, flags: u32) -> Self {
        ShingleSettings { unit: Unit::Words, ngram, flags }
    }
}

/// Code points of dense scripts (inclusive ranges, sorted): CJK radicals,
/// ideographic marks, kana, bopomofo, Han (BMP, extension A, compatibility,
/// supplementary planes), Hangul syllables, halfwidth katakana, kana supplements.
pub(crate) const DENSE_RANGES: [(u32, u32); 16] = [
    (0x2E80, 0x2FDF),
    (0x3005, 0x3007),
    (0x3021, 0x3029),
    (0x3038, 0x303B),
    (0x3040, 0x309F),
    (0x30A0, 0x30FF),
    (0x3100, 0x312F),
    (0x31A0, 0x31BF),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFF9D),
    (0x1B000, 0x1B16F),
    (0x20000, 0x3134F),
];

/// Weight of a code point of a dense script in [`Unit::Mixed`].
pub(crate) const DENSE_WEIGHT: usize = 3;

/// True iff `c` is in [`DENSE_RANGES`].
#[inline]
pub(crate) fn is_dense(c: char) -> bool {
    let cp = c as u32;
    if cp < DENSE_RANGES[0].0 {
        return false;
    }
    let i = DENSE_RANGES.partition_point(|&(lo, _)| lo <= cp);
    i > 0 && cp <= DENSE_RANGES[i - 1].1
}

/// The whitespace-free text of a document, built once, with the byte offset
/// of each of its code points: shingles are contiguous byte windows of it.
#[derive(Debug, Clone, Default)]
pub(crate) struct CharBuffer {
    pub(crate) bytes: Vec<u8>,
    /// Byte offset of each code point, then `bytes.len()` (empty when the
    /// text is ASCII: code point `i` is byte `i`).
    pub(super) starts: Vec<usize>,
    /// Weight of each code point (filled for `Mixed` only).
    pub(super) weights: Vec<u8>,
}

impl CharBuffer {
    /// Fills the buffer from `text` (already normalized), keeping `weights`
    /// when `weighted`.
    fn fill(&mut self, text: &str, weighted: bool) {
        self.bytes.clear();
        self.starts.clear();
        self.weights.clear();
        if text.is_ascii() && !weighted {
            // Python's ASCII whitespace: 0x09..=0x0D, 0x1C..=0x20.
            self.bytes.extend(text.bytes().filter(|&b| !matches!(b, 0x09..=0x0D | 0x1C..=0x20)));
            return;
        }
        for c in text.chars() {
            if is_py_whitespace(c) {
                continue;
            }
            self.starts.push(self.bytes.len());
            let mut utf8 = [0u8; 4];
            self.bytes.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            if weighted {
                self.weights.push(if is_dense(c) { DENSE_WEIGHT as u8 } else { 1 });
            }
        }
        self.starts.push(self.bytes.len());
    }

    fn code_points(&self) -> usize {
        if self.starts.is_empty() {
            self.bytes.len()
        } else {
            self.starts.len() - 1
        }
    }

    /// Byte offset of code point `i` (`i == code_points()`: the end).
    #[inline(always)]
    fn start(&self, i: usize) -> usize {
        if self.starts.is_empty() {
            i
        } else {
            self.starts[i]
        }
    }

    /// Calls `f(bytes, start, end)` for each window of `n` code points; one
    /// window of all of them if there are fewer (but some). Returns the calls.
    pub(crate) fn windows<F: FnMut(&[u8], usize, usize)>(&mut self, text: &str, n: usize, f: F) -> usize {
        self.fill(text, false);
        self.filled_windows(n, f)
    }

    /// [`CharBuffer::windows`] of the text already in the buffer.
    pub(super) fn filled_windows<F: FnMut(&[u8], usize, usize)>(&self, n: usize, mut f: F) -> usize {
        let len = self.code_points();
        if len == 0 {
            return 0;
        }
        if len <= n {
            f(&self.bytes, 0, self.bytes.len());
            return 1;
        }
        for i in 0..=len - n {
            f(&self.bytes, self.start(i), self.start(i + n));
        }
        len - n + 1
    }

    /// Calls `f(bytes, start, end)` for the shortest run from each code point
    /// whose weight reaches `n` (see [`Unit::Mixed`]). Returns the calls.
    pub(crate) fn weighted_windows<F: FnMut(&[u8], usize, usize)>(&mut self, text: &str, n: usize, f: F) -> usize {
        if text.is_ascii() {
            // Every code point weighs 1: the runs are the windows of `n` code points.
            return self.windows(text, n, f);
        }
        self.fill(text, true);
        self.filled_weighted_windows(n, f)
    }

    /// [`CharBuffer::weighted_windows`] of the text already in the buffer
    /// (filled with weights, or without offsets when it is ASCII).
    pub(super) fn filled_weighted_windows<F: FnMut(&[u8], usize, usize)>(&self, n: usize, mut f: F) -> usize {
        if self.starts.is_empty() {
            return self.filled_windows(n, f);
        }
        let w = &self.weights;
        if w.is_empty() {
            return 0;
        }
        // Two pointers: [i, j) is the run from i, `sum` its weight; j only grows.
        let (mut j, mut sum, mut count) = (0usize, 0usize, 0usize);
        for i in 0..w.len() {
            while sum < n && j < w.len() {
                sum += usize::from(w[j]);
                j += 1;
            }
            if sum < n {
                break; // this run and every later one pass the end
            }
            f(&self.bytes, self.starts[i], self.starts[j]);
            count += 1;
            sum -= usize::from(w[i]);
        }
        if count == 0 {
            // Total weight below n: one shingle of the whole text.
            f(&self.bytes, 0, self.bytes.len());
            return 1;
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Shingler, NORM_ALL, NORM_DEHYPHEN};
    use super::*;

    fn set(text: &str, unit: Unit, n: usize, flags: u32) -> Vec<String> {
        let mut v: Vec<String> = Shingler::with_settings(ShingleSettings { unit, ngram: n, flags })
            .shingle_set(text)
            .into_iter()
            .map(|b| String::from_utf8(b).unwrap())
            .collect();
        v.sort();
        v
    }

    fn strs(v: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn names_round_trip() {
        for name in Unit::NAMES {
            assert_eq!(Unit::parse(name).unwrap().name(), name);
        }
        assert_eq!(Unit::parse("word"), None);
    }

    #[test]
    fn dense_table_is_sorted_and_bounded() {
        for w in DENSE_RANGES.windows(2) {
            assert!(w[0].0 <= w[0].1 && w[0].1 < w[1].0);
        }
        for &(lo, hi) in &DENSE_RANGES {
            for cp in [lo, hi] {
                assert!(is_dense(char::from_u32(cp).unwrap()), "U+{cp:04X}");
            }
            for cp in [lo - 1, hi + 1] {
                let inside = DENSE_RANGES.iter().any(|&(a, b)| (a..=b).contains(&cp));
                if let Some(c) = char::from_u32(cp) {
                    assert_eq!(is_dense(c), inside, "U+{cp:04X}");
                }
            }
        }
        assert!(!is_dense('a') && !is_dense('\u{3000}') && !is_dense('\u{3001}') && !is_dense('\u{FF65}'));
        assert!(is_dense('漢') && is_dense('か') && is_dense('한') && is_dense('\u{FF66}') && is_dense('\u{20000}'));
    }

    #[test]
    fn chars_empty_short_and_windows() {
        assert!(set("", Unit::Chars, 3, 0).is_empty());
        assert!(set(" \t\n\u{3000}\u{85}", Unit::Chars, 3, 0).is_empty());
        assert_eq!(set("a b", Unit::Chars, 3, 0), strs(&["ab"]));
        assert_eq!(set("abc", Unit::Chars, 3, 0), strs(&["abc"]));
        assert_eq!(set("ab cd", Unit::Chars, 3, 0), strs(&["abc", "bcd"]));
        assert_eq!(set("abab", Unit::Chars, 2, 0), strs(&["ab", "ba"]));
        assert_eq!(set("漢 字\nかな", Unit::Chars, 2, 0), strs(&["漢字", "字か", "かな"]));
        assert_eq!(set("xyz", Unit::Chars, 1, 0), strs(&["x", "y", "z"]));
    }

    #[test]
    fn chars_delete_every_python_whitespace() {
        for cp in super::super::tests::PY_SPACES {
            let c = char::from_u32(*cp).unwrap();
            let text = format!("{c}a{c}{c}b\u{e9}{c}");
            assert_eq!(set(&text, Unit::Chars, 2, 0), strs(&["ab", "b\u{e9}"]), "U+{cp:04X}");
            assert_eq!(set(&text, Unit::Mixed, 2, 0), strs(&["ab", "b\u{e9}"]), "U+{cp:04X}");
        }
        // Not Python whitespace: kept as characters.
        assert_eq!(set("a\u{200B}b", Unit::Chars, 3, 0), strs(&["a\u{200B}b"]));
        assert_eq!(set("a\u{180E}b", Unit::Chars, 2, 0), strs(&["a\u{180E}", "\u{180E}b"]));
    }

    #[test]
    fn mixed_weighs_dense_scripts_three() {
        assert!(set("", Unit::Mixed, 5, 0).is_empty());
        assert!(set("\u{3000} \n", Unit::Mixed, 5, 0).is_empty());
        // Latin only: as chars.
        assert_eq!(set("abcdef", Unit::Mixed, 5, 0), set("abcdef", Unit::Chars, 5, 0));
        // Han only, ngram 5: two characters (weight 6) per shingle.
        assert_eq!(set("漢字かな", Unit::Mixed, 5, 0), strs(&["漢字", "字か", "かな"]));
        // ngram 3: one dense character is a shingle.
        assert_eq!(set("漢字漢", Unit::Mixed, 3, 0), strs(&["漢", "字"]));
        // Boundary: "ab漢" weighs 5; from 'b' the run needs '漢' (1+3); from '漢'
        // then 'c' (3+1); runs from 'c' and 'd' pass the end.
        assert_eq!(set("ab漢cd", Unit::Mixed, 4, 0), strs(&["ab漢", "b漢", "漢c"]));
        // Total weight below ngram: one shingle of all of it.
        assert_eq!(set("a漢", Unit::Mixed, 5, 0), strs(&["a漢"]));
        assert_eq!(set("ab", Unit::Mixed, 3, 0), strs(&["ab"]));
        // Exactly ngram: one shingle.
        assert_eq!(set("ab漢", Unit::Mixed, 5, 0), strs(&["ab漢"]));
        // Just outside a dense range weighs 1: U+3004 and U+3008.
        assert_eq!(set("\u{3004}\u{3008}\u{3005}", Unit::Mixed, 2, 0), strs(&["\u{3004}\u{3008}", "\u{3008}\u{3005}", "\u{3005}"]));
    }

    #[test]
    fn normalization_before_units_and_dehyphen_first() {
        // NFKC turns fullwidth 'Ａ' (not dense) into 'a' after lowercasing; punct -> space is deleted.
        assert_eq!(set("Ａ！b", Unit::Chars, 2, NORM_ALL), strs(&["ab"]));
        assert_eq!(set("docu-\n  ment", Unit::Chars, 8, NORM_DEHYPHEN), strs(&["document"]));
        assert_eq!(set("docu-\n  ment", Unit::Chars, 8, NORM_ALL), strs(&["document"]));
        assert_eq!(set("docu-\n  ment", Unit::Chars, 8, 0), strs(&["docu-men", "ocu-ment"]));
        assert_eq!(set("Docu-\nment", Unit::Words, 1, NORM_ALL | NORM_DEHYPHEN), strs(&["document"]));
        assert_eq!(set("Docu-\nment", Unit::Words, 1, NORM_ALL), strs(&["docu", "ment"]));
    }

    #[test]
    fn windows_are_contiguous_in_one_buffer() {
        let mut b = CharBuffer::default();
        let mut seen = Vec::new();
        let n = b.windows("é a\u{3000}漢 z", 2, |buf, s, e| seen.push((buf.len(), s, e)));
        assert_eq!(n, 3);
        assert_eq!(seen, vec![(7, 0, 3), (7, 2, 6), (7, 3, 7)]);
    }
}
