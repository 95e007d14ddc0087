//! datasketch's `sha1_hash32` (first 4 bytes of SHA-1, little-endian) over many
//! short messages. SHA-1 of one block is a long dependency chain, so with SHA-NI
//! we run several independent messages through the rounds together, which lets
//! the CPU overlap them. Falls back to the `sha1` crate's block function.

use sha1::block_api::compress as sha1_compress;

const H0: [u32; 5] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0];

/// Longest message that fits in one padded block.
const ONE_BLOCK_MAX: usize = 55;

/// Lanes of the interleaved SHA-NI kernel.
const LANES: usize = 8;

/// `sha1_hash32` of one message.
#[inline]
pub fn sha1_hash32(data: &[u8]) -> u32 {
    let mut state = H0;
    let (full, rem) = data.as_chunks::<64>();
    if !full.is_empty() {
        sha1_compress(&mut state, full);
    }
    let mut tail = [0u8; 128];
    tail[..rem.len()].copy_from_slice(rem);
    tail[rem.len()] = 0x80;
    let end = if rem.len() < 56 { 64 } else { 128 };
    tail[end - 8..end].copy_from_slice(&(data.len() as u64).wrapping_mul(8).to_be_bytes());
    sha1_compress(&mut state, tail[..end].as_chunks::<64>().0);
    // Digest bytes 0..4 are state[0] big-endian; read them little-endian.
    state[0].swap_bytes()
}

/// The padded single SHA-1 block of a message of at most 55 bytes.
#[inline(always)]
fn pad_block(data: &[u8], block: &mut [u8; 64]) {
    debug_assert!(data.len() <= ONE_BLOCK_MAX);
    *block = [0u8; 64];
    block[..data.len()].copy_from_slice(data);
    block[data.len()] = 0x80;
    block[56..].copy_from_slice(&(data.len() as u64 * 8).to_be_bytes());
}

#[cfg(target_arch = "x86_64")]
mod shani {
    use std::arch::x86_64::*;

    /// One SHA-1 step (4 rounds) for every lane; `S` is the step (0..20).
    macro_rules! step {
        ($w:ident, $h0:ident, $h1:ident, $s:literal) => {{
            const S: usize = $s;
            const F: i32 = ($s / 5) as i32;
            for j in 0..super::LANES {
                if S >= 4 {
                    $w[j][S % 5] = _mm_sha1msg2_epu32(
                        _mm_xor_si128(
                            _mm_sha1msg1_epu32($w[j][(S + 1) % 5], $w[j][(S + 2) % 5]),
                            $w[j][(S + 3) % 5],
                        ),
                        $w[j][(S + 4) % 5],
                    );
                }
                if S % 2 == 1 {
                    $h0[j] = _mm_sha1rnds4_epu32::<F>($h1[j], _mm_sha1nexte_epu32($h0[j], $w[j][S % 5]));
                } else {
                    $h1[j] = _mm_sha1rnds4_epu32::<F>($h0[j], _mm_sha1nexte_epu32($h1[j], $w[j][S % 5]));
                }
            }
        }};
    }

