//! LSH band keys: band i = sig[i*r..(i+1)*r], key = exact sum mod (2^61 - 1)
//! (datasketch's `_band_hash`, the default), or a 64-bit mix of the values.
//!
//! Why two: MinHash values are minima, about 2^32 / |shingles|, so the sum of
//! r of them spans ~10^8 values rather than 2^61, and at 10^6 documents
//! distinct documents' band sums collide often enough to flag a large share
//! of them (docs/algorithm.md §7). `Mix` keys are uniform over 2^61 - 1 and
//! collide at the rate the sizing formulas assume, but are not datasketch's.

use crate::hash::murmur3::fmix64;
use crate::minhash::{MinHasher, MERSENNE61};

/// Checks `b`, `r` against the signature length `k`.
pub(crate) fn check_bands(k: usize, b: usize, r: usize) -> Result<(), String> {
    if b == 0 || r == 0 {
        return Err(format!("b and r must be >= 1, got b={b}, r={r}"));
    }
    match b.checked_mul(r) {
        Some(br) if br <= k => Ok(()),
        _ => Err(format!(
            "b*r must be <= num_perm: b={b}, r={r}, num_perm={k}"
        )),
    }
}

/// How a band's `r` values become its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BandKey {
    /// The exact sum mod 2^61 - 1: datasketch-compatible.
    Sum,
    /// A 64-bit hash of the values in order, mod 2^61 - 1.
    Mix,
}

impl BandKey {
    pub(crate) fn parse(name: &str) -> Result<BandKey, String> {
        match name {
            "sum" => Ok(BandKey::Sum),
            "mix" => Ok(BandKey::Mix),
            _ => Err(format!("band_key must be 'sum' or 'mix', got {name:?}")),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            BandKey::Sum => "sum",
            BandKey::Mix => "mix",
        }
    }
}

/// How a signature becomes its band keys: `b` bands of `r` values, each
/// keyed by `key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Banding {
    pub b: usize,
    pub r: usize,
    pub key: BandKey,
}

impl Banding {
    /// Checks that the bands fit in a signature of length `k`.
    pub(crate) fn check(&self, k: usize) -> Result<(), String> {
        check_bands(k, self.b, self.r)
    }
}

/// Band keys of one signature row into `out` (length `b`); `b*r <= sig.len()`.
#[inline]
pub(crate) fn band_keys_row(sig: &[u32], r: usize, band_key: BandKey, out: &mut [u64]) {
    for (i, key) in out.iter_mut().enumerate() {
        let band = &sig[i * r..(i + 1) * r];
        *key = match band_key {
            // Exact sum (u128 cannot overflow for any slice length that fits in memory).
            BandKey::Sum => key_of_sum(band.iter().map(|&v| u128::from(v)).sum()),
            BandKey::Mix => key_of_values(band),
        };
    }
}

/// A 64-bit hash of `band` (order matters), reduced mod 2^61 - 1.
#[inline(always)]
fn key_of_values(band: &[u32]) -> u64 {
    let mut h: u64 = 0x243F_6A88_85A3_08D3 ^ band.len() as u64;
    for &v in band {
        h = (h ^ u64::from(v)).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(31);
    }
    // MurmurHash3's finalizer: every input bit affects every output bit.
    fmix64(h) % MERSENNE61
}

/// Reduces an exact band sum mod 2^61 - 1.
#[inline(always)]
fn key_of_sum(sum: u128) -> u64 {
    (sum % u128::from(MERSENNE61)) as u64
}

/// Band keys of an (n, k) row-major signature matrix into an (n, b) matrix.
pub(crate) fn band_keys(sigs: &[u32], k: usize, banding: Banding, out: &mut [u64]) {
    let Banding { b, r, key } = banding;
    assert!(k > 0 && sigs.len().is_multiple_of(k));
    let n = sigs.len() / k;
    assert_eq!(out.len(), n * b);
    for (row, keys) in sigs.chunks_exact(k).zip(out.chunks_exact_mut(b)) {
        band_keys_row(row, r, key, keys);
    }
}

