//! One blocked Bloom filter file (format in the module docs of `blocked`).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

#[cfg(target_arch = "x86_64")]
use super::kernel::Avx2;
use super::kernel::{self, locate, BlockOps, Loc, Portable};
use super::sizing::num_blocks_for;
use super::{BLOCK_BYTES, HEADER_LEN, MAGIC, VERSION};
use crate::bandset::{FileCore, FilterFile};
use crate::error::{format_err, io_err, BloomError};
use crate::mapped::{self, le_f64, le_u32, le_u64, MappedFile};
use crate::prefetch::prefetch;

/// Offset of `elem_count` in the header.
const OFF_ELEM_COUNT: usize = 48;

/// One blocked Bloom filter file, memory-mapped.
#[derive(Debug)]
pub struct BlockedFile {
    core: FileCore,
    num_blocks: u64,
    seed: u64,
}

fn encode_header(num_blocks: u64, capacity: u64, error_rate: f64, seed: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    h[16..24].copy_from_slice(&num_blocks.to_le_bytes());
    h[24..32].copy_from_slice(&capacity.to_le_bytes());
    h[32..40].copy_from_slice(&error_rate.to_le_bytes());
    h[40..48].copy_from_slice(&seed.to_le_bytes());
    h
}

/// The header of the `size`-byte file at `path`, validated against its size.
fn read_header(file: &File, path: &Path, size: u64) -> Result<[u8; HEADER_LEN], BloomError> {
    if size < HEADER_LEN as u64 {
        return Err(format_err(path, format!("truncated: {size} bytes, no blocked-filter header")));
    }
    let mut h = [0u8; HEADER_LEN];
    file.read_exact_at(&mut h, 0).map_err(io_err(path))?;
    if &h[..8] != MAGIC {
        return Err(format_err(path, "not a blocked Bloom filter file (bad magic)"));
    }
    let version = le_u32(&h, 8);
    let header_len = le_u32(&h, 12);
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
    Ok(h)
}

impl BlockedFile {
    /// Creates a new file (fails if `path` exists) sized by [`num_blocks_for`].
    pub fn create(path: &Path, capacity: u64, error_rate: f64, seed: u64) -> Result<BlockedFile, BloomError> {
        let num_blocks = num_blocks_for(capacity, error_rate).map_err(BloomError::Invalid)?;
        let data_len = num_blocks
            .checked_mul(BLOCK_BYTES as u64)
            .ok_or_else(|| BloomError::Invalid("blocked filter too large".into()))?;
        let header = encode_header(num_blocks, capacity, error_rate, seed);
        mapped::create_new(path, &header, HEADER_LEN as u64 + data_len)?;
        Self::open(path, true)
    }

    pub fn num_blocks(&self) -> u64 {
        self.num_blocks
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The blocks.
    #[inline(always)]
    pub fn data(&self) -> &[u8] {
        &self.core.file.bytes()[HEADER_LEN..]
    }

    #[inline(always)]
    pub(super) fn data_mut(&mut self) -> Result<&mut [u8], BloomError> {
        Ok(&mut self.core.file.bytes_mut()?[HEADER_LEN..])
    }

    #[inline(always)]
    pub fn locate(&self, key: u64) -> Loc {
        locate(key, self.seed, self.num_blocks)
    }

    #[inline(always)]
    pub(super) fn test_loc(&self, loc: Loc) -> bool {
        kernel::test_loc(self.data(), loc)
    }

    pub fn contains(&self, key: u64) -> bool {
        self.test_loc(self.locate(key))
    }
}

impl FilterFile for BlockedFile {
    fn open(path: &Path, writable: bool) -> Result<BlockedFile, BloomError> {
        let (file, size) = mapped::open(path, writable)?;
        let h = read_header(&file, path, size)?;
        let len = usize::try_from(size).map_err(|_| format_err(path, "file too large to map"))?;
        Ok(BlockedFile {
            core: FileCore {
                file: MappedFile::map(&file, path, len, writable)?,
                capacity: le_u64(&h, 24),
                error_rate: le_f64(&h, 32),
                elem_count: le_u64(&h, OFF_ELEM_COUNT),
                elem_count_offset: OFF_ELEM_COUNT,
            },
            num_blocks: le_u64(&h, 16),
            seed: le_u64(&h, 40),
        })
    }

