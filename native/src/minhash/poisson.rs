//! The `poisson` scheme: k independent MinHash values in O(shingles + k log k).
//!
//! Each shingle `x` (its xxh3-64 under the seed) drives a Poisson process of
//! rate `k` on `[0, ∞)` whose arrivals carry independent uniform marks in
//! `0..k` (the bins). By Poisson splitting, the arrivals marked `j` form k
//! independent rate-1 processes, so the first arrival of `x` in bin `j` is an
//! Exp(1) value independent across bins and shingles: row `j` of a signature,
//! the minimum over the document's shingles of their first arrival in bin `j`,
//! is distributed exactly as the minimum of one of k independent random hash
//! functions. Hence `P[sig_j(A) = sig_j(B)] = J(A, B)` for every row and the
//! rows are independent: a band of `r` rows matches with probability `J^r`
//! whatever the document sizes (unlike densified one-permutation hashing,
//! whose copied bins correlate a band's rows for documents with few shingles).
//!
//! Cost: a row's minimum over `n` shingles is Exp(n), and all k rows are
//! below `H = (ln k + c) / n` with probability `exp(-e^-c)`, so only arrivals
//! before `H` are drawn: a shingle whose first arrival is later costs one
//! draw and a comparison, and all shingles together have about
//! `n k H = k (ln k + c)` arrivals before `H`. While `e` rows are still empty,
//! `H` grows by `(ln e + c') / n` and every stream resumes where it paused.
//! Since every shingle's arrivals are a fixed function of its hash, the result
//! does not depend on `H` (nor on `n`, repeats or order): every arrival below
//! the final `H` is applied, and every row's value is below it.
//!
//! Values are the arrival times (in units of 1/k) rounded to `f32`, as their bit patterns
//! (monotone for positive floats), so `u32::MAX` (no shingle) stays above all.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::exponential::exponential;

/// A row with no arrival yet.
const EMPTY: u32 = u32::MAX;
/// Added to `ln k` in the first horizon: every row is filled by then with
/// probability `exp(-e^-c)` = 0.69; the rest resume their walks.
const FIRST_SLACK: f64 = 1.0;
/// Added to `ln e` when `e` rows are still empty: filled by then with
/// probability `exp(-e^-c)` = 0.87.
const NEXT_SLACK: f64 = 2.0;

/// SplitMix64: the arrival stream of one shingle, seeded by its hash.
#[inline(always)]
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The next arrival of a stream: its random word (whose high bits pick the
/// bin) and its Exp(1) gap (from the low bits, and more words when the
/// ziggurat rejects).
#[inline(always)]
fn next_arrival(state: &mut u64) -> (u64, f64) {
    let r = next_random(state);
    let gap = exponential(r, &mut || next_random(state));
    (r, gap)
}

/// The bin of a random word: its high 32 bits scaled to `0..k`.
#[inline(always)]
fn bin(r: u64, k: usize) -> usize {
    (((r >> 32) * k as u64) >> 32) as usize
}

/// The `poisson` signature of `k` rows under a 64-bit seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoissonSketch {
    k: usize,
    seed: u64,
}

impl PoissonSketch {
    pub fn new(k: usize, seed: u64) -> Self {
        assert!(k >= 1, "k must be >= 1");
        PoissonSketch { k, seed }
    }

    pub fn num_perm(&self) -> usize {
        self.k
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The 64-bit hash of one shingle (xxh3 of its UTF-8 bytes).
    #[inline(always)]
    pub fn shingle_hash(&self, shingle: &[u8]) -> u64 {
        xxh3_64_with_seed(shingle, self.seed)
    }

    /// The signature of the shingles whose hashes are `hashes` (repeats
    /// allowed) into `sig` (length k): all `u32::MAX` when `hashes` is empty.
    /// `walks` is scratch space (the paused streams of the active shingles).
    pub fn sketch(&self, hashes: &[u64], sig: &mut [u32], walks: &mut Vec<Walk>) {
        assert_eq!(sig.len(), self.k);
        sig.fill(EMPTY);
        walks.clear();
        if hashes.is_empty() {
            return;
        }
        // Times are scaled by k (Exp(1) gaps, not Exp(1)/k): a real horizon H
        // is `end = k H`. Each row receives a shingle's arrivals at rate 1 in
        // real time, so n shingles fill an empty row within (ln e + c)/n with
        // e rows empty with probability exp(-e^-c).
        let (k, kf, n) = (self.k, self.k as f64, hashes.len() as f64);
        let mut end = kf * (kf.ln() + FIRST_SLACK) / n;
        let mut filled = 0usize;
        // Only the streams with an arrival before `end` are kept (about
        // k (ln k + 1) of them at most): the others restart from their hash.
        for &h in hashes {
            let mut walk = Walk::start(h);
            if walk.t < end {
                filled += walk.advance(end, k, sig);
                walks.push(walk);
            }
        }
        while filled < k {
            let before = end;
            end += kf * (((k - filled) as f64).ln() + NEXT_SLACK) / n;
            // Kept streams resume where they paused, streams whose first
            // arrival falls in [before, end) start: no arrival is drawn twice.
            for walk in walks.iter_mut() {
                filled += walk.advance(end, k, sig);
            }
            for &h in hashes {
                let mut walk = Walk::start(h);
                if walk.t >= before && walk.t < end {
                    filled += walk.advance(end, k, sig);
                    walks.push(walk);
                }
            }
        }
    }
}

/// One shingle's arrival stream, paused at its first arrival not yet applied.
#[derive(Debug, Clone, Copy)]
pub struct Walk {
    state: u64,
    /// The pending arrival's random word (its high bits are its row).
    r: u64,
    /// The pending arrival's time, scaled by k.
    t: f64,
}

impl Walk {
    #[inline(always)]
    fn start(h: u64) -> Walk {
        let mut state = h;
        let (r, t) = next_arrival(&mut state);
        Walk { state, r, t }
    }