/// Fused MinHash + banding: keys of `texts` into the (len(texts), b) matrix
/// `keys`, and `has_shingles[i]` = row i had at least one shingle. Only one
/// signature row is materialized. Requires `b*r <= num_perm`.
pub fn minhash_band_keys(
    hasher: &mut MinHasher,
    texts: &[Option<&str>],
    banding: Banding,
    keys: &mut [u64],
    has_shingles: &mut [bool],
) {
    let Banding { b, r, key } = banding;
    let k = hasher.num_perm();
    assert!(banding.check(k).is_ok());
    assert_eq!(keys.len(), texts.len() * b);
    assert_eq!(has_shingles.len(), texts.len());
    let mut sig = vec![0u32; k];
    for ((text, row_keys), has) in texts.iter().zip(keys.chunks_exact_mut(b)).zip(has_shingles) {
        *has = hasher.signature(*text, &mut sig);
        band_keys_row(&sig, r, key, row_keys);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_of_max_values_is_exact() {
        // 256 values of u32::MAX: sum = 256 * (2^32 - 1) < 2^61 - 1.
        let sig = vec![u32::MAX; 256];
        let mut out = [0u64; 1];
        band_keys_row(&sig, 256, BandKey::Sum, &mut out);
        assert_eq!(out[0], 256 * u64::from(u32::MAX));
        let mut out2 = [0u64; 2];
        band_keys_row(&sig, 128, BandKey::Sum, &mut out2);
        assert_eq!(out2, [128 * u64::from(u32::MAX); 2]);
    }

    #[test]
    fn reduces_mod_mersenne() {
        // Sums reach 2^61 - 1 only with > 2^29 values; test the reduction itself.
        let p = u128::from(MERSENNE61);
        assert_eq!(key_of_sum(p - 1), MERSENNE61 - 1);
        assert_eq!(key_of_sum(p), 0);
        assert_eq!(key_of_sum(p + 1), 1);
        assert_eq!(key_of_sum(3 * p + 5), 5);
    }

    #[test]
    fn matrix_layout_and_unused_tail() {
        // k = 7, b = 3, r = 2: the last value is not part of any band.
        let sigs: Vec<u32> = (0..14).collect();
        let mut out = vec![0u64; 6];
        band_keys(&sigs, 7, Banding { b: 3, r: 2, key: BandKey::Sum }, &mut out);
        assert_eq!(out, vec![1, 5, 9, 15, 19, 23]);
    }

    #[test]
    fn fused_equals_two_step() {
        use crate::minhash::{signatures, Permutations, Scheme};
        let k = 12;
        let a: Vec<u64> = (0..k as u64).map(|i| 2 * i * 7919 + 1).collect();
        let bb: Vec<u64> = (0..k as u64).map(|i| i * 104_729).collect();
        let perms = Permutations::new(Scheme::Affine32, &a, &bb).unwrap();
        let mut h = MinHasher::new(perms, 2, 0);
        let texts = [Some("a b c d"), None, Some(""), Some("x y z a b")];
        let mut sigs = vec![0u32; texts.len() * k];
        signatures(&mut h, &texts, &mut sigs);
        let mut two_step = vec![0u64; texts.len() * 5];
        let sum = Banding { b: 5, r: 2, key: BandKey::Sum };
        band_keys(&sigs, k, sum, &mut two_step);
        let mut fused = vec![0u64; texts.len() * 5];
        let mut has = vec![false; texts.len()];
        minhash_band_keys(&mut h, &texts, sum, &mut fused, &mut has);
        assert_eq!(fused, two_step);
        assert_eq!(has, vec![true, false, false, true]);
        assert_eq!(fused[5], 2 * u64::from(u32::MAX));
        let mix = Banding { key: BandKey::Mix, ..sum };
        band_keys(&sigs, k, mix, &mut two_step);
        minhash_band_keys(&mut h, &texts, mix, &mut fused, &mut has);
        assert_eq!(fused, two_step);
    }

    #[test]
    fn mix_keys_separate_bands_with_equal_sums() {
        // Same sum, other values or order: one Sum key, distinct Mix keys.
        let sig = [1u32, 2, 3, 4, 5, 5, 4, 3, 2, 1, 3, 3, 3, 3, 3];
        let (mut sums, mut mixes) = ([0u64; 3], [0u64; 3]);
        band_keys_row(&sig, 5, BandKey::Sum, &mut sums);
        band_keys_row(&sig, 5, BandKey::Mix, &mut mixes);
        assert_eq!(sums, [15, 15, 15]);
        assert!(mixes[0] != mixes[1] && mixes[1] != mixes[2] && mixes[0] != mixes[2]);
        assert!(mixes.iter().all(|&k| k < MERSENNE61));
        // Deterministic.
        let mut again = [0u64; 3];
        band_keys_row(&sig, 5, BandKey::Mix, &mut again);
        assert_eq!(again, mixes);
    }

    #[test]
    fn mix_keys_do_not_collide_where_sums_do() {
        // Minima of ~1000-shingle documents lie below ~2^32/1000 * 8: band sums
        // of r = 5 crowd into ~10^8 values, so 200k bands give many equal sums.
        let mut state = 0x1234_5678_9ABC_DEF0u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % (1u64 << 25)) as u32
        };
        let n = 200_000;
        let sigs: Vec<u32> = (0..n * 5).map(|_| next()).collect();
        let count_repeats = |band_key| {
            let mut keys = vec![0u64; n];
            band_keys(&sigs, 5, Banding { b: 1, r: 5, key: band_key }, &mut keys);
            keys.sort_unstable();
            keys.windows(2).filter(|w| w[0] == w[1]).count()
        };
        assert!(count_repeats(BandKey::Sum) > 50);
        assert_eq!(count_repeats(BandKey::Mix), 0);
    }

    #[test]
    fn band_key_names() {
        assert_eq!(BandKey::parse("sum"), Ok(BandKey::Sum));
        assert_eq!(BandKey::parse("mix"), Ok(BandKey::Mix));
        assert!(BandKey::parse("xor").is_err());
        assert_eq!(BandKey::parse(BandKey::Mix.name()), Ok(BandKey::Mix));
    }

    #[test]
    fn check() {
        assert!(check_bands(256, 42, 6).is_ok());
        assert!(check_bands(256, 16, 16).is_ok());
        assert!(check_bands(256, 16, 17).is_err());
        assert!(check_bands(256, 0, 1).is_err());
        assert!(check_bands(256, usize::MAX, 2).is_err());
    }
}