    /// First state word of SHA-1 over `LANES` independent single padded blocks
    /// (the same schedule as the `sha1` crate's SHA-NI backend, interleaved).
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    pub(crate) fn first_words(blocks: &[[u8; 64]; super::LANES]) -> [u32; super::LANES] {
        const L: usize = super::LANES;
        let mask = _mm_set_epi64x(0x0001_0203_0405_0607, 0x0809_0A0B_0C0D_0E0F);
        let [a, b, c, d, e] = super::H0;
        let abcd = _mm_set_epi32(a as i32, b as i32, c as i32, d as i32);
        let e0 = _mm_set_epi32(e as i32, 0, 0, 0);
        let mut w = [[_mm_setzero_si128(); 5]; L];
        for (wj, block) in w.iter_mut().zip(blocks) {
            let p: *const __m128i = block.as_ptr().cast();
            for (t, wt) in wj.iter_mut().take(4).enumerate() {
                // SAFETY: `p` points to 64 readable bytes; loadu is unaligned.
                *wt = _mm_shuffle_epi8(unsafe { _mm_loadu_si128(p.add(t)) }, mask);
            }
        }
        let mut h0 = [abcd; L];
        let mut h1 = [_mm_setzero_si128(); L];
        for j in 0..L {
            h1[j] = _mm_sha1rnds4_epu32::<0>(h0[j], _mm_add_epi32(e0, w[j][0]));
        }
        step!(w, h0, h1, 1);
        step!(w, h0, h1, 2);
        step!(w, h0, h1, 3);
        step!(w, h0, h1, 4);
        step!(w, h0, h1, 5);
        step!(w, h0, h1, 6);
        step!(w, h0, h1, 7);
        step!(w, h0, h1, 8);
        step!(w, h0, h1, 9);
        step!(w, h0, h1, 10);
        step!(w, h0, h1, 11);
        step!(w, h0, h1, 12);
        step!(w, h0, h1, 13);
        step!(w, h0, h1, 14);
        step!(w, h0, h1, 15);
        step!(w, h0, h1, 16);
        step!(w, h0, h1, 17);
        step!(w, h0, h1, 18);
        step!(w, h0, h1, 19);
        let mut out = [0u32; L];
        for j in 0..L {
            // Lane 3 holds `a`.
            out[j] = _mm_extract_epi32::<3>(_mm_add_epi32(abcd, h0[j])) as u32;
        }
        out
    }
}

fn have_shani() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("sha")
            && std::arch::is_x86_feature_detected!("sse2")
            && std::arch::is_x86_feature_detected!("ssse3")
            && std::arch::is_x86_feature_detected!("sse4.1")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Appends `sha1_hash32` of every message to `out` (in order).
pub fn sha1_hash32_many<'a>(messages: impl Iterator<Item = &'a [u8]>, out: &mut Vec<u32>) {
    #[cfg(target_arch = "x86_64")]
    {
        if have_shani() {
            let mut blocks = [[0u8; 64]; LANES];
            // Index in `out` of each queued message.
            let mut slots = [0usize; LANES];
            let mut pending = 0;
            for m in messages {
                if m.len() > ONE_BLOCK_MAX {
                    out.push(sha1_hash32(m));
                    continue;
                }
                pad_block(m, &mut blocks[pending]);
                slots[pending] = out.len();
                out.push(0);
                pending += 1;
                if pending == LANES {
                    // SAFETY: the CPU has SHA-NI and SSE2/SSSE3/SSE4.1 (checked above).
                    let words = unsafe { shani::first_words(&blocks) };
                    for (&slot, w) in slots.iter().zip(words) {
                        out[slot] = w.swap_bytes();
                    }
                    pending = 0;
                }
            }
            if pending > 0 {
                // SAFETY: as above (unused lanes hold stale blocks; ignored).
                let words = unsafe { shani::first_words(&blocks) };
                for (&slot, w) in slots[..pending].iter().zip(words) {
                    out[slot] = w.swap_bytes();
                }
            }
            return;
        }
    }
    out.extend(messages.map(sha1_hash32));
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha1::{Digest, Sha1};

    fn reference(data: &[u8]) -> u32 {
        let d = Sha1::digest(data);
        u32::from_le_bytes([d[0], d[1], d[2], d[3]])
    }

    #[test]
    fn single_matches_digest_for_all_lengths() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 37 % 251) as u8).collect();
        for len in 0..=data.len() {
            assert_eq!(sha1_hash32(&data[..len]), reference(&data[..len]), "len {len}");
        }
        assert_eq!(sha1_hash32(b"abc"), 0x363e_99a9);
        assert_eq!(sha1_hash32(b""), 0xeea3_39da);
    }

    #[test]
    fn many_matches_single_in_order() {
        let data: Vec<u8> = (0..400u32).map(|i| (i * 91 % 253) as u8).collect();
        let mut st = 5u64;
        for count in 0..40 {
            let msgs: Vec<&[u8]> = (0..count)
                .map(|_| {
                    st = st.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let len = ((st >> 33) % 140) as usize;
                    let off = ((st >> 20) % 200) as usize;
                    &data[off..off + len]
                })
                .collect();
            let mut out = vec![7u32];
            sha1_hash32_many(msgs.iter().copied(), &mut out);
            let expect: Vec<u32> = std::iter::once(7).chain(msgs.iter().map(|m| reference(m))).collect();
            assert_eq!(out, expect, "count {count}");
        }
    }
}
