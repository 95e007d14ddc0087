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

use super::exponential::{exponential, exponential_fast};
// SplitMix64: the arrival stream of one shingle, seeded by its hash.
use crate::hash::splitmix::next as next_random;
#[cfg(target_arch = "x86_64")]
use super::poisson_avx512::{self, Avx512, WideWalks};

/// A row with no arrival yet.
pub(super) const EMPTY: u32 = u32::MAX;
/// Added to `ln k` in the first horizon: every row is filled by then with
/// probability `exp(-e^-c)` = 0.69; the rest resume their walks.
const FIRST_SLACK: f64 = 1.0;
/// Added to `ln e` when `e` rows are still empty: filled by then with
/// probability `exp(-e^-c)` = 0.87.
const NEXT_SLACK: f64 = 2.0;

/// The next arrival of a stream: its random word (whose high bits pick the
/// bin) and its Exp(1) gap (from the low bits, and more words when the
/// ziggurat rejects).
#[inline(always)]
fn next_arrival(state: &mut u64) -> (u64, f64) {
    let r = next_random(state);
    let gap = match exponential_fast(r) {
        Some(gap) => gap,
        None => {
            let (gap, after) = rejected_gap(r, *state);
            *state = after;
            gap
        }
    };
    (r, gap)
}

/// The ziggurat's rejection path, outlined and taking the state by value so
/// that the hot loops never take its address (which would keep it in memory).
#[cold]
#[inline(never)]
pub(super) fn rejected_gap(r: u64, mut state: u64) -> (f64, u64) {
    let gap = exponential(r, &mut || next_random(&mut state));
    (gap, state)
}

/// The bin of a random word: its high 32 bits scaled to `0..k`.
#[inline(always)]
pub(super) fn bin(r: u64, k: usize) -> usize {
    (((r >> 32) * k as u64) >> 32) as usize
}

/// The `poisson` signature of `k` rows under a 64-bit seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoissonSketch {
    k: usize,
    seed: u64,
}

impl PoissonSketch {
    pub(crate) fn new(k: usize, seed: u64) -> Self {
        assert!(k >= 1, "k must be >= 1");
        PoissonSketch { k, seed }
    }

    pub(crate) fn num_perm(&self) -> usize {
        self.k
    }

    /// The 64-bit hash of one shingle (xxh3 of its UTF-8 bytes).
    #[inline(always)]
    pub(crate) fn shingle_hash(&self, shingle: &[u8]) -> u64 {
        xxh3_64_with_seed(shingle, self.seed)
    }

    /// The signature of the shingles whose hashes are `hashes` (repeats
    /// allowed) into `sig` (length k): all `u32::MAX` when `hashes` is empty.
    /// `walks` is scratch space (the paused arrival streams). Runs the
    /// AVX-512 kernel when the CPU has it (bit-identical to the scalar code).
    pub(crate) fn sketch(&self, hashes: &[u64], sig: &mut [u32], walks: &mut Walks) {
        self.sketch_on(Path::detect(), hashes, sig, walks)
    }

    /// [`Self::sketch`] on the given implementation.
    pub(crate) fn sketch_on(&self, path: Path, hashes: &[u64], sig: &mut [u32], walks: &mut Walks) {
        assert_eq!(sig.len(), self.k);
        sig.fill(EMPTY);
        if hashes.is_empty() {
            return;
        }
        match path {
            // The kernel's bins multiply by k as a 32-bit lane (`vpmuludq`).
            #[cfg(target_arch = "x86_64")]
            Path::Avx512(cpu) if u32::try_from(self.k).is_ok() => {
                self.run(hashes, sig, &mut poisson_avx512::Kernel::new(&mut walks.wide, cpu))
            }
            _ => self.run(hashes, sig, walks),
        }
    }

    /// [`Self::sketch`] on `hashes` (not empty), `sig` all empty: the horizon
    /// loop, on the distinct hashes when repeats are most of them.
    ///
    /// Copies of one shingle walk the same stream, so the horizons, set by
    /// the number of hashes, are too short for the distinct ones: the first
    /// fills fewer than half the rows (n distinct hashes fill all but
    /// `1 / e` of them on average) and the loop would then take steps of
    /// `1 / n` through `~ln k` of time with all `n` streams walked each step
    /// (one character repeated 2^18 times: 185 s). Such a document is
    /// sketched again over its distinct hashes (sorted), with the same
    /// result: a signature does not depend on repeats or on the horizons.
    fn run(&self, hashes: &[u64], sig: &mut [u32], walks: &mut impl Streams) {
        if !self.horizons(hashes, sig, walks, true) {
            let mut distinct = hashes.to_vec();
            distinct.sort_unstable();
            distinct.dedup();
            sig.fill(EMPTY);
            self.horizons(&distinct, sig, walks, false);
        }
    }

    /// The horizon loop over `hashes` into `sig`; false, with `sig` partly
    /// filled, when `may_decline` and the first horizon filled fewer than
    /// half the rows (see [`Self::run`]).
    fn horizons(&self, hashes: &[u64], sig: &mut [u32], walks: &mut impl Streams, may_decline: bool) -> bool {
        // Times are scaled by k (Exp(1) gaps, not Exp(1)/k): a real horizon H
        // is `end = k H`. Each row receives a shingle's arrivals at rate 1 in
        // real time, so n shingles fill an empty row within (ln e + c)/n with
        // e rows empty with probability exp(-e^-c).
        let (k, kf, n) = (self.k, self.k as f64, hashes.len() as f64);
        let mut end = kf * (kf.ln() + FIRST_SLACK) / n;
        walks.start(hashes, end, k);
        let mut filled = walks.apply(end, k, sig);
        if may_decline && 2 * filled < k {
            return false;
        }
        while filled < k {
            end += kf * (((k - filled) as f64).ln() + NEXT_SLACK) / n;
            // Paused streams resume where they paused: no arrival is drawn twice.
            walks.resume(end);
            filled += walks.apply(end, k, sig);
        }
        true
    }
}

