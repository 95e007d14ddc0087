//! Normalization fused into the whitespace-free buffer of the character
//! units: one pass over the text, no intermediate strings.
//!
//! The step-by-step path (`normalize`, then `CharBuffer::fill`) builds up to
//! three new strings per document (NFKC, lowercase, punctuation) and then
//! copies the text once more without its whitespace. For the character units
//! every punctuation character becomes a space and every space is deleted, so
//! each code point is either dropped or kept (lowercased) on its own, which
//! one pass can do:
//!
//! - ASCII bytes go through a 128-entry table (lowercase, or drop:
//!   whitespace, and punctuation when it is asked for);
//! - other code points are lowercased with `char::to_lowercase`, then
//!   dropped if punctuation or whitespace.
//!
//! Exactly the step-by-step result, given two conditions checked first (else
//! the caller takes the step-by-step path): NFKC changes nothing (the text is
//! ASCII or passes the NFKC quick check with `Yes`), and the text has no
//! U+03A3 when lowercasing (`str::to_lowercase` maps a final capital sigma by
//! its context; every other code point lowercases on its own). Dehyphenation
//! comes first in both paths and is applied by the caller.

use unicode_normalization::{is_nfkc_quick, IsNormalized};

use super::units::{is_dense, CharBuffer, DENSE_WEIGHT};
use super::{is_punct, is_py_whitespace, NORM_LOWER, NORM_NFKC, NORM_PUNCT};
use crate::text::shingles::punct_table::ASCII_PUNCT_MASK;

/// Marks an ASCII byte the fused pass drops.
const DROP: u8 = 0xFF;

/// What the normalization flags make of each ASCII byte: itself, its
/// lowercase, or [`DROP`].
#[derive(Debug, Clone)]
pub(crate) struct AsciiTable {
    map: [u8; 128],
    flags: u32,
}

impl AsciiTable {
    pub(crate) fn new(flags: u32) -> Self {
        let mut map = [0u8; 128];
        for (b, m) in (0u8..128).zip(map.iter_mut()) {
            // Python's ASCII whitespace (`str.isspace()`).
            let space = matches!(b, 0x09..=0x0D | 0x1C..=0x20);
            let punct = flags & NORM_PUNCT != 0 && ASCII_PUNCT_MASK >> b & 1 == 1;
            *m = if space || punct {
                DROP
            } else if flags & NORM_LOWER != 0 {
                b.to_ascii_lowercase()
            } else {
                b
            };
        }
        AsciiTable { map, flags }
    }
}

