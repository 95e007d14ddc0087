//! Spark's two hash expressions, `xxhash64` (XXH64) and `hash` (its
//! Murmur3_x86_32 `hashUnsafeBytes`, whose tail is not the reference one: each
//! byte after the last 4-byte block, sign-extended, is a block of its own), as
//! the input check's sums use them (`crate::input::sums`, which tests them
//! against Spark's own values).

use xxhash_rust::xxh64::xxh64;

/// The seed of Spark's `hash` and `xxhash64` expressions.
pub(crate) const SPARK_SEED: u32 = 42;

/// Spark's `xxhash64` of one value given as its bytes.
#[inline]
pub(crate) fn xxhash64(bytes: &[u8], seed: u64) -> u64 {
    xxh64(bytes, seed)
}

#[inline(always)]
fn mix_k1(k: u32) -> u32 {
    k.wrapping_mul(0xCC9E_2D51).rotate_left(15).wrapping_mul(0x1B87_3593)
}

#[inline(always)]
fn mix_h1(h: u32, k: u32) -> u32 {
    (h ^ k).rotate_left(13).wrapping_mul(5).wrapping_add(0xE654_6B64)
}

#[inline(always)]
fn fmix(mut h: u32, len: u32) -> u32 {
    h ^= len;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 16)
}

/// Spark's `hash` of a string's bytes (`Murmur3_x86_32.hashUnsafeBytes`).
pub(crate) fn murmur3_bytes(bytes: &[u8], seed: u32) -> u32 {
    let mut blocks = bytes.chunks_exact(4);
    let mut h = seed;
    for block in &mut blocks {
        h = mix_h1(h, mix_k1(u32::from_le_bytes([block[0], block[1], block[2], block[3]])));
    }
    for &byte in blocks.remainder() {
        h = mix_h1(h, mix_k1(byte as i8 as i32 as u32));
    }
    fmix(h, bytes.len() as u32)
}

/// Spark's `hash` of an int.
pub(crate) fn murmur3_int(v: u32, seed: u32) -> u32 {
    fmix(mix_h1(seed, mix_k1(v)), 4)
}

/// Spark's `hash` of a long.
pub(crate) fn murmur3_long(v: u64, seed: u32) -> u32 {
    let h = mix_h1(seed, mix_k1(v as u32));
    fmix(mix_h1(h, mix_k1((v >> 32) as u32)), 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_sparks_not_the_reference_one() {
        // Reference Murmur3 mixes the 1–3 tail bytes as one block; Spark mixes each, sign-extended.
        let reference_tail = |b: &[u8], seed: u32| {
            let mut h = seed;
            let mut k = 0u32;
            for (i, &byte) in b.iter().enumerate() {
                k |= u32::from(byte) << (8 * i);
            }
            if !b.is_empty() {
                h ^= mix_k1(k);
            }
            fmix(h, b.len() as u32)
        };
        assert_ne!(murmur3_bytes(b"ab", 42), reference_tail(b"ab", 42));
        assert_eq!(murmur3_bytes(b"", 42), reference_tail(b"", 42));
    }
}
