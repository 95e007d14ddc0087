//! One cuckoo filter file (format in the module docs of `cuckoo`).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::kernel::{self, locate, Full, Loc, Shape};
use super::sizing::{geometry, slots_for, Geometry};
use super::{BUCKET_BYTES, HEADER_LEN, MAGIC, MAX_FP_BITS, MIN_FP_BITS, VERSION};
use crate::bandset::{FileCore, FilterFile};
use crate::error::{format_err, io_err, BloomError};
use crate::mapped::{self, le_f64, le_u32, le_u64, MappedFile};
use crate::prefetch::prefetch;

/// Offset of `elem_count` in the header.
const OFF_ELEM_COUNT: usize = 48;

/// One cuckoo filter file, memory-mapped.
#[derive(Debug)]
pub struct CuckooFile {
    core: FileCore,
    shape: Shape,
    seed: u64,
}

fn encode_header(g: Geometry, capacity: u64, error_rate: f64, seed: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    h[16..24].copy_from_slice(&g.num_buckets.to_le_bytes());
    h[24..32].copy_from_slice(&capacity.to_le_bytes());
    h[32..40].copy_from_slice(&error_rate.to_le_bytes());
    h[40..48].copy_from_slice(&seed.to_le_bytes());
    h[56..60].copy_from_slice(&g.fp_bits.to_le_bytes());
    h
}

/// The header of the `size`-byte file at `path`, validated against its size.
fn read_header(file: &File, path: &Path, size: u64) -> Result<[u8; HEADER_LEN], BloomError> {
    if size < HEADER_LEN as u64 {
        return Err(format_err(path, format!("truncated: {size} bytes, no cuckoo-filter header")));
    }
    let mut h = [0u8; HEADER_LEN];
    file.read_exact_at(&mut h, 0).map_err(io_err(path))?;
    if &h[..8] != MAGIC {
        return Err(format_err(path, "not a cuckoo filter file (bad magic)"));
    }
    let (version, header_len) = (le_u32(&h, 8), le_u32(&h, 12));
    if version != VERSION || header_len as usize != HEADER_LEN {
        return Err(format_err(
            path,
            format!("unsupported cuckoo-filter version {version} / header {header_len} (expected {VERSION} / {HEADER_LEN})"),
        ));
    }
    let num_buckets = le_u64(&h, 16);
    let fp_bits = le_u32(&h, 56);
    if num_buckets == 0 || !(MIN_FP_BITS..=MAX_FP_BITS).contains(&fp_bits) {
        return Err(format_err(path, format!("invalid header: {num_buckets} buckets, {fp_bits}-bit fingerprints")));
    }
    let expected = num_buckets
        .checked_mul(BUCKET_BYTES as u64)
        .and_then(|d| d.checked_add(HEADER_LEN as u64))
        .ok_or_else(|| format_err(path, "invalid header: num_buckets too large"))?;
    if size != expected {
        return Err(format_err(path, format!("expected {expected} bytes, found {size}")));
    }
    Ok(h)
}

impl CuckooFile {
    /// Creates a new file (fails if `path` exists) sized by [`geometry`].
    pub fn create(path: &Path, capacity: u64, error_rate: f64, seed: u64) -> Result<CuckooFile, BloomError> {
        let g = geometry(capacity, error_rate).map_err(BloomError::Invalid)?;
        let data_len = g
            .num_buckets
            .checked_mul(BUCKET_BYTES as u64)
            .ok_or_else(|| BloomError::Invalid("cuckoo filter too large".into()))?;
        mapped::create_new(path, &encode_header(g, capacity, error_rate, seed), HEADER_LEN as u64 + data_len)?;
        Self::open(path, true)
    }

    pub fn num_buckets(&self) -> u64 {
        self.shape.num_buckets
    }
    pub fn fp_bits(&self) -> u32 {
        self.shape.fp_bits
    }
    pub fn slots(&self) -> u32 {
        self.shape.slots
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub(super) fn shape(&self) -> Shape {
        self.shape
    }

    /// The buckets.
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
        locate(key, self.seed, self.shape)
    }

    #[inline(always)]
    pub(super) fn test_loc(&self, loc: Loc) -> bool {
        kernel::test_loc(self.data(), loc, self.shape)
    }

    pub fn contains(&self, key: u64) -> bool {
        self.test_loc(self.locate(key))
    }

    /// The error of an insert that found the filter full.
    pub(super) fn full(&self, _: Full) -> BloomError {
        BloomError::Invalid(format!(
            "{}: cuckoo filter full ({} keys, sized for {}): nothing was added for the failing key; \
             use growth=\"grow\" or a larger expected_docs",
            self.path().display(),
            self.elem_count(),
            self.capacity()
        ))
    }
}

