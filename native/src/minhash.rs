//! MinHash signatures compatible with datasketch 2.x (`affine32`, `legacy`).


use crate::distinct::{read_u64, short_fp, DistinctSet, MASKS};
use crate::sha1x::sha1_hash32_many;
use crate::shingles::Shingler;

/// 2^61 - 1.
pub const MERSENNE61: u64 = (1u64 << 61) - 1;

pub use crate::sha1x::sha1_hash32;

/// MurmurHash3's 32-bit finalizer (datasketch's `_fmix(hv, 32)`).
#[inline(always)]
pub fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^= h >> 16;
    h
}

/// `x mod (2^61 - 1)` for any u64.
#[inline(always)]
pub fn mod_mersenne61(x: u64) -> u64 {
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
}

impl Scheme {
    pub fn parse(name: &str) -> Option<Scheme> {
        match name {
            "affine32" => Some(Scheme::Affine32),
            "legacy" => Some(Scheme::Legacy),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scheme::Affine32 => "affine32",
            Scheme::Legacy => "legacy",
        }
    }
}

/// Permutation parameters of one scheme.
#[derive(Debug, Clone)]
pub enum Permutations {
    Affine32 { a: Vec<u32>, b: Vec<u32> },
    Legacy { a: Vec<u64>, b: Vec<u64> },
}

impl Permutations {
    /// Validates and converts the (a, b) parameters computed by Python.
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
        }
    }

    pub fn num_perm(&self) -> usize {
        match self {
            Permutations::Affine32 { a, .. } => a.len(),
            Permutations::Legacy { a, .. } => a.len(),
        }
    }

    pub fn scheme(&self) -> Scheme {
        match self {
            Permutations::Affine32 { .. } => Scheme::Affine32,
            Permutations::Legacy { .. } => Scheme::Legacy,
        }
    }

    /// `sig[k] = min(sig[k], phv_k(h))` for every shingle hash `h`.
    pub fn update(&self, hashes: &[u32], sig: &mut [u32]) {
        match self {
            Permutations::Affine32 { a, b } => update_affine32(a, b, hashes, sig),
            Permutations::Legacy { a, b } => update_legacy(a, b, hashes, sig),
        }
    }
}

#[inline(always)]
fn affine32_body(a: &[u32], b: &[u32], hashes: &[u32], sig: &mut [u32]) {
    let k = sig.len();
    let (a, b) = (&a[..k], &b[..k]);
    // Four hashes per pass over the signature: a quarter of the loads/stores of
    // `sig`, `a` and `b`; each inner loop is a plain slice loop LLVM vectorizes.
    let mut chunks = hashes.chunks_exact(4);
    for c in &mut chunks {
        let (h0, h1, h2, h3) = (fmix32(c[0]), fmix32(c[1]), fmix32(c[2]), fmix32(c[3]));
        for ((s, &ak), &bk) in sig.iter_mut().zip(a).zip(b) {
            let v0 = ak.wrapping_mul(h0).wrapping_add(bk);
            let v1 = ak.wrapping_mul(h1).wrapping_add(bk);
            let v2 = ak.wrapping_mul(h2).wrapping_add(bk);
            let v3 = ak.wrapping_mul(h3).wrapping_add(bk);
            *s = (*s).min(v0.min(v1)).min(v2.min(v3));
        }
    }
    for &h in chunks.remainder() {
        let h = fmix32(h);
        for ((s, &ak), &bk) in sig.iter_mut().zip(a).zip(b) {
            *s = (*s).min(ak.wrapping_mul(h).wrapping_add(bk));
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn affine32_avx2(a: &[u32], b: &[u32], hashes: &[u32], sig: &mut [u32]) {
    affine32_body(a, b, hashes, sig)
}

/// The same loop compiled for AVX-512 (16 lanes of vpmulld/vpaddd/vpminud).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn affine32_avx512(a: &[u32], b: &[u32], hashes: &[u32], sig: &mut [u32]) {
    affine32_body(a, b, hashes, sig)
}

fn affine32_generic(a: &[u32], b: &[u32], hashes: &[u32], sig: &mut [u32]) {
    affine32_body(a, b, hashes, sig)
}

/// The widest kernel this CPU runs (detected once): "avx512", "avx2" or "generic".
pub fn simd_backend() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "avx512";
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return "avx2";
        }
    }
    "generic"
}

