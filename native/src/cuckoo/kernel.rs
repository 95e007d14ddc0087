//! Where a key goes in a cuckoo filter, and the scan, set and kick of
//! fingerprints in 64-byte buckets.

use super::{BUCKET_BYTES, MAX_KICKS};

/// Where a key goes: its two buckets and its fingerprint.
#[derive(Debug, Clone, Copy, Default)]
pub struct Loc {
    pub a: usize,
    pub b: usize,
    pub fp: u64,
}

/// The shape a kernel needs: buckets, fingerprint bits, slots per bucket.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub num_buckets: u64,
    pub fp_bits: u32,
    pub slots: u32,
}

#[inline(always)]
fn mum(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

#[inline(always)]
fn fast_range(h: u64, n: u64) -> u64 {
    ((u128::from(h) * u128::from(n)) >> 64) as u64
}

/// The other bucket of fingerprint `fp` found in bucket `i`: `(c − i) mod B`.
#[inline(always)]
pub fn alt(i: usize, fp: u64, num_buckets: u64) -> usize {
    const K3: u64 = 0x5899_65cc_7537_4cc3;
    const K4: u64 = 0x1d8e_4e27_c47d_124f;
    let c = fast_range(mum(fp ^ K3, K4), num_buckets) as usize;
    let i = i % num_buckets as usize;
    if c >= i { c - i } else { c + num_buckets as usize - i }
}

/// The buckets and fingerprint of `key` (module docs of `cuckoo`).
#[inline(always)]
pub fn locate(key: u64, seed: u64, shape: Shape) -> Loc {
    const K0: u64 = 0xa076_1d64_78bd_642f;
    const K1: u64 = 0xe703_7ed1_a0b4_28db;
    const K2: u64 = 0x8ebc_6af0_9c88_c6e3;
    let h1 = mum(key ^ seed, K0);
    let h2 = mum(h1 ^ K1, K2);
    let a = fast_range(h1, shape.num_buckets) as usize;
    let fp = 1 + fast_range(h2, fp_mask(shape.fp_bits));
    Loc { a, b: alt(a, fp, shape.num_buckets), fp }
}

#[inline(always)]
fn fp_mask(fp_bits: u32) -> u64 {
    if fp_bits >= 64 { u64::MAX } else { (1u64 << fp_bits) - 1 }
}

#[inline(always)]
fn words(line: &[u8]) -> [u64; 8] {
    let mut w = [0u64; 8];
    for (i, x) in w.iter_mut().enumerate() {
        *x = u64::from_le_bytes(line[8 * i..8 * i + 8].try_into().unwrap());
    }
    w
}

/// Slot `i` of a bucket read as `words`.
#[inline(always)]
fn get(w: &[u64; 8], i: u32, fp_bits: u32) -> u64 {
    let bit = i * fp_bits;
    let (k, off) = ((bit / 64) as usize, bit % 64);
    let mut v = w[k] >> off;
    if off + fp_bits > 64 {
        v |= w[k + 1] << (64 - off);
    }
    v & fp_mask(fp_bits)
}

/// Writes `fp` into slot `i` of the bucket `line` (touching only the one or
/// two little-endian words the slot lies in).
#[inline(always)]
fn put(line: &mut [u8], i: u32, fp_bits: u32, fp: u64) {
    let bit = i * fp_bits;
    let (k, off) = ((bit / 64) as usize, bit % 64);
    let mask = fp_mask(fp_bits);
    let word = |line: &[u8], k: usize| u64::from_le_bytes(line[8 * k..8 * k + 8].try_into().unwrap());
    let lo = (word(line, k) & !(mask << off)) | (fp << off);
    line[8 * k..8 * k + 8].copy_from_slice(&lo.to_le_bytes());
    if off + fp_bits > 64 {
        let sh = 64 - off;
        let hi = (word(line, k + 1) & !(mask >> sh)) | (fp >> sh);
        line[8 * k + 8..8 * k + 16].copy_from_slice(&hi.to_le_bytes());
    }
}

/// What a scan of one bucket found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    Found,
    /// Not there; the first empty slot, if any.
    Absent(Option<u32>),
}

/// Scans bucket `line` for `fp`, stopping at the first empty slot (the
/// occupied slots are a prefix).
#[inline(always)]
pub fn scan(line: &[u8], fp: u64, shape: Shape) -> Scan {
    if shape.fp_bits > 57 {
        return scan_wide(line, fp, shape);
    }
    // A slot of ≤ 57 bits starting at bit `i f` lies inside the 8 bytes from
    // byte `i f / 8`: one unaligned load, a shift and a mask. The last slots'
    // loads reach up to 8 bytes past the line: the next bucket's (masked
    // off), or for the last bucket a padded copy.
    let mut copy = [0u8; BUCKET_BYTES + 8];
    let buf = padded(line, &mut copy);
    let mask = fp_mask(shape.fp_bits);
    let mut bit = 0usize;
    for i in 0..shape.slots {
        let at = bit / 8;
        let v = (u64::from_le_bytes(buf[at..at + 8].try_into().unwrap()) >> (bit % 8)) & mask;
        if v == fp {
            return Scan::Found;
        }
        if v == 0 {
            return Scan::Absent(Some(i));
        }
        bit += shape.fp_bits as usize;
    }
    Scan::Absent(None)
}

