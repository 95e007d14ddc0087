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

/// Writes `fp` into slot `i` of the bucket `line`.
#[inline(always)]
fn put(line: &mut [u8], i: u32, fp_bits: u32, fp: u64) {
    let mut w = words(line);
    let bit = i * fp_bits;
    let (k, off) = ((bit / 64) as usize, bit % 64);
    let mask = fp_mask(fp_bits);
    w[k] = (w[k] & !(mask << off)) | (fp << off);
    if off + fp_bits > 64 {
        let sh = 64 - off;
        w[k + 1] = (w[k + 1] & !(mask >> sh)) | (fp >> sh);
    }
    for (j, x) in w.iter().enumerate() {
        line[8 * j..8 * j + 8].copy_from_slice(&x.to_le_bytes());
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

#[inline(always)]
fn line_mut(data: &mut [u8], bucket: usize) -> &mut [u8] {
    &mut data[bucket * BUCKET_BYTES..(bucket + 1) * BUCKET_BYTES]
}

/// Is the key at `loc` (probably) in the buckets `data`?
#[inline(always)]
pub fn test_loc(data: &[u8], loc: Loc, shape: Shape) -> bool {
    scan(line(data, loc.a), loc.fp, shape) == Scan::Found
        || (loc.b != loc.a && scan(line(data, loc.b), loc.fp, shape) == Scan::Found)
}

/// The filter cannot place a key within `MAX_KICKS` moves (it is far past
/// the load it was sized for); nothing was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// Adds the key at `loc` unless present; `Ok(true)` if it was present.
#[inline(always)]
pub fn set_loc(data: &mut [u8], loc: Loc, shape: Shape) -> Result<bool, Full> {
    let first = scan(line(data, loc.a), loc.fp, shape);
    if first == Scan::Found {
        return Ok(true);
    }
    let second = if loc.b != loc.a { scan(line(data, loc.b), loc.fp, shape) } else { first };
    if second == Scan::Found {
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
