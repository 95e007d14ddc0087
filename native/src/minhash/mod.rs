//! MinHash signatures compatible with datasketch 2.x (`affine32`, `legacy`),
//! and the `poisson` scheme (xxh3-64 shingle hashes, O(shingles + k log k)).
//!
//! `permute` holds the permutation kernels, `words` the per-thread table of
//! word hashes that turns a document into the hashes of its distinct shingles,
//! `poisson` the independent-rows sketch of the `poisson` scheme
//! (`poisson_avx512` its AVX-512 kernel). `band_keys` turns signatures into
//! LSH band keys, `parallel` runs the batch functions on several threads.

pub mod band_keys;
mod exponential;
mod permute;
mod poisson;
#[cfg(target_arch = "x86_64")]
mod poisson_avx512;
#[cfg(test)]
mod pinned;
mod words;
pub(crate) mod parallel;

pub(crate) use poisson::{PoissonSketch, Walks};

pub(crate) use permute::simd_backend;
pub use permute::{update_affine32, update_legacy};
pub(crate) use words::reset_word_table;

use crate::text::distinct::DistinctSet;
use crate::text::shingles::{ShingleSettings, Shingler};
use words::{ShortKey, WORDS};

/// 2^61 - 1.
pub(crate) const MERSENNE61: u64 = (1u64 << 61) - 1;

pub use crate::hash::sha1::sha1_hash32;

/// MurmurHash3's 32-bit finalizer (datasketch's `_fmix(hv, 32)`).
#[inline(always)]
pub(crate) fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^= h >> 16;
    h
}

/// `x mod (2^61 - 1)` for any u64.
#[inline(always)]
pub(crate) fn mod_mersenne61(x: u64) -> u64 {
    let r = (x & MERSENNE61) + (x >> 61);
    if r >= MERSENNE61 {
        r - MERSENNE61
    } else {
        r
    }
}

/// Permutation scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// datasketch >= 2.0 default: `a * fmix32(h) + b mod 2^32`.
    Affine32,
    /// datasketch < 2.0: `((a * h + b) mod 2^64) mod (2^61 - 1) & 0xFFFFFFFF`.
    Legacy,
    /// Not datasketch's: xxh3-64 shingle hashes, each driving a Poisson process
    /// of arrivals over the k rows (see `poisson`).
    Poisson,
}

impl Scheme {
    pub(crate) fn parse(name: &str) -> Option<Scheme> {
        match name {
            "affine32" => Some(Scheme::Affine32),
            "legacy" => Some(Scheme::Legacy),
            "poisson" => Some(Scheme::Poisson),
            _ => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Scheme::Affine32 => "affine32",
            Scheme::Legacy => "legacy",
            Scheme::Poisson => "poisson",
        }
    }
}

/// Permutation parameters of one scheme.
#[derive(Debug, Clone)]
pub enum Permutations {
    Affine32 { a: Vec<u32>, b: Vec<u32> },
    Legacy { a: Vec<u64>, b: Vec<u64> },
    Poisson(PoissonSketch),
}

impl Permutations {
    /// Validates and converts the (a, b) parameters computed by Python. For
    /// `poisson`, `a` holds k copies of the xxh3 seed and `b` k zeros.
    pub fn new(scheme: Scheme, a: &[u64], b: &[u64]) -> Result<Permutations, String> {
        if a.len() != b.len() {
            return Err(format!(
                "perm_a and perm_b must have the same length, got {} and {}",
                a.len(),
                b.len()
            ));
        }
        if a.is_empty() {
            return Err("perm_a and perm_b must not be empty (num_perm >= 1)".into());
        }
        match scheme {
            Scheme::Affine32 => {
                let to32 = |name: &str, v: &[u64]| -> Result<Vec<u32>, String> {
                    v.iter()
                        .enumerate()
                        .map(|(i, &x)| {
                            u32::try_from(x).map_err(|_| {
                                format!("{name}[{i}] = {x} does not fit in 32 bits (scheme affine32)")
                            })
                        })
                        .collect()
                };
                let a32 = to32("perm_a", a)?;
                let b32 = to32("perm_b", b)?;
                if let Some(i) = a32.iter().position(|&x| x & 1 == 0) {
                    return Err(format!(
                        "perm_a[{i}] = {} must be odd for scheme affine32",
                        a32[i]
                    ));
                }
                Ok(Permutations::Affine32 { a: a32, b: b32 })
            }
            Scheme::Legacy => Ok(Permutations::Legacy {
                a: a.to_vec(),
                b: b.to_vec(),
            }),
            Scheme::Poisson => {
                if a.iter().any(|&x| x != a[0]) || b.iter().any(|&x| x != 0) {
                    return Err("scheme poisson takes perm_a = k copies of the seed and perm_b = k zeros \
                                (lshbloom_udf.minhash.permutations(k, seed, 'poisson'))"
                        .into());
                }
                Ok(Permutations::Poisson(PoissonSketch::new(a.len(), a[0])))
            }
        }
    }

