//! The `poisson` sketch's arrival streams eight at a time on AVX-512, picked
//! at run time (see [`Avx512::detect`]); the scalar `Walks` stay the fallback.
//!
//! The result is bit-for-bit that of the scalar code. A row is a minimum over
//! the arrivals applied to it and every arrival below the final horizon is
//! applied, so the order of the streams (here: their lanes and their places
//! in the lists) does not matter; the arithmetic of each arrival is the
//! scalar one, lane by lane:
//! - SplitMix64 in u64 wrapping ops (`vpaddq`, `vpxorq`, shifts, `vpmullq`);
//! - the bin `((r >> 32) * k) >> 32`: `vpmuludq` multiplies the low 32 bits
//!   of each lane into 64, exactly the scalar product for `k < 2^32`;
//! - the ziggurat's fast path `f64::from(jz) * we[iz]`, accepted when
//!   `jz < ke[iz]` (`jz` the low 32 bits of `r`, `iz = jz & 255`): both
//!   tables are gathered with the index `r & 255`, in bounds whatever the
//!   lane holds; `jz` converts to f64 exactly and the product is one IEEE
//!   multiply (no FMA: the scalar code rounds the gap, then the sum);
//! - the rejected lanes (about 2 % of the draws of a 279-shingle, k = 256
//!   document) keep their time and state and are set aside; after the pass
//!   over the list, `settle` runs the scalar `rejected_gap` on each (the
//!   same words, so the same gap and state) and sorts it;
//! - `t += gap` and `t < end` in f64; the value `(t as f32).to_bits()` is
//!   `vcvtpd2ps` (round to nearest under the default MXCSR, as `as f32`).
//!
//! Each list is structure-of-arrays (state, time, row) so eight streams load
//! with three masked loads; after a draw, `vcompresspd`/`vpcompressq` pack
//! the streams still before the horizon for the active list, the others for
//! the waiting one (the scalar lists' branch-free double write) and the
//! rejected ones for `settle`, in registers (a compress to memory is
//! known to be slow on Zen 4; not measured here), so each list is stored
//! whole (8 lanes) and has 8 lanes of room past its streams. The lane indices are clamped into the
//! lists rather than asserted: a panic path in the loop cost a fifth of its
//! time. (Times below: one sketch of 279 hashes, k = 256, on the Zen 4 this
//! was written on, where the scalar code takes 7.4 µs.)
//!
//! The row updates are scalar, eight per chunk, in lane order (lanes of one
//! chunk may share a row): a gather, `vpminud` and a scatter, with
//! `vpconflictq` sending shared rows to scalar code, measured slower (5.7
//! against 4.4 µs), the vector units being the busy ones. The rows filled
//! for the first time (the horizon loop's count) are counted once per pass,
//! by scanning `sig` for empty rows before and after. The rejected lanes are
//! stored every time, not behind a branch (one chunk in five has one): with
//! the branch, `examples/keys_stages.rs` measured 6.9 against 6.35 µs per
//! document (the repeated documents of a micro-benchmark teach the branch
//! predictor their rejections and showed the opposite).

use std::arch::x86_64::*;
use std::sync::OnceLock;

use super::exponential::tables;
use super::poisson::{bin, rejected_gap, Streams, EMPTY};

/// Proof that this CPU runs the kernel: only [`Avx512::detect`] makes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Avx512(());

impl Avx512 {
    /// AVX-512F and DQ (`vpmullq`, `vcvtuqq2pd`) and POPCNT, detected at run time.
    pub(crate) fn detect() -> Option<Avx512> {
        let yes = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("popcnt");
        yes.then_some(Avx512(()))
    }
}

/// The ziggurat's fast-path tables widened to 64-bit lanes for the gathers.
struct Wide {
    ke: [u64; 256],
    we: [f64; 256],
}

fn wide_tables() -> &'static Wide {
    static WIDE: OnceLock<Wide> = OnceLock::new();
    WIDE.get_or_init(|| {
        let t = tables();
        Wide { ke: t.ke.map(u64::from), we: t.we }
    })
}