/// `line` (a bucket and whatever follows it in the filter) if 8 bytes follow
/// the bucket, else the bucket copied into `copy` (zero padded).
#[inline(always)]
fn padded<'a>(line: &'a [u8], copy: &'a mut [u8; BUCKET_BYTES + 8]) -> &'a [u8] {
    if line.len() >= BUCKET_BYTES + 8 {
        &line[..BUCKET_BYTES + 8]
    } else {
        copy[..BUCKET_BYTES].copy_from_slice(&line[..BUCKET_BYTES]);
        &copy[..]
    }
}

/// [`scan`] for fingerprints of more than 57 bits (slots may span 9 bytes).
fn scan_wide(line: &[u8], fp: u64, shape: Shape) -> Scan {
    let w = words(line);
    for i in 0..shape.slots {
        let v = get(&w, i, shape.fp_bits);
        if v == fp {
            return Scan::Found;
        }
        if v == 0 {
            return Scan::Absent(Some(i));
        }
    }
    Scan::Absent(None)
}

/// The first empty slot of bucket `line`, if any.
fn first_empty(line: &[u8], shape: Shape) -> Option<u32> {
    let w = words(line);
    (0..shape.slots).find(|&i| get(&w, i, shape.fp_bits) == 0)
}

#[inline(always)]
fn line(data: &[u8], bucket: usize) -> &[u8] {
    &data[bucket * BUCKET_BYTES..(bucket + 1) * BUCKET_BYTES]
}

/// Bucket `bucket` and the buckets after it (a scan reads up to 8 bytes past
/// a bucket when they are there).
#[inline(always)]
fn tail(data: &[u8], bucket: usize) -> &[u8] {
    &data[bucket * BUCKET_BYTES..]
}

#[inline(always)]
fn line_mut(data: &mut [u8], bucket: usize) -> &mut [u8] {
    &mut data[bucket * BUCKET_BYTES..(bucket + 1) * BUCKET_BYTES]
}

/// Is the key at `loc` (probably) in the buckets `data`?
///
/// Bucket 2 is read only when bucket 1 is full: a fingerprint is in its
/// second bucket only if its first was full when it got there (an insert, or
/// a kick out of the full first bucket), and a full bucket stays full (no
/// deletions). So a first bucket with a free slot settles the query.
#[inline(always)]
pub fn test_loc(data: &[u8], loc: Loc, shape: Shape) -> bool {
    // SAFETY: portable code needs no CPU feature.
    let (first, second) = unsafe { scan_both::<Portable>(data, loc, shape) };
    first == Scan::Found || second == Scan::Found
}

/// The scans (by `K`) of a key's buckets: the second only when the first is
/// full (`Absent(None)`), else a copy of the first.
///
/// # Safety
/// The CPU has `K`'s target features.
#[inline(always)]
pub unsafe fn scan_both<K: ScanOps>(data: &[u8], loc: Loc, shape: Shape) -> (Scan, Scan) {
    // SAFETY (both): forwarded from the caller.
    let first = unsafe { K::scan(tail(data, loc.a), loc.fp, shape) };
    match first {
        Scan::Absent(None) if loc.b != loc.a => (first, unsafe { K::scan(tail(data, loc.b), loc.fp, shape) }),
        _ => (first, first),
    }
}

/// The scan of one bucket, portable or AVX2 (the band loops are generic over
/// it and instantiated inside a `#[target_feature]` function).
pub trait ScanOps {
    /// [`scan`], with the implementation's instructions.
    ///
    /// # Safety
    /// The CPU has the implementation's target features.
    unsafe fn scan(line: &[u8], fp: u64, shape: Shape) -> Scan;
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
        if shape.fp_bits > 57 {
            return scan_wide(line, fp, shape);
        }
        // SAFETY: forwarded from the caller.
        unsafe { avx2::scan(line, fp, shape) }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{fp_mask, padded, Scan, Shape, BUCKET_BYTES};
    use std::arch::x86_64::*;