    pub(crate) fn num_perm(&self) -> usize {
        match self {
            Permutations::Affine32 { a, .. } => a.len(),
            Permutations::Legacy { a, .. } => a.len(),
            Permutations::Poisson(p) => p.num_perm(),
        }
    }


    /// `sig[k] = min(sig[k], phv_k(h))` for every 32-bit shingle hash `h`
    /// (the datasketch schemes; `poisson` hashes to 64 bits in `signature`).
    pub(crate) fn update(&self, hashes: &[u32], sig: &mut [u32]) {
        match self {
            Permutations::Affine32 { a, b } => update_affine32(a, b, hashes, sig),
            Permutations::Legacy { a, b } => update_legacy(a, b, hashes, sig),
            Permutations::Poisson(_) => unreachable!("poisson signatures are sketched from 64-bit hashes"),
        }
    }
}

/// Computes signatures document by document, reusing its buffers.
#[derive(Debug, Clone)]
pub struct MinHasher {
    perms: Permutations,
    shingler: Shingler,
    distinct: DistinctSet,
    hashes: Vec<u32>,
    /// The xxh3-64 of every shingle (`poisson`; repeats kept: they cannot
    /// change a row and cost less than dropping them).
    hashes64: Vec<u64>,
    /// The paused arrival streams of `poisson`.
    walks: Walks,
    /// Shingles of this document that missed the word table.
    pending: Vec<ShortKey>,
    scratch: Vec<u32>,
    /// This document's short shingles.
    keys: Vec<ShortKey>,
}

impl MinHasher {
    /// Word `ngram`s after the normalization `flags`.
    pub fn new(perms: Permutations, ngram: usize, flags: u32) -> Self {
        Self::with_shingles(perms, ShingleSettings::words(ngram, flags))
    }

    /// Shingles of any unit (the hashing does not depend on it).
    pub fn with_shingles(perms: Permutations, shingles: ShingleSettings) -> Self {
        MinHasher {
            perms,
            shingler: Shingler::with_settings(shingles),
            distinct: DistinctSet::new(),
            hashes: Vec::new(),
            hashes64: Vec::new(),
            walks: Walks::default(),
            pending: Vec::new(),
            scratch: Vec::new(),
            keys: Vec::new(),
        }
    }

    pub(crate) fn num_perm(&self) -> usize {
        self.perms.num_perm()
    }

    /// Writes the signature of `text` (`None` = null document) into `sig`
    /// (length `num_perm`). Returns whether the document had any shingle; if
    /// not, `sig` is all `u32::MAX`.
    pub(crate) fn signature(&mut self, text: Option<&str>, sig: &mut [u32]) -> bool {
        assert_eq!(sig.len(), self.perms.num_perm());
        sig.fill(u32::MAX);
        let Some(text) = text else { return false };
        if let Permutations::Poisson(p) = &self.perms {
            let hashes = &mut self.hashes64;
            hashes.clear();
            self.shingler.for_each(text, |s| hashes.push(p.shingle_hash(s)));
            p.sketch(hashes, sig, &mut self.walks);
            return !hashes.is_empty();
        }
        // Repeated shingles cannot change a minimum, and text repeats most of
        // its words: emit each distinct shingle's hash once (short ones through
        // the word table, long ones through a per-document set), then permute.
        WORDS.with(|words| self.emit_hashes(text, &mut words.borrow_mut()));
        if self.hashes.is_empty() {
            return false;
        }
        self.perms.update(&self.hashes, sig);
        true
    }
}