/// An implementation of [`PoissonSketch::sketch`]'s arrival streams.
///
/// The horizon loop drives both the scalar [`Walks`] and the AVX-512 kernel.
pub(super) trait Streams {
    /// Starts the stream of every hash: those with a first arrival before
    /// `end` are active, the others wait.
    fn start(&mut self, hashes: &[u64], end: f64, k: usize);
    /// Moves the waiting streams with an arrival before `end` to the active ones.
    fn resume(&mut self, end: f64);
    /// Applies every arrival before `end` of the active streams to `sig`,
    /// pausing each stream at its first arrival from `end` on. Returns how
    /// many rows it filled for the first time.
    fn apply(&mut self, end: f64, k: usize, sig: &mut [u32]) -> usize;
}

/// Which implementation [`PoissonSketch::sketch_on`] runs (tests pick each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx512(Avx512),
}

impl Path {
    /// The fastest this CPU runs, detected at run time.
    pub(crate) fn detect() -> Path {
        #[cfg(target_arch = "x86_64")]
        if let Some(cpu) = Avx512::detect() {
            return Path::Avx512(cpu);
        }
        Path::Scalar
    }
}

/// Scratch space of [`PoissonSketch::sketch`]: every stream of a document,
/// split into those paused at or after the horizon and those with an
/// arrival before it.
///
/// Which arrivals fall before the horizon is unpredictable (about half the
/// shingles have one, a Bernoulli draw each), so the streams are moved
/// between the two lists branch-free (each stream is written to both and
/// only one list's length grows) and applied in rounds; a signature row is a
/// minimum, so the order in which arrivals are applied does not matter.
#[derive(Debug, Clone, Default)]
pub(crate) struct Walks {
    /// `waiting[..nw]`: streams paused at or after the horizon.
    waiting: Vec<Walk>,
    /// `active[..na]`: streams with an arrival before the horizon.
    active: Vec<Walk>,
    nw: usize,
    na: usize,
    /// The same lists for the AVX-512 kernel (structure-of-arrays).
    #[cfg(target_arch = "x86_64")]
    wide: WideWalks,
}

/// Appends `walk` to `to_a[*a..]` when `due`, else to `to_w[*w..]`, without
/// a branch: it is written to both and only one length grows.
#[inline(always)]
fn sort_walk(walk: Walk, due: bool, to_w: &mut [Walk], w: &mut usize, to_a: &mut [Walk], a: &mut usize) {
    to_w[*w] = walk;
    to_a[*a] = walk;
    *w += usize::from(!due);
    *a += usize::from(due);
}

impl Streams for Walks {
    fn start(&mut self, hashes: &[u64], end: f64, _k: usize) {
        let n = hashes.len();
        // Both lists hold at most every stream; they only grow (no per-document fill).
        if self.waiting.len() < n {
            self.waiting.resize(n, Walk::default());
            self.active.resize(n, Walk::default());
        }
        let (waiting, active) = (&mut self.waiting[..n], &mut self.active[..n]);
        let (mut w, mut a) = (0, 0);
        for &h in hashes {
            let walk = Walk::start(h);
            sort_walk(walk, walk.t < end, waiting, &mut w, active, &mut a);
        }
        (self.nw, self.na) = (w, a);
    }

    /// Compacts `waiting` in place: its write index never passes the read one.
    fn resume(&mut self, end: f64) {
        let (mut w, mut a) = (0, self.na);
        let (waiting, active) = (&mut self.waiting[..], &mut self.active[..]);
        for i in 0..self.nw {
            let walk = waiting[i];
            sort_walk(walk, walk.t < end, waiting, &mut w, active, &mut a);
        }
        (self.nw, self.na) = (w, a);
    }

    /// A round at a time (one arrival per stream).
    fn apply(&mut self, end: f64, k: usize, sig: &mut [u32]) -> usize {
        let mut filled = 0;
        let (waiting, active) = (&mut self.waiting[..], &mut self.active[..]);
        let (mut w, mut n) = (self.nw, self.na);
        while n > 0 {
            // In place: the active write index never passes the read one.
            let mut a = 0;
            for i in 0..n {
                let mut walk = active[i];
                filled += walk.step(k, sig);
                sort_walk(walk, walk.t < end, waiting, &mut w, active, &mut a);
            }
            n = a;
        }
        (self.nw, self.na) = (w, 0);
        filled
    }
}

/// One shingle's arrival stream, paused at its first arrival not yet applied.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Walk {
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

    /// Applies the pending arrival to `sig` and draws the next; returns
    /// whether it filled its row for the first time.
    #[inline(always)]
    fn step(&mut self, k: usize, sig: &mut [u32]) -> usize {
        let slot = &mut sig[bin(self.r, k)];
        let filled = usize::from(*slot == EMPTY);
        *slot = (*slot).min((self.t as f32).to_bits());
        let (r, gap) = next_arrival(&mut self.state);
        self.r = r;
        self.t += gap;
        filled
    }
}

#[cfg(test)]
#[path = "poisson_tests.rs"]
mod tests;
