//! Python's `str.split()` over UTF-8 bytes: 64 bytes classified at a time
//! (AVX2 when the CPU has it), token boundaries walked with bit tricks.

/// Byte classes for the tokenizer: 0 = part of a token, 1 = ASCII whitespace,
/// 2 = lead byte of a possible multi-byte whitespace character.
const CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0x09;
    while b <= 0x0D {
        t[b] = 1;
        b += 1;
    }
    let mut b = 0x1C;
    while b <= 0x20 {
        t[b] = 1;
        b += 1;
    }
    t[0xC2] = 2;
    t[0xE1] = 2;
    t[0xE2] = 2;
    t[0xE3] = 2;
    t
};

/// Length of the multi-byte Python-whitespace character starting at `bytes[i]`
/// (whose lead byte has class 2), or 0 if it is not whitespace. `bytes` is valid
/// UTF-8, so the continuation bytes of a lead byte exist.
#[inline(always)]
fn multibyte_space_len(bytes: &[u8], i: usize) -> usize {
    // U+0085, U+00A0 (C2 xx); U+1680 (E1 9A 80); U+2000..U+200A, U+2028,
    // U+2029, U+202F (E2 80 xx); U+205F (E2 81 9F); U+3000 (E3 80 80).
    match bytes[i] {
        0xC2 => match bytes[i + 1] {
            0x85 | 0xA0 => 2,
            _ => 0,
        },
        0xE1 => usize::from(bytes[i + 1] == 0x9A && bytes[i + 2] == 0x80) * 3,
        0xE2 => match (bytes[i + 1], bytes[i + 2]) {
            (0x80, 0x80..=0x8A | 0xA8 | 0xA9 | 0xAF) | (0x81, 0x9F) => 3,
            _ => 0,
        },
        0xE3 => usize::from(bytes[i + 1] == 0x80 && bytes[i + 2] == 0x80) * 3,
        _ => 0,
    }
}

/// Whitespace and multi-byte-lead masks of a 64-byte chunk (bit j = byte j).
#[inline(always)]
fn chunk_masks_scalar(c: &[u8; 64]) -> (u64, u64) {
    let mut sp = 0u64;
    let mut lead = 0u64;
    for (j, &b) in c.iter().enumerate() {
        let cl = CLASS[b as usize];
        sp |= u64::from(cl == 1) << j;
        lead |= u64::from(cl == 2) << j;
    }
    (sp, lead)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn half_masks_avx2(c: &[u8; 32]) -> (u32, u32) {
    use std::arch::x86_64::*;
    // SAFETY: `c` is 32 readable bytes; loadu has no alignment requirement.
    let v = unsafe { _mm256_loadu_si256(c.as_ptr().cast::<__m256i>()) };
    // x <= k (unsigned bytes) iff min(x, k) == x.
    let le = |x: __m256i, k: u8| _mm256_cmpeq_epi8(_mm256_min_epu8(x, _mm256_set1_epi8(k as i8)), x);
    let a = le(_mm256_sub_epi8(v, _mm256_set1_epi8(0x09)), 4); // 0x09..=0x0D
    let b = le(_mm256_sub_epi8(v, _mm256_set1_epi8(0x1C)), 4); // 0x1C..=0x20
    let c2 = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(0xC2u8 as i8));
    let e = le(_mm256_sub_epi8(v, _mm256_set1_epi8(0xE1u8 as i8)), 2); // 0xE1..=0xE3
    (
        _mm256_movemask_epi8(_mm256_or_si256(a, b)) as u32,
        _mm256_movemask_epi8(_mm256_or_si256(c2, e)) as u32,
    )
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn chunk_masks_avx2(c: &[u8; 64]) -> (u64, u64) {
    let (lo, hi) = c.split_at(32);
    let (s0, l0) = half_masks_avx2(lo.try_into().unwrap());
    let (s1, l1) = half_masks_avx2(hi.try_into().unwrap());
    (
        u64::from(s0) | u64::from(s1) << 32,
        u64::from(l0) | u64::from(l1) << 32,
    )
}

#[inline(always)]
fn tokenize_with(text: &str, out: &mut Vec<(usize, usize)>, masks: impl Fn(&[u8; 64]) -> (u64, u64)) {
    out.clear();
    let bytes = text.as_bytes();
    let n = bytes.len();
    // Bit: the byte before the current chunk is whitespace (true before the text).
    let mut prev_space = 1u64;
    // Whitespace bits of a multi-byte character spilling into the next chunk.
    let mut carry = 0u64;
    // Tokens out[closed..] are open (their end is not known yet).
    let mut closed = 0usize;
    let mut pad = [b' '; 64];
    let mut base = 0usize;
    while base < n {
        let chunk: &[u8; 64] = match bytes.get(base..base + 64) {
            Some(c) => c.try_into().unwrap(),
            None => {
                pad[..n - base].copy_from_slice(&bytes[base..]);
                &pad
            }
        };
        let (mut sp, lead) = masks(chunk);
        sp |= carry;
        carry = 0;
        let mut l = lead & !sp;
        while l != 0 {
            let j = l.trailing_zeros() as usize;
            l &= l - 1;
            let len = multibyte_space_len(bytes, base + j);
            if len > 0 {
                let bits = ((1u128 << len) - 1) << j;
                sp |= bits as u64;
                carry |= (bits >> 64) as u64;
            }
        }
        let tok = !sp;
        let mut starts = tok & ((sp << 1) | prev_space);
        let mut ends = sp & ((tok << 1) | (prev_space ^ 1));
        prev_space = sp >> 63;
        while starts != 0 {
            out.push((base + starts.trailing_zeros() as usize, 0));
            starts &= starts - 1;
        }
        while ends != 0 {
            out[closed].1 = base + ends.trailing_zeros() as usize;
            closed += 1;
            ends &= ends - 1;
        }
        base += 64;
    }
    if closed < out.len() {
        out[closed].1 = n;
    }
}

/// Byte ranges `(start, end)` of the `str.split()` tokens of `text`, appended to
/// `out` (which is cleared first). Classifies 64 bytes at a time (AVX2 when
/// available) and walks token boundaries with bit tricks.
pub fn tokenize(text: &str, out: &mut Vec<(usize, usize)>) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return tokenize_with(text, out, |c| unsafe { chunk_masks_avx2(c) });
        }
    }
    tokenize_with(text, out, chunk_masks_scalar)
}

