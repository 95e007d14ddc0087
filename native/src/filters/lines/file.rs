//! One filter file of 64-byte lines (header in the module docs of `lines`).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::{set, set_with, splitmix, test, Full, Kernel, Layout, HEADER_LEN, LINE_BYTES};
use crate::filters::band_set::{FileCore, FilterFile};
use crate::filters::error::{format_err, io_err, FilterError};
use crate::filters::mapped::{self, le_f64, le_u32, le_u64, MappedFile};

/// Offset of `elem_count` in the header.
const OFF_ELEM_COUNT: usize = 48;

/// One filter file of layout `L`, memory-mapped.
#[derive(Debug)]
pub struct LineFile<L: Layout> {
    core: FileCore,
    shape: L::Shape,
    seed: u64,
}

fn encode_header<L: Layout>(shape: L::Shape, capacity: u64, error_rate: f64, seed: u64) -> [u8; HEADER_LEN] {
    let (num_lines, extra) = L::encode(shape);
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(L::MAGIC);
    h[8..12].copy_from_slice(&L::VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    h[16..24].copy_from_slice(&num_lines.to_le_bytes());
    h[24..32].copy_from_slice(&capacity.to_le_bytes());
    h[32..40].copy_from_slice(&error_rate.to_le_bytes());
    h[40..48].copy_from_slice(&seed.to_le_bytes());
    h[56..60].copy_from_slice(&extra.to_le_bytes());
    h
}

/// The header of the `size`-byte file at `path` and the shape it records,
/// validated against its size.
fn read_header<L: Layout>(file: &File, path: &Path, size: u64) -> Result<([u8; HEADER_LEN], L::Shape), FilterError> {
    if size < HEADER_LEN as u64 {
        return Err(format_err(path, format!("truncated: {size} bytes, no {} header", L::TAG)));
    }
    let mut h = [0u8; HEADER_LEN];
    file.read_exact_at(&mut h, 0).map_err(io_err(path))?;
    if &h[..8] != L::MAGIC {
        return Err(format_err(path, format!("not a {} file (bad magic)", L::NAME)));
    }
    let (version, header_len) = (le_u32(&h, 8), le_u32(&h, 12));
    if version != L::VERSION || header_len as usize != HEADER_LEN {
        return Err(format_err(
            path,
            format!(
                "unsupported {} version {version} / header {header_len} (expected {} / {HEADER_LEN})",
                L::TAG,
                L::VERSION
            ),
        ));
    }
    let num_lines = le_u64(&h, 16);
    let shape = L::decode(num_lines, le_u32(&h, 56)).map_err(|e| format_err(path, format!("invalid header: {e}")))?;
    let expected = num_lines
        .checked_mul(LINE_BYTES as u64)
        .and_then(|d| d.checked_add(HEADER_LEN as u64))
        .ok_or_else(|| format_err(path, "invalid header: too many lines"))?;
    if size != expected {
        return Err(format_err(path, format!("expected {expected} bytes, found {size}")));
    }
    Ok((h, shape))
}

impl<L: Layout> LineFile<L> {
    /// Creates a new file (fails if `path` exists) sized by [`Layout::shape_for`].
    pub fn create(path: &Path, capacity: u64, error_rate: f64, seed: u64) -> Result<LineFile<L>, FilterError> {
        let shape = L::shape_for(capacity, error_rate).map_err(FilterError::Invalid)?;
        let data_len = L::num_lines(shape)
            .checked_mul(LINE_BYTES as u64)
            .ok_or_else(|| FilterError::Invalid(format!("{} too large", L::NAME)))?;
        let header = encode_header::<L>(shape, capacity, error_rate, seed);
        mapped::create_new(path, &header, HEADER_LEN as u64 + data_len)?;
        Self::open(path, true)
    }

    pub(crate) fn seed(&self) -> u64 {
        self.seed
    }

    pub(crate) fn shape(&self) -> L::Shape {
        self.shape
    }

    /// The lines.
    #[inline(always)]
    pub(crate) fn data(&self) -> &[u8] {
        &self.core.file.bytes()[HEADER_LEN..]
    }

    #[inline(always)]
    pub(crate) fn data_mut(&mut self) -> Result<&mut [u8], FilterError> {
        Ok(&mut self.core.file.bytes_mut()?[HEADER_LEN..])
    }

    #[inline(always)]
    pub(crate) fn locate(&self, key: u64) -> L::Loc {
        L::locate(key, self.seed, self.shape)
    }

    #[cfg(test)]
    pub(crate) fn test_loc(&self, loc: L::Loc) -> bool {
        test::<L>(self.data(), loc, self.shape)
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, key: u64) -> bool {
        self.test_loc(self.locate(key))
    }

    /// The error of an insert that found the filter full.
    pub(crate) fn full(&self, _: Full) -> FilterError {
        FilterError::Invalid(format!(
            "{}: {} full ({} keys, sized for {}): nothing was added for the failing key; \
             use growth=\"grow\" or a larger expected_docs",
            self.path().display(),
            L::NAME,
            self.elem_count(),
            self.capacity()
        ))
    }
}

impl<L: Layout> FilterFile for LineFile<L> {
    fn open(path: &Path, writable: bool) -> Result<LineFile<L>, FilterError> {
        let (file, size) = mapped::open(path, writable)?;
        let (h, shape) = read_header::<L>(&file, path, size)?;
        let len = usize::try_from(size).map_err(|_| format_err(path, "file too large to map"))?;
        Ok(LineFile {
            core: FileCore {
                file: MappedFile::map(&file, path, len, writable)?,
                capacity: le_u64(&h, 24),
                error_rate: le_f64(&h, 32),
                elem_count: le_u64(&h, OFF_ELEM_COUNT),
                elem_count_offset: OFF_ELEM_COUNT,
            },
            shape,
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
        HEADER_LEN as u64 + L::num_lines(self.shape) * LINE_BYTES as u64
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
        unsafe { contains_many_with::<L, L::Portable>(self, keys, out) }
    }

    fn add_many(&mut self, keys: &[u64], out: &mut [bool]) -> Result<(), FilterError> {
        assert_eq!(keys.len(), out.len());
        self.core.file.check_writable()?;
        let (seed, shape) = (self.seed, self.shape);
        let mut result = Ok(());
        for (o, &k) in out.iter_mut().zip(keys) {
            match set::<L>(self.data_mut()?, L::locate(k, seed, shape), shape) {
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

/// Keys located ahead of the one tested, so that its lines are in cache by then.
const CONTAINS_AHEAD: usize = 8;

/// Membership of every key of `keys` in `f`, lines tested by `K`.
///
/// # Safety
/// The CPU has `K`'s target features.
#[inline(always)]
pub(crate) unsafe fn contains_many_with<L: Layout, K: Kernel<L>>(f: &LineFile<L>, keys: &[u64], out: &mut [bool]) {
    let data = f.data();
    let locs: Vec<L::Loc> = keys.iter().map(|&k| f.locate(k)).collect();
    for (i, (o, loc)) in out.iter_mut().zip(&locs).enumerate() {
        if let Some(ahead) = locs.get(i + CONTAINS_AHEAD) {
            L::prefetch(data, *ahead);
        }
        // SAFETY: `K`'s features are present (caller).
        *o = unsafe { K::probe(data, *loc, f.shape) }.is_none();
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn contains_many_avx2<L: Layout>(f: &LineFile<L>, keys: &[u64], out: &mut [bool]) {
    // SAFETY: AVX2 is enabled in this function.
    unsafe { contains_many_with::<L, L::Avx2>(f, keys, out) }
}

/// What [`measure_fp`] found: false positives among the queries, the shape,
/// and the keys actually stored (capacity minus inserts that were false positives).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured<S> {
    pub(crate) false_positives: u64,
    pub(crate) shape: S,
    pub(crate) stored: u64,
}

/// Measures a filter's false-positive rate: creates one for `capacity` keys
/// at `error_rate` (in memory), inserts `capacity` pseudo-random keys (a
/// SplitMix64 stream of `seed`), queries `queries` keys of a disjoint stream
/// (a collision with an inserted key has probability ~ capacity · queries / 2^64).
pub(crate) fn measure_fp<L: Layout>(capacity: u64, error_rate: f64, queries: u64, seed: u64) -> Result<Measured<L::Shape>, String> {
    let shape = L::shape_for(capacity, error_rate)?;
    let len = usize::try_from(L::num_lines(shape) * LINE_BYTES as u64).map_err(|_| "too large")?;
    let mut data = vec![0u8; len];
    let fseed = splitmix(&mut (seed ^ 0x5555)).wrapping_add(1);
    let mut st = seed;
    let mut stored = 0;
    for _ in 0..capacity {
        let k = splitmix(&mut st);
        // SAFETY: portable code needs no CPU feature.
        let present = unsafe { set_with::<L, L::Portable>(&mut data, L::locate(k, fseed, shape), shape) }
            .map_err(|_| format!("{} full after {stored} keys", L::NAME))?;
        stored += u64::from(!present);
    }
    let mut qs = seed ^ 0xDEAD_BEEF_CAFE_F00D;
    let mut fp = 0u64;
    for _ in 0..queries {
        let k = splitmix(&mut qs);
        fp += u64::from(test::<L>(&data, L::locate(k, fseed, shape), shape));
    }
    Ok(Measured { false_positives: fp, shape, stored })
}
