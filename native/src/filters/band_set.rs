//! One filter per band (docs/algorithm.md §4), whatever the filter format: the
//! traits the formats implement (pybloomfiltermmap3's, and the line filters'
//! once for every layout) and the band set written once over them.
//!
//! [`BandSet`] holds what the formats share (the checks, the element counts,
//! sync); the row loops ([`BandFilter`]) are pybloomfilter's own (a key
//! touches one cache line per hash) and, once for every line layout
//! (blocked, cuckoo: one or two lines per key), those of `lines`.

use std::path::{Path, PathBuf};

use crate::filters::error::FilterError;
use crate::filters::mapped::MappedFile;

/// What every filter file has besides its bits: the mapping, and the numbers
/// its header records that every format shares.
#[derive(Debug)]
pub struct FileCore {
    pub(crate) file: MappedFile,
    pub(crate) capacity: u64,
    pub(crate) error_rate: f64,
    /// Keys added while absent (in memory; the header gets it on
    /// [`FileCore::store_elem_count`]).
    pub(crate) elem_count: u64,
    /// Where the header keeps `elem_count`.
    pub(crate) elem_count_offset: usize,
}

impl FileCore {
    /// Writes the in-memory `elem_count` into the mapped header.
    pub(crate) fn store_elem_count(&mut self) {
        self.file.store_u64(self.elem_count_offset, self.elem_count);
    }
}

/// One memory-mapped filter file.
pub trait FilterFile: Sized {
    /// Opens and validates an existing file (read-only unless `writable`).
    fn open(path: &Path, writable: bool) -> Result<Self, FilterError>;
    fn core(&self) -> &FileCore;
    fn core_mut(&mut self) -> &mut FileCore;
    fn file_size(&self) -> u64;
    /// `out[i]` = is key i (probably) in the filter?
    fn contains_many(&self, keys: &[u64], out: &mut [bool]);
    /// Adds every key; `out[i]` = key i was already present (earlier keys of
    /// the same batch count).
    fn add_many(&mut self, keys: &[u64], out: &mut [bool]) -> Result<(), FilterError>;

    fn path(&self) -> &Path {
        self.core().file.path()
    }
    fn capacity(&self) -> u64 {
        self.core().capacity
    }
    fn error_rate(&self) -> f64 {
        self.core().error_rate
    }
    fn elem_count(&self) -> u64 {
        self.core().elem_count
    }
    fn writable(&self) -> bool {
        self.core().file.writable()
    }
    /// msync (synchronous) of the whole mapping; no-op when read-only.
    fn sync(&self) -> Result<(), FilterError> {
        self.core().file.sync()
    }
}

/// A filter file usable as one band of an index: the row loops over all b
/// bands at once, specialised per format. `keys` is an (n, b) row-major
/// matrix whose column i belongs to `bands[i]`; [`BandSet`] has checked its
/// shape and, for the writing loops, that every band is writable.
pub trait BandFilter: FilterFile {
    /// `out[j]` = some key of row j is in its band's filter. No inserts.
    fn query_rows(bands: &[Self], keys: &[u64], out: &mut [bool]);

    /// Adds every row's key i to band i, counting (in memory) each key that
    /// was absent from its filter.
    fn insert_rows(bands: &mut [Self], keys: &[u64]) -> Result<(), FilterError>;

    /// "Keep first": row j (in order) is a duplicate iff some band key is in
    /// its filter; otherwise all its keys are inserted before row j+1 is
    /// examined. Returns the number of rows inserted.
    fn query_insert_rows(bands: &mut [Self], keys: &[u64], out: &mut [bool]) -> Result<u64, FilterError>;

    /// "Any earlier": every key of every row is added to its band's filter,
    /// and `out[j]` = some key of row j was already present (keys of earlier
    /// rows count), counting (in memory) each key that was absent. Bands are
    /// independent under this rule, so this default tests and sets each band
    /// as one column, in row order.
    fn test_insert_rows(bands: &mut [Self], keys: &[u64], out: &mut [bool]) -> Result<(), FilterError> {
        test_insert_columns(bands, keys, out)
    }

    /// Counts `n` more keys added while absent (in memory).
    fn count_new_keys(&mut self, n: u64);
}

/// "Any earlier" (see [`BandFilter::test_insert_rows`]) band by band: each
/// band's column of `keys` through [`FilterFile::add_many`]. The default of
/// every format, and the reference of the line formats' own loop.
pub fn test_insert_columns<F: FilterFile>(bands: &mut [F], keys: &[u64], out: &mut [bool]) -> Result<(), FilterError> {
    let (n, b) = (out.len(), bands.len());
    out.fill(false);
    let mut column = Vec::with_capacity(n);
    let mut present = vec![false; n];
    for (i, f) in bands.iter_mut().enumerate() {
        column.clear();
        column.extend(keys.iter().skip(i).step_by(b));
        f.add_many(&column, &mut present)?;
        out.iter_mut().zip(&present).for_each(|(o, &p)| *o |= p);
    }
    Ok(())
}

/// The b band filters of an LSHBloom index, one file per band.
#[derive(Debug)]
pub struct BandSet<F> {
    filters: Vec<F>,
}

