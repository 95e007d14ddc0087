//! The bucket scans of a cuckoo filter as the kernels of `lines` (portable
//! and AVX2): a probe scans both buckets (the second unless the first finds the key).

use super::kernel::{insert_absent, scan, scan_wide, tail, Loc, Scan, Shape};
#[cfg(target_arch = "x86_64")]
use super::sizing::is_lane_width;
use super::Cuckoo;
use crate::filters::lines::{Full, Kernel};

/// The scan of one bucket, portable or AVX2 (a trait rather than a closure:
/// a closure would not inherit the caller's `#[target_feature]`, and the
/// AVX2 intrinsics would not inline).
trait ScanOps {
    /// [`scan`], with the implementation's instructions.
    ///
    /// # Safety
    /// The CPU has the implementation's target features.
    unsafe fn scan(line: &[u8], fp: u64, shape: Shape) -> Scan;
}

/// The scans (by `S`) of a key's buckets: both, unless the first finds the
/// key (or the buckets are one).
///
/// Both are read: an insert puts a key in the emptier bucket of its two
/// (`insert_absent`), so a fingerprint may be in its second bucket while its
/// first has room. (Filters written when inserts filled bucket 1 first read
/// the same.)
///
/// # Safety
/// The CPU has `S`'s target features.
#[inline(always)]
unsafe fn scan_both<S: ScanOps>(data: &[u8], loc: Loc, shape: Shape) -> (Scan, Scan) {
    // SAFETY (both): forwarded from the caller.
    let first = unsafe { S::scan(tail(data, loc.a), loc.fp, shape) };
    if first == Scan::Found || loc.b == loc.a {
        return (first, first);
    }
    (first, unsafe { S::scan(tail(data, loc.b), loc.fp, shape) })
}

/// `None` if either scan found the key, else both scans.
#[inline(always)]
fn probe_of((first, second): (Scan, Scan)) -> Option<(Scan, Scan)> {
    (first != Scan::Found && second != Scan::Found).then_some((first, second))
}

/// Every bucket scan is a kernel: a probe scans both buckets, and an insert
/// uses both scans.
impl<S: ScanOps> Kernel<Cuckoo> for S {
    /// The scans of the key's two buckets (where an insert puts it).
    type Probe = (Scan, Scan);

    #[inline(always)]
    unsafe fn probe(data: &[u8], loc: Loc, shape: Shape) -> Option<(Scan, Scan)> {
        // SAFETY: forwarded from the caller.
        probe_of(unsafe { scan_both::<S>(data, loc, shape) })
    }

    #[inline(always)]
    unsafe fn insert(data: &mut [u8], loc: Loc, shape: Shape, (first, second): (Scan, Scan)) -> Result<(), Full> {
        insert_absent(data, loc, shape, first, second)
    }
}

/// Portable code (the reference the AVX2 scan is tested against).
pub struct Portable;

impl ScanOps for Portable {
    #[inline(always)]
    unsafe fn scan(line: &[u8], fp: u64, shape: Shape) -> Scan {
        scan(line, fp, shape)
    }
}

#[cfg(target_arch = "x86_64")]
pub struct Avx2;

#[cfg(target_arch = "x86_64")]
impl ScanOps for Avx2 {
    #[inline(always)]
    unsafe fn scan(line: &[u8], fp: u64, shape: Shape) -> Scan {
        // SAFETY: forwarded from the caller.
        unsafe { avx2_scan(line, fp, shape) }
    }
}