impl FilterFile for CuckooFile {
    fn open(path: &Path, writable: bool) -> Result<CuckooFile, BloomError> {
        let (file, size) = mapped::open(path, writable)?;
        let h = read_header(&file, path, size)?;
        let len = usize::try_from(size).map_err(|_| format_err(path, "file too large to map"))?;
        let fp_bits = le_u32(&h, 56);
        Ok(CuckooFile {
            core: FileCore {
                file: MappedFile::map(&file, path, len, writable)?,
                capacity: le_u64(&h, 24),
                error_rate: le_f64(&h, 32),
                elem_count: le_u64(&h, OFF_ELEM_COUNT),
                elem_count_offset: OFF_ELEM_COUNT,
            },
            shape: Shape { num_buckets: le_u64(&h, 16), fp_bits, slots: slots_for(fp_bits) },
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
        HEADER_LEN as u64 + self.shape.num_buckets * BUCKET_BYTES as u64
    }

    fn contains_many(&self, keys: &[u64], out: &mut [bool]) {
        assert_eq!(keys.len(), out.len());
        let data = self.data();
        let locs: Vec<Loc> = keys.iter().map(|&k| self.locate(k)).collect();
        for (i, (o, loc)) in out.iter_mut().zip(&locs).enumerate() {
            if let Some(ahead) = locs.get(i + CONTAINS_AHEAD) {
                prefetch(data, ahead.a * BUCKET_BYTES);
                prefetch(data, ahead.b * BUCKET_BYTES);
            }
            *o = kernel::test_loc(data, *loc, self.shape);
        }
    }

    fn add_many(&mut self, keys: &[u64], out: &mut [bool]) -> Result<(), BloomError> {
        assert_eq!(keys.len(), out.len());
        self.core.file.check_writable()?;
        let (seed, shape) = (self.seed, self.shape);
        let mut result = Ok(());
        for (o, &k) in out.iter_mut().zip(keys) {
            match kernel::set_loc(self.data_mut()?, locate(k, seed, shape), shape) {
                Ok(present) => {
                    *o = present;
                    self.core.elem_count += u64::from(!present);
                }
                Err(full) => {
                    result = Err(self.full(full));
                    break;
                }
            }
        }
        self.core.store_elem_count();
        result
    }
}

/// Keys located ahead of the one tested, so that its buckets are in cache by then.
const CONTAINS_AHEAD: usize = 8;

/// What [`measure_fp`] found.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    pub false_positives: u64,
    pub num_buckets: u64,
    pub fp_bits: u32,
    /// Keys actually stored (capacity minus the inserts that were false positives).
    pub stored: u64,
}

/// Measures a cuckoo filter's false-positive rate: creates a filter for
/// `capacity` keys at `error_rate` (in memory), inserts `capacity`
/// pseudo-random keys, queries `queries` other pseudo-random keys.
pub fn measure_fp(capacity: u64, error_rate: f64, queries: u64, seed: u64) -> Result<Measured, String> {
    use crate::blocked::splitmix;
    let g = geometry(capacity, error_rate)?;
    let shape = Shape { num_buckets: g.num_buckets, fp_bits: g.fp_bits, slots: g.slots };
    let len = usize::try_from(g.num_buckets * BUCKET_BYTES as u64).map_err(|_| "too large")?;
    let mut data = vec![0u8; len];
    let fseed = splitmix(&mut (seed ^ 0x5555)).wrapping_add(1);
    let mut st = seed;
    let mut stored = 0;
    for _ in 0..capacity {
        let k = splitmix(&mut st);
        let present = kernel::set_loc(&mut data, locate(k, fseed, shape), shape)
            .map_err(|_| format!("cuckoo filter full after {stored} keys"))?;
        stored += u64::from(!present);
    }
    // Query keys from a disjoint stream, as `blocked::measure_fp`.
    let mut qs = seed ^ 0xDEAD_BEEF_CAFE_F00D;
    let mut fp = 0u64;
    for _ in 0..queries {
        let k = splitmix(&mut qs);
        fp += u64::from(kernel::test_loc(&data, locate(k, fseed, shape), shape));
    }
    Ok(Measured { false_positives: fp, num_buckets: g.num_buckets, fp_bits: g.fp_bits, stored })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapped::test_dir;

    #[test]
    fn measured_rate_within_target() {
        for (cap, p) in [(100_000u64, 1e-2), (100_000, 1e-3), (200_000, 1e-4)] {
            let q = 2_000_000u64;
            let m = measure_fp(cap, p, q, 42).unwrap();
            let rate = m.false_positives as f64 / q as f64;
            let tol = 4.0 * (p * q as f64).sqrt() / q as f64;
            assert!(rate <= p + tol, "cap {cap} p {p}: measured {rate}");
            assert!(rate >= p * 0.3, "cap {cap} p {p}: measured {rate}");
        }
    }

    #[test]
    fn file_roundtrip_rejects_bad_files_and_refuses_overfill() {
        let d = test_dir("cuckoo-file");
        let mut f = CuckooFile::create(&d.join("a.cbf"), 1000, 1e-4, 9).unwrap();
        let keys: Vec<u64> = (0..1000).collect();
        let mut out = vec![false; 1000];
        f.add_many(&keys, &mut out).unwrap();
        assert_eq!(f.elem_count() + out.iter().filter(|&&x| x).count() as u64, 1000);
        f.sync().unwrap();
        drop(f);
        let ro = CuckooFile::open(&d.join("a.cbf"), false).unwrap();
        let mut c = vec![false; 1000];
        ro.contains_many(&keys, &mut c);
        assert!(c.iter().all(|&x| x));
        assert_eq!(ro.seed(), 9);
        let bytes = std::fs::read(d.join("a.cbf")).unwrap();
        let p = d.join("x.cbf");
        std::fs::write(&p, &bytes[..bytes.len() - 1]).unwrap();
        assert!(matches!(CuckooFile::open(&p, false), Err(BloomError::Format { .. })));
        std::fs::write(&p, b"short").unwrap();
        assert!(matches!(CuckooFile::open(&p, false), Err(BloomError::Format { .. })));
        // Far past capacity the filter refuses (an error, not a lost key).
        let mut f = CuckooFile::create(&d.join("b.cbf"), 100, 1e-3, 1).unwrap();
        let many: Vec<u64> = (0..100_000).collect();
        let err = f.add_many(&many, &mut vec![false; many.len()]).unwrap_err();
        assert!(err.to_string().contains("cuckoo filter full"), "{err}");
        let stored = f.elem_count();
        let mut c = vec![false; stored as usize];
        f.contains_many(&many[..stored as usize], &mut c);
        assert!(c.iter().all(|&x| x));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
