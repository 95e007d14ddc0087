//! Where a key goes in a blocked filter and the test/set of its 16 lane bits
//! in one 64-byte block: portable code, and AVX2 kernels the band loops call
//! behind run-time detection.

use super::{BLOCK_BYTES, LANES, SALTS};

/// Where a key goes: its block and the 64 bits that pick its lane bits.
#[derive(Debug, Clone, Copy, Default)]
pub struct Loc {
    pub block: usize,
    pub bits: u64,
}

/// 64x64 -> 128-bit multiply folded to 64 bits (wyhash's `mum`).
#[inline(always)]
fn mum(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The block and lane bits of `key` in a filter of `num_blocks` blocks with
/// hash seed `seed`: `h1 = mum(key ^ seed, K0)`, `h2 = mum(h1 ^ K1, K2)`;
/// block = `(h1 * num_blocks) >> 64`, lanes from `h2`.
#[inline(always)]
pub fn locate(key: u64, seed: u64, num_blocks: u64) -> Loc {
    const K0: u64 = 0xa076_1d64_78bd_642f;
    const K1: u64 = 0xe703_7ed1_a0b4_28db;
    const K2: u64 = 0x8ebc_6af0_9c88_c6e3;
    let h1 = mum(key ^ seed, K0);
    let h2 = mum(h1 ^ K1, K2);
    let block = ((u128::from(h1) * u128::from(num_blocks)) >> 64) as usize;
    Loc { block, bits: h2 }
}

/// The 16 lane masks of a key.
#[inline(always)]
pub fn masks(bits: u64) -> [u32; LANES] {
    let lo = bits as u32;
    let hi = (bits >> 32) as u32;
    let mut m = [0u32; LANES];
    for i in 0..LANES {
        let w = if i < LANES / 2 { lo } else { hi };
        m[i] = 1u32 << (w.wrapping_mul(SALTS[i]) >> 27);
    }
    m
}

#[inline(always)]
fn block_words(block: &[u8]) -> [u32; LANES] {
    let mut w = [0u32; LANES];
    for (i, x) in w.iter_mut().enumerate() {
        *x = u32::from_le_bytes(block[4 * i..4 * i + 4].try_into().unwrap());
    }
    w
}

#[inline(always)]
fn test_block(block: &[u8], m: &[u32; LANES]) -> bool {
    let w = block_words(block);
    let mut miss = 0u32;
    for i in 0..LANES {
        miss |= m[i] & !w[i];
    }
    miss == 0
}

#[inline(always)]
fn set_block(block: &mut [u8], m: &[u32; LANES]) -> bool {
    let w = block_words(block);
    let mut miss = 0u32;
    for i in 0..LANES {
        miss |= m[i] & !w[i];
        let v = w[i] | m[i];
        block[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
    miss == 0
}

/// Are all the bits of the key at `loc` set in the block data `data`?
#[inline(always)]
pub(super) fn test_loc(data: &[u8], loc: Loc) -> bool {
    test_block(&data[loc.block * BLOCK_BYTES..(loc.block + 1) * BLOCK_BYTES], &masks(loc.bits))
}

/// Sets the bits of the key at `loc`; returns whether they were all set already.
#[inline(always)]
pub(super) fn set_loc(data: &mut [u8], loc: Loc) -> bool {
    set_block(&mut data[loc.block * BLOCK_BYTES..(loc.block + 1) * BLOCK_BYTES], &masks(loc.bits))
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{LANES, SALTS};
    use std::arch::x86_64::*;

    /// The two halves (lanes 0-7, 8-15) of a key's 512-bit mask.
    #[inline(always)]
    pub unsafe fn masks(bits: u64) -> (__m256i, __m256i) {
        // SAFETY (all intrinsics here): the caller runs with AVX2 enabled.
        unsafe {
            let salts0 = _mm256_loadu_si256(SALTS.as_ptr().cast());
            let salts1 = _mm256_loadu_si256(SALTS[LANES / 2..].as_ptr().cast());
            let lo = _mm256_set1_epi32(bits as u32 as i32);
            let hi = _mm256_set1_epi32((bits >> 32) as u32 as i32);
            let one = _mm256_set1_epi32(1);
            let i0 = _mm256_srli_epi32::<27>(_mm256_mullo_epi32(lo, salts0));
            let i1 = _mm256_srli_epi32::<27>(_mm256_mullo_epi32(hi, salts1));
            (_mm256_sllv_epi32(one, i0), _mm256_sllv_epi32(one, i1))
        }
    }

    /// Are all the key's bits set in the 64-byte block at `p`?
    #[inline(always)]
    pub unsafe fn test(p: *const u8, bits: u64) -> bool {
        // SAFETY: `p` points to 64 readable bytes (caller); AVX2 enabled.
        unsafe {
            let (m0, m1) = masks(bits);
            let b0 = _mm256_loadu_si256(p.cast());
            let b1 = _mm256_loadu_si256(p.add(32).cast());
            // testc: (!block & mask) == 0
            _mm256_testc_si256(b0, m0) & _mm256_testc_si256(b1, m1) != 0
        }
    }

    /// Sets the key's bits in the 64-byte block at `p`.
    #[inline(always)]
    pub unsafe fn set(p: *mut u8, bits: u64) {
        // SAFETY: `p` points to 64 writable bytes (caller); AVX2 enabled.
        unsafe {
            let (m0, m1) = masks(bits);
            let b0 = _mm256_loadu_si256(p.cast());
            let b1 = _mm256_loadu_si256(p.add(32).cast());
            _mm256_storeu_si256(p.cast(), _mm256_or_si256(b0, m0));
            _mm256_storeu_si256(p.add(32).cast(), _mm256_or_si256(b1, m1));
        }
    }
}

/// The block test and set over a raw pointer to one 64-byte block, portable
/// or AVX2: the loops over many keys are written once, generic over this, and
/// instantiated inside a `#[target_feature]` function for AVX2 so that the
/// intrinsics inline.
pub(super) trait BlockOps {
    /// Are all the bits of `bits`'s pattern set in the block at `p`?
    ///
    /// # Safety
    /// `p` addresses 64 readable bytes, and the CPU has the implementation's
    /// target features.
    unsafe fn test(p: *const u8, bits: u64) -> bool;

    /// Sets the bits of `bits`'s pattern in the block at `p`.
    ///
    /// # Safety
    /// `p` addresses 64 writable bytes nothing else accesses meanwhile, and the
    /// CPU has the implementation's target features.
    unsafe fn set(p: *mut u8, bits: u64);
}

/// Portable code (the reference the AVX2 kernels are tested against).
pub(super) struct Portable;

impl BlockOps for Portable {
    #[inline(always)]
    unsafe fn test(p: *const u8, bits: u64) -> bool {
        // SAFETY: the caller guarantees 64 readable bytes at `p`.
        test_block(unsafe { std::slice::from_raw_parts(p, BLOCK_BYTES) }, &masks(bits))
    }

    #[inline(always)]
    unsafe fn set(p: *mut u8, bits: u64) {
        // SAFETY: the caller guarantees 64 writable, unaliased bytes at `p`.
        set_block(unsafe { std::slice::from_raw_parts_mut(p, BLOCK_BYTES) }, &masks(bits));
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) struct Avx2;

#[cfg(target_arch = "x86_64")]
impl BlockOps for Avx2 {
    #[inline(always)]
    unsafe fn test(p: *const u8, bits: u64) -> bool {
        // SAFETY: forwarded from the caller.
        unsafe { avx2::test(p, bits) }
    }

    #[inline(always)]
    unsafe fn set(p: *mut u8, bits: u64) {
        // SAFETY: forwarded from the caller.
        unsafe { avx2::set(p, bits) }
    }
}