    /// Four slots at a time: gather the 8 bytes holding each (from the line
    /// and the 8 bytes after it, see `padded`), shift and mask, compare with
    /// `fp` and with 0.
    #[inline(always)]
    pub unsafe fn scan(line: &[u8], fp: u64, shape: Shape) -> Scan {
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

/// The filter cannot place a key within `MAX_KICKS` moves (it is far past
/// the load it was sized for); nothing was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// Adds the key at `loc` unless present; `Ok(true)` if it was present.
#[inline(always)]
pub fn set_loc(data: &mut [u8], loc: Loc, shape: Shape) -> Result<bool, Full> {
    // SAFETY: portable code needs no CPU feature.
    let (first, second) = unsafe { scan_both::<Portable>(data, loc, shape) };
    if first == Scan::Found || second == Scan::Found {
        return Ok(true);
    }
    insert_absent(data, loc, shape, first, second).map(|()| false)
}

/// Inserts the (absent) key at `loc`, given the scans of its two buckets.
#[inline(always)]
pub fn insert_absent(data: &mut [u8], loc: Loc, shape: Shape, first: Scan, second: Scan) -> Result<(), Full> {
    if let Scan::Absent(Some(i)) = first {
        put(line_mut(data, loc.a), i, shape.fp_bits, loc.fp);
        return Ok(());
    }
    if let Scan::Absent(Some(i)) = second {
        put(line_mut(data, loc.b), i, shape.fp_bits, loc.fp);
        return Ok(());
    }
    kick(data, loc, shape)
}

/// Both buckets full: move residents to their other buckets (a random walk,
/// deterministic given the key) until one lands in a free slot; if none does
/// within `MAX_KICKS`, undo every move.
#[cold]
fn kick(data: &mut [u8], loc: Loc, shape: Shape) -> Result<(), Full> {
    let mut rng = loc.fp ^ (loc.a as u64).rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut bucket = if next() & 1 == 0 { loc.a } else { loc.b };
    let mut fp = loc.fp;
    let mut path: Vec<(usize, u32, u64)> = Vec::new();
    for _ in 0..MAX_KICKS {
        let slot = (next() % u64::from(shape.slots)) as u32;
        let victim = get(&words(line(data, bucket)), slot, shape.fp_bits);
        put(line_mut(data, bucket), slot, shape.fp_bits, fp);
        path.push((bucket, slot, victim));
        fp = victim;
        bucket = alt(bucket, fp, shape.num_buckets);
        if let Some(i) = first_empty(line(data, bucket), shape) {
            put(line_mut(data, bucket), i, shape.fp_bits, fp);
            return Ok(());
        }
    }
    for &(bucket, slot, victim) in path.iter().rev() {
        put(line_mut(data, bucket), slot, shape.fp_bits, victim);
    }
    Err(Full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_round_trip_at_every_width() {
        for f in 2..=64u32 {
            let slots = 512 / f;
            let shape = Shape { num_buckets: 1, fp_bits: f, slots };
            let mut line = [0u8; 64];
            let vals: Vec<u64> = (0..slots as u64).map(|i| 1 + (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & fp_mask(f)) % fp_mask(f)).collect();
            for (i, &v) in vals.iter().enumerate() {
                put(&mut line, i as u32, f, v);
            }
            let w = words(&line);
            for (i, &v) in vals.iter().enumerate() {
                assert_eq!(get(&w, i as u32, f), v, "f {f} slot {i}");
            }
            assert_eq!(scan(&line, vals[slots as usize - 1], shape), Scan::Found);
        }
    }

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
                    let fast = unsafe { <Avx2 as ScanOps>::scan(&line, probe, shape) };
                    assert_eq!(fast, scan(&line, probe, shape), "f {f} fill {fill} probe {probe}");
                    // Read in place, followed by a bucket of ones: the bytes past the line do not matter.
                    let mut two = [0xffu8; 128];
                    two[..64].copy_from_slice(&line);
                    // SAFETY: AVX2 is present (checked).
                    assert_eq!(unsafe { <Avx2 as ScanOps>::scan(&two, probe, shape) }, fast);
                    assert_eq!(scan(&two, probe, shape), fast);
                }
            }
        }
    }

    #[test]
    fn alt_is_an_involution_for_any_bucket_count() {
        for nb in [1u64, 2, 7, 1000, 12345] {
            for i in 0..nb.min(500) as usize {
                for fp in [1u64, 5, 77, u64::MAX] {
                    let j = alt(i, fp, nb);
                    assert!((j as u64) < nb);
                    assert_eq!(alt(j, fp, nb), i);
                }
            }
        }
    }

    #[test]
    fn full_filter_refuses_and_is_unchanged() {
        // 2 buckets of 16 slots (f = 32): 32 keys at most.
        let shape = Shape { num_buckets: 2, fp_bits: 32, slots: 16 };
        let mut data = vec![0u8; 128];
        let mut added = 0;
        let mut key = 0u64;
        loop {
            key += 1;
            let loc = locate(key, 3, shape);
            let before = data.clone();
            match set_loc(&mut data, loc, shape) {
                Ok(false) => added += 1,
                Ok(true) => {}
                Err(Full) => {
                    assert_eq!(data, before);
                    break;
                }
            }
        }
        assert_eq!(added, 32);
        // Everything added is still found.
        for k in 1..key {
            assert!(test_loc(&data, locate(k, 3, shape), shape), "key {k}");
        }
    }
}
