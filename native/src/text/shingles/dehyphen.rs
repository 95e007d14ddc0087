//! The `dehyphen` normalization step: words split across a line break by a
//! hyphen ("docu-\n  ment", as OCR and PDF extraction leave them) are joined.
//!
//! Rule: a hyphen (U+002D, U+00AD soft hyphen, U+2010) right after an
//! alphabetic character (`char::is_alphabetic`), followed by optional spaces
//! and tabs, one line break (`\r\n`, `\n` or `\r`) and optional spaces and
//! tabs, is removed together with that whitespace. Matches are found in the
//! original text, left to right (a removal never creates a new match: the
//! character before a hyphen is never part of an earlier match).

use std::borrow::Cow;

/// Byte length of the hyphen's trailing whitespace `[ \t]* (\r\n|\n|\r) [ \t]*`
/// at the start of `rest`, or `None` when there is no line break.
fn break_len(rest: &[u8]) -> Option<usize> {
    let blank = |from: usize| from + rest[from..].iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    let mut i = blank(0);
    match rest.get(i) {
        Some(b'\r') if rest.get(i + 1) == Some(&b'\n') => i += 2,
        Some(b'\n' | b'\r') => i += 1,
        _ => return None,
    }
    Some(blank(i))
}

/// The next hyphen at or after byte `from`: (its byte offset, its length).
/// 0xC2 and 0xE2 are UTF-8 lead bytes, so a match is on a char boundary.
fn next_hyphen(bytes: &[u8], from: usize) -> Option<(usize, usize)> {
    let mut j = from;
    while j < bytes.len() {
        match bytes[j] {
            b'-' => return Some((j, 1)),
            0xC2 if bytes.get(j + 1) == Some(&0xAD) => return Some((j, 2)),
            0xE2 if bytes.get(j + 1..j + 3) == Some(&[0x80, 0x90]) => return Some((j, 3)),
            _ => j += 1,
        }
    }
    None
}

/// Whether `bytes` has a '-' byte, or the last byte of a soft hyphen (C2 AD) or
/// of U+2010 (E2 80 90): the cheap rejection. Fixed 32-byte blocks without an
/// early exit inside, so that the compiler vectorizes them.
fn has_hyphen_byte(bytes: &[u8]) -> bool {
    let hit = |b: u8| u8::from(b == b'-') | u8::from(b == 0xAD) | u8::from(b == 0x90);
    let mut blocks = bytes.chunks_exact(32);
    for block in &mut blocks {
        if block.iter().fold(0u8, |acc, &b| acc | hit(b)) != 0 {
            return true;
        }
    }
    blocks.remainder().iter().any(|&b| hit(b) != 0)
}