    /// Applies every arrival before `end` to `sig`; returns how many rows it
    /// filled for the first time.
    #[inline(always)]
    fn advance(&mut self, end: f64, k: usize, sig: &mut [u32]) -> usize {
        let Walk { mut state, mut r, mut t } = *self;
        let mut filled = 0;
        while t < end {
            let slot = &mut sig[bin(r, k)];
            filled += usize::from(*slot == EMPTY);
            *slot = (*slot).min((t as f32).to_bits());
            let (r2, gap) = next_arrival(&mut state);
            r = r2;
            t += gap;
        }
        *self = Walk { state, r, t };
        filled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sketch_of(p: &PoissonSketch, hashes: &[u64]) -> Vec<u32> {
        let mut sig = vec![0u32; p.num_perm()];
        p.sketch(hashes, &mut sig, &mut Vec::new());
        sig
    }

    /// The reference: every shingle's first arrival in every bin, walked until
    /// each bin has one (no horizon at all), then the minimum per bin.
    fn naive(p: &PoissonSketch, hashes: &[u64]) -> Vec<u32> {
        let k = p.num_perm();
        let mut sig = vec![EMPTY; k];
        for &h in hashes {
            let mut first = vec![EMPTY; k];
            let mut left = k;
            let mut state = h;
            let mut t = 0.0f64;
            while left > 0 {
                let (r, gap) = next_arrival(&mut state);
                t += gap;
                let j = bin(r, k);
                if first[j] == EMPTY {
                    first[j] = (t as f32).to_bits();
                    left -= 1;
                }
            }
            for j in 0..k {
                sig[j] = sig[j].min(first[j]);
            }
        }
        sig
    }

    fn hashes(p: &PoissonSketch, n: usize, base: usize) -> Vec<u64> {
        (base..base + n).map(|i| p.shingle_hash(format!("shingle {i}").as_bytes())).collect()
    }

    #[test]
    fn equals_the_walk_without_horizon() {
        for k in [1usize, 2, 7, 64, 300] {
            let p = PoissonSketch::new(k, 42);
            for n in [1usize, 2, 5, 50, 1000] {
                let hs = hashes(&p, n, 0);
                assert_eq!(sketch_of(&p, &hs), naive(&p, &hs), "k={k} n={n}");
            }
        }
        // Many documents, so that some fill every row in the first horizon
        // and others need one or more extensions.
        let p = PoissonSketch::new(64, 5);
        for base in 0..60 {
            let hs = hashes(&p, 1 + base % 40, 1000 * base);
            assert_eq!(sketch_of(&p, &hs), naive(&p, &hs), "base={base}");
        }
    }

    #[test]
    fn empty_is_max_and_repeats_and_order_do_not_matter() {
        let p = PoissonSketch::new(16, 7);
        assert_eq!(sketch_of(&p, &[]), vec![u32::MAX; 16]);
        let hs = hashes(&p, 40, 0);
        let mut again: Vec<u64> = hs.iter().rev().copied().collect();
        again.extend(hs.iter().copied().take(30));
        assert_eq!(sketch_of(&p, &hs), sketch_of(&p, &again));
        assert!(sketch_of(&p, &hs).iter().all(|&v| v != EMPTY));
    }

    #[test]
    fn row_of_a_union_is_the_min_of_the_rows() {
        // The defining property of a MinHash row, whatever the horizon each
        // document's size picked.
        let p = PoissonSketch::new(128, 3);
        let a = hashes(&p, 10, 0);
        let b = hashes(&p, 3000, 5);
        let union: Vec<u64> = a.iter().chain(&b).copied().collect();
        let (sa, sb, su) = (sketch_of(&p, &a), sketch_of(&p, &b), sketch_of(&p, &union));
        for j in 0..128 {
            assert_eq!(su[j], sa[j].min(sb[j]));
        }
    }

    #[test]
    fn seed_changes_the_hash() {
        let (p1, p2) = (PoissonSketch::new(8, 1), PoissonSketch::new(8, 2));
        assert_ne!(p1.shingle_hash(b"a b c d"), p2.shingle_hash(b"a b c d"));
        assert_eq!(p1.shingle_hash(b"a b c d"), xxh3_64_with_seed(b"a b c d", 1));
    }

    #[test]
    fn matching_rows_estimate_jaccard() {
        // Sets of 30 shingles (fewer than k) sharing 20: J = 20/40.
        let p = PoissonSketch::new(4096, 9);
        let a = hashes(&p, 30, 0);
        let b = hashes(&p, 30, 10);
        let (sa, sb) = (sketch_of(&p, &a), sketch_of(&p, &b));
        let matches = sa.iter().zip(&sb).filter(|(x, y)| x == y).count() as f64 / 4096.0;
        // sd = sqrt(0.25 / 4096) = 0.0078: 5 sd.
        assert!((matches - 0.5).abs() < 0.04, "{matches}");
    }
}