/// Signatures of `texts` into the row-major (len(texts), num_perm) matrix `out`.
pub fn signatures(hasher: &mut MinHasher, texts: &[Option<&str>], out: &mut [u32]) {
    let k = hasher.num_perm();
    assert_eq!(out.len(), texts.len() * k);
    for (text, sig) in texts.iter().zip(out.chunks_exact_mut(k)) {
        hasher.signature(*text, sig);
    }
}

#[cfg(test)]
mod test_support {
    use super::fmix32;

    pub(crate) fn naive_affine(a: &[u32], b: &[u32], hashes: &[u32]) -> Vec<u32> {
        let mut sig = vec![u32::MAX; a.len()];
        for &h in hashes {
            let h = fmix32(h);
            for k in 0..a.len() {
                sig[k] = sig[k].min(a[k].wrapping_mul(h).wrapping_add(b[k]));
            }
        }
        sig
    }

    pub(crate) fn lcg(state: &mut u64) -> u64 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *state >> 11
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::naive_affine;
    use super::*;

    #[test]
    fn sha1_hash32_known_values() {
        // SHA-1("abc") = a9993e36 4706816a ...; first 4 bytes little-endian.
        assert_eq!(sha1_hash32(b"abc"), 0x363e_99a9);
        // SHA-1("") = da39a3ee ...
        assert_eq!(sha1_hash32(b""), 0xeea3_39da);
    }

    #[test]
    fn fmix32_known_values() {
        assert_eq!(fmix32(0), 0);
        // Reference values from the C MurmurHash3 finalizer.
        assert_eq!(fmix32(1), 0x514e_28b7);
        assert_eq!(fmix32(0xFFFF_FFFF), 0x81f1_6f39);
        // It is a bijection: spot-check no collisions on a range.
        let mut v: Vec<u32> = (0..100_000u32).map(fmix32).collect();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), 100_000);
    }

    #[test]
    fn mersenne_mod() {
        for x in [0u64, 1, MERSENNE61 - 1, MERSENNE61, MERSENNE61 + 1, u64::MAX, 1 << 63, 12345678901234567] {
            assert_eq!(mod_mersenne61(x), x % MERSENNE61, "{x}");
        }
    }

    #[test]
    fn permutations_validation() {
        assert!(Permutations::new(Scheme::Affine32, &[1, 3], &[0]).is_err());
        assert!(Permutations::new(Scheme::Affine32, &[], &[]).is_err());
        assert!(Permutations::new(Scheme::Affine32, &[2], &[0]).is_err());
        assert!(Permutations::new(Scheme::Affine32, &[1 << 32 | 1], &[0]).is_err());
        assert!(Permutations::new(Scheme::Affine32, &[3], &[1 << 32]).is_err());
        assert!(Permutations::new(Scheme::Legacy, &[2, 1 << 40], &[0, 5]).is_ok());
        assert_eq!(Scheme::parse("affine32"), Some(Scheme::Affine32));
        assert_eq!(Scheme::parse("affine64"), None);
    }

    #[test]
    fn signature_of_empty_and_null_is_max() {
        let perms = Permutations::new(Scheme::Affine32, &[1, 3, 5], &[0, 1, 2]).unwrap();
        let mut mh = MinHasher::new(perms, 1, 0);
        let mut sig = vec![0u32; 3];
        assert!(!mh.signature(None, &mut sig));
        assert_eq!(sig, vec![u32::MAX; 3]);
        assert!(!mh.signature(Some(" \n "), &mut sig));
        assert_eq!(sig, vec![u32::MAX; 3]);
        assert!(mh.signature(Some("a"), &mut sig));
        assert_eq!(sig, naive_affine(&[1, 3, 5], &[0, 1, 2], &[sha1_hash32(b"a")]));
    }

    #[test]
    fn signature_ignores_repeats() {
        let perms = Permutations::new(Scheme::Affine32, &[1, 3, 5, 7], &[9, 1, 2, 3]).unwrap();
        let mut mh = MinHasher::new(perms, 2, 0);
        let mut s1 = vec![0u32; 4];
        let mut s2 = vec![0u32; 4];
        mh.signature(Some("a b a b a b"), &mut s1);
        mh.signature(Some("a b\tb a"), &mut s2);
        assert_eq!(s1, s2);
    }
}