/// Reference tokenizer, byte by byte (same result as [`tokenize`]): what the
/// tests compare it with.
#[cfg(test)]
fn tokenize_scalar(text: &str, out: &mut Vec<(usize, usize)>) {
    out.clear();
    let bytes = text.as_bytes();
    let n = bytes.len();
    let mut i = 0;
    loop {
        // Skip whitespace.
        while i < n {
            match CLASS[bytes[i] as usize] {
                0 => break,
                1 => i += 1,
                _ => match multibyte_space_len(bytes, i) {
                    0 => break,
                    l => i += l,
                },
            }
        }
        if i >= n {
            return;
        }
        // bytes[i] starts a token (continuation bytes are class 0).
        let start = i;
        i += 1;
        while i < n {
            match CLASS[bytes[i] as usize] {
                0 => i += 1,
                1 => break,
                _ => {
                    if multibyte_space_len(bytes, i) > 0 {
                        break;
                    }
                    i += 1;
                }
            }
        }
        out.push((start, i));
    }
}

#[cfg(test)]
mod tests {
    use super::super::is_py_whitespace;
    use super::super::tests::PY_SPACES;
    use super::*;

    fn toks(text: &str) -> Vec<&str> {
        let mut v = Vec::new();
        tokenize(text, &mut v);
        let mut w = Vec::new();
        tokenize_scalar(text, &mut w);
        assert_eq!(v, w, "tokenize vs tokenize_scalar on {text:?}");
        let mut x = Vec::new();
        tokenize_with(text, &mut x, chunk_masks_scalar);
        assert_eq!(v, x, "avx2 vs scalar masks on {text:?}");
        v.into_iter().map(|(s, e)| &text[s..e]).collect()
    }

    #[test]
    fn tokenizer_random_texts_across_chunk_boundaries() {
        let pieces = [
            "a", "bc", "défg", " ", "  ", "\t", "\n", "\u{1c}", "\u{85}", "\u{a0}", "\u{1680}",
            "\u{2000}", "\u{200a}", "\u{2028}", "\u{202f}", "\u{205f}", "\u{3000}", "\u{200b}",
            "—", "漢字", "\u{a1}", "\u{3001}", "\u{1681}", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        ];
        let mut st = 12345u64;
        for _ in 0..3000 {
            let mut t = String::new();
            st = st.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let len = (st >> 33) % 120;
            for _ in 0..len {
                st = st.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                t.push_str(pieces[((st >> 33) % pieces.len() as u64) as usize]);
            }
            let expected: Vec<&str> = t.split(is_py_whitespace).filter(|x| !x.is_empty()).collect();
            assert_eq!(toks(&t), expected);
        }
        // Whitespace characters straddling a 64-byte chunk boundary at every offset.
        for &cp in PY_SPACES {
            let c = char::from_u32(cp).unwrap();
            for pre in 55..66 {
                let t = format!("{}{c}z", "y".repeat(pre));
                assert_eq!(toks(&t), vec!["y".repeat(pre).as_str(), "z"], "U+{cp:04X} at {pre}");
            }
        }
    }

    #[test]
    fn tokenizer_splits_on_every_python_space() {
        for &cp in PY_SPACES {
            let c = char::from_u32(cp).unwrap();
            let text = format!("{c}a{c}{c}b\u{00e9}{c}");
            assert_eq!(toks(&text), vec!["a", "b\u{00e9}"], "U+{cp:04X}");
        }
    }

    #[test]
    fn tokenizer_does_not_split_on_other_chars() {
        // Characters Rust or other tools may treat as spaces, but Python does not,
        // plus chars whose UTF-8 encoding shares lead bytes with real spaces.
        for c in [
            '\u{180E}', '\u{200B}', '\u{FEFF}', '\u{2060}', '\u{00A1}', '\u{1681}', '\u{200B}',
            '\u{2030}', '\u{205E}', '\u{3001}', '\u{0084}', '\u{0000}', '\u{007F}',
        ] {
            let text = format!("a{c}b");
            assert_eq!(toks(&text), vec![text.as_str()], "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn tokenizer_agrees_with_char_classification_for_all_chars() {
        let mut text = String::new();
        for cp in 0..=0x10FFFFu32 {
            if let Some(c) = char::from_u32(cp) {
                text.push(c);
            }
        }
        let expected: Vec<&str> = text
            .split(is_py_whitespace)
            .filter(|t| !t.is_empty())
            .collect();
        assert_eq!(toks(&text), expected);
    }
}
