//! Cuckoo filters with one cache line per bucket (`--bloom cuckoo`): a key is
//! an f-bit fingerprint stored in one of two 64-byte buckets, so a query reads
//! at most two cache lines, and the filter takes fewer bits than a classic
//! Bloom filter at the low per-band rates of LSHBloom.
//!
//! ## Layout
//!
//! A bucket is one 64-byte line holding `s = floor(512 / f)` slots of `f` bits
//! (slot `i` is bits `[i f, (i + 1) f)` of the line read as a little-endian
//! 512-bit number). A slot holding 0 is empty; fingerprints are never 0, and
//! the occupied slots of a bucket are always a prefix (no deletions; a kick
//! overwrites a slot in place), so a scan stops at the first empty slot.
//! For a key `x` and the filter's seed (`mum`, `h1`, `h2` as in `blocked`):
//!
//! ```text
//! a   = (h1 * B) >> 64                              bucket 1 (Lemire's fast range)
//! fp  = 1 + ((h2 * (2^f - 1)) >> 64)                uniform over 1 .. 2^f - 1
//! c   = (mum(fp ^ K3, K4) * B) >> 64                the fingerprint's bucket offset
//! alt(i, fp) = (c - i) mod B                        bucket 2 = alt(a, fp); alt(alt(i)) = i
//! ```
//!
//! `alt` needs only the bucket and the fingerprint (a kicked fingerprint moves
//! to its other bucket without its key) and works for any B (XOR would need a
//! power of two). Insert: the first empty slot of the emptier of the two
//! buckets (ties: bucket 1; balancing keeps buckets from filling long before
//! the filter does), else kick a pseudo-random resident of one of them to its
//! other bucket, up to `MAX_KICKS` times; if that fails every move is undone
//! and the insert returns an error (the filter is unchanged: nothing silently
//! lost). A query reads both buckets (both are prefetched by the band loops).
//!
//! ## False-positive rate (the sizing maths)
//!
//! A query `x` is a false positive iff some stored `y` has `fp_y = fp_x` and
//! sits in one of x's two buckets. With equal fingerprints the two keys share
//! `c`, so their bucket pairs `{a, c − a}` and `{b, c − b}` meet iff `a = b` or
//! `a + b ≡ c (mod B)`: probability `2/B` over x's uniform bucket. So, with
//! `q = 1/(2^f − 1)` and `n` keys stored,
//!
//! ```text
//! FP(n, B, f) = 1 − (1 − q)^(2n/B)    (≤ 2nq/B: each of the ≤ 2n/B expected residents matches w.p. q)
//! ```
//!
//! (the rate of reading both buckets is `1 − E[(1 − q)^S]` over their
//! occupancy `S`, `E[S] = 2n/B`; by Jensen at most the formula): the formula
//! is an upper bound, and the measured rate lies between `FP(n/2, B, f)` and
//! `FP(n, B, f)` (files written before inserts balanced the buckets filled
//! bucket 1 first: their rate is nearer `FP(n/2)`). Sizing for
//! `capacity = n` at rate `p` takes, for every `f` in 2..=64,
//!
//! ```text
//! B_fp(f)   = ceil(2n · ln(1 − q) / ln(1 − p))      (the least B with FP(n, B, f) ≤ p; closed form)
//! B_load(f) = ceil(n / (0.90 · s(f)))               (load ≤ 90 %: far below the ~99.8 % where
//!                                                   two-choice cuckoo with ≥ 8 slots per bucket fails,
//!                                                   and few kicks)
//! ```
//!
//! and `B(f) = max(B_fp, B_load)`. It keeps the least `B` over the lane widths
//! (8, 16, 32, 64: a bucket's scan is one SIMD compare per half line) if that
//! is within `LANE_SLACK` (1.15x) of the least over every `f` (ties: the
//! larger `f`), else the latter. At p = 1.2e-7 that is f = 32, 16 slots:
//! 1.07x a classic Bloom filter's bits; at 1.2e-12 f = 44: 0.90x
//! (docs/algorithm.md).
//!
//! ## File format (one file per band, `band-{i}.cbf`)
//!
//! The header of `lines` (magic "LSHBCKO\0", version 1, `num_lines` =
//! num_buckets, `extra` = fp_bits), then the buckets, 64 bytes each.
//!
//! `sizing` is the maths above, `kernel` a key's buckets and fingerprint and
//! the portable scan, set and kick, `scan` the kernels (portable and AVX2) of
//! the loops of `lines`, `file` the layout's own accessors over [`LineFile`].

mod file;
mod kernel;
mod scan;
mod sizing;

pub use file::Cuckoo;
pub(crate) use file::measure_fp;
pub(crate) use sizing::{fp_rate, geometry};
use crate::filters::lines::LineFile;

pub(crate) const MAGIC: &[u8; 8] = b"LSHBCKO\0";
pub(crate) const VERSION: u32 = 1;
pub(crate) const BUCKET_BYTES: usize = crate::filters::lines::LINE_BYTES;
pub(crate) const BUCKET_BITS: u32 = 512;
/// Fingerprint widths the format allows.
pub(crate) const MIN_FP_BITS: u32 = 2;
pub(crate) const MAX_FP_BITS: u32 = 64;
/// Kicks tried before an insert gives up (and undoes them).
pub(crate) const MAX_KICKS: usize = 2000;

/// One cuckoo filter file, memory-mapped.
pub(crate) type CuckooFile = LineFile<Cuckoo>;
