//! Where a key goes in a blocked filter and the test/set of its 16 lane bits
//! in one 64-byte block: portable code, and the AVX2 kernel the loops of
//! `lines` call behind run-time detection.

use super::{Blocked, LANES, SALTS};
use crate::filters::lines::{fast_range, hashes, line, line_mut, Full, Kernel};

/// Where a key goes: its block and the 64 bits that pick its lane bits.
#[derive(Debug, Clone, Copy, Default)]
pub struct Loc {
    pub(crate) block: usize,
    pub(crate) bits: u64,
}

/// The block and lane bits of `key` in a filter of `num_blocks` blocks with
/// hash seed `seed`: `h1`, `h2` of [`hashes`]; block = `(h1 * num_blocks) >> 64`,
/// lanes from `h2`.
#[inline(always)]
pub(crate) fn locate(key: u64, seed: u64, num_blocks: u64) -> Loc {
    let (h1, h2) = hashes(key, seed);
    Loc { block: fast_range(h1, num_blocks) as usize, bits: h2 }
}

/// The 16 lane masks of a key.
#[inline(always)]
pub(crate) fn masks(bits: u64) -> [u32; LANES] {
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
fn set_block(block: &mut [u8], m: &[u32; LANES]) {
    let w = block_words(block);
    for i in 0..LANES {
        let v = w[i] | m[i];
        block[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{LANES, SALTS};
    use std::arch::x86_64::*;

    /// The two halves (lanes 0-7, 8-15) of a key's 512-bit mask.
    #[inline(always)]
    pub(crate) unsafe fn masks(bits: u64) -> (__m256i, __m256i) {
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
    pub(crate) unsafe fn test(p: *const u8, bits: u64) -> bool {
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
    pub(crate) unsafe fn set(p: *mut u8, bits: u64) {
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

/// Portable code (the reference the AVX2 kernel is tested against).
pub struct Portable;

impl Kernel<Blocked> for Portable {
    /// A blocked key has nothing to reuse: its insert sets its bits.
    type Probe = ();

    #[inline(always)]
    unsafe fn probe(data: &[u8], loc: Loc, _: u64) -> Option<()> {
        (!test_block(line(data, loc.block), &masks(loc.bits))).then_some(())
    }

    #[inline(always)]
    unsafe fn insert(data: &mut [u8], loc: Loc, _: u64, (): ()) -> Result<(), Full> {
        set_block(line_mut(data, loc.block), &masks(loc.bits));
        Ok(())
    }
}

#[cfg(target_arch = "x86_64")]
pub struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Kernel<Blocked> for Avx2 {
    type Probe = ();

    #[inline(always)]
    unsafe fn probe(data: &[u8], loc: Loc, _: u64) -> Option<()> {
        // SAFETY: `line` is 64 readable bytes; AVX2 is present (caller).
        (!unsafe { avx2::test(line(data, loc.block).as_ptr(), loc.bits) }).then_some(())
    }

    #[inline(always)]
    unsafe fn insert(data: &mut [u8], loc: Loc, _: u64, (): ()) -> Result<(), Full> {
        // SAFETY: `line_mut` is 64 writable bytes borrowed here; AVX2 is present (caller).
        unsafe { avx2::set(line_mut(data, loc.block).as_mut_ptr(), loc.bits) };
        Ok(())
    }
}