/// One list of paused streams, structure-of-arrays: three arrays of one
/// length, at least 8 (the lanes of a whole load or store).
#[derive(Debug, Clone)]
struct Lanes {
    state: Vec<u64>,
    /// The pending arrival's time, scaled by k.
    t: Vec<f64>,
    /// The pending arrival's row.
    row: Vec<u64>,
}

/// Eight streams in registers.
#[derive(Clone, Copy)]
struct Eight {
    state: __m512i,
    t: __m512d,
    row: __m512i,
}

/// The scratch space of the kernel: the lists of `Walks`, structure-of-arrays.
#[derive(Debug, Clone, Default)]
pub(crate) struct WideWalks {
    /// `waiting[..nw]`: streams paused at or after the horizon.
    waiting: Lanes,
    /// `active[..na]`: streams with an arrival before the horizon.
    active: Lanes,
    /// `rejected[..nr]`: streams whose last draw the ziggurat's fast path
    /// rejected, with their time before it and (in `row`) its random word.
    rejected: Lanes,
    nw: usize,
    na: usize,
    nr: usize,
}

/// The mask of the first `min(left, 8)` lanes.
#[inline(always)]
fn first_lanes(left: usize) -> __mmask8 {
    ((1u16 << left.min(8)) - 1) as __mmask8
}

impl Default for Lanes {
    fn default() -> Self {
        Lanes { state: vec![0; 8], t: vec![0.0; 8], row: vec![0; 8] }
    }
}

impl Lanes {
    /// The first of 8 lanes at `i`, kept in bounds without a branch (a
    /// panic path in the hot loop costs a fifth of its time): the lists
    /// hold at most every stream and have 8 lanes of room past them, so
    /// `i` is in bounds already and the clamp only backs the `unsafe` up.
    #[inline(always)]
    fn clamp(&self, i: usize) -> usize {
        i.min(self.t.len() - 8)
    }

    /// Room for `n` streams and the 8 lanes a whole store may write past them.
    fn reserve(&mut self, n: usize) {
        let n = n + 8;
        if self.state.len() < n {
            self.state.resize(n, 0);
            self.t.resize(n, 0.0);
            self.row.resize(n, 0);
        }
    }

    /// The streams `i..i + 8` under the prefix mask `m` (the others zero).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load(&self, i: usize, m: __mmask8) -> Eight {
        let i = self.clamp(i);
        // SAFETY: the lanes read are within `i..i + 8`, in bounds of all three
        // arrays (same length, at least `i + 8` by the clamp).
        unsafe {
            Eight {
                state: _mm512_maskz_loadu_epi64(m, self.state.as_ptr().add(i).cast()),
                t: _mm512_maskz_loadu_pd(m, self.t.as_ptr().add(i)),
                row: _mm512_maskz_loadu_epi64(m, self.row.as_ptr().add(i).cast()),
            }
        }
    }

    /// Appends the lanes of `v` selected by `m` at `i` (and garbage after
    /// them, up to `i + 8`); returns how many.
    ///
    /// Compressed in registers, then stored whole (not a compress to
    /// memory, slow on Zen 4).
    #[inline]
    #[target_feature(enable = "avx512f,popcnt")]
    fn store(&mut self, i: usize, m: __mmask8, v: Eight) -> usize {
        let i = self.clamp(i);
        // SAFETY: each store writes the 8 lanes `i..i + 8`, in bounds of all
        // three arrays (same length, at least `i + 8` by the clamp).
        unsafe {
            _mm512_storeu_epi64(self.state.as_mut_ptr().add(i).cast(), _mm512_maskz_compress_epi64(m, v.state));
            _mm512_storeu_pd(self.t.as_mut_ptr().add(i), _mm512_maskz_compress_pd(m, v.t));
            _mm512_storeu_epi64(self.row.as_mut_ptr().add(i).cast(), _mm512_maskz_compress_epi64(m, v.row));
        }
        m.count_ones() as usize
    }
}

