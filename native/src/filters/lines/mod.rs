//! Filters made of 64-byte lines (`blocked`: one block per key, `cuckoo`: two
//! buckets per key): what their layouts share, written once.
//!
//! A layout ([`Layout`]) says where a key goes (its `Loc`), which lines to
//! prefetch for it, and how its lines are tested and set ([`Kernel`], portable
//! and AVX2). Over that, [`LineFile`] is one filter file (the common 64-byte
//! header, below, and the mapping) and `row_loops` the row loops of a band set of
//! them: chunked locate, software prefetch two documents ahead, the SIMD
//! kernel chosen once per call by run-time detection.
//!
//! ## The header (one file per band)
//!
//! ```text
//! 0   magic               8 bytes (the layout's)
//! 8   version             u32
//! 12  header_len (= 64)   u32
//! 16  num_lines           u64   (blocks / buckets)
//! 24  capacity            u64
//! 32  error_rate          f64   (the per-band target the file was sized for)
//! 40  seed                u64
//! 48  elem_count          u64   (keys added while absent)
//! 56  extra               u32   (the layout's: 0 for blocked, fp_bits for cuckoo)
//! 60  reserved            4 bytes (zero)
//! 64  lines, 64 bytes each
//! ```

pub(crate) mod row_loops;
pub(crate) mod file;

pub use file::LineFile;
pub(crate) use file::measure_fp;

pub(crate) const HEADER_LEN: usize = 64;
pub(crate) const LINE_BYTES: usize = 64;

/// The filter cannot place a key (a cuckoo filter far past the load it was
/// sized for); nothing was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// One filter layout over 64-byte lines.
pub trait Layout: Sized + Send + Sync + 'static {
    const MAGIC: &'static [u8; 8];
    const VERSION: u32;
    /// What a file of this layout is, in messages ("cuckoo filter").
    const NAME: &'static str;
    /// The header's name in messages ("cuckoo-filter").
    const TAG: &'static str;

    /// Everything about a filter's size its kernels need.
    type Shape: Copy + std::fmt::Debug + Send + Sync;
    /// Where a key goes.
    type Loc: Copy + Default;
    type Portable: Kernel<Self>;
    #[cfg(target_arch = "x86_64")]
    type Avx2: Kernel<Self>;

    /// The smallest shape for `capacity` keys at `error_rate`.
    fn shape_for(capacity: u64, error_rate: f64) -> Result<Self::Shape, String>;
    /// The header's `num_lines` and `extra` of a shape.
    fn encode(shape: Self::Shape) -> (u64, u32);
    /// The shape a header records, validated (the message after "invalid header: ").
    fn decode(num_lines: u64, extra: u32) -> Result<Self::Shape, String>;
    fn num_lines(shape: Self::Shape) -> u64;
    fn locate(key: u64, seed: u64, shape: Self::Shape) -> Self::Loc;
    /// Hints the cache lines a probe of `loc` may read.
    fn prefetch(data: &[u8], loc: Self::Loc);
}

/// A layout's test and set of one key's lines, portable or AVX2: the loops
/// over many keys are generic over it and instantiated inside a
/// `#[target_feature]` function for AVX2, so that the intrinsics inline.
pub trait Kernel<L: Layout> {
    /// What a probe of an absent key learnt that its insert can reuse.
    type Probe: Copy;

    /// `None` if the key at `loc` is (probably) present in the lines `data`.
    ///
    /// # Safety
    /// The CPU has the implementation's target features.
    unsafe fn probe(data: &[u8], loc: L::Loc, shape: L::Shape) -> Option<Self::Probe>;

    /// Adds the key `probe` found absent (no other write in between).
    ///
    /// # Safety
    /// As [`Kernel::probe`].
    unsafe fn insert(data: &mut [u8], loc: L::Loc, shape: L::Shape, probe: Self::Probe) -> Result<(), Full>;
}

/// Adds the key at `loc` unless present; `Ok(true)` if it was present.
///
/// # Safety
/// The CPU has `K`'s target features.
#[inline(always)]
pub(crate) unsafe fn set_with<L: Layout, K: Kernel<L>>(data: &mut [u8], loc: L::Loc, shape: L::Shape) -> Result<bool, Full> {
    // SAFETY (both): forwarded from the caller.
    match unsafe { K::probe(data, loc, shape) } {
        None => Ok(true),
        Some(p) => unsafe { K::insert(data, loc, shape, p) }.map(|()| false),
    }
}

/// Is the key at `loc` (probably) in `data`? Portable code.
#[inline(always)]
pub(crate) fn test<L: Layout>(data: &[u8], loc: L::Loc, shape: L::Shape) -> bool {
    // SAFETY: portable code needs no CPU feature.
    unsafe { L::Portable::probe(data, loc, shape) }.is_none()
}

/// Adds the key at `loc` unless present; `Ok(true)` if it was. Portable code.
#[inline(always)]
pub(crate) fn set<L: Layout>(data: &mut [u8], loc: L::Loc, shape: L::Shape) -> Result<bool, Full> {
    // SAFETY: portable code needs no CPU feature.
    unsafe { set_with::<L, L::Portable>(data, loc, shape) }
}

/// Hints the CPU to load line `i` of `data` (no effect on results).
#[inline(always)]
pub(crate) fn prefetch_line(data: &[u8], i: usize) {
    crate::prefetch::prefetch(data, i * LINE_BYTES);
}

/// Line `i` of `data`.
#[inline(always)]
pub(crate) fn line(data: &[u8], i: usize) -> &[u8] {
    &data[i * LINE_BYTES..(i + 1) * LINE_BYTES]
}

/// Line `i` of `data`, writable.
#[inline(always)]
pub(crate) fn line_mut(data: &mut [u8], i: usize) -> &mut [u8] {
    &mut data[i * LINE_BYTES..(i + 1) * LINE_BYTES]
}

/// SplitMix64: the pseudo-random keys of the rate measurements and tests.
pub(crate) use crate::hash::splitmix::next as splitmix;

/// 64x64 -> 128-bit multiply folded to 64 bits (wyhash's `mum`).
#[inline(always)]
pub(crate) fn mum(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Lemire's fast range: `h` scaled into `0..n`.
#[inline(always)]
pub(crate) fn fast_range(h: u64, n: u64) -> u64 {
    ((u128::from(h) * u128::from(n)) >> 64) as u64
}

/// The two hashes of `key` both layouts start from:
/// `h1 = mum(key ^ seed, K0)`, `h2 = mum(h1 ^ K1, K2)`.
#[inline(always)]
pub(crate) fn hashes(key: u64, seed: u64) -> (u64, u64) {
    const K0: u64 = 0xa076_1d64_78bd_642f;
    const K1: u64 = 0xe703_7ed1_a0b4_28db;
    const K2: u64 = 0x8ebc_6af0_9c88_c6e3;
    let h1 = mum(key ^ seed, K0);
    (h1, mum(h1 ^ K1, K2))
}
