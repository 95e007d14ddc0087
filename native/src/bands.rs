//! LSH band keys: band i = sig[i*r..(i+1)*r], key = exact sum mod (2^61 - 1).

use crate::minhash::{MinHasher, MERSENNE61};

/// Checks `b`, `r` against the signature length `k`.
pub fn check_bands(k: usize, b: usize, r: usize) -> Result<(), String> {
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

/// Band keys of one signature row into `out` (length `b`); `b*r <= sig.len()`.
#[inline]
pub fn band_keys_row(sig: &[u32], r: usize, out: &mut [u64]) {
    for (i, key) in out.iter_mut().enumerate() {
        let band = &sig[i * r..(i + 1) * r];
        // Exact sum (u128 cannot overflow for any slice length that fits in memory).
        let sum: u128 = band.iter().map(|&v| u128::from(v)).sum();
        *key = key_of_sum(sum);
    }
}

/// Reduces an exact band sum mod 2^61 - 1.
#[inline(always)]
fn key_of_sum(sum: u128) -> u64 {
    (sum % u128::from(MERSENNE61)) as u64
}

/// Band keys of an (n, k) row-major signature matrix into an (n, b) matrix.
pub fn band_keys(sigs: &[u32], k: usize, b: usize, r: usize, out: &mut [u64]) {
    assert!(k > 0 && sigs.len().is_multiple_of(k));
    let n = sigs.len() / k;
    assert_eq!(out.len(), n * b);
    for (row, keys) in sigs.chunks_exact(k).zip(out.chunks_exact_mut(b)) {
        band_keys_row(row, r, keys);
    }
}

/// Fused MinHash + banding: keys of `texts` into the (len(texts), b) matrix
/// `keys`, and `has_shingles[i]` = row i had at least one shingle. Only one
/// signature row is materialized. Requires `b*r <= num_perm`.
pub fn minhash_band_keys(
    hasher: &mut MinHasher,
    texts: &[Option<&str>],
    b: usize,
    r: usize,
    keys: &mut [u64],
    has_shingles: &mut [bool],
) {
    let k = hasher.num_perm();
    assert!(check_bands(k, b, r).is_ok());
    assert_eq!(keys.len(), texts.len() * b);
    assert_eq!(has_shingles.len(), texts.len());
    let mut sig = vec![0u32; k];
    for ((text, row_keys), has) in texts.iter().zip(keys.chunks_exact_mut(b)).zip(has_shingles) {
        *has = hasher.signature(*text, &mut sig);
        band_keys_row(&sig, r, row_keys);
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
        band_keys_row(&sig, 256, &mut out);
        assert_eq!(out[0], 256 * u64::from(u32::MAX));
        let mut out2 = [0u64; 2];
        band_keys_row(&sig, 128, &mut out2);
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
        band_keys(&sigs, 7, 3, 2, &mut out);
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
        band_keys(&sigs, k, 5, 2, &mut two_step);
        let mut fused = vec![0u64; texts.len() * 5];
        let mut has = vec![false; texts.len()];
        minhash_band_keys(&mut h, &texts, 5, 2, &mut fused, &mut has);
        assert_eq!(fused, two_step);
        assert_eq!(has, vec![true, false, false, true]);
        assert_eq!(fused[5], 2 * u64::from(u32::MAX));
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
