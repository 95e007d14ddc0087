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
//! ```text
//! 0   magic "LSHBBLK\0"   8 bytes
//! 8   version (= 1)       u32
//! 12  header_len (= 64)   u32
//! 16  num_blocks          u64
//! 24  capacity            u64
//! 32  error_rate          f64   (the per-band target the file was sized for)
//! 40  seed                u64
//! 48  elem_count          u64   (keys added while absent)
//! 56  reserved            8 bytes (zero)
//! 64  blocks, 64 bytes each; lane i is the little-endian u32 at 4 i
//! ```

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapMut, MmapOptions};

use crate::bloom::{prefetch, BloomError};

pub const MAGIC: &[u8; 8] = b"LSHBBLK\0";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: usize = 64;
pub const BLOCK_BYTES: usize = 64;
pub const LANES: usize = 16;
const LANE_BITS: f64 = 32.0;

/// Odd multipliers, one per lane (Parquet's eight, then eight more odd
/// 32-bit constants of the same kind).
pub const SALTS: [u32; LANES] = [
    0x47b6_137b, 0x4497_4d91, 0x8824_ad5b, 0xa2b7_289d, 0x7054_95c7, 0x2df1_424b, 0x9efc_4947, 0x5c6b_fb31,
    0x9e37_79b1, 0x85eb_ca77, 0xc2b2_ae3d, 0x27d4_eb2f, 0x1656_67b1, 0xd3a2_646d, 0xfd70_46c5, 0xb55a_4f09,
];

// ---------------------------------------------------------------------------
// Sizing

/// `(1 − (31/32)^j)^16`: false-positive rate of a block holding `j` keys.
#[inline]
pub fn block_fp(j: f64) -> f64 {
    (-(j * (1.0 - 1.0 / LANE_BITS).ln()).exp_m1()).abs().powi(LANES as i32)
}

/// The textbook estimate `f(n / B)` (every block at the mean load).
pub fn fp_rate_textbook(n: f64, num_blocks: u64) -> f64 {
    block_fp(n / num_blocks as f64)
}

/// The false-positive rate of a blocked filter of `num_blocks` blocks holding
/// `n` keys: `Σ_j Poisson(j; n/B) · block_fp(j)`.
pub fn fp_rate(n: f64, num_blocks: u64) -> f64 {
    let lam = n / num_blocks as f64;
    if lam <= 0.0 {
        return 0.0;
    }
    // Sum from the mode outwards until terms are negligible.
    let mode = lam.floor();
    let ln_pmf = |j: f64| -> f64 { j * lam.ln() - lam - ln_gamma(j + 1.0) };
    let mut total = 0.0;
    let mut j = mode;
    loop {
        let t = (ln_pmf(j)).exp() * block_fp(j);
        total += t;
        if (t < total * 1e-17 && j > lam + 10.0) || j > lam + 50.0 + 50.0 * lam.sqrt() {
            break;
        }
        j += 1.0;
    }
    let mut j = mode - 1.0;
    while j >= 0.0 {
        let t = (ln_pmf(j)).exp() * block_fp(j);
        total += t;
        if t < total * 1e-17 {
            break;
        }
        j -= 1.0;
    }
    total
}

/// ln Γ(x) for x ≥ 1 (Lanczos, g = 7; relative error < 1e-13 here).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, &g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The smallest number of blocks whose exact rate at `capacity` keys is at
/// most `error_rate`.
pub fn num_blocks_for(capacity: u64, error_rate: f64) -> Result<u64, String> {
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(format!("error_rate must be in (0, 1), got {error_rate}"));
    }
    if capacity == 0 {
        return Err("capacity must be >= 1".into());
    }
    let n = capacity as f64;
    let mut hi: u64 = 1;
    while fp_rate(n, hi) > error_rate {
        hi = hi.checked_mul(2).ok_or("blocked filter too large")?;
    }
    let mut lo = hi / 2; // fp(lo) > p (or lo == 0)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fp_rate(n, mid) <= error_rate {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

// ---------------------------------------------------------------------------
// Hashing

/// Where a key goes: its block and the 64 bits that pick its lane bits.
#[derive(Debug, Clone, Copy, Default)]
pub struct Loc {
    pub block: usize,
    pub bits: u64,
}