/// [`scan`] with AVX2: whole-lane fingerprints (8, 16, 32, 64 bits) by one
/// compare per half bucket, other widths of up to 57 bits by gathers, wider
/// ones portable. The branch is the shape's: the same for every key of a
/// filter.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn avx2_scan(line: &[u8], fp: u64, shape: Shape) -> Scan {
    if is_lane_width(shape.fp_bits) {
        // SAFETY: forwarded from the caller.
        return unsafe { avx2::scan_lanes(line, fp, shape) };
    }
    if shape.fp_bits > 57 {
        return scan_wide(line, fp, shape);
    }
    // SAFETY: forwarded from the caller.
    unsafe { avx2::scan(line, fp, shape) }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::kernel::{fp_mask, padded, Scan, Shape};
    use super::super::BUCKET_BYTES;
    use std::arch::x86_64::*;

    /// A bucket of whole-lane fingerprints (`f` = 8, 16, 32 or 64 bits, `512 /
    /// f` slots filling the line): each half compared with `fp` and with 0 at
    /// once, byte masks out (a slot's bytes are all set or all clear). No
    /// gather and no branch on the slots: the occupied slots are a prefix, so
    /// the first empty one is the lowest zero slot.
    #[inline(always)]
    pub(crate) unsafe fn scan_lanes(line: &[u8], fp: u64, shape: Shape) -> Scan {
        assert!(line.len() >= BUCKET_BYTES);
        // SAFETY (all intrinsics): AVX2 is enabled (caller); both 32-byte
        // loads are inside the bucket (asserted).
        unsafe {
            let lo = _mm256_loadu_si256(line.as_ptr().cast());
            let hi = _mm256_loadu_si256(line.as_ptr().add(32).cast());
            let zero = _mm256_setzero_si256();
            let (eq_lo, eq_hi, z_lo, z_hi) = match shape.fp_bits {
                8 => {
                    let w = _mm256_set1_epi8(fp as i8);
                    (_mm256_cmpeq_epi8(lo, w), _mm256_cmpeq_epi8(hi, w), _mm256_cmpeq_epi8(lo, zero), _mm256_cmpeq_epi8(hi, zero))
                }
                16 => {
                    let w = _mm256_set1_epi16(fp as i16);
                    (_mm256_cmpeq_epi16(lo, w), _mm256_cmpeq_epi16(hi, w), _mm256_cmpeq_epi16(lo, zero), _mm256_cmpeq_epi16(hi, zero))
                }
                32 => {
                    let w = _mm256_set1_epi32(fp as i32);
                    (_mm256_cmpeq_epi32(lo, w), _mm256_cmpeq_epi32(hi, w), _mm256_cmpeq_epi32(lo, zero), _mm256_cmpeq_epi32(hi, zero))
                }
                _ => {
                    let w = _mm256_set1_epi64x(fp as i64);
                    (_mm256_cmpeq_epi64(lo, w), _mm256_cmpeq_epi64(hi, w), _mm256_cmpeq_epi64(lo, zero), _mm256_cmpeq_epi64(hi, zero))
                }
            };
            let bytes = |a: __m256i, b: __m256i| {
                u64::from(_mm256_movemask_epi8(a) as u32) | (u64::from(_mm256_movemask_epi8(b) as u32) << 32)
            };
            let (found, empty) = (bytes(eq_lo, eq_hi), bytes(z_lo, z_hi));
            if found != 0 {
                Scan::Found
            } else if empty != 0 {
                Scan::Absent(Some(empty.trailing_zeros() / (shape.fp_bits / 8)))
            } else {
                Scan::Absent(None)
            }
        }
    }

    /// Four slots at a time: gather the 8 bytes holding each (from the line
    /// and the 8 bytes after it, see `padded`), shift and mask, compare with
    /// `fp` and with 0.
    #[inline(always)]
    pub(crate) unsafe fn scan(line: &[u8], fp: u64, shape: Shape) -> Scan {
        let mut copy = [0u8; BUCKET_BYTES + 8];
        let buf = padded(line, &mut copy);
        // SAFETY (all intrinsics): AVX2 is enabled (caller); every gathered
        // index is `(i f) / 8 ≤ 64 − f/8` for a slot `i < slots` (lanes past
        // the slots read index 0), so each 8-byte read is inside `buf` (72 bytes).
        unsafe {
            let f = i64::from(shape.fp_bits);
            let mask = _mm256_set1_epi64x(fp_mask(shape.fp_bits) as i64);
            let want = _mm256_set1_epi64x(fp as i64);
            let zero = _mm256_setzero_si256();
            let seven = _mm256_set1_epi64x(7);
            let slots = shape.slots as i64;
            let mut base = 0i64;
            while base < slots {
                let lanes = _mm256_set_epi64x(base + 3, base + 2, base + 1, base);
                let live = _mm256_cmpgt_epi64(_mm256_set1_epi64x(slots), lanes);
                let bits = _mm256_and_si256(_mm256_mul_epu32(lanes, _mm256_set1_epi64x(f)), live);
                let v = _mm256_i64gather_epi64::<1>(buf.as_ptr().cast(), _mm256_srli_epi64::<3>(bits));
                let v = _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_and_si256(bits, seven)), mask);
                let found = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(v, want)));
                let live_mask = _mm256_movemask_pd(_mm256_castsi256_pd(live));
                if found & live_mask != 0 {
                    return Scan::Found;
                }
                let empty = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(v, zero))) & live_mask;
                if empty != 0 {
                    return Scan::Absent(Some((base + i64::from(empty.trailing_zeros())) as u32));
                }
                base += 4;
            }
            Scan::Absent(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::kernel::{fp_mask, put};
    use super::*;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_scan_equals_portable_at_every_width_and_fill() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        for f in 2..=64u32 {
            let slots = 512 / f;
            let shape = Shape { num_buckets: 1, fp_bits: f, slots };
            let mut line = [0u8; 64];
            let vals: Vec<u64> = (0..slots as u64).map(|i| 1 + (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 3) % fp_mask(f)).collect();
            for fill in 0..=slots {
                if fill > 0 {
                    put(&mut line, fill - 1, f, vals[fill as usize - 1]);
                }
                for probe in vals.iter().copied().chain([fp_mask(f), 12345 % fp_mask(f) + 1]) {
                    // SAFETY: AVX2 is present (checked).
                    let fast = unsafe { avx2_scan(&line, probe, shape) };
                    assert_eq!(fast, scan(&line, probe, shape), "f {f} fill {fill} probe {probe}");
                    // Read in place, followed by a bucket of ones: the bytes past the line do not matter.
                    let mut two = [0xffu8; 128];
                    two[..64].copy_from_slice(&line);
                    // SAFETY: AVX2 is present (checked).
                    assert_eq!(unsafe { avx2_scan(&two, probe, shape) }, fast);
                    assert_eq!(scan(&two, probe, shape), fast);
                }
            }
        }
    }

}