    fn core(&self) -> &FileCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut FileCore {
        &mut self.core
    }
    fn file_size(&self) -> u64 {
        HEADER_LEN as u64 + self.num_blocks * BLOCK_BYTES as u64
    }

    fn contains_many(&self, keys: &[u64], out: &mut [bool]) {
        assert_eq!(keys.len(), out.len());
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 is present (checked).
                unsafe { contains_many_avx2(self, keys, out) };
                return;
            }
        }
        // SAFETY: portable code needs no CPU feature.
        unsafe { contains_many_with::<Portable>(self, keys, out) }
    }

    fn add_many(&mut self, keys: &[u64], out: &mut [bool]) -> Result<(), BloomError> {
        assert_eq!(keys.len(), out.len());
        self.core.file.check_writable()?;
        let (seed, nb) = (self.seed, self.num_blocks);
        let mut added = 0;
        let data = self.data_mut()?;
        for (o, &k) in out.iter_mut().zip(keys) {
            let present = kernel::set_loc(data, locate(k, seed, nb));
            *o = present;
            added += u64::from(!present);
        }
        self.core.elem_count += added;
        self.core.store_elem_count();
        Ok(())
    }
}

/// Keys located ahead of the one tested, so that its block is in cache by then.
const CONTAINS_AHEAD: usize = 8;

/// Membership of every key of `keys` in `f`, blocks tested by `K`.
///
/// # Safety
/// The CPU has `K`'s target features.
#[inline(always)]
unsafe fn contains_many_with<K: BlockOps>(f: &BlockedFile, keys: &[u64], out: &mut [bool]) {
    let data = f.data();
    let locs: Vec<Loc> = keys.iter().map(|&k| f.locate(k)).collect();
    for (i, (o, loc)) in out.iter_mut().zip(&locs).enumerate() {
        if let Some(ahead) = locs.get(i + CONTAINS_AHEAD) {
            prefetch(data, ahead.block * BLOCK_BYTES);
        }
        let block = &data[loc.block * BLOCK_BYTES..(loc.block + 1) * BLOCK_BYTES];
        // SAFETY: `block` is 64 readable bytes; `K`'s features are present (caller).
        *o = unsafe { K::test(block.as_ptr(), loc.bits) };
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn contains_many_avx2(f: &BlockedFile, keys: &[u64], out: &mut [bool]) {
    // SAFETY: AVX2 is enabled in this function.
    unsafe { contains_many_with::<Avx2>(f, keys, out) }
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
        kernel::set_loc(&mut data, locate(k, fseed, nb));
    }
    // Query keys from a disjoint stream (a different SplitMix64 start); a
    // collision with an inserted key has probability ~ capacity * queries / 2^64.
    let mut qs = seed ^ 0xDEAD_BEEF_CAFE_F00D;
    let mut fp = 0u64;
    for _ in 0..queries {
        let k = splitmix(&mut qs);
        fp += u64::from(kernel::test_loc(&data, locate(k, fseed, nb)));
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
    use crate::mapped::test_dir;

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
    fn open_rejects_bad_files() {
        let d = test_dir("blocked-bad");
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
    fn avx2_and_scalar_contains_agree() {
        let d = test_dir("blocked-contains");
        let mut f = BlockedFile::create(&d.join("a.bbf"), 5000, 1e-3, 9).unwrap();
        let mut st = 11u64;
        let ins: Vec<u64> = (0..5000).map(|_| splitmix(&mut st)).collect();
        f.add_many(&ins, &mut vec![false; ins.len()]).unwrap();
        let qs: Vec<u64> = (0..20000).map(|_| splitmix(&mut st)).chain(ins.iter().copied()).collect();
        let mut a = vec![false; qs.len()];
        let mut s = vec![false; qs.len()];
        f.contains_many(&qs, &mut a);
        // SAFETY: portable code needs no CPU feature.
        unsafe { contains_many_with::<Portable>(&f, &qs, &mut s) };
        assert_eq!(a, s);
        assert!(a[20000..].iter().all(|&x| x));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
