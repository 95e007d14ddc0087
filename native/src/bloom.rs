//! Memory-mapped Bloom filters in pybloomfiltermmap3 0.6.3's file format, and
//! the multi-band "keep first" query/insert of LSHBloom (DESIGN §2).
//!
//! File layout (x86-64, little-endian), as written by `mbarray_Create_Mmap`:
//!
//! ```text
//! 0     "MBITARRAY"                      9 bytes
//! 9     num_bits                         u64
//! 17    header_len (= 1200)              i32
//! 21    struct _BloomFilter              1200 bytes (offsets below are relative to 21)
//!         0    max_num_elem  u64        (capacity)
//!         8    error_rate    f64
//!         16   num_hashes    u32
//!         20   hash_seeds    [u32; 256]
//!         1048 MBArray*      (8 bytes, zero on disk)
//!         1056 bf_version    u8 (= 1)
//!         1057 count_correct u8 (= 1)
//!         1064 elem_count    u64
//!         1072 reserved      [u32; 32]
//! 1221  zero padding up to the preamble = ceil(1221 / 256) * 256 = 1280
//! 1280  bit data, ceil(num_bits / 8) bytes; bit i is byte i / 8, mask 1 << (i % 8)
//! ```
//!
//! A key (an integer) is hashed as pybloomfilter hashes a Python int: its
//! `hash()` (= key mod 2^61-1 for non-negative ints) as 8 little-endian bytes,
//! through MurmurHash3_x64_128 with each stored seed; bit = (h1 ^ h2) % num_bits.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapMut, MmapOptions};


pub const MAGIC: &[u8; 9] = b"MBITARRAY";
/// `sizeof(struct _BloomFilter)` on x86-64.
pub const HEADER_LEN: usize = 1200;
pub const OFF_NUM_BITS: usize = 9;
pub const OFF_HEADER_LEN: usize = 17;
pub const OFF_HEADER: usize = 21;
pub const H_MAX_NUM_ELEM: usize = 0;
pub const H_ERROR_RATE: usize = 8;
pub const H_NUM_HASHES: usize = 16;
pub const H_HASH_SEEDS: usize = 20;
pub const H_ARRAY_PTR: usize = 1048;
pub const H_BF_VERSION: usize = 1056;
pub const H_COUNT_CORRECT: usize = 1057;
pub const H_ELEM_COUNT: usize = 1064;
pub const MAX_HASHES: usize = 256;
pub const BF_VERSION: u8 = 1;

/// Bytes before the bit data: magic, num_bits, header_len and header, rounded
/// up to a multiple of 256 (1280 for the 1200-byte header).
pub const fn preamble_len(header_len: usize) -> usize {
    (OFF_HEADER + header_len).div_ceil(256) * 256
}

pub const PREAMBLE: usize = preamble_len(HEADER_LEN);

/// Errors of this module; the bindings map them to Python exceptions.
#[derive(Debug)]
pub enum BloomError {
    /// OS error on a file (becomes `OSError` with errno and path).
    Io { path: PathBuf, source: io::Error },
    /// The file is not a valid filter (becomes `ValueError` naming the file).
    Format { path: PathBuf, msg: String },
    /// A write on a filter opened read-only (becomes `PermissionError`).
    ReadOnly { path: PathBuf },
    /// Bad argument (becomes `ValueError`).
    Invalid(String),
}

