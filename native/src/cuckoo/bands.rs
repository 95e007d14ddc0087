//! The row loops of a band set of cuckoo filter files.

#[cfg(target_arch = "x86_64")]
use super::kernel::Avx2;
use super::kernel::{self, Loc, Portable, Scan, ScanOps};
use super::{CuckooFile, BUCKET_BYTES};
use crate::bandset::{BandFilter, FilterFile};
use crate::error::BloomError;
use crate::prefetch::prefetch;

/// Rows processed per chunk of precomputed locations.
const CHUNK: usize = 64;

impl BandFilter for CuckooFile {
    fn query_rows(bands: &[CuckooFile], keys: &[u64], out: &mut [bool]) {
        let b = bands.len();
        let mut locs = Vec::with_capacity(CHUNK * b);
        for start in (0..out.len()).step_by(CHUNK) {
            let end = (start + CHUNK).min(out.len());
            locate_rows(bands, keys, start..end, &mut locs);
            prefetch_row(bands, &locs[..b]);
            for r in 0..end - start {
                if let Some(next) = locs.get((r + 2) * b..(r + 3) * b) {
                    prefetch_row(bands, next);
                }
                let row = &locs[r * b..(r + 1) * b];
                out[start + r] = row.iter().zip(bands).any(|(l, f)| f.test_loc(*l));
            }
        }
    }

    fn insert_rows(bands: &mut [CuckooFile], keys: &[u64]) -> Result<(), BloomError> {
        let b = bands.len();
        for row in keys.chunks_exact(b) {
            for (&k, f) in row.iter().zip(bands.iter_mut()) {
                let (loc, shape) = (f.locate(k), f.shape());
                let present = kernel::set_loc(f.data_mut()?, loc, shape).map_err(|e| f.full(e))?;
                f.core_mut().elem_count += u64::from(!present);
            }
        }
        Ok(())
    }

    fn query_insert_rows(bands: &mut [CuckooFile], keys: &[u64], out: &mut [bool]) -> Result<u64, BloomError> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 is present (checked).
                return unsafe { query_insert_avx2(bands, keys, out) };
            }
        }
        // SAFETY: portable code needs no CPU feature.
        unsafe { query_insert_with::<Portable>(bands, keys, out) }
    }

    fn count_new_keys(&mut self, n: u64) {
        self.core_mut().elem_count += n;
    }
}

/// Scans row `row`'s buckets band by band into `scans` (bucket scans by
/// `K`), stopping at the first band that finds its key; true if one did.
///
/// # Safety
/// The CPU has `K`'s target features.
#[inline(always)]
unsafe fn scan_row<K: ScanOps>(bands: &[CuckooFile], row: &[Loc], scans: &mut Vec<(Scan, Scan)>) -> bool {
    scans.clear();
    for (l, f) in row.iter().zip(bands) {
        // SAFETY: forwarded from the caller.
        let (first, second) = unsafe { kernel::scan_both::<K>(f.data(), *l, f.shape()) };
        if first == Scan::Found || second == Scan::Found {
            return true;
        }
        scans.push((first, second));
    }
    false
}