/// SplitMix64's output function, lane by lane (the state already advanced).
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn mix(mut z: __m512i) -> __m512i {
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64::<30>(z)), _mm512_set1_epi64(0xBF58_476D_1CE4_E5B9u64 as i64));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64::<27>(z)), _mm512_set1_epi64(0x94D0_49BB_1331_11EBu64 as i64));
    _mm512_xor_si512(z, _mm512_srli_epi64::<31>(z))
}

/// Draws the next arrival of the lanes of `v` (`Walk::step` without the
/// row update): the state advances, `t` grows by the gap, `row` is its bin.
/// Returns the random words and the lanes the ziggurat's fast path accepted;
/// the others keep their time (and their gap is left to `settle`).
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn draw(v: &mut Eight, k: __m512i, z: &Wide) -> (__m512i, __mmask8) {
    v.state = _mm512_add_epi64(v.state, _mm512_set1_epi64(0x9E37_79B9_7F4A_7C15u64 as i64));
    let r = mix(v.state);
    v.row = _mm512_srli_epi64::<32>(_mm512_mul_epu32(_mm512_srli_epi64::<32>(r), k));
    let jz = _mm512_and_si512(r, _mm512_set1_epi64(0xFFFF_FFFF));
    let iz = _mm512_and_si512(r, _mm512_set1_epi64(255));
    // SAFETY: every index is `r & 255`, below the tables' length 256.
    let (ke, we) = unsafe {
        (_mm512_i64gather_epi64::<8>(iz, z.ke.as_ptr().cast()), _mm512_i64gather_pd::<8>(iz, z.we.as_ptr()))
    };
    let accepted = _mm512_cmplt_epu64_mask(jz, ke);
    let gap = _mm512_mul_pd(_mm512_cvtepu64_pd(jz), we);
    v.t = _mm512_mask_add_pd(v.t, accepted, v.t, gap);
    (r, accepted)
}

/// Applies the pending arrivals of the lanes `m` of `v` to `sig`, lane by
/// lane in order (two lanes may share a row), all eight without a branch:
/// a lane outside `m` (row 0, from a masked load) takes the minimum with
/// `EMPTY`, which changes nothing.
#[inline]
#[target_feature(enable = "avx512f")]
fn update_rows(v: &Eight, m: __mmask8, sig: &mut [u32]) {
    let (mut rows, mut values) = ([0u32; 8], [0u32; 8]);
    let empty = _mm256_castsi256_ps(_mm256_set1_epi32(EMPTY as i32));
    // SAFETY: each store writes 32 bytes into a local array of 32 bytes.
    unsafe {
        _mm256_storeu_si256(rows.as_mut_ptr().cast(), _mm512_cvtepi64_epi32(v.row));
        _mm256_storeu_ps(values.as_mut_ptr().cast(), _mm512_mask_cvtpd_ps(empty, m, v.t));
    }
    for (&row, &value) in rows.iter().zip(&values) {
        let slot = &mut sig[row as usize];
        *slot = (*slot).min(value);
    }
}

/// The rows of `sig` still empty.
#[inline]
#[target_feature(enable = "avx512f")]
fn empty_rows(sig: &[u32]) -> usize {
    sig.iter().filter(|&&v| v == EMPTY).count()
}

impl WideWalks {
    /// Appends the lanes `m` of `v` to the active list when before `end`,
    /// else to the waiting one (the active list's end is `a`).
    #[inline]
    #[target_feature(enable = "avx512f,popcnt")]
    fn sort(&mut self, v: Eight, m: __mmask8, end: __m512d, a: &mut usize) {
        let due = _mm512_mask_cmplt_pd_mask(m, v.t, end);
        *a += self.active.store(*a, due, v);
        self.nw += self.waiting.store(self.nw, m & !due, v);
    }

    /// Draws the next arrival of the lanes `m` of `v` and sorts them (the
    /// rejected ones to `rejected`, stored every time: a branch mispredicts).
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,popcnt")]
    fn draw_and_sort(&mut self, mut v: Eight, m: __mmask8, k: __m512i, end: __m512d, z: &Wide, a: &mut usize) {
        let (r, accepted) = draw(&mut v, k, z);
        self.nr += self.rejected.store(self.nr, m & !accepted, Eight { row: r, ..v });
        self.sort(v, m & accepted, end, a);
    }