impl CharBuffer {
    /// Fills the buffer with `text` normalized by `table`'s flags (after
    /// dehyphenation) and its whitespace deleted, as `normalize` then `fill`
    /// would. Returns false, leaving the buffer unspecified, when the text
    /// needs the step-by-step path (see the module comment).
    ///
    /// `nfkc_done`: the caller already applied NFKC (the check is skipped).
    pub(crate) fn fill_fused(&mut self, text: &str, table: &AsciiTable, weighted: bool, nfkc_done: bool) -> bool {
        self.bytes.clear();
        self.starts.clear();
        self.weights.clear();
        let map = &table.map;
        if text.is_ascii() {
            // Code point i is byte i: no offsets, and every weight is 1.
            self.bytes.resize(text.len(), 0);
            let mut j = 0;
            // Branch-free: every byte is written, only kept ones advance.
            for &b in text.as_bytes() {
                let m = map[usize::from(b)];
                self.bytes[j] = m;
                j += usize::from(m != DROP);
            }
            self.bytes.truncate(j);
            return true;
        }
        let flags = table.flags;
        if flags & NORM_NFKC != 0 && !nfkc_done && is_nfkc_quick(text.chars()) != IsNormalized::Yes {
            return false;
        }
        let lower = flags & NORM_LOWER != 0;
        if lower && text.contains('\u{3A3}') {
            return false;
        }
        let punct = flags & NORM_PUNCT != 0;
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b < 0x80 {
                let m = map[usize::from(b)];
                if m != DROP {
                    self.starts.push(self.bytes.len());
                    self.bytes.push(m);
                    if weighted {
                        self.weights.push(1);
                    }
                }
                i += 1;
                continue;
            }
            let c = text[i..].chars().next().expect("i is on a char boundary");
            i += c.len_utf8();
            if lower {
                c.to_lowercase().for_each(|l| self.push_kept(l, punct, weighted));
            } else {
                self.push_kept(c, punct, weighted);
            }
        }
        self.starts.push(self.bytes.len());
        true
    }

    /// Appends `c` unless it is whitespace, or punctuation when `punct`.
    #[inline]
    fn push_kept(&mut self, c: char, punct: bool, weighted: bool) {
        if is_py_whitespace(c) || (punct && is_punct(c)) {
            return;
        }
        self.starts.push(self.bytes.len());
        let mut utf8 = [0u8; 4];
        self.bytes.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
        if weighted {
            self.weights.push(if is_dense(c) { DENSE_WEIGHT as u8 } else { 1 });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{normalize, NORM_ALL, NORM_DEHYPHEN, NORM_VALID};
    use super::*;

    /// The buffer the step-by-step path builds: normalize, then drop whitespace.
    fn stepwise(text: &str, flags: u32) -> Vec<u8> {
        normalize(text, flags).chars().filter(|&c| !is_py_whitespace(c)).collect::<String>().into_bytes()
    }

    fn fused(text: &str, flags: u32) -> Option<Vec<u8>> {
        let mut buf = CharBuffer::default();
        let text = if flags & NORM_DEHYPHEN != 0 { super::super::dehyphen(text) } else { text.into() };
        buf.fill_fused(&text, &AsciiTable::new(flags), true, false).then_some(buf.bytes)
    }

    #[test]
    fn table_drops_whitespace_and_punctuation_and_lowercases() {
        let t = AsciiTable::new(NORM_ALL);
        assert_eq!(t.map[usize::from(b'A')], b'a');
        assert_eq!(t.map[usize::from(b'!')], DROP);
        assert_eq!(t.map[usize::from(b'\x1f')], DROP);
        assert_eq!(t.map[usize::from(b'+')], b'+');
        let t = AsciiTable::new(0);
        assert_eq!(t.map[usize::from(b'A')], b'A');
        assert_eq!(t.map[usize::from(b'!')], b'!');
        assert_eq!(t.map[usize::from(b' ')], DROP);
    }

    #[test]
    fn equals_the_stepwise_path_or_declines() {
        let texts = [
            "Plain ASCII, with punctuation! And\tTABS\x1c.",
            "caf\u{E9} na\u{EF}ve \u{2014} \u{201C}quoted\u{201D} \u{3000}\u{6F22}\u{5B57}\u{FF0C}\u{304B}\u{306A}",
            "\u{130}stanbul \u{212A}elvin \u{1E9E} \u{FB01}",
            "\u{FF21}\u{FF22} fullwidth",
            "OΔΟΣ final sigma",
            "docu-\nment \u{D55C}\u{AD6D}\u{C5B4}-\n\u{D14D}",
            "",
            " \u{85}\u{A0}\u{2028}",
        ];
        let flag_sets = [0, NORM_NFKC, NORM_LOWER, NORM_PUNCT, NORM_ALL, NORM_VALID, NORM_DEHYPHEN | NORM_LOWER];
        let mut declined = 0;
        for text in texts {
            for flags in flag_sets {
                match fused(text, flags) {
                    Some(got) => assert_eq!(got, stepwise(text, flags), "{text:?} {flags}"),
                    None => declined += 1,
                }
            }
        }
        // Declined: fullwidth (NFKC), and capital sigma when lowercasing.
        assert!(fused("\u{FF21}", NORM_NFKC).is_none());
        assert!(fused("\u{3A3}", NORM_LOWER).is_none());
        assert!(fused("\u{3A3}", NORM_PUNCT).is_some());
        assert!(declined > 0);
    }

    #[test]
    fn random_texts_equal_the_stepwise_path() {
        // Code points from every class the steps treat differently.
        let pool: Vec<char> = "aZ09 \t\n-_!,.'\u{1c}\u{85}\u{a0}\u{ad}\u{e9}\u{c9}\u{df}\u{130}\u{3a3}\u{3c3}\u{391}\u{301}\u{316}\u{2010}\u{2014}\u{201c}\u{3000}\u{3001}\u{6f22}\u{304b}\u{d55c}\u{ff21}\u{ff01}\u{fb01}\u{212a}\u{2126}\u{1f600}\u{20000}\u{10400}"
            .chars()
            .collect();
        let mut state = 7u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        let (mut accepted, mut declined) = (0, 0);
        for _ in 0..3000 {
            let len = next() % 40;
            // Half the texts draw from the first 16 code points only (ASCII and Latin-1, mostly accepted).
            let span = if next() % 2 == 0 { 16 } else { pool.len() };
            let text: String = (0..len).map(|_| pool[next() % span]).collect();
            let flags = next() as u32 & NORM_VALID;
            match fused(&text, flags) {
                Some(got) => {
                    assert_eq!(got, stepwise(&text, flags), "{text:?} {flags}");
                    accepted += 1;
                }
                None => declined += 1,
            }
        }
        assert!(accepted > 1000 && declined > 100, "{accepted} {declined}");
    }

    #[test]
    fn shingler_equals_the_stepwise_path_in_order() {
        use super::super::{ShingleSettings, Shingler, Unit};
        // Includes texts the fused pass declines at first (fullwidth: NFKC
        // first, then fused) and for good (capital sigma: step by step).
        let pool: Vec<char> = "aZ \n-!\u{e9}\u{3a3}\u{301}\u{6f22}\u{304b}\u{ff21}\u{ff0c}\u{fb01}\u{3000}\u{2010}".chars().collect();
        let mut state = 3u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        for _ in 0..2000 {
            let text: String = (0..next() % 30).map(|_| pool[next() % pool.len()]).collect();
            let flags = next() as u32 & NORM_VALID;
            let unit = if next() % 2 == 0 { Unit::Mixed } else { Unit::Chars };
            let ngram = [1, 3, 11][next() % 3];
            let mut sh = Shingler::with_settings(ShingleSettings { unit, ngram, flags });
            let mut got = Vec::new();
            sh.for_each(&text, |s| got.push(s.to_vec()));
            let norm = normalize(&text, flags);
            let mut want = Vec::new();
            sh.for_each_span_normalized(&norm, |b, s, e| want.push(b[s..e].to_vec()));
            assert_eq!(got, want, "{text:?} {flags} {unit:?} {ngram}");
        }
    }

    #[test]
    fn weights_and_offsets_follow_the_kept_code_points() {
        let mut buf = CharBuffer::default();
        assert!(buf.fill_fused("A\u{6F22}, b", &AsciiTable::new(NORM_ALL), true, false));
        assert_eq!(buf.bytes, "a\u{6F22}b".as_bytes());
        assert_eq!(buf.starts, vec![0, 1, 4, 5]);
        assert_eq!(buf.weights, vec![1, 3, 1]);
    }
}