/// Keep first, with bucket 1 of the rows two ahead prefetched and
/// buckets scanned by `K`; a row's scans are kept so that a new row's inserts
/// need not repeat them. Returns the rows inserted.
///
/// # Safety
/// The CPU has `K`'s target features.
#[inline(always)]
unsafe fn query_insert_with<K: ScanOps>(
    bands: &mut [CuckooFile],
    keys: &[u64],
    out: &mut [bool],
) -> Result<u64, BloomError> {
    let b = bands.len();
    let n = out.len();
    let mut locs = Vec::with_capacity(CHUNK * b);
    let mut scans: Vec<(Scan, Scan)> = Vec::with_capacity(b);
    let mut inserted = 0u64;
    for start in (0..n).step_by(CHUNK) {
        let end = (start + CHUNK).min(n);
        locate_rows(bands, keys, start..end, &mut locs);
        prefetch_row(bands, &locs[..b]);
        for r in 0..end - start {
            if let Some(next) = locs.get((r + 2) * b..(r + 3) * b) {
                prefetch_row(bands, next);
            }
            let row = &locs[r * b..(r + 1) * b];
            // SAFETY: `K`'s features are present (caller).
            let dup = unsafe { scan_row::<K>(bands, row, &mut scans) };
            out[start + r] = dup;
            if !dup {
                for ((l, f), &(first, second)) in row.iter().zip(bands.iter_mut()).zip(&scans) {
                    let shape = f.shape();
                    kernel::insert_absent(f.data_mut()?, *l, shape, first, second).map_err(|e| f.full(e))?;
                }
                inserted += 1;
            }
        }
    }
    Ok(inserted)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn query_insert_avx2(bands: &mut [CuckooFile], keys: &[u64], out: &mut [bool]) -> Result<u64, BloomError> {
    // SAFETY: AVX2 is enabled in this function.
    unsafe { query_insert_with::<Avx2>(bands, keys, out) }
}

/// Locations of rows `rows` of `keys` into `locs` (row-major).
fn locate_rows(bands: &[CuckooFile], keys: &[u64], rows: std::ops::Range<usize>, locs: &mut Vec<Loc>) {
    let b = bands.len();
    locs.clear();
    for row in keys[rows.start * b..rows.end * b].chunks_exact(b) {
        for (&k, f) in row.iter().zip(bands) {
            locs.push(f.locate(k));
        }
    }
}

#[inline(always)]
fn prefetch_row(bands: &[CuckooFile], locs: &[Loc]) {
    for (loc, f) in locs.iter().zip(bands) {
        prefetch(f.data(), loc.a * BUCKET_BYTES);
        // Bucket 2 is read only when bucket 1 is full (kernel::scan_both): not prefetched.
    }
}

#[cfg(test)]
mod tests {
    use super::super::CuckooBands;
    use super::*;
    use crate::blocked::splitmix;
    use crate::mapped::test_dir;

    #[test]
    fn file_roundtrip_and_band_keep_first() {
        let d = test_dir("cuckoo-bands");
        let files = (0..3u64)
            .map(|i| CuckooFile::create(&d.join(format!("band-{i}.cbf")), 1000, 1e-6, 1234 + i).unwrap())
            .collect();
        let mut bands = CuckooBands::new(files).unwrap();
        let keys = [1u64, 2, 3, 10, 2, 30, 7, 8, 9, 7, 8, 9];
        let mut out = [false; 4];
        bands.query_insert(&keys, &mut out).unwrap();
        assert_eq!(out, [false, true, false, true]);
        assert_eq!(bands.filters()[0].elem_count(), 2);
        bands.sync().unwrap();
        drop(bands);
        let files: Vec<_> = (0..3).map(|i| CuckooFile::open(&d.join(format!("band-{i}.cbf")), false).unwrap()).collect();
        assert_eq!(files[1].elem_count(), 2);
        let mut ro = CuckooBands::new(files).unwrap();
        let mut q = [false; 2];
        ro.query(&[1, 99, 99, 100, 101, 102], &mut q);
        assert_eq!(q, [true, false]);
        assert!(matches!(ro.query_insert(&[1, 2, 3], &mut [false]), Err(BloomError::ReadOnly { .. })));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn query_insert_equals_naive_over_many_rows() {
        let d = test_dir("cuckoo-naive");
        let b = 5;
        let mk = |tag: &str| -> Vec<CuckooFile> {
            (0..b as u64)
                .map(|i| CuckooFile::create(&d.join(format!("{tag}-{i}.cbf")), 1000, 1e-2, 77 + i).unwrap())
                .collect()
        };
        let mut bands = CuckooBands::new(mk("f")).unwrap();
        let mut st = 3u64;
        let keys: Vec<u64> = (0..1000 * b).map(|_| splitmix(&mut st) % 400).collect();
        let mut out = vec![false; 1000];
        bands.query_insert(&keys, &mut out).unwrap();
        let mut naive = mk("n");
        for (j, row) in keys.chunks_exact(b).enumerate() {
            let dup = row.iter().zip(&naive).any(|(&k, f)| f.contains(k));
            assert_eq!(dup, out[j], "row {j}");
            if !dup {
                for (&k, f) in row.iter().zip(naive.iter_mut()) {
                    f.add_many(&[k], &mut [false]).unwrap();
                }
            }
        }
        assert!(out.iter().any(|&x| x) && out.iter().any(|&x| !x));
        // The portable loop (the reference of the AVX2 one) decides and writes the same.
        let mut slow = mk("s");
        let mut s = vec![false; 1000];
        // SAFETY: portable code needs no CPU feature.
        unsafe { query_insert_with::<Portable>(&mut slow, &keys, &mut s) }.unwrap();
        assert_eq!(s, out);
        for (x, y) in bands.filters().iter().zip(&slow) {
            assert_eq!(x.data(), y.data());
        }
        for (x, y) in bands.filters().iter().zip(&naive) {
            assert_eq!(x.data(), y.data());
            assert_eq!(x.elem_count(), y.elem_count());
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