impl std::fmt::Display for BloomError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BloomError::Io { path, source } => write!(f, "{}: {}", path.display(), source),
            BloomError::Format { path, msg } => write!(f, "{}: {}", path.display(), msg),
            BloomError::ReadOnly { path } => write!(f, "{}: opened read-only", path.display()),
            BloomError::Invalid(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for BloomError {}

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

// ---------------------------------------------------------------------------
// MurmurHash3_x64_128 (port of MurmurHash3.c, little-endian)

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

#[inline(always)]
pub fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// MurmurHash3_x64_128 of `data` with a 32-bit seed; returns (h1, h2).
pub fn murmur3_x64_128(data: &[u8], seed: u32) -> (u64, u64) {
    let len = data.len();
    let mut h1 = u64::from(seed);
    let mut h2 = u64::from(seed);
    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let mut k1 = u64::from_le_bytes(block[0..8].try_into().unwrap());
        let mut k2 = u64::from_le_bytes(block[8..16].try_into().unwrap());
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
        h1 = h1.rotate_left(27).wrapping_add(h2).wrapping_mul(5).wrapping_add(0x52dc_e729);
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
        h2 = h2.rotate_left(31).wrapping_add(h1).wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    let mut k1 = 0u64;
    let mut k2 = 0u64;
    for (i, &byte) in tail.iter().enumerate() {
        if i < 8 {
            k1 ^= u64::from(byte) << (8 * i);
        } else {
            k2 ^= u64::from(byte) << (8 * (i - 8));
        }
    }
    if tail.len() > 8 {
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
    }
    if !tail.is_empty() {
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
    }
    h1 ^= len as u64;
    h2 ^= len as u64;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// MurmurHash3_x64_128 of the 8 little-endian bytes of `key` (specialized).
#[inline(always)]
pub fn murmur3_u64(key: u64, seed: u32) -> (u64, u64) {
    let mut h1 = u64::from(seed);
    let mut h2 = u64::from(seed);
    h1 ^= key.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
    h1 ^= 8;
    h2 ^= 8;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// Python's `hash()` of a non-negative int that fits in a u64.
#[inline(always)]
pub fn py_int_hash(x: u64) -> u64 {
    crate::minhash::mod_mersenne61(x)
}

// ---------------------------------------------------------------------------
// Fast `x % d` for a fixed 64-bit divisor (Lemire, Kaser & Kurz, "Faster
// remainder by direct computation", with a 128-bit fraction: exact for all u64).

#[derive(Debug, Clone, Copy)]
pub struct FastMod {
    d: u64,
    m: u128,
}

impl FastMod {
    pub fn new(d: u64) -> FastMod {
        assert!(d > 0);
        // ceil(2^128 / d); wraps to 0 for d == 1, which then yields 0 as required.
        FastMod {
            d,
            m: (u128::MAX / u128::from(d)).wrapping_add(1),
        }
    }

    #[inline(always)]
    pub fn rem(&self, x: u64) -> u64 {
        let low = self.m.wrapping_mul(u128::from(x));
        let d = u128::from(self.d);
        let hi = (low >> 64) * d;
        let lo = ((low as u64 as u128) * d) >> 64;
        ((hi + lo) >> 64) as u64
    }
}

// ---------------------------------------------------------------------------
// Geometry

/// pybloomfilter's `_create` sizing, with the same f64 operations in the same
/// order: returns (num_hashes, num_bits). `num_hashes` is the number of seeds
/// when given, otherwise max(floor(log2(1/p)), 1).
pub fn geometry(capacity: u64, error_rate: f64, num_hashes: Option<usize>) -> Result<(u32, u64), String> {
    if error_rate.is_nan() || error_rate <= 0.0 || error_rate >= 1.0 {
        return Err(format!("error_rate must be in (0, 1), got {error_rate}"));
    }
    let nh: u64 = match num_hashes {
        Some(n) => {
            if n == 0 || n > MAX_HASHES {
                return Err(format!("number of hash seeds must be in 1..=256, got {n}"));
            }
            n as u64
        }
        None => {
            let f = (1.0 / error_rate).log2().floor();
            if f > MAX_HASHES as f64 {
                return Err(format!(
                    "error_rate {error_rate} needs {f} hashes; pybloomfiltermmap3 supports at most 256"
                ));
            }
            (f as u64).max(1)
        }
    };
    let ln2 = 2f64.ln();
    let bits_per_hash = (capacity as f64 * error_rate.ln().abs() / (nh as f64 * (ln2 * ln2))).ceil();
    // (Also rejects NaN / infinity.)
    if !bits_per_hash.is_finite() || bits_per_hash >= 2f64.powi(63) {
        return Err(format!("capacity {capacity} is too large"));
    }
    let total = u128::from(nh) * (bits_per_hash as u128);
    let num_bits = ((total as f64 / 8.0).ceil() * 8.0).max(128.0);
    if num_bits >= 2f64.powi(63) {
        return Err(format!("capacity {capacity} is too large"));
    }
    Ok((nh as u32, num_bits as u64))
}

// ---------------------------------------------------------------------------
// One filter file

#[derive(Debug)]
enum Map {
    Ro(Mmap),
    Rw(MmapMut),
}

impl Map {
    fn bytes(&self) -> &[u8] {
        match self {
            Map::Ro(m) => m,
            Map::Rw(m) => m,
        }
    }
}

/// A pybloomfiltermmap3 filter file, memory-mapped.
#[derive(Debug)]
pub struct BloomFile {
    path: PathBuf,
    map: Map,
    num_bits: u64,
    seeds: Vec<u32>,
    capacity: u64,
    error_rate: f64,
    count_correct: bool,
    elem_count: u64,
    data_len: usize,
    file_size: u64,
    fastmod: FastMod,
}

/// Encodes the 1200-byte header exactly as pybloomfilter writes it at creation.
pub fn encode_header(capacity: u64, error_rate: f64, seeds: &[u32], elem_count: u64) -> Vec<u8> {
    let mut h = vec![0u8; HEADER_LEN];
    h[H_MAX_NUM_ELEM..H_MAX_NUM_ELEM + 8].copy_from_slice(&capacity.to_le_bytes());
    h[H_ERROR_RATE..H_ERROR_RATE + 8].copy_from_slice(&error_rate.to_le_bytes());
    h[H_NUM_HASHES..H_NUM_HASHES + 4].copy_from_slice(&(seeds.len() as u32).to_le_bytes());
    for (i, s) in seeds.iter().enumerate() {
        let o = H_HASH_SEEDS + 4 * i;
        h[o..o + 4].copy_from_slice(&s.to_le_bytes());
    }
    // H_ARRAY_PTR: the in-memory MBArray* is NULL when the header is written.
    debug_assert!(h[H_ARRAY_PTR..H_ARRAY_PTR + 8].iter().all(|&b| b == 0));
    h[H_BF_VERSION] = BF_VERSION;
    h[H_COUNT_CORRECT] = 1;
    h[H_ELEM_COUNT..H_ELEM_COUNT + 8].copy_from_slice(&elem_count.to_le_bytes());
    h
}

fn le_u64(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

fn le_u32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

impl BloomFile {
    /// Creates a new filter file (fails if `path` exists), sized as pybloomfilter
    /// sizes `BloomFilter(capacity, error_rate, path, hash_seeds=seeds)`.
    pub fn create(path: &Path, capacity: u64, error_rate: f64, seeds: &[u32]) -> Result<BloomFile, BloomError> {
        let (_, num_bits) = geometry(capacity, error_rate, Some(seeds.len())).map_err(BloomError::Invalid)?;
        let data_len = usize::try_from(num_bits.div_ceil(8))
            .map_err(|_| BloomError::Invalid(format!("filter of {num_bits} bits is too large")))?;
        let file_size = (PREAMBLE + data_len) as u64;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io_err(path))?;
        let mut pre = vec![0u8; PREAMBLE];
        pre[..9].copy_from_slice(MAGIC);
        pre[OFF_NUM_BITS..OFF_NUM_BITS + 8].copy_from_slice(&num_bits.to_le_bytes());
        pre[OFF_HEADER_LEN..OFF_HEADER_LEN + 4].copy_from_slice(&(HEADER_LEN as i32).to_le_bytes());
        pre[OFF_HEADER..OFF_HEADER + HEADER_LEN]
            .copy_from_slice(&encode_header(capacity, error_rate, seeds, 0));
        let init = (|| -> io::Result<()> {
            file.write_all_at(&pre, 0)?;
            file.set_len(file_size)?;
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

    /// Opens and validates an existing filter file.
    pub fn open(path: &Path, writable: bool) -> Result<BloomFile, BloomError> {
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(io_err(path))?;
        let file_size = file.metadata().map_err(io_err(path))?.len();
        let pre = read_preamble(&file, path, file_size)?;
        let num_bits = le_u64(&pre, OFF_NUM_BITS);
        let header = &pre[OFF_HEADER..OFF_HEADER + HEADER_LEN];
        let num_hashes = le_u32(header, H_NUM_HASHES) as usize;
        if num_bits == 0 {
            return Err(format_err(path, "invalid header: num_bits is 0"));
        }
        if num_hashes == 0 || num_hashes > MAX_HASHES {
            return Err(format_err(
                path,
                format!("invalid header: num_hashes is {num_hashes}, expected 1..=256"),
            ));
        }
        let data_len = num_bits.div_ceil(8);
        let expected = PREAMBLE as u64 + data_len;
        if file_size < expected {
            return Err(format_err(
                path,
                format!("truncated: expected {expected} bytes, found {file_size}"),
            ));
        }
        let data_len = usize::try_from(data_len)
            .map_err(|_| format_err(path, format!("filter of {num_bits} bits is too large")))?;
        let seeds = (0..num_hashes)
            .map(|i| le_u32(header, H_HASH_SEEDS + 4 * i))
            .collect();
        let map_len = PREAMBLE + data_len;
        // SAFETY: the mapping is only accessed through this struct; as with
        // pybloomfilter, another process truncating the file while it is mapped
        // is not supported.
        let map = unsafe {
            if writable {
                Map::Rw(MmapOptions::new().len(map_len).map_mut(&file).map_err(io_err(path))?)
            } else {
                Map::Ro(MmapOptions::new().len(map_len).map(&file).map_err(io_err(path))?)
            }
        };
        Ok(BloomFile {
            path: path.to_path_buf(),
            map,
            num_bits,
            seeds,
            capacity: le_u64(header, H_MAX_NUM_ELEM),
            error_rate: f64::from_le_bytes(header[H_ERROR_RATE..H_ERROR_RATE + 8].try_into().unwrap()),
            count_correct: header[H_COUNT_CORRECT] != 0,
            elem_count: le_u64(header, H_ELEM_COUNT),
            data_len,
            file_size,
            fastmod: FastMod::new(num_bits),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn num_bits(&self) -> u64 {
        self.num_bits
    }
    pub fn num_hashes(&self) -> usize {
        self.seeds.len()
    }
    pub fn seeds(&self) -> &[u32] {
        &self.seeds
    }
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
    pub fn error_rate(&self) -> f64 {
        self.error_rate
    }
    pub fn elem_count(&self) -> u64 {
        self.elem_count
    }
    pub fn file_size(&self) -> u64 {
        self.file_size
    }
    pub fn writable(&self) -> bool {
        matches!(self.map, Map::Rw(_))
    }

    /// The bit-data region.
    pub fn data(&self) -> &[u8] {
        &self.map.bytes()[PREAMBLE..PREAMBLE + self.data_len]
    }

    fn data_mut(&mut self) -> Result<&mut [u8], BloomError> {
        match &mut self.map {
            Map::Rw(m) => Ok(&mut m[PREAMBLE..PREAMBLE + self.data_len]),
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

    /// Bit positions of `key`, one per seed, appended to `out`.
    #[inline]
    pub fn positions(&self, key: u64, out: &mut Vec<u64>) {
        let hk = py_int_hash(key);
        for &s in &self.seeds {
            let (h1, h2) = murmur3_u64(hk, s);
            out.push(self.fastmod.rem(h1 ^ h2));
        }
    }

    #[inline(always)]
    fn test_positions(data: &[u8], pos: &[u64]) -> bool {
        pos.iter().all(|&p| data[(p >> 3) as usize] & (1u8 << (p & 7)) != 0)
    }

    #[inline(always)]
    fn set_positions(data: &mut [u8], pos: &[u64]) {
        for &p in pos {
            data[(p >> 3) as usize] |= 1u8 << (p & 7);
        }
    }

    /// Is `key` (probably) in the filter?
    pub fn contains(&self, key: u64) -> bool {
        let hk = py_int_hash(key);
        let data = self.data();
        self.seeds.iter().all(|&s| {
            let (h1, h2) = murmur3_u64(hk, s);
            let p = self.fastmod.rem(h1 ^ h2);
            data[(p >> 3) as usize] & (1u8 << (p & 7)) != 0
        })
    }

    /// Adds `key`; returns whether it was already present. Counts it in
    /// `elem_count` when it was not (pybloomfilter's `bloomfilter_Add` rule).
    /// The mapped header's `elem_count` is updated by [`BloomFile::store_elem_count`].
    fn add_one(&mut self, key: u64, pos: &mut Vec<u64>) -> Result<bool, BloomError> {
        pos.clear();
        self.positions(key, pos);
        let data = self.data_mut()?;
        let present = Self::test_positions(data, pos);
        Self::set_positions(data, pos);
        if !present && self.count_correct {
            self.elem_count += 1;
        }
        Ok(present)
    }

    /// Writes the in-memory `elem_count` into the mapped header.
    fn store_elem_count(&mut self) {
        let count = self.elem_count;
        if let Map::Rw(m) = &mut self.map {
            let o = OFF_HEADER + H_ELEM_COUNT;
            m[o..o + 8].copy_from_slice(&count.to_le_bytes());
        }
    }

    pub fn contains_many(&self, keys: &[u64], out: &mut [bool]) {
        assert_eq!(keys.len(), out.len());
        for (o, &k) in out.iter_mut().zip(keys) {
            *o = self.contains(k);
        }
    }

    /// Adds every key; `out[i]` = was key i already present (earlier keys of
    /// the same batch count).
    pub fn add_many(&mut self, keys: &[u64], out: &mut [bool]) -> Result<(), BloomError> {
        assert_eq!(keys.len(), out.len());
        self.check_writable()?;
        let mut pos = Vec::with_capacity(self.seeds.len());
        for (o, &k) in out.iter_mut().zip(keys) {
            *o = self.add_one(k, &mut pos)?;
        }
        self.store_elem_count();
        Ok(())
    }

    /// msync (synchronous) of the whole mapping; no-op when read-only.
    pub fn sync(&self) -> Result<(), BloomError> {
        match &self.map {
            Map::Rw(m) => m.flush().map_err(io_err(&self.path)),
            Map::Ro(_) => Ok(()),
        }
    }
}

fn read_preamble(file: &File, path: &Path, file_size: u64) -> Result<Vec<u8>, BloomError> {
    let min = (OFF_HEADER + HEADER_LEN) as u64;
    if file_size < OFF_HEADER as u64 {
        // Too short even for magic + num_bits + header_len.
        let mut buf = vec![0u8; file_size as usize];
        file.read_exact_at(&mut buf, 0).map_err(io_err(path))?;
        if !MAGIC.starts_with(&buf[..buf.len().min(9)]) || buf.is_empty() {
            return Err(format_err(path, "not a pybloomfiltermmap3 file (bad magic)"));
        }
        return Err(format_err(
            path,
            format!("truncated: expected at least {} bytes, found {file_size}", PREAMBLE),
        ));
    }
    let mut head = [0u8; OFF_HEADER];
    file.read_exact_at(&mut head, 0).map_err(io_err(path))?;
    if &head[..9] != MAGIC {
        return Err(format_err(path, "not a pybloomfiltermmap3 file (bad magic)"));
    }
    let header_len = i32::from_le_bytes(head[OFF_HEADER_LEN..OFF_HEADER_LEN + 4].try_into().unwrap());
    if header_len != HEADER_LEN as i32 {
        return Err(format_err(
            path,
            format!("unsupported header length {header_len} (expected {HEADER_LEN}, x86-64 pybloomfiltermmap3)"),
        ));
    }
    if file_size < PREAMBLE as u64 {
        let _ = min;
        return Err(format_err(
            path,
            format!("truncated: expected at least {PREAMBLE} bytes, found {file_size}"),
        ));
    }
    let mut pre = vec![0u8; PREAMBLE];
    file.read_exact_at(&mut pre, 0).map_err(io_err(path))?;
    Ok(pre)
}

// ---------------------------------------------------------------------------
// One filter per band

/// The b band filters of an LSHBloom index.
#[derive(Debug)]
pub struct BandFilters {
    filters: Vec<BloomFile>,
    pos: Vec<u64>,
    offsets: Vec<usize>,
}

impl BandFilters {
    pub fn new(filters: Vec<BloomFile>) -> Result<BandFilters, BloomError> {
        if filters.is_empty() {
            return Err(BloomError::Invalid("at least one band filter is required".into()));
        }
        let mut offsets = Vec::with_capacity(filters.len() + 1);
        let mut total = 0;
        offsets.push(0);
        for f in &filters {
            total += f.num_hashes();
            offsets.push(total);
        }
        Ok(BandFilters {
            filters,
            pos: Vec::with_capacity(total),
            offsets,
        })
    }

    pub fn num_bands(&self) -> usize {
        self.filters.len()
    }

    pub fn filters(&self) -> &[BloomFile] {
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

    /// Row j is a duplicate iff some band key is in its filter. No inserts.
    pub fn query(&self, keys: &[u64], out: &mut [bool]) {
        let b = self.filters.len();
        assert_eq!(self.check_keys(keys), out.len());
        for (row, o) in keys.chunks_exact(b).zip(out.iter_mut()) {
            *o = row.iter().zip(&self.filters).any(|(&k, f)| f.contains(k));
        }
    }

    /// Inserts every row's key i into filter i.
    pub fn insert(&mut self, keys: &[u64]) -> Result<(), BloomError> {
        let b = self.filters.len();
        self.check_keys(keys);
        self.check_writable()?;
        let mut pos = std::mem::take(&mut self.pos);
        for row in keys.chunks_exact(b) {
            for (&k, f) in row.iter().zip(self.filters.iter_mut()) {
                f.add_one(k, &mut pos)?;
            }
        }
        self.pos = pos;
        for f in &mut self.filters {
            f.store_elem_count();
        }
        Ok(())
    }

    /// "Keep first": row j (in order) is a duplicate iff some band key is in its
    /// filter; otherwise all its keys are inserted before row j+1 is examined.
    pub fn query_insert(&mut self, keys: &[u64], out: &mut [bool]) -> Result<(), BloomError> {
        let b = self.filters.len();
        assert_eq!(self.check_keys(keys), out.len());
        self.check_writable()?;
        let mut pos = std::mem::take(&mut self.pos);
        let mut next = Vec::with_capacity(pos.capacity());
        let mut inserted = 0u64;
        let mut rows = keys.chunks_exact(b);
        if let Some(first) = rows.next() {
            pos.clear();
            self.positions_prefetched(first, &mut pos);
        }
        for o in out.iter_mut() {
            // Software prefetch across documents: the bit positions of the next
            // document do not depend on this one's inserts, so compute them and
            // start their cache-line loads before this document's tests.
            next.clear();
            if let Some(row) = rows.next() {
                self.positions_prefetched(row, &mut next);
            }
            let dup = self.filters.iter().enumerate().any(|(i, f)| {
                BloomFile::test_positions(f.data(), &pos[self.offsets[i]..self.offsets[i + 1]])
            });
            *o = dup;
            if !dup {
                for (i, f) in self.filters.iter_mut().enumerate() {
                    let data = f.data_mut()?;
                    BloomFile::set_positions(data, &pos[self.offsets[i]..self.offsets[i + 1]]);
                }
                inserted += 1;
            }
            std::mem::swap(&mut pos, &mut next);
        }
        self.pos = pos;
        for f in &mut self.filters {
            if f.count_correct {
                f.elem_count += inserted;
            }
            f.store_elem_count();
        }
        Ok(())
    }

    /// Bit positions of one row's band keys (band after band) appended to
    /// `pos`, each one's cache line prefetched.
    #[inline]
    fn positions_prefetched(&self, row: &[u64], pos: &mut Vec<u64>) {
        for (&k, f) in row.iter().zip(&self.filters) {
            let start = pos.len();
            f.positions(k, pos);
            let data = f.data();
            for &p in &pos[start..] {
                prefetch(data, (p >> 3) as usize);
            }
        }
    }

    pub fn sync(&self) -> Result<(), BloomError> {
        self.filters.iter().try_for_each(|f| f.sync())
    }
}

/// Hints the CPU to load the cache line of `data[i]` (no effect on results).
#[inline(always)]
pub fn prefetch(data: &[u8], i: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if i < data.len() {
            // SAFETY: prefetch never faults and does not dereference in the
            // language sense; the address is inside `data` anyway.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    data.as_ptr().add(i).cast::<i8>(),
                )
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (data, i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minhash::MERSENNE61;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lshbloom-native-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn murmur3_known_vectors() {
        // Reference outputs of the C MurmurHash3_x64_128 (as used by mmh3.hash128 /
        // mmh3.hash64, little-endian halves).
        assert_eq!(murmur3_x64_128(b"", 0), (0, 0));
        assert_eq!(
            murmur3_x64_128(b"hello", 0),
            (0xcbd8a7b341bd9b02, 0x5b1e906a48ae1d19)
        );
        assert_eq!(
            murmur3_x64_128(b"The quick brown fox jumps over the lazy dog", 0),
            (0xe34bbc7bbc071b6c, 0x7a433ca9c49a9347)
        );
    }

    #[test]
    fn murmur3_u64_specialization_matches_generic() {
        let mut x = 0x0123_4567_89ab_cdefu64;
        for seed in [0u32, 1, 42, 0xFFFF_FFFF, 2_147_483_648] {
            for _ in 0..1000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                assert_eq!(murmur3_u64(x, seed), murmur3_x64_128(&x.to_le_bytes(), seed));
            }
        }
    }

    #[test]
    fn murmur3_all_tail_lengths() {
        // MurmurHash3_x64_128(bytes 0, 1, ..., len-1; seed 7), from the C source
        // compiled as is (pybloomfiltermmap3-0.6.3/src/MurmurHash3.c).
        const EXPECTED: &[(usize, u64, u64)] = &[
            (0, 0xf402c55ac5dec98f, 0x2de586f681711c02),
            (1, 0x7d480f9fa80ec469, 0x719af4070b74d89d),
            (2, 0xe782918eb8b27e84, 0x008f0e9b03c4ab1c),
            (3, 0x72ca291a6a777918, 0x1f31ec190045b159),
            (4, 0xee50d1d3f7ce76ab, 0x3d32fe53f455d0ac),
            (5, 0x89977ab6ddbbfa1e, 0x14a47f01c8a25694),
            (6, 0x1f57c8a69f7a7e91, 0x13ce9b785340fa25),
            (7, 0xd957d6ca33cdb458, 0xc603c22f4db48e84),
            (8, 0xb1add0ce5e581561, 0xbb431fe101d9f8f4),
            (9, 0xdc2366f6bc543c1c, 0xf9328dba8f5f8217),
            (10, 0x84bfddeb15040a1e, 0x8f2e83c960036bec),
            (11, 0x14d2ce892ad595a7, 0xedbb07d04e6feca5),
            (12, 0x2ff54948468a1945, 0xb97b510dfb038b57),
            (13, 0xdabd72ebe3032eea, 0xdcb62a4db60b577e),
            (14, 0x73e4765cebd53674, 0xf9bb7c88f5e61c8b),
            (15, 0x688bea6b8b27a4ae, 0x1955659341ae9e4b),
            (16, 0xbdccfbf89cfd226f, 0xfe917a495ceec318),
            (17, 0x779e800196ee1661, 0x0edef569f03ff70b),
            (18, 0x9560d0deaff5d8ba, 0x203eb0ce438ba5b2),
            (19, 0x3555ea0d60a9b9ba, 0x1ebb9df91d23e0f7),
            (20, 0x0145ea95e7b8f63e, 0xe217fd399d03054f),
            (21, 0x956af06e2789ab6b, 0x0f8c1707ad220ef7),
            (22, 0xf4fc21cd01c25740, 0xc28e2f2ba16ffb26),
            (23, 0xb5c714b6795025ba, 0x0a3d1dc90daf6960),
            (24, 0xf4efcaaae938c3cc, 0x86c3b81454570ad0),
            (25, 0xb5c90f3689eec1e0, 0xd0375b1140279277),
            (26, 0x7f3d8c6e9ef38984, 0xd1d7691c1ea44bb8),
            (27, 0x071184fa9465c6b1, 0xdc02d99e6b1e7abc),
            (28, 0x4ef5dabc5202871b, 0x448586906a510c6d),
            (29, 0x315e16ddd4e230b4, 0x10c106308da15dac),
            (30, 0x4e842f25c6f38330, 0xe4185866f257f31a),
            (31, 0x04365954be67f77e, 0x5a9e408d5359e11c),
            (32, 0x39a625dafaff2a0f, 0x471ed6ce98720555),
            (33, 0xc01074f451f7d7f0, 0x66d3eaa938ac0eb5),
            (34, 0x548401b8346762cb, 0xd2cbc7b875568a27),
            (35, 0x56a3f8161cd5c18e, 0x24b68eee6bf686d6),
            (36, 0x5bc46b6c00ec6022, 0xf8a29522b82125e9),
            (37, 0xdfa273e707b3b1a6, 0xa00e3d0be380f002),
            (38, 0xa109b985c9fb40eb, 0x12776b8094aaa632),
            (39, 0xb16adbae50ede124, 0x767a04c6c91fb43c),
            (40, 0x345a060429ccb14b, 0xe3e244e7186f73c9),
        ];
        let data: Vec<u8> = (0..40u8).collect();
        for &(len, h1, h2) in EXPECTED {
            assert_eq!(murmur3_x64_128(&data[..len], 7), (h1, h2), "len {len}");
        }
        // 8-byte key, seed 42.
        assert_eq!(
            murmur3_x64_128(&123_456_789u64.to_le_bytes(), 42),
            (0x99598a7d2e0a8c2b, 0x93d587ff0c99c65e)
        );
        assert_eq!(murmur3_u64(123_456_789, 42), (0x99598a7d2e0a8c2b, 0x93d587ff0c99c65e));
    }

    #[test]
    fn fastmod_matches_rem() {
        let mut x = 99u64;
        let divisors = [1u64, 2, 3, 7, 128, 1000, 31_536_008, (1 << 40) + 5, u64::MAX, u64::MAX - 1, 1 << 63];
        for &d in &divisors {
            let fm = FastMod::new(d);
            for v in [0, 1, d - 1, d, d.wrapping_add(1), u64::MAX, u64::MAX - 1] {
                assert_eq!(fm.rem(v), v % d, "{v} % {d}");
            }
            for _ in 0..20_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                assert_eq!(fm.rem(x), x % d, "{x} % {d}");
            }
        }
    }

    #[test]
    fn geometry_matches_pybloomfilter() {
        // (capacity, error_rate) -> (num_hashes, num_bits) from pybloomfilter 0.6.3.
        assert_eq!(geometry(1000, 0.01, None).unwrap(), (6, 9592));
        assert_eq!(geometry(1, 0.5, None).unwrap(), (1, 128));
        assert_eq!(geometry(0, 0.1, None).unwrap(), (3, 128));
        assert_eq!(geometry(1_000_000, 1e-5, None).unwrap(), (16, 23_962_656));
        assert_eq!(geometry(100_000, 0.001, Some(4)).unwrap(), (4, 1_437_760));
        assert!(geometry(10, 0.0, None).is_err());
        assert!(geometry(10, 1.0, None).is_err());
        assert!(geometry(10, 0.1, Some(0)).is_err());
        assert!(geometry(10, 0.1, Some(257)).is_err());
    }

    #[test]
    fn header_offsets() {
        let h = encode_header(5, 0.25, &[7, 9], 3);
        assert_eq!(h.len(), 1200);
        assert_eq!(le_u64(&h, 0), 5);
        assert_eq!(&h[8..16], &0.25f64.to_le_bytes());
        assert_eq!(le_u32(&h, 16), 2);
        assert_eq!(le_u32(&h, 20), 7);
        assert_eq!(le_u32(&h, 24), 9);
        assert_eq!(h[1056], 1);
        assert_eq!(h[1057], 1);
        assert_eq!(le_u64(&h, 1064), 3);
        assert_eq!(PREAMBLE, 1280);
    }

    #[test]
    fn create_open_add_contains() {
        let d = tmpdir("basic");
        let p = d.join("f.bf");
        let mut f = BloomFile::create(&p, 1000, 0.01, &[1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(f.num_bits(), 9592);
        assert_eq!(f.file_size(), 1280 + 1199);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 2479);
        let keys: Vec<u64> = (0..500u64).map(|i| i * 7919 + 3).collect();
        let mut out = vec![true; keys.len()];
        f.add_many(&keys, &mut out).unwrap();
        assert_eq!(f.elem_count(), out.iter().filter(|&&x| !x).count() as u64);
        let mut again = vec![false; keys.len()];
        f.add_many(&keys, &mut again).unwrap();
        assert!(again.iter().all(|&x| x));
        f.sync().unwrap();
        let count = f.elem_count();
        drop(f);
        let g = BloomFile::open(&p, false).unwrap();
        assert_eq!(g.elem_count(), count);
        assert_eq!(g.seeds(), &[1, 2, 3, 4, 5, 6]);
        assert_eq!(g.capacity(), 1000);
        assert_eq!(g.error_rate(), 0.01);
        let mut c = vec![false; keys.len()];
        g.contains_many(&keys, &mut c);
        assert!(c.iter().all(|&x| x));
        let fp = (1_000_000u64..1_010_000).filter(|&k| g.contains(k)).count();
        assert!(fp < 400, "false positives {fp}");
        // Key x and x + (2^61 - 1) hash identically (Python int hash).
        assert!(g.contains(keys[0] + MERSENNE61));
        // Read-only writes are refused.
        let mut g = g;
        let err = g.add_many(&[1], &mut [false]).unwrap_err();
        assert!(matches!(err, BloomError::ReadOnly { .. }));
        assert!(err.to_string().ends_with("opened read-only"));
        // Creating over an existing file fails.
        let err = BloomFile::create(&p, 10, 0.1, &[1]).unwrap_err();
        assert!(matches!(err, BloomError::Io { .. }));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn open_validation() {
        let d = tmpdir("validate");
        let p = d.join("ok.bf");
        drop(BloomFile::create(&p, 1000, 0.01, &[1, 2]).unwrap());
        let good = std::fs::read(&p).unwrap();
        let check = |name: &str, bytes: &[u8], needle: &str| {
            let q = d.join(name);
            std::fs::write(&q, bytes).unwrap();
            let e = BloomFile::open(&q, false).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, BloomError::Format { .. }), "{msg}");
            assert!(msg.contains(name) && msg.contains(needle), "{msg}");
        };
        check("empty.bf", &[], "bad magic");
        check("short.bf", b"MBITAR", "truncated");
        let mut bad = good.clone();
        bad[0] = b'X';
        check("magic.bf", &bad, "bad magic");
        let mut bad = good.clone();
        bad[17] = 0;
        check("hlen.bf", &bad, "header length");
        let mut bad = good.clone();
        bad[21 + 16..21 + 20].copy_from_slice(&0u32.to_le_bytes());
        check("nh0.bf", &bad, "num_hashes");
        let mut bad = good.clone();
        bad[21 + 16..21 + 20].copy_from_slice(&300u32.to_le_bytes());
        check("nh300.bf", &bad, "num_hashes");
        let mut bad = good.clone();
        bad[9..17].copy_from_slice(&0u64.to_le_bytes());
        check("bits0.bf", &bad, "num_bits");
        check("trunc.bf", &good[..good.len() - 1], &format!("expected {} bytes, found {}", good.len(), good.len() - 1));
        check("trunc2.bf", &good[..1000], "truncated");
        let e = BloomFile::open(&d.join("missing.bf"), false).unwrap_err();
        assert!(matches!(e, BloomError::Io { .. }));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn band_filters_keep_first() {
        let d = tmpdir("bands");
        let files: Vec<BloomFile> = (0..3)
            .map(|i| BloomFile::create(&d.join(format!("band-{i}.bf")), 1000, 0.001, &[11, 22, 33, 44]).unwrap())
            .collect();
        let mut bf = BandFilters::new(files).unwrap();
        // Row 1 shares band 2 with row 0; row 2 is new; row 3 repeats row 2's band 0.
        let keys = [1u64, 2, 3, 10, 20, 3, 100, 200, 300, 100, 7, 8];
        let mut q = [true; 4];
        bf.query(&keys, &mut q);
        assert_eq!(q, [false; 4]);
        let mut out = [false; 4];
        bf.query_insert(&keys, &mut out).unwrap();
        assert_eq!(out, [false, true, false, true]);
        // Duplicates were not inserted: 10, 20 and 7, 8 are absent.
        assert!(!bf.filters()[0].contains(10) && !bf.filters()[1].contains(20));
        assert!(!bf.filters()[1].contains(7) && !bf.filters()[2].contains(8));
        assert!(bf.filters().iter().all(|f| f.elem_count() == 2));
        bf.query(&keys, &mut q);
        assert_eq!(q, [true; 4]);
        bf.insert(&[5, 6, 7]).unwrap();
        assert!(bf.filters()[2].contains(7));
        assert_eq!(bf.filters()[0].elem_count(), 3);
        bf.sync().unwrap();
        drop(bf);
        let ro: Vec<BloomFile> = (0..3)
            .map(|i| BloomFile::open(&d.join(format!("band-{i}.bf")), false).unwrap())
            .collect();
        let mut ro = BandFilters::new(ro).unwrap();
        assert_eq!(ro.filters()[1].elem_count(), 3);
        assert!(matches!(ro.query_insert(&[1, 2, 3], &mut [false]), Err(BloomError::ReadOnly { .. })));
        assert!(matches!(ro.insert(&[1, 2, 3]), Err(BloomError::ReadOnly { .. })));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