/// `text` with every hyphenated line break removed; borrowed when there is none.
///
/// Jumps from hyphen to hyphen (a byte scan) and decodes only the character
/// before each, instead of walking every character.
pub(crate) fn dehyphen(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    if !has_hyphen_byte(bytes) {
        return Cow::Borrowed(text);
    }
    let mut out = String::new();
    let mut copied = 0; // bytes of `text` already in `out` or removed
    let mut from = 0;
    while let Some((at, len)) = next_hyphen(bytes, from) {
        let after = at + len;
        // Right after a removal the previous character is removed whitespace,
        // not a letter: a removal never creates a new match.
        let after_removal = copied > 0 && at == copied;
        let prev_alpha = !after_removal && text[..at].chars().next_back().is_some_and(char::is_alphabetic);
        if prev_alpha {
            if let Some(n) = break_len(&bytes[after..]) {
                out.push_str(&text[copied..at]);
                copied = after + n;
                from = copied;
                continue;
            }
        }
        from = after;
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_hyphenated_line_breaks() {
        assert_eq!(dehyphen("docu-\n  ment"), "document");
        assert_eq!(dehyphen("docu- \t\r\n\tment"), "document");
        assert_eq!(dehyphen("docu-\rment"), "document");
        assert_eq!(dehyphen("soft\u{AD}\nhyphen"), "softhyphen");
        assert_eq!(dehyphen("uni\u{2010}\ncode"), "unicode");
        assert_eq!(dehyphen("Кон-\nец"), "Конец");
        assert_eq!(dehyphen("a-\nb c-\nd"), "ab cd");
        assert_eq!(dehyphen("end-\n"), "end");
    }

    #[test]
    fn leaves_other_hyphens_alone() {
        for t in [
            "well-known", "a - \nb", "9-\n1", "_-\nx", "a-\n\nb", "a-\n\r\nb", "-\nx", "a\u{2011}\nb",
            "a\u{2013}\nb", "a-\u{85}b", "a-\u{2028}b", "a-\u{A0}\nb", "a-\u{3000}\nb", "plain",
        ] {
            let want = match t {
                "a-\n\nb" => "a\nb",
                "a-\n\r\nb" => "a\r\nb",
                _ => t,
            };
            assert_eq!(dehyphen(t), want, "{t:?}");
        }
        assert!(matches!(dehyphen("well-known"), Cow::Borrowed(_)));
        assert!(matches!(dehyphen("no hyphen here"), Cow::Borrowed(_)));
    }

    fn is_hyphen(c: char) -> bool {
        matches!(c, '-' | '\u{AD}' | '\u{2010}')
    }

    /// The character-by-character walk this module used first.
    fn reference(text: &str) -> Cow<'_, str> {
        let bytes = text.as_bytes();
        // Cheap rejection: no '-' byte, no soft hyphen (C2 AD), no U+2010 (E2 80 90).
        if !bytes.iter().any(|&b| b == b'-' || b == 0xAD || b == 0x90) {
            return Cow::Borrowed(text);
        }
        let mut out = String::new();
        let mut copied = 0; // bytes of `text` already in `out` or removed
        let mut prev_alpha = false;
        let mut i = 0;
        while i < text.len() {
            let c = text[i..].chars().next().expect("i is on a char boundary");
            let after = i + c.len_utf8();
            if prev_alpha && is_hyphen(c) {
                if let Some(n) = break_len(&bytes[after..]) {
                    out.push_str(&text[copied..i]);
                    copied = after + n;
                    i = copied;
                    // The next character follows removed whitespace, not a letter.
                    prev_alpha = false;
                    continue;
                }
            }
            prev_alpha = c.is_alphabetic();
            i = after;
        }
        if copied == 0 {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }

    #[test]
    fn equals_the_character_walk_on_random_texts() {
        let pool: Vec<char> = "ab-\u{AD}\u{2010}\n\r\t \u{6F22}9_\u{301}\u{2011}".chars().collect();
        let mut state = 11u64;
        for _ in 0..20_000 {
            let len = {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 33) as usize % 16
            };
            let text: String = (0..len)
                .map(|_| {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    pool[(state >> 33) as usize % pool.len()]
                })
                .collect();
            assert_eq!(dehyphen(&text), reference(&text), "{text:?}");
        }
    }

    #[test]
    fn cheap_rejection_sees_every_position() {
        for len in [0usize, 1, 31, 32, 33, 64, 100] {
            assert!(!has_hyphen_byte(&vec![b'a'; len]));
            for at in 0..len {
                for mark in [b'-', 0xAD, 0x90] {
                    let mut v = vec![b'a'; len];
                    v[at] = mark;
                    assert!(has_hyphen_byte(&v), "{len} {at} {mark}");
                }
            }
        }
    }

    #[test]
    fn removal_does_not_create_new_matches() {
        // The second hyphen follows a line break in the text, not a letter.
        assert_eq!(dehyphen("a-\n-\nb"), "a-\nb");
        // Alphabetic covers Nl and marks (Rust's Alphabetic property), not digits.
        assert_eq!(dehyphen("\u{2160}-\nx"), "\u{2160}x");
        assert_eq!(dehyphen("漢-\n字"), "漢字");
    }
}
