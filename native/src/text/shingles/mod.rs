//! Shingling (docs/algorithm.md §1, §1b): optional normalization, then the shingles of
//! one unit (`units.rs`): word n-grams of Python `str.split()` tokens joined
//! by one ASCII space (the reference), or windows of code points of the
//! whitespace-free text (`chars`, and `mixed` where dense scripts weigh 3).

mod dehyphen;
pub(crate) mod punct_table;
mod fused;
mod tokenize;
mod units;

pub(crate) use dehyphen::dehyphen;
pub(crate) use fused::AsciiTable;
pub use tokenize::tokenize;
pub use units::{ShingleSettings, Unit};
pub(crate) use units::CharBuffer;

use std::borrow::Cow;

use unicode_normalization::{is_nfkc_quick, IsNormalized, UnicodeNormalization};

use crate::text::distinct::DistinctSet;
use crate::text::shingles::punct_table::{ASCII_PUNCT_MASK, PUNCT_RANGES};

/// Normalization flag: Unicode NFKC.
pub(crate) const NORM_NFKC: u32 = 1;
/// Normalization flag: lowercase (`str::to_lowercase`, as Python's `str.lower()`).
pub(crate) const NORM_LOWER: u32 = 2;
/// Normalization flag: every punctuation character (general category P*) becomes ' '.
pub(crate) const NORM_PUNCT: u32 = 4;
/// Normalization flag: join words hyphenated across a line break (applied first, `dehyphen.rs`).
pub const NORM_DEHYPHEN: u32 = 8;
/// The steps Python's `"all"` means (NFKC, lowercase, punctuation).
pub const NORM_ALL: u32 = NORM_NFKC | NORM_LOWER | NORM_PUNCT;
/// All valid flag bits.
pub(crate) const NORM_VALID: u32 = NORM_ALL | NORM_DEHYPHEN;

/// Exactly the code points for which Python's `str.isspace()` is true, i.e. the
/// separators of `str.split()` with no arguments. (Rust's `char::is_whitespace`
/// differs: it lacks U+001C..U+001F.)
pub(crate) fn is_py_whitespace(c: char) -> bool {
    matches!(
        c as u32,
        0x09..=0x0D
            | 0x1C..=0x20
            | 0x85
            | 0xA0
            | 0x1680
            | 0x2000..=0x200A
            | 0x2028
            | 0x2029
            | 0x202F
            | 0x205F
            | 0x3000
    )
}