    /// Finishes the draws of the rejected streams in scalar code (their
    /// gaps from `rejected_gap`) and sorts them (the active list's end is `a`).
    fn settle(&mut self, end: f64, k: usize, a: &mut usize) {
        for j in 0..std::mem::take(&mut self.nr) {
            let (r, t) = (self.rejected.row[j], self.rejected.t[j]);
            let (gap, state) = rejected_gap(r, self.rejected.state[j]);
            let (t, row) = (t + gap, bin(r, k) as u64);
            let (to, i) = if t < end { (&mut self.active, &mut *a) } else { (&mut self.waiting, &mut self.nw) };
            (to.state[*i], to.t[*i], to.row[*i]) = (state, t, row);
            *i += 1;
        }
    }

    #[target_feature(enable = "avx512f,avx512dq,popcnt")]
    fn start_avx512(&mut self, hashes: &[u64], end: f64, k: usize) {
        let n = hashes.len();
        self.waiting.reserve(n);
        self.active.reserve(n);
        self.rejected.reserve(n);
        let (z, kv, endv) = (wide_tables(), _mm512_set1_epi64(k as i64), _mm512_set1_pd(end));
        (self.nw, self.na, self.nr) = (0, 0, 0);
        let mut a = 0;
        for i in (0..n).step_by(8) {
            let m = first_lanes(n - i);
            // SAFETY: `m` selects the lanes `i..min(i + 8, n)`, in bounds; the
            // others are not accessed.
            let state = unsafe { _mm512_maskz_loadu_epi64(m, hashes.as_ptr().add(i).cast()) };
            let v = Eight { state, t: _mm512_set1_pd(0.0), row: state };
            self.draw_and_sort(v, m, kv, endv, z, &mut a);
        }
        if self.nr > 0 {
            self.settle(end, k, &mut a);
        }
        self.na = a;
    }

    #[target_feature(enable = "avx512f,popcnt")]
    fn resume_avx512(&mut self, end: f64) {
        let endv = _mm512_set1_pd(end);
        let (n, mut a) = (self.nw, self.na);
        // In place: the waiting write index never passes the read one.
        self.nw = 0;
        for i in (0..n).step_by(8) {
            let m = first_lanes(n - i);
            let v = self.waiting.load(i, m);
            self.sort(v, m, endv, &mut a);
        }
        self.na = a;
    }

    #[target_feature(enable = "avx512f,avx512dq,popcnt")]
    fn apply_avx512(&mut self, end: f64, k: usize, sig: &mut [u32]) -> usize {
        let (z, kv, endv) = (wide_tables(), _mm512_set1_epi64(k as i64), _mm512_set1_pd(end));
        let (empty, mut n) = (empty_rows(sig), self.na);
        while n > 0 {
            // In place: the active write index never passes the read one, and
            // the lanes `i..i + 8` are read before any of them is overwritten.
            let mut a = 0;
            for i in (0..n).step_by(8) {
                let m = first_lanes(n - i);
                let v = self.active.load(i, m);
                update_rows(&v, m, sig);
                self.draw_and_sort(v, m, kv, endv, z, &mut a);
            }
            // Past `a`, every stream of the round has been read.
            if self.nr > 0 {
                self.settle(end, k, &mut a);
            }
            n = a;
        }
        self.na = 0;
        // Rows filled for the first time: counted once here, not per arrival.
        empty - empty_rows(sig)
    }
}

/// [`WideWalks`] with the proof that the CPU runs them: the horizon loop of
/// `PoissonSketch::sketch` drives it as it drives the scalar `Walks`.
pub(crate) struct Kernel<'a> {
    walks: &'a mut WideWalks,
    _cpu: Avx512,
}

impl<'a> Kernel<'a> {
    pub(crate) fn new(walks: &'a mut WideWalks, cpu: Avx512) -> Self {
        Kernel { walks, _cpu: cpu }
    }
}

