//! Where a key goes in a cuckoo filter, and the portable scan, set and kick
//! of fingerprints in 64-byte buckets (`scan` has the AVX2 scan and the
//! kernels the loops of `lines` call).

use super::{BUCKET_BYTES, MAX_KICKS};
use crate::filters::lines::{fast_range, hashes, mum, Full};

/// Where a key goes: its two buckets and its fingerprint.
#[derive(Debug, Clone, Copy, Default)]
pub struct Loc {
    pub(crate) a: usize,
    pub(crate) b: usize,
    pub(crate) fp: u64,
}

/// The shape a kernel needs: buckets, fingerprint bits, slots per bucket.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub(crate) num_buckets: u64,
    pub(crate) fp_bits: u32,
    pub(crate) slots: u32,
}

/// The other bucket of fingerprint `fp` found in bucket `i`: `(c − i) mod B`.
#[inline(always)]
pub(crate) fn alt(i: usize, fp: u64, num_buckets: u64) -> usize {
    const K3: u64 = 0x5899_65cc_7537_4cc3;
    const K4: u64 = 0x1d8e_4e27_c47d_124f;
    let c = fast_range(mum(fp ^ K3, K4), num_buckets) as usize;
    // Every bucket index here comes from `fast_range` or `alt`: no reduction
    // (a 64-bit division per key) is needed.
    debug_assert!((i as u64) < num_buckets);
    if c >= i { c - i } else { c + num_buckets as usize - i }
}

/// The buckets and fingerprint of `key` (module docs of `cuckoo`).
#[inline(always)]
pub(crate) fn locate(key: u64, seed: u64, shape: Shape) -> Loc {
    let (h1, h2) = hashes(key, seed);
    let a = fast_range(h1, shape.num_buckets) as usize;
    let fp = 1 + fast_range(h2, fp_mask(shape.fp_bits));
    Loc { a, b: alt(a, fp, shape.num_buckets), fp }
}

#[inline(always)]
pub(super) fn fp_mask(fp_bits: u32) -> u64 {
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
pub(super) fn put(line: &mut [u8], i: u32, fp_bits: u32, fp: u64) {
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
pub(crate) fn scan(line: &[u8], fp: u64, shape: Shape) -> Scan {
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
pub(super) fn padded<'a>(line: &'a [u8], copy: &'a mut [u8; BUCKET_BYTES + 8]) -> &'a [u8] {
    if line.len() >= BUCKET_BYTES + 8 {
        &line[..BUCKET_BYTES + 8]
    } else {
        copy[..BUCKET_BYTES].copy_from_slice(&line[..BUCKET_BYTES]);
        &copy[..]
    }
}

/// [`scan`] for fingerprints of more than 57 bits (slots may span 9 bytes).
pub(super) fn scan_wide(line: &[u8], fp: u64, shape: Shape) -> Scan {
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
pub(super) fn tail(data: &[u8], bucket: usize) -> &[u8] {
    &data[bucket * BUCKET_BYTES..]
}

#[inline(always)]
fn line_mut(data: &mut [u8], bucket: usize) -> &mut [u8] {
    &mut data[bucket * BUCKET_BYTES..(bucket + 1) * BUCKET_BYTES]
}

/// Inserts the (absent) key at `loc`, given the scans of its two buckets:
/// into the emptier (its first free slot is the lower; ties: bucket 1).
/// Balancing the two keeps buckets from filling long before the filter does:
/// fewer kicks (each a random walk of cache misses) at high load.
#[inline(always)]
pub(crate) fn insert_absent(data: &mut [u8], loc: Loc, shape: Shape, first: Scan, second: Scan) -> Result<(), Full> {
    match (first, second) {
        (Scan::Absent(Some(i)), Scan::Absent(Some(j))) if j < i => put(line_mut(data, loc.b), j, shape.fp_bits, loc.fp),
        (Scan::Absent(Some(i)), _) => put(line_mut(data, loc.a), i, shape.fp_bits, loc.fp),
        (_, Scan::Absent(Some(j))) => put(line_mut(data, loc.b), j, shape.fp_bits, loc.fp),
        _ => return kick(data, loc, shape),
    }
    Ok(())
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
    use super::super::Cuckoo;
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
            match crate::filters::lines::set::<Cuckoo>(&mut data, loc, shape) {
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
            assert!(crate::filters::lines::test::<Cuckoo>(&data, locate(k, 3, shape), shape), "key {k}");
        }
    }

    /// Every filter holds its capacity: sized by `geometry` (load ≤ 90 %),
    /// no insert of `capacity` random keys runs out of kicks, at every small
    /// size (where a bucket more or less moves the load most; 20 key sets
    /// each) and at the defaults' per-band rate as at others.
    #[test]
    fn holds_its_capacity_at_every_small_size() {
        let sizes = (1..400u64).flat_map(|c| (0..20).map(move |s| (c, s))).chain([1000, 5000, 100_000].map(|c| (c, 0)));
        for (capacity, seed) in sizes {
            for p in [7.8125e-8, 1e-2, 1e-4] {
                let g = crate::filters::cuckoo::geometry(capacity, p).unwrap();
                let shape = Shape { num_buckets: g.num_buckets, fp_bits: g.fp_bits, slots: g.slots };
                let mut data = vec![0u8; g.num_buckets as usize * BUCKET_BYTES];
                let mut st = (capacity << 8) ^ seed;
                for _ in 0..capacity {
                    let key = crate::filters::lines::splitmix(&mut st);
                    let set = crate::filters::lines::set::<Cuckoo>(&mut data, locate(key, 7, shape), shape);
                    assert!(set.is_ok(), "p {p} capacity {capacity} seed {seed}: full");
                }
            }
        }
    }
}