/// True iff `c`'s Unicode general category is P* (table generated from Python's
/// `unicodedata`, see `punct_table.rs`).
pub(crate) fn is_punct(c: char) -> bool {
    let cp = c as u32;
    if cp < 128 {
        return ASCII_PUNCT_MASK >> cp & 1 == 1;
    }
    PUNCT_RANGES
        .binary_search_by(|&(lo, hi)| {
            if hi < cp {
                std::cmp::Ordering::Less
            } else if lo > cp {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Applies the normalization steps selected by `flags`, in the order
/// dehyphen, NFKC, lowercase, punctuation → space. Borrows when nothing changes.
pub fn normalize(text: &str, flags: u32) -> Cow<'_, str> {
    let mut s = if flags & NORM_DEHYPHEN != 0 { dehyphen(text) } else { Cow::Borrowed(text) };
    if flags & NORM_NFKC != 0
        && !s.is_ascii()
        && is_nfkc_quick(s.chars()) != IsNormalized::Yes
    {
        s = Cow::Owned(s.nfkc().collect());
    }
    if flags & NORM_LOWER != 0 {
        if s.is_ascii() {
            if s.bytes().any(|b| b.is_ascii_uppercase()) {
                s = Cow::Owned(s.to_ascii_lowercase());
            }
        } else {
            s = Cow::Owned(s.to_lowercase());
        }
    }
    if flags & NORM_PUNCT != 0 && s.chars().any(is_punct) {
        s = Cow::Owned(
            s.chars()
                .map(|c| if is_punct(c) { ' ' } else { c })
                .collect(),
        );
    }
    s
}

/// Produces the shingles of documents in one unit, reusing its buffers.
#[derive(Debug, Clone)]
pub struct Shingler {
    unit: Unit,
    ngram: usize,
    flags: u32,
    tokens: Vec<(usize, usize)>,
    buf: Vec<u8>,
    chars: CharBuffer,
    /// The flags' map of ASCII bytes (character units).
    table: AsciiTable,
    /// The NFKC form of a document that needs one (character units).
    nfkc: String,
}

impl Shingler {
    /// Word n-grams. `ngram` must be >= 1 and `flags` a subset of [`NORM_VALID`] (checked by the caller).
    pub fn new(ngram: usize, flags: u32) -> Self {
        Self::with_settings(ShingleSettings::words(ngram, flags))
    }

    /// Shingles of `settings.unit`; same preconditions as [`Shingler::new`].
    pub fn with_settings(settings: ShingleSettings) -> Self {
        let ShingleSettings { unit, ngram, flags } = settings;
        assert!(ngram >= 1, "ngram must be >= 1");
        assert!(flags & !NORM_VALID == 0, "unknown normalization flags");
        Shingler {
            unit,
            ngram,
            flags,
            tokens: Vec::new(),
            buf: Vec::new(),
            chars: CharBuffer::default(),
            table: AsciiTable::new(flags),
            nfkc: String::new(),
        }
    }

    /// Calls `f` with the UTF-8 bytes of every shingle of `text` (after
    /// normalization). Shingles may repeat; the caller dedups if it needs a set.
    /// Returns the number of calls made.
    pub fn for_each<F: FnMut(&[u8])>(&mut self, text: &str, mut f: F) -> usize {
        self.for_each_span(text, |b, s, e| f(&b[s..e]))
    }

    /// As [`Shingler::for_each`], but each shingle is given as `(buffer, start,
    /// end)`: the shingle is `buffer[start..end]`, and the buffer may extend
    /// past it (so the callee can read whole words beyond the end).
    pub(crate) fn for_each_span<F: FnMut(&[u8], usize, usize)>(&mut self, text: &str, f: F) -> usize {
        if self.unit != Unit::Words {
            return self.char_spans(text, f);
        }
        if self.flags == 0 {
            self.for_each_span_normalized(text, f)
        } else {
            let norm = normalize(text, self.flags);
            self.for_each_span_normalized(&norm, f)
        }
    }

    /// The character units: normalization fused into the whitespace-free
    /// buffer (`fused.rs`) when it gives the step-by-step result, else step by step.
    fn char_spans<F: FnMut(&[u8], usize, usize)>(&mut self, text: &str, f: F) -> usize {
        let text = if self.flags & NORM_DEHYPHEN != 0 { dehyphen(text) } else { Cow::Borrowed(text) };
        let weighted = self.unit == Unit::Mixed;
        let mut fused = self.chars.fill_fused(&text, &self.table, weighted, false);
        if !fused && self.flags & NORM_NFKC != 0 {
            // NFKC is not code point by code point: apply it on its own (into a
            // reused buffer), then the rest of the steps fused.
            self.nfkc.clear();
            self.nfkc.extend(text.nfkc());
            fused = self.chars.fill_fused(&self.nfkc, &self.table, weighted, true);
        }
        if fused {
            return if weighted {
                self.chars.filled_weighted_windows(self.ngram, f)
            } else {
                self.chars.filled_windows(self.ngram, f)
            };
        }
        let norm = normalize(&text, self.flags & !NORM_DEHYPHEN);
        self.for_each_span_normalized(&norm, f)
    }

    fn for_each_span_normalized<F: FnMut(&[u8], usize, usize)>(&mut self, text: &str, f: F) -> usize {
        match self.unit {
            Unit::Words => self.word_spans(text, f),
            Unit::Chars => self.chars.windows(text, self.ngram, f),
            Unit::Mixed => self.chars.weighted_windows(text, self.ngram, f),
        }
    }

    fn word_spans<F: FnMut(&[u8], usize, usize)>(&mut self, text: &str, mut f: F) -> usize {
        tokenize(text, &mut self.tokens);
        let bytes = text.as_bytes();
        let toks = &self.tokens;
        let nt = toks.len();
        if nt == 0 {
            return 0;
        }
        let n = self.ngram.min(nt);
        if n == 1 {
            for &(s, e) in toks {
                f(bytes, s, e);
            }
            return nt;
        }
        let count = nt - n + 1;
        for i in 0..count {
            let window = &toks[i..i + n];
            let (first_start, _) = window[0];
            let (_, last_end) = window[n - 1];
            // Zero-copy when the tokens are already separated by single spaces.
            let contiguous = window
                .windows(2)
                .all(|w| w[1].0 == w[0].1 + 1 && bytes[w[0].1] == b' ');
            if contiguous {
                f(bytes, first_start, last_end);
            } else {
                self.buf.clear();
                for (j, &(s, e)) in window.iter().enumerate() {
                    if j > 0 {
                        self.buf.push(b' ');
                    }
                    self.buf.extend_from_slice(&bytes[s..e]);
                }
                f(&self.buf, 0, self.buf.len());
            }
        }
        count
    }

    /// The distinct shingles of `text`, sorted bytewise.
    pub(crate) fn shingle_set(&mut self, text: &str) -> Vec<Vec<u8>> {
        let mut set = DistinctSet::new();
        self.for_each(text, |s| {
            set.insert(s);
        });
        let mut out: Vec<Vec<u8>> = set.iter().map(<[u8]>::to_vec).collect();
        out.sort_unstable();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const PY_SPACES: &[u32] = &[
        0x9, 0xA, 0xB, 0xC, 0xD, 0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x2001,
        0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029,
        0x202F, 0x205F, 0x3000,
    ];

    fn set(text: &str, n: usize, flags: u32) -> Vec<String> {
        Shingler::new(n, flags)
            .shingle_set(text)
            .into_iter()
            .map(|b| String::from_utf8(b).unwrap())
            .collect()
    }

    #[test]
    fn whitespace_table_matches_python_list() {
        for cp in 0..=0x10FFFFu32 {
            if let Some(c) = char::from_u32(cp) {
                assert_eq!(is_py_whitespace(c), PY_SPACES.contains(&cp), "U+{cp:04X}");
            }
        }
    }

    #[test]
    fn empty_and_blank() {
        assert!(set("", 1, 0).is_empty());
        assert!(set(" \t\n\u{3000}", 3, 0).is_empty());
    }

    #[test]
    fn fewer_tokens_than_n_gives_one_shingle() {
        assert_eq!(set("  a\tb ", 5, 0), vec!["a b"]);
        assert_eq!(set("solo", 3, 0), vec!["solo"]);
    }

    #[test]
    fn ngrams_joined_by_single_space_and_distinct() {
        assert_eq!(
            set("a  b\nc a b c", 2, 0),
            vec!["a b", "b c", "c a"]
        );
        assert_eq!(set("x y x y", 1, 0), vec!["x", "y"]);
        assert_eq!(set("a b c", 3, 0), vec!["a b c"]);
    }

    #[test]
    fn for_each_counts_duplicates() {
        let mut sh = Shingler::new(1, 0);
        let mut n = 0;
        assert_eq!(sh.for_each("x y x", |_| n += 1), 3);
        assert_eq!(n, 3);
    }

    #[test]
    fn normalization_flags() {
        // NFKC: fullwidth letters and ligatures.
        assert_eq!(set("\u{FF21}\u{FF22} \u{FB01}", 1, NORM_NFKC), vec!["AB", "fi"]);
        assert_eq!(set("Hello WORLD", 1, NORM_LOWER), vec!["hello", "world"]);
        // Final sigma, as Python's str.lower().
        assert_eq!(set("ΟΔΟΣ", 1, NORM_LOWER), vec!["οδος"]);
        assert_eq!(set("don't stop—now!", 1, NORM_PUNCT), vec!["don", "now", "stop", "t"]);
        // Order NFKC -> lower -> punct: fullwidth '！' (U+FF01) becomes '!' then ' '.
        assert_eq!(set("Ａ！b", 1, NORM_ALL), vec!["a", "b"]);
        // Symbols (S*) are not punctuation.
        assert_eq!(set("a+b $c", 1, NORM_PUNCT), vec!["$c", "a+b"]);
    }

    #[test]
    fn dehyphen_step_comes_first_and_all_excludes_it() {
        // "all" does not join hyphenated breaks; with dehyphen, "Docu-\n" joins
        // before lowercasing and punctuation (which would turn '-' into ' ').
        assert_eq!(set("Docu-\nment", 1, NORM_ALL), vec!["docu", "ment"]);
        assert_eq!(set("Docu-\nment", 1, NORM_VALID), vec!["document"]);
        assert_eq!(set("Docu-\nment x-\n", 1, NORM_DEHYPHEN), vec!["Document", "x"]);
        // NFKC after dehyphen: a fullwidth hyphen-minus (U+FF0D) is not joined.
        assert_eq!(set("a\u{FF0D}\nb", 1, NORM_DEHYPHEN | NORM_NFKC), vec!["a-", "b"]);
    }

    #[test]
    fn normalize_borrows_when_unchanged() {
        assert!(matches!(normalize("plain text", NORM_ALL), Cow::Borrowed(_)));
        assert!(matches!(normalize("Upper", NORM_LOWER), Cow::Owned(_)));
    }

    #[test]
    fn punct_ascii() {
        let ascii_punct: Vec<char> = (0u8..128)
            .map(char::from)
            .filter(|&c| is_punct(c))
            .collect();
        let expected: Vec<char> = "!\"#%&'()*,-./:;?@[\\]_{}".chars().collect();
        assert_eq!(ascii_punct, expected);
        assert!(is_punct('\u{2014}'));
        assert!(is_punct('\u{00BF}'));
        assert!(!is_punct('\u{00A9}'));
        assert!(!is_punct('a'));
    }
}
