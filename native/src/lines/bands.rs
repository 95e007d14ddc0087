//! The row loops of a band set of line filters, for every layout: keys are
//! located a chunk of rows at a time, the lines of the rows two documents
//! ahead are prefetched (their lines do not depend on this document's
//! inserts), and a row's probes are kept so that a new row's inserts need not
//! repeat them.

use super::{test, Kernel, Layout, LineFile};
use crate::bandset::{BandFilter, FilterFile};
use crate::error::BloomError;

/// Rows processed per chunk of precomputed locations.
const CHUNK: usize = 64;
/// Documents ahead whose lines are prefetched.
const AHEAD: usize = 2;

impl<L: Layout> BandFilter for LineFile<L> {
    fn query_rows(bands: &[Self], keys: &[u64], out: &mut [bool]) {
        let b = bands.len();
        let mut locs = Vec::with_capacity(CHUNK * b);
        for start in (0..out.len()).step_by(CHUNK) {
            let end = (start + CHUNK).min(out.len());
            locate_rows(bands, keys, start..end, &mut locs);
            (0..AHEAD).for_each(|r| prefetch_row(bands, &locs, r));
            for r in 0..end - start {
                prefetch_row(bands, &locs, r + AHEAD);
                let row = &locs[r * b..(r + 1) * b];
                out[start + r] = row.iter().zip(bands).any(|(l, f)| test::<L>(f.data(), *l, f.shape()));
            }
        }
    }

    fn insert_rows(bands: &mut [Self], keys: &[u64]) -> Result<(), BloomError> {
        let b = bands.len();
        for row in keys.chunks_exact(b) {
            for (&k, f) in row.iter().zip(bands.iter_mut()) {
                let (loc, shape) = (f.locate(k), f.shape());
                let present = super::set::<L>(f.data_mut()?, loc, shape).map_err(|e| f.full(e))?;
                f.core_mut().elem_count += u64::from(!present);
            }
        }
        Ok(())
    }

    fn query_insert_rows(bands: &mut [Self], keys: &[u64], out: &mut [bool]) -> Result<u64, BloomError> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 is present (checked).
                return unsafe { query_insert_avx2(bands, keys, out) };
            }
        }
        // SAFETY: portable code needs no CPU feature.
        unsafe { query_insert_with::<L, L::Portable>(bands, keys, out) }
    }

    fn count_new_keys(&mut self, n: u64) {
        self.core_mut().elem_count += n;
    }
}

/// Locations of rows `rows` of `keys` into `locs` (row-major).
fn locate_rows<L: Layout>(bands: &[LineFile<L>], keys: &[u64], rows: std::ops::Range<usize>, locs: &mut Vec<L::Loc>) {
    let b = bands.len();
    locs.clear();
    for row in keys[rows.start * b..rows.end * b].chunks_exact(b) {
        locs.extend(row.iter().zip(bands).map(|(&k, f)| f.locate(k)));
    }
}

/// Prefetches the lines of row `r` of `locs`, if there is one.
#[inline(always)]
fn prefetch_row<L: Layout>(bands: &[LineFile<L>], locs: &[L::Loc], r: usize) {
    let b = bands.len();
    if let Some(row) = locs.get(r * b..(r + 1) * b) {
        for (loc, f) in row.iter().zip(bands) {
            L::prefetch(f.data(), *loc);
        }
    }
}

/// Probes row `row` band by band into `probes` (by `K`), stopping at the
/// first band that finds its key; true if one did.
///
/// # Safety
/// The CPU has `K`'s target features.
#[inline(always)]
unsafe fn probe_row<L: Layout, K: Kernel<L>>(bands: &[LineFile<L>], row: &[L::Loc], probes: &mut Vec<K::Probe>) -> bool {
    probes.clear();
    for (l, f) in row.iter().zip(bands) {
        // SAFETY: forwarded from the caller.
        match unsafe { K::probe(f.data(), *l, f.shape()) } {
            None => return true,
            Some(p) => probes.push(p),
        }
    }
    false
}