/// 64x64 -> 128-bit multiply folded to 64 bits (wyhash's `mum`).
#[inline(always)]
fn mum(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The block and lane bits of `key` in a filter of `num_blocks` blocks with
/// hash seed `seed`: `h1 = mum(key ^ seed, K0)`, `h2 = mum(h1 ^ K1, K2)`;
/// block = `(h1 * num_blocks) >> 64`, lanes from `h2`.
#[inline(always)]
pub fn locate(key: u64, seed: u64, num_blocks: u64) -> Loc {
    const K0: u64 = 0xa076_1d64_78bd_642f;
    const K1: u64 = 0xe703_7ed1_a0b4_28db;
    const K2: u64 = 0x8ebc_6af0_9c88_c6e3;
    let h1 = mum(key ^ seed, K0);
    let h2 = mum(h1 ^ K1, K2);
    let block = ((u128::from(h1) * u128::from(num_blocks)) >> 64) as usize;
    Loc { block, bits: h2 }
}

/// The 16 lane masks of a key.
#[inline(always)]
pub fn masks(bits: u64) -> [u32; LANES] {
    let lo = bits as u32;
    let hi = (bits >> 32) as u32;
    let mut m = [0u32; LANES];
    for i in 0..LANES {
        let w = if i < LANES / 2 { lo } else { hi };
        m[i] = 1u32 << (w.wrapping_mul(SALTS[i]) >> 27);
    }
    m
}

#[inline(always)]
fn block_words(block: &[u8]) -> [u32; LANES] {
    let mut w = [0u32; LANES];
    for (i, x) in w.iter_mut().enumerate() {
        *x = u32::from_le_bytes(block[4 * i..4 * i + 4].try_into().unwrap());
    }
    w
}

#[inline(always)]
fn test_block(block: &[u8], m: &[u32; LANES]) -> bool {
    let w = block_words(block);
    let mut miss = 0u32;
    for i in 0..LANES {
        miss |= m[i] & !w[i];
    }
    miss == 0
}

#[inline(always)]
fn set_block(block: &mut [u8], m: &[u32; LANES]) -> bool {
    let w = block_words(block);
    let mut miss = 0u32;
    for i in 0..LANES {
        miss |= m[i] & !w[i];
        let v = w[i] | m[i];
        block[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
    miss == 0
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{LANES, SALTS};
    use std::arch::x86_64::*;

    /// The two halves (lanes 0-7, 8-15) of a key's 512-bit mask.
    #[inline(always)]
    pub unsafe fn masks(bits: u64) -> (__m256i, __m256i) {
        // SAFETY (all intrinsics here): the caller runs with AVX2 enabled.
        unsafe {
            let salts0 = _mm256_loadu_si256(SALTS.as_ptr().cast());
            let salts1 = _mm256_loadu_si256(SALTS[LANES / 2..].as_ptr().cast());
            let lo = _mm256_set1_epi32(bits as u32 as i32);
            let hi = _mm256_set1_epi32((bits >> 32) as u32 as i32);
            let one = _mm256_set1_epi32(1);
            let i0 = _mm256_srli_epi32::<27>(_mm256_mullo_epi32(lo, salts0));
            let i1 = _mm256_srli_epi32::<27>(_mm256_mullo_epi32(hi, salts1));
            (_mm256_sllv_epi32(one, i0), _mm256_sllv_epi32(one, i1))
        }
    }

    /// Are all the key's bits set in the 64-byte block at `p`?
    #[inline(always)]
    pub unsafe fn test(p: *const u8, bits: u64) -> bool {
        // SAFETY: `p` points to 64 readable bytes (caller); AVX2 enabled.
        unsafe {
            let (m0, m1) = masks(bits);
            let b0 = _mm256_loadu_si256(p.cast());
            let b1 = _mm256_loadu_si256(p.add(32).cast());
            // testc: (!block & mask) == 0
            _mm256_testc_si256(b0, m0) & _mm256_testc_si256(b1, m1) != 0
        }
    }

    /// Sets the key's bits in the 64-byte block at `p`.
    #[inline(always)]
    pub unsafe fn set(p: *mut u8, bits: u64) {
        // SAFETY: `p` points to 64 writable bytes (caller); AVX2 enabled.
        unsafe {
            let (m0, m1) = masks(bits);
            let b0 = _mm256_loadu_si256(p.cast());
            let b1 = _mm256_loadu_si256(p.add(32).cast());
            _mm256_storeu_si256(p.cast(), _mm256_or_si256(b0, m0));
            _mm256_storeu_si256(p.add(32).cast(), _mm256_or_si256(b1, m1));
        }
    }
}

// ---------------------------------------------------------------------------
// One blocked filter file

#[derive(Debug)]
enum Map {
    Ro(Mmap),
    Rw(MmapMut),
}

/// One blocked Bloom filter file, memory-mapped.
#[derive(Debug)]
pub struct BlockedFile {
    path: PathBuf,
    map: Map,
    num_blocks: u64,
    capacity: u64,
    error_rate: f64,
    seed: u64,
    elem_count: u64,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> BloomError + '_ {
    move |source| BloomError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn format_err(path: &Path, msg: impl Into<String>) -> BloomError {
    BloomError::Format {
        path: path.to_path_buf(),
        msg: msg.into(),
    }
}

fn le_u64(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

impl BlockedFile {
    /// Creates a new file (fails if `path` exists) sized by [`num_blocks_for`].
    pub fn create(path: &Path, capacity: u64, error_rate: f64, seed: u64) -> Result<BlockedFile, BloomError> {
        let num_blocks = num_blocks_for(capacity, error_rate).map_err(BloomError::Invalid)?;
        let data_len = num_blocks
            .checked_mul(BLOCK_BYTES as u64)
            .ok_or_else(|| BloomError::Invalid("blocked filter too large".into()))?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io_err(path))?;
        let mut h = [0u8; HEADER_LEN];
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        h[16..24].copy_from_slice(&num_blocks.to_le_bytes());
        h[24..32].copy_from_slice(&capacity.to_le_bytes());
        h[32..40].copy_from_slice(&error_rate.to_le_bytes());
        h[40..48].copy_from_slice(&seed.to_le_bytes());
        let init = (|| -> io::Result<()> {
            file.write_all_at(&h, 0)?;
            file.set_len(HEADER_LEN as u64 + data_len)?;
            Ok(())
        })();
        if let Err(e) = init {
            drop(file);
            let _ = std::fs::remove_file(path);
            return Err(io_err(path)(e));
        }
        drop(file);
        Self::open(path, true)
    }

    /// Opens and validates an existing file.
    pub fn open(path: &Path, writable: bool) -> Result<BlockedFile, BloomError> {
        let file: File = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(io_err(path))?;
        let size = file.metadata().map_err(io_err(path))?.len();
        if size < HEADER_LEN as u64 {
            return Err(format_err(path, format!("truncated: {size} bytes, no blocked-filter header")));
        }
        let mut h = [0u8; HEADER_LEN];
        file.read_exact_at(&mut h, 0).map_err(io_err(path))?;
        if &h[..8] != MAGIC {
            return Err(format_err(path, "not a blocked Bloom filter file (bad magic)"));
        }
        let version = u32::from_le_bytes(h[8..12].try_into().unwrap());
        let header_len = u32::from_le_bytes(h[12..16].try_into().unwrap());
        if version != VERSION || header_len as usize != HEADER_LEN {
            return Err(format_err(
                path,
                format!("unsupported blocked-filter version {version} / header {header_len} (expected {VERSION} / {HEADER_LEN})"),
            ));
        }
        let num_blocks = le_u64(&h, 16);
        if num_blocks == 0 {
            return Err(format_err(path, "invalid header: num_blocks is 0"));
        }
        let expected = num_blocks
            .checked_mul(BLOCK_BYTES as u64)
            .and_then(|d| d.checked_add(HEADER_LEN as u64))
            .ok_or_else(|| format_err(path, "invalid header: num_blocks too large"))?;
        if size != expected {
            return Err(format_err(path, format!("expected {expected} bytes, found {size}")));
        }
        let len = usize::try_from(expected).map_err(|_| format_err(path, "file too large to map"))?;
        // SAFETY: only this struct accesses the mapping; truncation of the file
        // by another process while mapped is not supported (as for BloomFile).
        let map = unsafe {
            if writable {
                Map::Rw(MmapOptions::new().len(len).map_mut(&file).map_err(io_err(path))?)
            } else {
                Map::Ro(MmapOptions::new().len(len).map(&file).map_err(io_err(path))?)
            }
        };
        Ok(BlockedFile {
            path: path.to_path_buf(),
            map,
            num_blocks,
            capacity: le_u64(&h, 24),
            error_rate: f64::from_le_bytes(h[32..40].try_into().unwrap()),
            seed: le_u64(&h, 40),
            elem_count: le_u64(&h, 48),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn num_blocks(&self) -> u64 {
        self.num_blocks
    }
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
    pub fn error_rate(&self) -> f64 {
        self.error_rate
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn elem_count(&self) -> u64 {
        self.elem_count
    }
    pub fn file_size(&self) -> u64 {
        HEADER_LEN as u64 + self.num_blocks * BLOCK_BYTES as u64
    }
    pub fn writable(&self) -> bool {
        matches!(self.map, Map::Rw(_))
    }

    fn data(&self) -> &[u8] {
        match &self.map {
            Map::Ro(m) => &m[HEADER_LEN..],
            Map::Rw(m) => &m[HEADER_LEN..],
        }
    }

    fn data_mut(&mut self) -> Result<&mut [u8], BloomError> {
        match &mut self.map {
            Map::Rw(m) => Ok(&mut m[HEADER_LEN..]),
            Map::Ro(_) => Err(BloomError::ReadOnly {
                path: self.path.clone(),
            }),
        }
    }

    fn check_writable(&self) -> Result<(), BloomError> {
        if self.writable() {
            Ok(())
        } else {
            Err(BloomError::ReadOnly {
                path: self.path.clone(),
            })
        }
    }

    #[inline(always)]
    pub fn locate(&self, key: u64) -> Loc {
        locate(key, self.seed, self.num_blocks)
    }

    #[inline(always)]
    fn block(&self, b: usize) -> &[u8] {
        &self.data()[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES]
    }

    #[inline(always)]
    fn test_loc(&self, loc: Loc) -> bool {
        test_block(self.block(loc.block), &masks(loc.bits))
    }

    /// Sets the key's bits; returns whether they were all set already.
    #[inline(always)]
    fn set_loc(data: &mut [u8], loc: Loc) -> bool {
        set_block(&mut data[loc.block * BLOCK_BYTES..(loc.block + 1) * BLOCK_BYTES], &masks(loc.bits))
    }

    pub fn contains(&self, key: u64) -> bool {
        self.test_loc(self.locate(key))
    }

    pub fn contains_many(&self, keys: &[u64], out: &mut [bool]) {
        assert_eq!(keys.len(), out.len());
        contains_many_dispatch(self, keys, out);
    }

    /// Adds every key; `out[i]` = key i was already present.
    pub fn add_many(&mut self, keys: &[u64], out: &mut [bool]) -> Result<(), BloomError> {
        assert_eq!(keys.len(), out.len());
        self.check_writable()?;
        let (seed, nb) = (self.seed, self.num_blocks);
        let mut added = 0;
        let data = self.data_mut()?;
        for (o, &k) in out.iter_mut().zip(keys) {
            let present = Self::set_loc(data, locate(k, seed, nb));
            *o = present;
            added += u64::from(!present);
        }
        self.elem_count += added;
        self.store_elem_count();
        Ok(())
    }

    fn store_elem_count(&mut self) {
        let c = self.elem_count;
        if let Map::Rw(m) = &mut self.map {
            m[48..56].copy_from_slice(&c.to_le_bytes());
        }
    }

    pub fn sync(&self) -> Result<(), BloomError> {
        match &self.map {
            Map::Rw(m) => m.flush().map_err(io_err(&self.path)),
            Map::Ro(_) => Ok(()),
        }
    }
}

/// Count of keys (of `keys`) found, for measuring the false-positive rate
/// without materializing a result array.
fn contains_many_dispatch(f: &BlockedFile, keys: &[u64], out: &mut [bool]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present (checked).
            unsafe { contains_many_avx2(f, keys, out) };
            return;
        }
    }
    contains_many_body(f, keys, out)
}

#[inline(always)]
fn contains_many_body(f: &BlockedFile, keys: &[u64], out: &mut [bool]) {
    const D: usize = 8;
    let data = f.data();
    let locs: Vec<Loc> = keys.iter().map(|&k| f.locate(k)).collect();
    for (i, (o, loc)) in out.iter_mut().zip(&locs).enumerate() {
        if let Some(ahead) = locs.get(i + D) {
            prefetch(data, ahead.block * BLOCK_BYTES);
        }
        *o = f.test_loc(*loc);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn contains_many_avx2(f: &BlockedFile, keys: &[u64], out: &mut [bool]) {
    const D: usize = 8;
    let data = f.data();
    let locs: Vec<Loc> = keys.iter().map(|&k| f.locate(k)).collect();
    for (i, (o, loc)) in out.iter_mut().zip(&locs).enumerate() {
        if let Some(ahead) = locs.get(i + D) {
            prefetch(data, ahead.block * BLOCK_BYTES);
        }
        let block = &data[loc.block * BLOCK_BYTES..(loc.block + 1) * BLOCK_BYTES];
        // SAFETY: `block` is 64 readable bytes; AVX2 is enabled here.
        *o = unsafe { avx2::test(block.as_ptr(), loc.bits) };
    }
}

// ---------------------------------------------------------------------------
// One blocked filter per band

/// Rows processed per chunk of precomputed locations in `query_insert`.
const CHUNK: usize = 64;

/// The b blocked band filters of an LSHBloom index.
#[derive(Debug)]
pub struct BlockedBands {
    filters: Vec<BlockedFile>,
}

impl BlockedBands {
    pub fn new(filters: Vec<BlockedFile>) -> Result<BlockedBands, BloomError> {
        if filters.is_empty() {
            return Err(BloomError::Invalid("at least one band filter is required".into()));
        }
        Ok(BlockedBands { filters })
    }

    pub fn num_bands(&self) -> usize {
        self.filters.len()
    }

    pub fn filters(&self) -> &[BlockedFile] {
        &self.filters
    }

    fn check_keys(&self, keys: &[u64]) -> usize {
        let b = self.filters.len();
        assert_eq!(keys.len() % b, 0, "keys must be an (n, num_bands) matrix");
        keys.len() / b
    }

    fn check_writable(&self) -> Result<(), BloomError> {
        self.filters.iter().try_for_each(|f| f.check_writable())
    }

    /// Locations of rows `rows` of `keys` into `locs` (row-major), prefetching the
    /// first row's blocks.
    fn locate_rows(&self, keys: &[u64], rows: std::ops::Range<usize>, locs: &mut Vec<Loc>) {
        let b = self.filters.len();
        locs.clear();
        for row in keys[rows.start * b..rows.end * b].chunks_exact(b) {
            for (&k, f) in row.iter().zip(&self.filters) {
                locs.push(f.locate(k));
            }
        }
    }

    #[inline(always)]
    fn prefetch_row(&self, locs: &[Loc]) {
        for (loc, f) in locs.iter().zip(&self.filters) {
            prefetch(f.data(), loc.block * BLOCK_BYTES);
        }
    }

    /// Row j is a duplicate iff some band key is in its filter. No inserts.
    pub fn query(&self, keys: &[u64], out: &mut [bool]) {
        let b = self.filters.len();
        assert_eq!(self.check_keys(keys), out.len());
        let mut locs = Vec::with_capacity(CHUNK * b);
        for start in (0..out.len()).step_by(CHUNK) {
            let end = (start + CHUNK).min(out.len());
            self.locate_rows(keys, start..end, &mut locs);
            for r in 0..end - start {
                if let Some(next) = locs.get((r + 1) * b..(r + 2) * b) {
                    self.prefetch_row(next);
                }
                let row = &locs[r * b..(r + 1) * b];
                out[start + r] = row.iter().zip(&self.filters).any(|(l, f)| f.test_loc(*l));
            }
        }
    }

    /// Inserts every row's key i into filter i.
    pub fn insert(&mut self, keys: &[u64]) -> Result<(), BloomError> {
        let b = self.filters.len();
        self.check_keys(keys);
        self.check_writable()?;
        for row in keys.chunks_exact(b) {
            for (&k, f) in row.iter().zip(self.filters.iter_mut()) {
                let loc = f.locate(k);
                let present = BlockedFile::set_loc(f.data_mut()?, loc);
                f.elem_count += u64::from(!present);
            }
        }
        for f in &mut self.filters {
            f.store_elem_count();
        }
        Ok(())
    }

    /// "Keep first": row j (in order) is a duplicate iff some band key is in
    /// its filter; otherwise its keys are inserted before row j+1 is examined.
    pub fn query_insert(&mut self, keys: &[u64], out: &mut [bool]) -> Result<(), BloomError> {
        assert_eq!(self.check_keys(keys), out.len());
        self.check_writable()?;
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 is present (checked).
                return unsafe { self.query_insert_avx2(keys, out) };
            }
        }
        self.query_insert_body(keys, out)
    }

    /// The same loop as [`Self::query_insert_body`] with the block test and
    /// set as AVX2 kernels over raw block pointers.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn query_insert_avx2(&mut self, keys: &[u64], out: &mut [bool]) -> Result<(), BloomError> {
        let b = self.filters.len();
        let n = out.len();
        let mut bases: Vec<*mut u8> = Vec::with_capacity(b);
        for f in self.filters.iter_mut() {
            bases.push(f.data_mut()?.as_mut_ptr());
        }
        let mut locs = Vec::with_capacity(CHUNK * b);
        let mut inserted = 0u64;
        for start in (0..n).step_by(CHUNK) {
            let end = (start + CHUNK).min(n);
            self.locate_rows(keys, start..end, &mut locs);
            self.prefetch_row(&locs[..b]);
            for r in 0..end - start {
                if let Some(next) = locs.get((r + 2) * b..(r + 3) * b) {
                    self.prefetch_row(next);
                }
                let row = &locs[r * b..(r + 1) * b];
                // SAFETY: every `loc.block < num_blocks` (fast range), so each
                // pointer addresses 64 bytes inside its filter's mapping, which
                // `self` keeps alive and which nothing else aliases meanwhile.
                let dup = row
                    .iter()
                    .zip(&bases)
                    .any(|(l, &p)| unsafe { avx2::test(p.add(l.block * BLOCK_BYTES), l.bits) });
                out[start + r] = dup;
                if !dup {
                    for (l, &p) in row.iter().zip(&bases) {
                        // SAFETY: as above.
                        unsafe { avx2::set(p.add(l.block * BLOCK_BYTES), l.bits) };
                    }
                    inserted += 1;
                }
            }
        }
        for f in &mut self.filters {
            f.elem_count += inserted;
            f.store_elem_count();
        }
        Ok(())
    }

    /// Portable loop (also the reference the AVX2 kernel is tested against).
    #[inline(always)]
    pub fn query_insert_body(&mut self, keys: &[u64], out: &mut [bool]) -> Result<(), BloomError> {
        let b = self.filters.len();
        let n = out.len();
        let mut locs = Vec::with_capacity(CHUNK * b);
        let mut inserted = 0u64;
        for start in (0..n).step_by(CHUNK) {
            let end = (start + CHUNK).min(n);
            self.locate_rows(keys, start..end, &mut locs);
            self.prefetch_row(&locs[..b]);
            for r in 0..end - start {
                // Prefetch two documents ahead: their blocks do not depend on
                // this document's inserts.
                if let Some(next) = locs.get((r + 2) * b..(r + 3) * b) {
                    self.prefetch_row(next);
                }
                let row = &locs[r * b..(r + 1) * b];
                let dup = row.iter().zip(&self.filters).any(|(l, f)| f.test_loc(*l));
                out[start + r] = dup;
                if !dup {
                    for (l, f) in row.iter().zip(self.filters.iter_mut()) {
                        BlockedFile::set_loc(f.data_mut()?, *l);
                    }
                    inserted += 1;
                }
            }
        }
        for f in &mut self.filters {
            // A non-duplicate row's key was absent from every band's filter.
            f.elem_count += inserted;
            f.store_elem_count();
        }
        Ok(())
    }

    pub fn sync(&self) -> Result<(), BloomError> {
        self.filters.iter().try_for_each(|f| f.sync())
    }
}

/// Measures a blocked filter's false-positive rate: creates a filter for
/// `capacity` keys at `error_rate` (in memory), inserts `capacity`
/// pseudo-random keys, queries `queries` other pseudo-random keys, and returns
/// (false positives, num_blocks). Keys come from a SplitMix64 stream of `seed`.
pub fn measure_fp(capacity: u64, error_rate: f64, queries: u64, seed: u64) -> Result<(u64, u64), String> {
    let nb = num_blocks_for(capacity, error_rate)?;
    let len = usize::try_from(nb * BLOCK_BYTES as u64).map_err(|_| "too large")?;
    let mut data = vec![0u8; len];
    let fseed = splitmix(&mut (seed ^ 0x5555)).wrapping_add(1);
    let mut st = seed;
    for _ in 0..capacity {
        let k = splitmix(&mut st);
        BlockedFile::set_loc(&mut data, locate(k, fseed, nb));
    }
    // Query keys from a disjoint stream (a different SplitMix64 start); a
    // collision with an inserted key has probability ~ capacity * queries / 2^64.
    let mut qs = seed ^ 0xDEAD_BEEF_CAFE_F00D;
    let mut fp = 0u64;
    for _ in 0..queries {
        let k = splitmix(&mut qs);
        let loc = locate(k, fseed, nb);
        fp += u64::from(test_block(&data[loc.block * BLOCK_BYTES..(loc.block + 1) * BLOCK_BYTES], &masks(loc.bits)));
    }
    Ok((fp, nb))
}

#[inline]
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lshbloom-blocked-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn ln_gamma_matches_factorials() {
        let mut f = 0.0f64;
        for j in 1..60 {
            f += (j as f64).ln();
            assert!((ln_gamma(j as f64 + 1.0) - f).abs() < 1e-9 * f.max(1.0), "{j}");
        }
    }

    #[test]
    fn exact_rate_exceeds_textbook_at_low_p() {
        // At the textbook size for 1e-7 the real rate is clearly higher.
        let n = 1_000_000f64;
        let mut b = 1u64;
        while fp_rate_textbook(n, b) > 1e-7 {
            b *= 2;
        }
        let (mut lo, mut hi) = (b / 2, b);
        while hi - lo > 1 {
            let m = (lo + hi) / 2;
            if fp_rate_textbook(n, m) <= 1e-7 {
                hi = m
            } else {
                lo = m
            }
        }
        assert!(fp_rate(n, hi) > 2e-7, "exact {} at textbook size", fp_rate(n, hi));
        let ours = num_blocks_for(1_000_000, 1e-7).unwrap();
        assert!(ours > hi);
        assert!(fp_rate(n, ours) <= 1e-7 && fp_rate(n, ours - 1) > 1e-7);
    }

    #[test]
    fn measured_rate_within_target() {
        for (cap, p) in [(100_000u64, 1e-2), (100_000, 1e-3), (200_000, 1e-4)] {
            let q = 2_000_000u64;
            let (fp, _) = measure_fp(cap, p, q, 42).unwrap();
            let rate = fp as f64 / q as f64;
            // Within the target, allowing 4 sigma of binomial noise.
            let tol = 4.0 * (p * q as f64).sqrt() / q as f64;
            assert!(rate <= p + tol, "cap {cap} p {p}: measured {rate}");
            // And not absurdly below it (the model is tight, not just an upper bound).
            assert!(rate >= p * 0.5, "cap {cap} p {p}: measured {rate}");
        }
    }

    #[test]
    fn file_roundtrip_and_band_keep_first() {
        let d = tmpdir("bands");
        let mut files = Vec::new();
        for i in 0..3u64 {
            files.push(BlockedFile::create(&d.join(format!("band-{i}.bbf")), 1000, 1e-4, 1234 + i).unwrap());
        }
        let mut bands = BlockedBands::new(files).unwrap();
        // rows: 0 new, 1 shares band 1 with row 0, 2 new, 3 repeats row 2.
        let keys = [1u64, 2, 3, 10, 2, 30, 7, 8, 9, 7, 8, 9];
        let mut out = [false; 4];
        bands.query_insert(&keys, &mut out).unwrap();
        assert_eq!(out, [false, true, false, true]);
        assert_eq!(bands.filters()[0].elem_count(), 2);
        bands.sync().unwrap();
        drop(bands);
        let files: Vec<_> = (0..3).map(|i| BlockedFile::open(&d.join(format!("band-{i}.bbf")), false).unwrap()).collect();
        assert_eq!(files[1].elem_count(), 2);
        assert_eq!(files[2].seed(), 1236);
        let ro = BlockedBands::new(files).unwrap();
        let mut q = [false; 2];
        ro.query(&[1, 99, 99, 100, 101, 102], &mut q);
        assert_eq!(q, [true, false]);
        let mut ro = ro;
        assert!(matches!(ro.query_insert(&[1, 2, 3], &mut [false]), Err(BloomError::ReadOnly { .. })));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn query_insert_equals_naive_over_many_rows() {
        let d = tmpdir("naive");
        let b = 5;
        let mut files = Vec::new();
        for i in 0..b as u64 {
            files.push(BlockedFile::create(&d.join(format!("band-{i}.bbf")), 300, 1e-2, 77 + i).unwrap());
        }
        let mut bands = BlockedBands::new(files).unwrap();
        let mut st = 3u64;
        // Small key alphabet so many rows collide; 1000 rows cross chunk boundaries.
        let keys: Vec<u64> = (0..1000 * b).map(|_| splitmix(&mut st) % 400).collect();
        let mut out = vec![false; 1000];
        bands.query_insert(&keys, &mut out).unwrap();
        // Naive: per-row contains then add.
        let mut naive = Vec::new();
        for i in 0..b as u64 {
            naive.push(BlockedFile::create(&d.join(format!("n-{i}.bbf")), 300, 1e-2, 77 + i).unwrap());
        }
        for (j, row) in keys.chunks_exact(b).enumerate() {
            let dup = row.iter().zip(&naive).any(|(&k, f)| f.contains(k));
            assert_eq!(dup, out[j], "row {j}");
            if !dup {
                for (&k, f) in row.iter().zip(naive.iter_mut()) {
                    f.add_many(&[k], &mut [false]).unwrap();
                }
            }
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn open_rejects_bad_files() {
        let d = tmpdir("bad");
        let p = d.join("x.bbf");
        std::fs::write(&p, b"short").unwrap();
        assert!(matches!(BlockedFile::open(&p, false), Err(BloomError::Format { .. })));
        std::fs::write(&p, [0u8; 128]).unwrap();
        assert!(matches!(BlockedFile::open(&p, false), Err(BloomError::Format { .. })));
        let f = BlockedFile::create(&d.join("ok.bbf"), 10, 0.01, 1).unwrap();
        drop(f);
        let bytes = std::fs::read(d.join("ok.bbf")).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 1]).unwrap();
        assert!(matches!(BlockedFile::open(&p, false), Err(BloomError::Format { .. })));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn avx2_and_scalar_query_insert_agree() {
        let d = tmpdir("simdqi");
        let b = 6;
        let mk = |tag: &str| {
            let files = (0..b as u64)
                .map(|i| BlockedFile::create(&d.join(format!("{tag}-{i}.bbf")), 2000, 1e-2, 5 + i).unwrap())
                .collect();
            BlockedBands::new(files).unwrap()
        };
        let mut st = 17u64;
        let keys: Vec<u64> = (0..3000 * b).map(|_| splitmix(&mut st) % 2500).collect();
        let mut fast = mk("f");
        let mut slow = mk("s");
        let mut a = vec![false; 3000];
        let mut s = vec![false; 3000];
        fast.query_insert(&keys, &mut a).unwrap();
        slow.query_insert_body(&keys, &mut s).unwrap();
        assert_eq!(a, s);
        assert!(a.iter().any(|&x| x) && a.iter().any(|&x| !x));
        for (x, y) in fast.filters().iter().zip(slow.filters()) {
            assert_eq!(x.data(), y.data());
            assert_eq!(x.elem_count(), y.elem_count());
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn avx2_and_scalar_contains_agree() {
        let d = tmpdir("simd");
        let mut f = BlockedFile::create(&d.join("a.bbf"), 5000, 1e-3, 9).unwrap();
        let mut st = 11u64;
        let ins: Vec<u64> = (0..5000).map(|_| splitmix(&mut st)).collect();
        f.add_many(&ins, &mut vec![false; ins.len()]).unwrap();
        let qs: Vec<u64> = (0..20000).map(|_| splitmix(&mut st)).chain(ins.iter().copied()).collect();
        let mut a = vec![false; qs.len()];
        let mut s = vec![false; qs.len()];
        f.contains_many(&qs, &mut a);
        contains_many_body(&f, &qs, &mut s);
        assert_eq!(a, s);
        assert!(a[20000..].iter().all(|&x| x));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
