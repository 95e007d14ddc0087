//! Blocked Bloom filters (`--bloom blocked`): one 512-bit block (one cache
//! line) per key per band.
//!
//! ## Layout of a block and of a key's pattern
//!
//! A block is 16 lanes of 32 bits. A key sets (and a query tests) exactly one
//! bit in every lane: k = 16 bits, all in one cache line ("split block", as
//! Parquet's and Impala's filters, with 16 lanes instead of 8). For a key `x`
//! and the filter's 64-bit seed `s`:
//!
//! ```text
//! mum(a, b) = low64(a*b) ^ high64(a*b)                   (128-bit product, wyhash's mixer)
//! h1       = mum(x ^ s, 0xa0761d6478bd642f),  h2 = mum(h1 ^ 0xe7037ed1a0b428db, 0x8ebc6af09c88c6e3)
//! block    = (h1 * num_blocks) >> 64                     (Lemire's fast range)
//! lane i   = bit ((w_i * SALT[i]) >> 27) of 32,  w_i = low 32 bits of h2 for i < 8, high 32 bits for i >= 8
//! ```
//!
//! ## Sizing (why the textbook formula is not enough)
//!
//! The textbook split-block estimate puts the mean load `λ = n / B` keys into
//! every block: `f(λ) = (1 − (1 − 1/32)^λ)^16`. But loads vary: the number of
//! keys `j` in the block a query lands on is Binomial(n, 1/B) ≈ Poisson(λ), and
//! given `j` the rate is exactly `f(j) = (1 − (31/32)^j)^16` (each lane's query
//! bit is clear iff none of the `j` keys picked it, independently per lane). So
//!
//! ```text
//! FP(n, B) = Σ_j Poisson(j; n/B) · (1 − (31/32)^j)^16   ≥ f(n/B)   (Jensen; f is convex where it matters)
//! ```
//!
//! and at low rates the heavily loaded blocks in the Poisson tail dominate: at
//! p = 1e-7 the textbook size gives a rate several times the target. We size
//! with the exact mixture: the smallest `B` with `FP(n, B) ≤ p` (the Poisson
//! law slightly over-disperses the binomial, so this is conservative).
//!
//! ## File format (one file per band, `band-{i}.bbf`)
//!
//! The header of `lines` (magic "LSHBBLK\0", version 1, `num_lines` =
//! num_blocks, `extra` = 0), then the blocks, 64 bytes each; lane i is the
//! little-endian u32 at 4 i.
//!
//! `sizing` is the maths above, `kernel` a key's block and lane bits and the
//! block test/set (portable and AVX2), `file` the layout's own accessors over
//! [`LineFile`]; the band loops are `lines`'.

mod file;
mod kernel;
mod sizing;

pub use file::Blocked;
pub(crate) use file::measure_fp;
pub(crate) use sizing::{fp_rate, fp_rate_textbook, num_blocks_for};

pub(crate) const MAGIC: &[u8; 8] = b"LSHBBLK\0";
pub(crate) const VERSION: u32 = 1;
pub(crate) const LANES: usize = 16;

/// Odd multipliers, one per lane (Parquet's eight, then eight more odd
/// 32-bit constants of the same kind).
pub(crate) const SALTS: [u32; LANES] = [
    0x47b6_137b, 0x4497_4d91, 0x8824_ad5b, 0xa2b7_289d, 0x7054_95c7, 0x2df1_424b, 0x9efc_4947, 0x5c6b_fb31,
    0x9e37_79b1, 0x85eb_ca77, 0xc2b2_ae3d, 0x27d4_eb2f, 0x1656_67b1, 0xd3a2_646d, 0xfd70_46c5, 0xb55a_4f09,
];

/// One blocked Bloom filter file, memory-mapped.
pub(crate) type BlockedFile = crate::filters::lines::LineFile<Blocked>;

/// The b blocked band filters of an LSHBloom index (`--bloom blocked`).
#[cfg(test)]
pub(crate) type BlockedBands = crate::filters::band_set::BandSet<BlockedFile>;