/// affine32 update: AVX-512 or AVX2 when the CPU has it (detected at run
/// time, so one wheel runs everywhere), else portable code.
pub fn update_affine32(a: &[u32], b: &[u32], hashes: &[u32], sig: &mut [u32]) {
    assert!(a.len() >= sig.len() && b.len() >= sig.len());
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            unsafe { affine32_avx512(a, b, hashes, sig) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            unsafe { affine32_avx2(a, b, hashes, sig) };
            return;
        }
    }
    affine32_generic(a, b, hashes, sig)
}

#[inline(always)]
fn legacy_body(a: &[u64], b: &[u64], hashes: &[u32], sig: &mut [u32]) {
    let k = sig.len();
    let (a, b) = (&a[..k], &b[..k]);
    for &h in hashes {
        let h = u64::from(h);
        for ((s, &ak), &bk) in sig.iter_mut().zip(a).zip(b) {
            let v = (mod_mersenne61(ak.wrapping_mul(h).wrapping_add(bk)) & 0xFFFF_FFFF) as u32;
            *s = (*s).min(v);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn legacy_avx2(a: &[u64], b: &[u64], hashes: &[u32], sig: &mut [u32]) {
    legacy_body(a, b, hashes, sig)
}

/// legacy update, AVX2 when the CPU has it.
pub fn update_legacy(a: &[u64], b: &[u64], hashes: &[u32], sig: &mut [u32]) {
    assert!(a.len() >= sig.len() && b.len() >= sig.len());
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            unsafe { legacy_avx2(a, b, hashes, sig) };
            return;
        }
    }
    legacy_body(a, b, hashes, sig)
}

/// A direct-mapped table of short shingles (<= 16 bytes), kept across the
/// documents a `MinHasher` processes. Each entry holds the shingle by value
/// (two zero-padded words and its length), its `sha1_hash32`, and the stamp of
/// the last document that emitted it. One lookup per shingle both drops
/// repeats within a document (stamp = this document) and reuses the SHA-1 of
/// a word seen in an earlier document (a corpus's vocabulary repeats).
///
/// Exactness: a signature is the minimum over the hashes emitted for a
/// document. Every distinct shingle is emitted at least once (its first
/// occurrence either misses, or hits an entry whose stamp is an older
/// document), with its own SHA-1 (entries are compared by value). A shingle
/// may be emitted more than once when two shingles of a document evict each
/// other from one entry; a repeated value cannot change a minimum.
#[derive(Debug, Clone)]
struct WordTable {
    entries: Vec<WordEntry>,
    stamp: u32,
}

#[derive(Debug, Clone, Copy, Default)]
#[repr(align(32))]
struct WordEntry {
    a: u64,
    b: u64,
    /// length + 1; 0 = empty entry.
    len1: u32,
    hash: u32,
    stamp: u32,
    /// `hash` is filled in (a claimed entry waits for the document's SHA-1 batch).
    ready: bool,
}

const WORD_BITS: u32 = 15;
/// Prefetch distance of the word-table probes, in shingles.
const PREFETCH_AHEAD: usize = 16;

thread_local! {
    /// One word table per thread, kept across calls: SHA-1 of a word does not
    /// depend on any parameter, and stamps are unique per document per thread,
    /// so a Spark task's Python worker keeps its vocabulary warm from one Arrow
    /// batch to the next.
    static WORDS: std::cell::RefCell<WordTable> = std::cell::RefCell::new(WordTable::new());
}

impl WordTable {
    fn new() -> Self {
        WordTable { entries: Vec::new(), stamp: 0 }
    }

    /// Starts a new document.
    fn next_document(&mut self) {
        if self.entries.is_empty() {
            self.entries = vec![WordEntry::default(); 1 << WORD_BITS];
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // Wrapped after 2^32 documents: forget every stamp once.
            self.entries.iter_mut().for_each(|e| e.stamp = 0);
            self.stamp = 1;
        }
    }
}

#[inline(always)]
fn prefetch_entry(entries: &[WordEntry], slot: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(e) = entries.get(slot) {
            // SAFETY: prefetch has no architectural effect; the address is in bounds.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((e as *const WordEntry).cast::<i8>())
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (entries, slot);
    }
}

/// Empties this thread's word table (benchmarks use it to time a cold start).
pub fn reset_word_table() {
    WORDS.with(|w| *w.borrow_mut() = WordTable::new());
}

/// Computes signatures document by document, reusing its buffers.
#[derive(Debug, Clone)]
pub struct MinHasher {
    perms: Permutations,
    shingler: Shingler,
    distinct: DistinctSet,
    hashes: Vec<u32>,
    /// Shingles of this document that missed the word table: (a, b, len, slot).
    pending: Vec<(u64, u64, u32, u32)>,
    scratch: Vec<u32>,
    /// This document's short shingles: (a, b, len, slot).
    keys: Vec<(u64, u64, u32, u32)>,
}

impl MinHasher {
    pub fn new(perms: Permutations, ngram: usize, flags: u32) -> Self {
        MinHasher {
            perms,
            shingler: Shingler::new(ngram, flags),
            distinct: DistinctSet::new(),
            hashes: Vec::new(),
            pending: Vec::new(),
            scratch: Vec::new(),
            keys: Vec::new(),
        }
    }

    pub fn num_perm(&self) -> usize {
        self.perms.num_perm()
    }

    /// Writes the signature of `text` (`None` = null document) into `sig`
    /// (length `num_perm`). Returns whether the document had any shingle; if
    /// not, `sig` is all `u32::MAX`.
    pub fn signature(&mut self, text: Option<&str>, sig: &mut [u32]) -> bool {
        assert_eq!(sig.len(), self.perms.num_perm());
        sig.fill(u32::MAX);
        let Some(text) = text else { return false };
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

    /// The hash of every distinct shingle of `text` into `self.hashes` (some
    /// possibly more than once, see [`WordTable`]).
    fn emit_hashes(&mut self, text: &str, words: &mut WordTable) {
        let MinHasher { shingler, distinct, hashes, pending, scratch, keys, .. } = self;
        distinct.clear();
        hashes.clear();
        pending.clear();
        words.next_document();
        let stamp = words.stamp;
        let entries = &mut words.entries;
        let mask = (1usize << WORD_BITS) - 1;
        // Pass 1: the document's short shingles as (a, b, len, slot). The
        // table is larger than L2, so pass 2 probes with software prefetch.
        keys.clear();
        shingler.for_each_span(text, |buf, s, e| {
            let n = e - s;
            if n > 16 {
                distinct.insert(&buf[s..e]);
                return;
            }
            let (a, b) = if s + 16 <= buf.len() {
                let (m0, m1) = MASKS[n];
                (read_u64(buf, s) & m0, read_u64(buf, s + 8) & m1)
            } else {
                let mut pad = [0u8; 16];
                pad[..n].copy_from_slice(&buf[s..e]);
                (read_u64(&pad, 0), read_u64(&pad, 8))
            };
            let slot = (short_fp(a, b, n) >> (64 - WORD_BITS)) as usize & mask;
            keys.push((a, b, n as u32, slot as u32));
        });
        // Pass 2, prefetching PREFETCH_AHEAD shingles ahead: the line arrives
        // about when it is needed and is still in L1 then.
        for &(_, _, _, slot) in keys.iter().take(PREFETCH_AHEAD) {
            prefetch_entry(entries, slot as usize);
        }
        // Hits are the common case and whether a hit is this document's
        // first sight of the word is unpredictable: emit branch-free into a
        // buffer sized for the worst case, then truncate.
        let base = hashes.len();
        hashes.resize(base + keys.len(), 0);
        let mut count = base;
        for (i, &(a, b, n, slot)) in keys.iter().enumerate() {
            if let Some(&(_, _, _, ahead)) = keys.get(i + PREFETCH_AHEAD) {
                prefetch_entry(entries, ahead as usize);
            }
            let (n, slot) = (n as usize, slot as usize);
            let entry = &mut entries[slot];
            if entry.a == a && entry.b == b && entry.len1 == n as u32 + 1 {
                let fresh = entry.stamp != stamp;
                entry.stamp = stamp;
                hashes[count] = entry.hash;
                count += usize::from(fresh & entry.ready);
                if fresh & !entry.ready {
                    pending.push((a, b, n as u32, slot as u32));
                }
            } else {
                // Claim the entry now (so repeats in this document are
                // dropped); its hash is filled in below.
                *entry = WordEntry { a, b, len1: n as u32 + 1, hash: 0, stamp, ready: false };
                pending.push((a, b, n as u32, slot as u32));
            }
        }
        hashes.truncate(count);
        if !pending.is_empty() {
            scratch.clear();
            let msgs: Vec<[u8; 16]> = pending
                .iter()
                .map(|&(a, b, _, _)| {
                    let mut m = [0u8; 16];
                    m[..8].copy_from_slice(&a.to_le_bytes());
                    m[8..].copy_from_slice(&b.to_le_bytes());
                    m
                })
                .collect();
            sha1_hash32_many(msgs.iter().zip(pending.iter()).map(|(m, p)| &m[..p.2 as usize]), scratch);
            for (&(a, b, n, slot), &h) in pending.iter().zip(scratch.iter()) {
                hashes.push(h);
                let entry = &mut entries[slot as usize];
                if entry.a == a && entry.b == b && entry.len1 == n + 1 {
                    entry.hash = h;
                    entry.ready = true;
                }
            }
        }
        if !distinct.is_empty() {
            sha1_hash32_many(distinct.iter(), hashes);
        }
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
mod tests {
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

    fn naive_affine(a: &[u32], b: &[u32], hashes: &[u32]) -> Vec<u32> {
        let mut sig = vec![u32::MAX; a.len()];
        for &h in hashes {
            let h = fmix32(h);
            for k in 0..a.len() {
                sig[k] = sig[k].min(a[k].wrapping_mul(h).wrapping_add(b[k]));
            }
        }
        sig
    }

    fn lcg(state: &mut u64) -> u64 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *state >> 11
    }

    #[test]
    fn affine32_matches_naive_for_all_remainders() {
        let mut st = 7u64;
        for k in [1usize, 7, 8, 9, 128, 256, 257] {
            let a: Vec<u32> = (0..k).map(|_| (lcg(&mut st) as u32) | 1).collect();
            let b: Vec<u32> = (0..k).map(|_| lcg(&mut st) as u32).collect();
            for nh in 0..10 {
                let hashes: Vec<u32> = (0..nh).map(|_| lcg(&mut st) as u32).collect();
                let mut sig = vec![u32::MAX; k];
                update_affine32(&a, &b, &hashes, &mut sig);
                assert_eq!(sig, naive_affine(&a, &b, &hashes));
                let mut sig2 = vec![u32::MAX; k];
                affine32_generic(&a, &b, &hashes, &mut sig2);
                assert_eq!(sig2, sig);
                #[cfg(target_arch = "x86_64")]
                {
                    if std::arch::is_x86_feature_detected!("avx2") {
                        let mut s3 = vec![u32::MAX; k];
                        // SAFETY: AVX2 present (checked).
                        unsafe { affine32_avx2(&a, &b, &hashes, &mut s3) };
                        assert_eq!(s3, sig);
                    }
                    if std::arch::is_x86_feature_detected!("avx512f") {
                        let mut s4 = vec![u32::MAX; k];
                        // SAFETY: AVX-512F present (checked).
                        unsafe { affine32_avx512(&a, &b, &hashes, &mut s4) };
                        assert_eq!(s4, sig);
                    }
                }
            }
        }
    }

    #[test]
    fn legacy_matches_u128_arithmetic() {
        let mut st = 99u64;
        let k = 33;
        let a: Vec<u64> = (0..k).map(|_| 1 + lcg(&mut st) % (MERSENNE61 - 1)).collect();
        let b: Vec<u64> = (0..k).map(|_| lcg(&mut st) % MERSENNE61).collect();
        let hashes: Vec<u32> = (0..17).map(|_| lcg(&mut st) as u32).chain([0, u32::MAX]).collect();
        let mut sig = vec![u32::MAX; k];
        update_legacy(&a, &b, &hashes, &mut sig);
        for kk in 0..k {
            let expect = hashes
                .iter()
                .map(|&h| {
                    let x = (u128::from(a[kk]) * u128::from(h) + u128::from(b[kk])) % (1u128 << 64);
                    ((x % u128::from(MERSENNE61)) & 0xFFFF_FFFF) as u32
                })
                .min()
                .unwrap();
            assert_eq!(sig[kk], expect);
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
    fn cached_hashes_equal_sha1_across_documents() {
        // Many documents sharing a vocabulary (cache hits), words of every
        // length 1..=30 (short and long keys), and cache-slot collisions.
        let vocab: Vec<String> = (0..5000).map(|i| "x".repeat(1 + i % 30) + &format!("{i}")).collect();
        let perms = Permutations::new(Scheme::Affine32, &[1, 3, 5, 7], &[9, 1, 2, 3]).unwrap();
        let mut mh = MinHasher::new(perms, 1, 0);
        let mut st = 5u64;
        for _ in 0..50 {
            let doc: Vec<&str> = (0..300).map(|_| vocab[(lcg(&mut st) % 5000) as usize].as_str()).collect();
            let text = doc.join(" ");
            let mut sig = vec![0u32; 4];
            mh.signature(Some(&text), &mut sig);
            let mut words: Vec<&str> = doc.clone();
            words.sort_unstable();
            words.dedup();
            let hashes: Vec<u32> = words.iter().map(|w| sha1_hash32(w.as_bytes())).collect();
            assert_eq!(sig, naive_affine(&[1, 3, 5, 7], &[9, 1, 2, 3], &hashes));
        }
    }

    #[test]
    fn word_table_evictions_keep_signatures_exact() {
        // Documents of 6000 distinct short words out of 300k: many pairs share
        // a table entry within one document and evict each other; words are
        // repeated in different orders; long (> 16 byte) words mixed in.
        let vocab: Vec<String> = (0..300_000u32)
            .map(|i| if i % 97 == 0 { format!("long-word-number-{i:08}") } else { format!("w{i}") })
            .collect();
        let a: Vec<u64> = (0..8).map(|i| 2 * i + 1).collect();
        let b: Vec<u64> = (0..8).map(|i| 3 * i + 7).collect();
        let a32: Vec<u32> = a.iter().map(|&x| x as u32).collect();
        let b32: Vec<u32> = b.iter().map(|&x| x as u32).collect();
        let mut mh = MinHasher::new(Permutations::new(Scheme::Affine32, &a, &b).unwrap(), 1, 0);
        let mut st = 77u64;
        for _ in 0..6 {
            let mut doc: Vec<&str> = (0..6000).map(|_| vocab[(lcg(&mut st) % 300_000) as usize].as_str()).collect();
            let again: Vec<&str> = doc.iter().rev().copied().collect();
            doc.extend(again);
            let mut sig = vec![0u32; 8];
            assert!(mh.signature(Some(&doc.join(" ")), &mut sig));
            let mut words = doc.clone();
            words.sort_unstable();
            words.dedup();
            let hashes: Vec<u32> = words.iter().map(|w| sha1_hash32(w.as_bytes())).collect();
            assert_eq!(sig, naive_affine(&a32, &b32, &hashes));
        }
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