impl Streams for Kernel<'_> {
    fn start(&mut self, hashes: &[u64], end: f64, k: usize) {
        // SAFETY: `_cpu` proves AVX-512F, DQ and POPCNT (only `Avx512::detect` makes one).
        unsafe { self.walks.start_avx512(hashes, end, k) }
    }

    fn resume(&mut self, end: f64) {
        // SAFETY: as in `start`.
        unsafe { self.walks.resume_avx512(end) }
    }

    fn apply(&mut self, end: f64, k: usize, sig: &mut [u32]) -> usize {
        // SAFETY: as in `start`.
        unsafe { self.walks.apply_avx512(end, k, sig) }
    }
}

#[cfg(test)]
mod tests {
    use super::super::poisson::{Path, PoissonSketch, Walks};
    use super::*;
    use crate::filters::lines::splitmix;

    #[test]
    fn avx512_equals_scalar_bit_for_bit() {
        let Some(cpu) = Avx512::detect() else {
            println!("note: no AVX-512F/DQ/POPCNT on this CPU: the AVX-512 poisson kernel is not tested");
            return;
        };
        let (mut scalar_walks, mut wide_walks) = (Walks::default(), Walks::default());
        let mut rng = 0x5EED_u64;
        let (mut sketches, mut unfilled) = (0usize, 0usize);
        for k in [1usize, 2, 7, 8, 9, 64, 128, 256, 300, 512] {
            for n in [0usize, 1, 2, 3, 7, 8, 9, 15, 16, 17, 50, 279, 1000, 5000] {
                let repeats = if n >= 1000 { 2 } else { 6 };
                for rep in 0..repeats {
                    let p = PoissonSketch::new(k, splitmix(&mut rng));
                    let mut hashes: Vec<u64> = (0..n).map(|_| splitmix(&mut rng)).collect();
                    if rep % 3 == 2 && n > 1 {
                        // Repeats: a stream twice in a chunk hits the same rows.
                        hashes[n / 2] = hashes[0];
                        hashes[n - 1] = hashes[1];
                    }
                    let (mut want, mut got) = (vec![0u32; k], vec![7u32; k]);
                    p.sketch_on(Path::Scalar, &hashes, &mut want, &mut scalar_walks);
                    p.sketch_on(Path::Avx512(cpu), &hashes, &mut got, &mut wide_walks);
                    assert_eq!(got, want, "k={k} n={n} rep={rep}");
                    sketches += 1;
                    unfilled += usize::from(n > 0 && want.contains(&EMPTY));
                }
            }
        }
        assert!(sketches > 500 && unfilled == 0);
    }

    #[test]
    fn rejections_and_the_tail_match_the_scalar_draws() {
        // Hashes whose first draw the ziggurat rejects (about 1.1 %), the base
        // layer's tail among them, eight to a chunk: every lane a rejection.
        let Some(cpu) = Avx512::detect() else {
            println!("note: no AVX-512F/DQ/POPCNT on this CPU: the AVX-512 poisson kernel is not tested");
            return;
        };
        let z = tables();
        let (mut picked, mut tail, mut h) = (Vec::new(), 0, 0u64);
        while picked.len() < 64 || tail < 2 {
            h += 1;
            let mut st = h;
            let jz = splitmix(&mut st) as u32;
            let iz = (jz & 255) as usize;
            if jz >= z.ke[iz] {
                picked.push(h);
                tail += usize::from(iz == 0);
            }
        }
        for k in [1usize, 9, 256] {
            let p = PoissonSketch::new(k, 0);
            for n in [1usize, 8, 13, picked.len()] {
                let (mut want, mut got) = (vec![0u32; k], vec![0u32; k]);
                p.sketch_on(Path::Scalar, &picked[..n], &mut want, &mut Walks::default());
                p.sketch_on(Path::Avx512(cpu), &picked[..n], &mut got, &mut Walks::default());
                assert_eq!(got, want, "k={k} n={n}");
            }
        }
    }
}