impl<F: BandFilter> BandSet<F> {
    pub fn new(filters: Vec<F>) -> Result<BandSet<F>, FilterError> {
        if filters.is_empty() {
            return Err(FilterError::Invalid("at least one band filter is required".into()));
        }
        Ok(BandSet { filters })
    }

    /// Opens one file per band, in band order.
    pub(crate) fn open(paths: &[PathBuf], writable: bool) -> Result<BandSet<F>, FilterError> {
        let files = paths
            .iter()
            .map(|p| F::open(p, writable))
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(files)
    }

    pub(crate) fn num_bands(&self) -> usize {
        self.filters.len()
    }

    pub(crate) fn filters(&self) -> &[F] {
        &self.filters
    }

    /// The number of rows of the (n, b) matrix `keys`.
    fn rows(&self, keys: &[u64]) -> usize {
        let b = self.filters.len();
        assert_eq!(keys.len() % b, 0, "keys must be an (n, num_bands) matrix");
        keys.len() / b
    }

    fn check_writable(&self) -> Result<(), FilterError> {
        self.filters.iter().try_for_each(|f| f.core().file.check_writable())
    }

    /// Row j is a duplicate iff some band key is in its filter. No inserts.
    pub(crate) fn query(&self, keys: &[u64], out: &mut [bool]) {
        assert_eq!(self.rows(keys), out.len());
        F::query_rows(&self.filters, keys, out);
    }

    /// Inserts every row's key i into filter i.
    pub(crate) fn insert(&mut self, keys: &[u64]) -> Result<(), FilterError> {
        self.rows(keys);
        self.check_writable()?;
        F::insert_rows(&mut self.filters, keys)?;
        self.filters.iter_mut().for_each(|f| f.core_mut().store_elem_count());
        Ok(())
    }

    /// "Keep first" over the rows of `keys` in order (see
    /// [`BandFilter::query_insert_rows`]); `out[j]` = row j is a duplicate.
    pub fn query_insert(&mut self, keys: &[u64], out: &mut [bool]) -> Result<(), FilterError> {
        assert_eq!(self.rows(keys), out.len());
        self.check_writable()?;
        let inserted = F::query_insert_rows(&mut self.filters, keys, out)?;
        for f in &mut self.filters {
            // A non-duplicate row's key was absent from every band's filter.
            f.count_new_keys(inserted);
            f.core_mut().store_elem_count();
        }
        Ok(())
    }

    /// "Any earlier" over the rows of `keys` in order (see
    /// [`BandFilter::test_insert_rows`]); `out[j]` = some key of row j was
    /// already present (keys of earlier rows of `keys` count).
    pub fn test_insert(&mut self, keys: &[u64], out: &mut [bool]) -> Result<(), FilterError> {
        assert_eq!(self.rows(keys), out.len());
        self.check_writable()?;
        let result = F::test_insert_rows(&mut self.filters, keys, out);
        // Keys added before a failure stay counted, as the bits they set stay.
        self.filters.iter_mut().for_each(|f| f.core_mut().store_elem_count());
        result
    }

    pub(crate) fn sync(&self) -> Result<(), FilterError> {
        self.filters.iter().try_for_each(|f| f.sync())
    }
}

#[cfg(test)]
mod tests {
    use crate::filters::band_set::FilterFile;
    use crate::filters::blocked::{BlockedBands, BlockedFile};
    use crate::filters::pybloom::{BandFilters, BloomFile};
    use crate::filters::mapped::test_dir;

    /// Rows: 0 new; 1 shares band 1 with row 0; 2 new; 3 shares band 0 with
    /// row 1 only (a chain: 0~1, 1~3, 0!~3); 4 repeats row 2.
    const KEYS: [u64; 15] = [1, 2, 3, 10, 2, 30, 7, 8, 9, 10, 40, 50, 7, 8, 9];
    const ANY_EARLIER: [bool; 5] = [false, true, false, true, true];

    #[test]
    fn test_insert_is_any_earlier_blocked() {
        let d = test_dir("bandset-any-blocked");
        let files = (0..3u64)
            .map(|i| BlockedFile::create(&d.join(format!("band-{i}.bbf")), 1000, 1e-6, 9 + i).unwrap())
            .collect();
        let mut bands = BlockedBands::new(files).unwrap();
        let mut out = [true; 5];
        bands.test_insert(&KEYS, &mut out).unwrap();
        assert_eq!(out, ANY_EARLIER);
        // Every key went in, duplicate rows' too: band 0 holds 1, 10, 7.
        assert_eq!(bands.filters()[0].elem_count(), 3);
        assert_eq!(bands.filters()[2].elem_count(), 4);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn test_insert_is_any_earlier_pybloom() {
        let d = test_dir("bandset-any-bloom");
        let files = (0..3u32)
            .map(|i| BloomFile::create(&d.join(format!("band-{i}.bf")), 1000, 1e-6, &[i, 7 + i]).unwrap())
            .collect();
        let mut bands = BandFilters::new(files).unwrap();
        let mut out = [false; 5];
        bands.test_insert(&KEYS, &mut out).unwrap();
        assert_eq!(out, ANY_EARLIER);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
