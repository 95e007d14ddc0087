//! Branch-free bucket probes (SWAR: the 512-bit bucket as eight u64 words,
//! all slots at once): the kernel of the band loops.
//!
//! The scan of `kernel` walks the slots one by one (or four per AVX2
//! gather) and stops at the first empty one: a data-dependent branch per slot
//! and a mispredicted exit per bucket. Here, with `L` the 512-bit constant
//! holding a 1 at the lowest bit of every slot and `H` one at the highest:
//!
//! ```text
//! P = fp · L                   fp in every slot (slots are disjoint: no carries between them)
//! zero(v) = (v − L) & ¬v & H   nonzero iff some slot of v is 0; its lowest set bit is exact
//! found  = zero(bucket ⊕ P) ≠ 0   (an empty slot holds 0 ≠ fp, so every slot may be compared)
//! first empty slot = lowest set bit of zero(bucket)
//! full   = the last slot is not 0 (occupied slots are a prefix)
//! ```
//!
//! The decisions and the bytes written are the scan's: bucket 2 is read only
//! when bucket 1 is full, an insert takes the first empty slot of bucket 1,
//! else of bucket 2, else kicks (`kernel::kick`). The tests compare the two
//! over whole band sets.

use super::kernel::{get, kick, put, words, Loc, Shape};
use super::{Cuckoo, BUCKET_BITS, MAX_FP_BITS};
use crate::lines::{line, line_mut, Full, Kernel};

/// `L` and `H` of every fingerprint width (index f; 0 and 1 unused).
static MASKS: [([u64; 8], [u64; 8]); MAX_FP_BITS as usize + 1] = {
    let mut t = [([0u64; 8], [0u64; 8]); MAX_FP_BITS as usize + 1];
    let mut f = 2;
    while f <= MAX_FP_BITS {
        let mut i = 0;
        while i < BUCKET_BITS / f {
            let (lo, hi) = (i * f, i * f + f - 1);
            t[f as usize].0[(lo / 64) as usize] |= 1 << (lo % 64);
            t[f as usize].1[(hi / 64) as usize] |= 1 << (hi % 64);
            i += 1;
        }
        f += 1;
    }
    t
};

/// `fp` in every slot: the 512-bit product `fp · L`.
#[inline(always)]
fn pattern(fp: u64, l: &[u64; 8]) -> [u64; 8] {
    let mut p = [0u64; 8];
    let mut spill = 0u64;
    for (p, &l) in p.iter_mut().zip(l) {
        let prod = u128::from(l) * u128::from(fp);
        // The low half holds the slots starting in this word, `spill` the
        // rest of the one that started in the word before: disjoint bits.
        *p = prod as u64 | spill;
        spill = (prod >> 64) as u64;
    }
    p
}

/// `(v − L) & ¬v & H` over 512 bits (the subtraction borrows across words).
#[inline(always)]
fn zero_slots(v: &[u64; 8], l: &[u64; 8], h: &[u64; 8]) -> [u64; 8] {
    let mut z = [0u64; 8];
    let mut borrow = 0u64;
    for w in 0..8 {
        let (d, b1) = v[w].overflowing_sub(l[w]);
        let (d, b2) = d.overflowing_sub(borrow);
        borrow = u64::from(b1 | b2);
        z[w] = d & !v[w] & h[w];
    }
    z
}

#[inline(always)]
fn any(z: &[u64; 8]) -> bool {
    z.iter().fold(0, |a, &x| a | x) != 0
}

/// Does bucket `w` hold the fingerprint whose pattern is `p`?
#[inline(always)]
fn holds(w: &[u64; 8], p: &[u64; 8], f: u32) -> bool {
    let (l, h) = &MASKS[f as usize];
    let mut x = [0u64; 8];
    for i in 0..8 {
        x[i] = w[i] ^ p[i];
    }
    any(&zero_slots(&x, l, h))
}

#[inline(always)]
fn is_full(w: &[u64; 8], shape: Shape) -> bool {
    get(w, shape.slots - 1, shape.fp_bits) != 0
}

/// The first empty slot of bucket `w`, if any (no data-dependent branch
/// before the result).
#[inline(always)]
pub(super) fn first_empty(w: &[u64; 8], f: u32) -> Option<u32> {
    let (l, h) = &MASKS[f as usize];
    let z = zero_slots(w, l, h);
    let nonzero = z.iter().enumerate().fold(0u32, |m, (i, &x)| m | (u32::from(x != 0) << i));
    let k = nonzero.trailing_zeros() as usize;
    // The lowest set bit is the top bit of the first empty slot.
    let top = 64 * k as u32 + z.get(k).map_or(0, |x| x.trailing_zeros());
    (k < 8).then(|| (top + 1 - f) / f)
}

/// The branch-free kernel (its code is the same with or without AVX2; the
/// compiler may vectorise the word loops inside the AVX2 instantiation).
pub struct Swar;

impl Kernel<Cuckoo> for Swar {
    /// Nothing: an insert finds its slot itself, in lines the probe has just read.
    type Probe = ();

    #[inline(always)]
    unsafe fn probe(data: &[u8], loc: Loc, shape: Shape) -> Option<()> {
        let f = shape.fp_bits;
        let p = pattern(loc.fp, &MASKS[f as usize].0);
        let a = words(line(data, loc.a));
        // Both buckets are tested (both lines are prefetched): a data-dependent
        // branch on "bucket 1 full" would mispredict about once a key. Bucket 2
        // counts only when bucket 1 is full, as in the scan.
        let in_b = is_full(&a, shape) & (loc.b != loc.a) & holds(&words(line(data, loc.b)), &p, f);
        (!(holds(&a, &p, f) | in_b)).then_some(())
    }

    #[inline(always)]
    unsafe fn insert(data: &mut [u8], loc: Loc, shape: Shape, (): ()) -> Result<(), Full> {
        let f = shape.fp_bits;
        if let Some(i) = first_empty(&words(line(data, loc.a)), f) {
            put(line_mut(data, loc.a), i, f, loc.fp);
            return Ok(());
        }
        if loc.b != loc.a {
            if let Some(i) = first_empty(&words(line(data, loc.b)), f) {
                put(line_mut(data, loc.b), i, f, loc.fp);
                return Ok(());
            }
        }
        kick(data, loc, shape)
    }
}

#[cfg(test)]
mod tests {
    use super::super::kernel::fp_mask;
    use super::super::scan::{scan, Scan};
    use super::*;

    #[test]
    fn probes_and_first_empty_equal_the_scan_at_every_width_and_fill() {
        for f in 2..=64u32 {
            let slots = 512 / f;
            let shape = Shape { num_buckets: 1, fp_bits: f, slots };
            let mut line = [0u8; 64];
            let vals: Vec<u64> = (0..u64::from(slots)).map(|i| 1 + (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 3) % fp_mask(f)).collect();
            for fill in 0..=slots {
                if fill > 0 {
                    put(&mut line, fill - 1, f, vals[fill as usize - 1]);
                }
                let w = words(&line);
                let empty = first_empty(&w, f);
                for probe in vals.iter().copied().chain([fp_mask(f), 12345 % fp_mask(f) + 1, 1]) {
                    let s = scan(&line, probe, shape);
                    let p = pattern(probe, &MASKS[f as usize].0);
                    assert_eq!(holds(&w, &p, f), s == Scan::Found, "f {f} fill {fill} probe {probe}");
                    if s != Scan::Found {
                        assert_eq!(Scan::Absent(empty), s, "f {f} fill {fill}");
                    }
                }
                assert_eq!(is_full(&w, shape), fill == slots);
            }
        }
    }
}
