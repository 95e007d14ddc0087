//! The row loops of a band set of blocked filter files.

#[cfg(target_arch = "x86_64")]
use super::kernel::Avx2;
use super::kernel::{self, BlockOps, Loc, Portable};
use super::{BlockedFile, BLOCK_BYTES};
use crate::bandset::{BandFilter, FilterFile};
use crate::error::BloomError;
use crate::prefetch::prefetch;

/// Rows processed per chunk of precomputed locations.
const CHUNK: usize = 64;

impl BandFilter for BlockedFile {
    fn query_rows(bands: &[BlockedFile], keys: &[u64], out: &mut [bool]) {
        let b = bands.len();
        let mut locs = Vec::with_capacity(CHUNK * b);
        for start in (0..out.len()).step_by(CHUNK) {
            let end = (start + CHUNK).min(out.len());
            locate_rows(bands, keys, start..end, &mut locs);
            for r in 0..end - start {
                if let Some(next) = locs.get((r + 1) * b..(r + 2) * b) {
                    prefetch_row(bands, next);
                }
                let row = &locs[r * b..(r + 1) * b];
                out[start + r] = row.iter().zip(bands).any(|(l, f)| f.test_loc(*l));
            }
        }
    }

    fn insert_rows(bands: &mut [BlockedFile], keys: &[u64]) -> Result<(), BloomError> {
        let b = bands.len();
        for row in keys.chunks_exact(b) {
            for (&k, f) in row.iter().zip(bands.iter_mut()) {
                let loc = f.locate(k);
                let present = kernel::set_loc(f.data_mut()?, loc);
                f.core_mut().elem_count += u64::from(!present);
            }
        }
        Ok(())
    }

    fn query_insert_rows(bands: &mut [BlockedFile], keys: &[u64], out: &mut [bool]) -> Result<u64, BloomError> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 is present (checked).
                return unsafe { query_insert_avx2(bands, keys, out) };
            }
        }
        query_insert_portable(bands, keys, out)
    }

    fn count_new_keys(&mut self, n: u64) {
        self.core_mut().elem_count += n;
    }
}

/// Locations of rows `rows` of `keys` into `locs` (row-major).
fn locate_rows(bands: &[BlockedFile], keys: &[u64], rows: std::ops::Range<usize>, locs: &mut Vec<Loc>) {
    let b = bands.len();
    locs.clear();
    for row in keys[rows.start * b..rows.end * b].chunks_exact(b) {
        for (&k, f) in row.iter().zip(bands) {
            locs.push(f.locate(k));
        }
    }
}

#[inline(always)]
fn prefetch_row(bands: &[BlockedFile], locs: &[Loc]) {
    for (loc, f) in locs.iter().zip(bands) {
        prefetch(f.data(), loc.block * BLOCK_BYTES);
    }
}

/// The keep-first loop with blocks tested and set by `K`; returns the number
/// of rows inserted.
///
/// # Safety
/// The CPU has `K`'s target features.
#[inline(always)]
unsafe fn query_insert_with<K: BlockOps>(
    bands: &mut [BlockedFile],
    keys: &[u64],
    out: &mut [bool],
) -> Result<u64, BloomError> {
    let b = bands.len();
    let n = out.len();
    let mut bases: Vec<*mut u8> = Vec::with_capacity(b);
    for f in bands.iter_mut() {
        bases.push(f.data_mut()?.as_mut_ptr());
    }
    let mut locs = Vec::with_capacity(CHUNK * b);
    let mut inserted = 0u64;
    for start in (0..n).step_by(CHUNK) {
        let end = (start + CHUNK).min(n);
        locate_rows(bands, keys, start..end, &mut locs);
        prefetch_row(bands, &locs[..b]);
        for r in 0..end - start {
            // Prefetch two documents ahead: their blocks do not depend on
            // this document's inserts.
            if let Some(next) = locs.get((r + 2) * b..(r + 3) * b) {
                prefetch_row(bands, next);
            }
            let row = &locs[r * b..(r + 1) * b];
            // SAFETY: every `loc.block < num_blocks` (fast range), so each
            // pointer addresses 64 bytes inside its filter's mapping, which
            // `bands` keeps alive and which nothing else aliases meanwhile;
            // `K`'s features are present (caller).
            let dup = row
                .iter()
                .zip(&bases)
                .any(|(l, &p)| unsafe { K::test(p.add(l.block * BLOCK_BYTES), l.bits) });
            out[start + r] = dup;
            if !dup {
                for (l, &p) in row.iter().zip(&bases) {
                    // SAFETY: as above.
                    unsafe { K::set(p.add(l.block * BLOCK_BYTES), l.bits) };
                }
                inserted += 1;
            }
        }
    }
    Ok(inserted)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn query_insert_avx2(bands: &mut [BlockedFile], keys: &[u64], out: &mut [bool]) -> Result<u64, BloomError> {
    // SAFETY: AVX2 is enabled in this function.
    unsafe { query_insert_with::<Avx2>(bands, keys, out) }
}

/// Portable loop (also the reference the AVX2 kernel is tested against).
fn query_insert_portable(bands: &mut [BlockedFile], keys: &[u64], out: &mut [bool]) -> Result<u64, BloomError> {
    // SAFETY: portable code needs no CPU feature.
    unsafe { query_insert_with::<Portable>(bands, keys, out) }
}

#[cfg(test)]
mod tests {
    use super::super::{splitmix, BlockedBands};
    use super::*;
    use crate::mapped::test_dir;

    #[test]
    fn file_roundtrip_and_band_keep_first() {
        let d = test_dir("blocked-bands");
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
        let d = test_dir("blocked-naive");
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
    fn avx2_and_scalar_query_insert_agree() {
        let d = test_dir("blocked-qi");
        let b = 6;
        let mk = |tag: &str| -> Vec<BlockedFile> {
            (0..b as u64)
                .map(|i| BlockedFile::create(&d.join(format!("{tag}-{i}.bbf")), 2000, 1e-2, 5 + i).unwrap())
                .collect()
        };
        let mut st = 17u64;
        let keys: Vec<u64> = (0..3000 * b).map(|_| splitmix(&mut st) % 2500).collect();
        let mut fast = BlockedBands::new(mk("f")).unwrap();
        let mut slow = mk("s");
        let mut a = vec![false; 3000];
        let mut s = vec![false; 3000];
        fast.query_insert(&keys, &mut a).unwrap();
        let inserted = query_insert_portable(&mut slow, &keys, &mut s).unwrap();
        assert_eq!(a, s);
        assert!(a.iter().any(|&x| x) && a.iter().any(|&x| !x));
        for (x, y) in fast.filters().iter().zip(&slow) {
            assert_eq!(x.data(), y.data());
            assert_eq!(x.elem_count(), inserted);
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