/// "Keep first" with lines probed and set by `K`; returns the rows inserted.
///
/// # Safety
/// The CPU has `K`'s target features.
#[inline(always)]
pub(crate) unsafe fn query_insert_with<L: Layout, K: Kernel<L>>(
    bands: &mut [LineFile<L>],
    keys: &[u64],
    out: &mut [bool],
) -> Result<u64, BloomError> {
    let b = bands.len();
    let n = out.len();
    let mut locs = Vec::with_capacity(CHUNK * b);
    let mut probes: Vec<K::Probe> = Vec::with_capacity(b);
    let mut inserted = 0u64;
    for start in (0..n).step_by(CHUNK) {
        let end = (start + CHUNK).min(n);
        locate_rows(bands, keys, start..end, &mut locs);
        (0..AHEAD).for_each(|r| prefetch_row(bands, &locs, r));
        for r in 0..end - start {
            prefetch_row(bands, &locs, r + AHEAD);
            let row = &locs[r * b..(r + 1) * b];
            // SAFETY: `K`'s features are present (caller).
            let dup = unsafe { probe_row::<L, K>(bands, row, &mut probes) };
            out[start + r] = dup;
            if !dup {
                for ((l, f), &p) in row.iter().zip(bands.iter_mut()).zip(&probes) {
                    let shape = f.shape();
                    // SAFETY: as above; nothing was written since the probe.
                    unsafe { K::insert(f.data_mut()?, *l, shape, p) }.map_err(|e| f.full(e))?;
                }
                inserted += 1;
            }
        }
    }
    Ok(inserted)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn query_insert_avx2<L: Layout>(bands: &mut [LineFile<L>], keys: &[u64], out: &mut [bool]) -> Result<u64, BloomError> {
    // SAFETY: AVX2 is enabled in this function.
    unsafe { query_insert_with::<L, L::Avx2>(bands, keys, out) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bandset::BandSet;
    use crate::blocked::Blocked;
    use crate::cuckoo::Cuckoo;
    use crate::lines::splitmix;
    use crate::mapped::test_dir;
    use std::path::Path;

    fn files<L: Layout>(d: &Path, tag: &str, b: u64, capacity: u64, p: f64, seed: u64) -> Vec<LineFile<L>> {
        (0..b).map(|i| LineFile::create(&d.join(format!("{tag}-{i}")), capacity, p, seed + i).unwrap()).collect()
    }

    /// Keep first over a band set, and the files reopened read-only.
    fn roundtrip_and_keep_first<L: Layout>(name: &str) {
        let d = test_dir(name);
        let mut bands = BandSet::new(files::<L>(&d, "band", 3, 1000, 1e-6, 1234)).unwrap();
        // rows: 0 new, 1 shares band 1 with row 0, 2 new, 3 repeats row 2.
        let keys = [1u64, 2, 3, 10, 2, 30, 7, 8, 9, 7, 8, 9];
        let mut out = [false; 4];
        bands.query_insert(&keys, &mut out).unwrap();
        assert_eq!(out, [false, true, false, true]);
        assert_eq!(bands.filters()[0].elem_count(), 2);
        bands.sync().unwrap();
        drop(bands);
        let files: Vec<LineFile<L>> = (0..3).map(|i| LineFile::open(&d.join(format!("band-{i}")), false).unwrap()).collect();
        assert_eq!((files[1].elem_count(), files[2].seed()), (2, 1236));
        let mut ro = BandSet::new(files).unwrap();
        let mut q = [false; 2];
        ro.query(&[1, 99, 99, 100, 101, 102], &mut q);
        assert_eq!(q, [true, false]);
        assert!(matches!(ro.query_insert(&[1, 2, 3], &mut [false]), Err(BloomError::ReadOnly { .. })));
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// The band loop (AVX2 when present) against a naive per-row loop and
    /// against the loop over the reference kernel `R`: same decisions, bytes
    /// and counts. A small key alphabet makes many rows collide; 1000 rows
    /// cross chunk boundaries.
    fn equals_naive_and_reference<L: Layout, R: Kernel<L>>(name: &str, capacity: u64, p: f64) {
        let d = test_dir(name);
        let b = 5;
        let mut bands = BandSet::new(files::<L>(&d, "f", b, capacity, p, 77)).unwrap();
        let mut st = 3u64;
        let keys: Vec<u64> = (0..1000 * b).map(|_| splitmix(&mut st) % 400).collect();
        let mut out = vec![false; 1000];
        bands.query_insert(&keys, &mut out).unwrap();
        assert!(out.iter().any(|&x| x) && out.iter().any(|&x| !x));
        let mut naive = files::<L>(&d, "n", b, capacity, p, 77);
        for (j, row) in keys.chunks_exact(b as usize).enumerate() {
            let dup = row.iter().zip(&naive).any(|(&k, f)| f.contains(k));
            assert_eq!(dup, out[j], "row {j}");
            if !dup {
                for (&k, f) in row.iter().zip(naive.iter_mut()) {
                    f.add_many(&[k], &mut [false]).unwrap();
                }
            }
        }
        let mut slow = files::<L>(&d, "s", b, capacity, p, 77);
        let mut s = vec![false; 1000];
        // SAFETY: the reference kernels are portable code.
        let inserted = unsafe { query_insert_with::<L, R>(&mut slow, &keys, &mut s) }.unwrap();
        assert_eq!(s, out);
        for ((x, y), z) in bands.filters().iter().zip(&slow).zip(&naive) {
            assert_eq!(x.data(), y.data());
            assert_eq!(x.data(), z.data());
            assert_eq!(x.elem_count(), z.elem_count());
            assert_eq!(x.elem_count(), inserted);
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn blocked_band_loops() {
        roundtrip_and_keep_first::<Blocked>("lines-blocked-bands");
        equals_naive_and_reference::<Blocked, <Blocked as Layout>::Portable>("lines-blocked-naive", 300, 1e-2);
    }

    #[test]
    fn cuckoo_band_loops() {
        roundtrip_and_keep_first::<Cuckoo>("lines-cuckoo-bands");
        equals_naive_and_reference::<Cuckoo, <Cuckoo as Layout>::Portable>("lines-cuckoo-naive", 1000, 1e-2);
    }
}
