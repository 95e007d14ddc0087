//! The row loops of a band set of line filters, for every layout: keys are
//! located a chunk of rows at a time, the lines of the rows two documents
//! ahead are prefetched (their lines do not depend on this document's
//! inserts), and a row's probes are kept so that a new row's inserts need not
//! repeat them.

use super::{test, Kernel, Layout, LineFile};
use crate::filters::band_set::{BandFilter, FilterFile};
use crate::filters::error::FilterError;

/// Rows processed per chunk of precomputed locations.
const CHUNK: usize = 64;
/// Documents ahead whose lines are prefetched.
const AHEAD: usize = 2;
/// Rows per block of the any-earlier loop: its keys (rows × bands × 8 bytes,
/// 2 MB at 64 bands) stay in cache while each band's column is read.
const BLOCK_ROWS: usize = 4096;
/// Keys of one band's column whose lines are prefetched ahead of its test
/// (16 rather than 8: cuckoo ~1.2x, blocked ~1.1x keys/s in filters_pass at 10^6 x 64).
const COLUMN_AHEAD: usize = 16;
/// Keys (rows × bands) from which "any earlier" shares its bands among
/// threads: below it, starting threads costs more than it saves.
const SPLIT_MIN_KEYS: usize = 1 << 16;
/// At most this many threads per call (each reads its own bands' files: more
/// only queue on memory).
const MAX_SPLIT_THREADS: usize = 4;

/// Threads for "any earlier" over `b` bands and `n` rows: the cores this
/// process may use, at most [`MAX_SPLIT_THREADS`] and `b`; one for small calls.
fn any_earlier_threads(b: usize, n: usize) -> usize {
    if n.saturating_mul(b) < SPLIT_MIN_KEYS {
        return 1;
    }
    cores().min(MAX_SPLIT_THREADS).min(b).max(1)
}

/// The cores this process may use, read once (`available_parallelism` reads the affinity mask and cgroup
/// files on every call; the pass asks once per chunk).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |c| c.get()))
}

/// "Any earlier" with the bands shared among `threads` threads, each over
/// every row of its own bands. Bands are independent under this rule (a row's
/// flag is an "or" over its bands, each band's filter sees its column in row
/// order), so flags, bytes and counts are those of one thread. On failures,
/// the error of the first band group that failed.
fn test_insert_split<L: Layout>(
    bands: &mut [LineFile<L>],
    keys: &[u64],
    out: &mut [bool],
    threads: usize,
) -> Result<(), FilterError> {
    let stride = bands.len();
    if threads <= 1 || stride <= 1 {
        return test_insert_group(bands, Columns { first: 0, stride }, keys, out);
    }
    let per = stride.div_ceil(threads);
    let n = out.len();
    let groups: Vec<(Vec<bool>, Result<(), FilterError>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = bands
            .chunks_mut(per)
            .enumerate()
            .map(|(g, group)| {
                let columns = Columns { first: g * per, stride };
                scope.spawn(move || {
                    let mut flags = vec![false; n];
                    let done = test_insert_group(group, columns, keys, &mut flags);
                    (flags, done)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    out.fill(false);
    for (flags, done) in groups {
        done?;
        out.iter_mut().zip(flags).for_each(|(o, f)| *o |= f);
    }
    Ok(())
}

/// Which columns of the row-major keys a band group reads: its first band's
/// column and the row length (all bands).
#[derive(Debug, Clone, Copy)]
struct Columns {
    first: usize,
    stride: usize,
}

/// "Any earlier" over one band group on this thread, by the widest kernel the CPU has.
fn test_insert_group<L: Layout>(
    group: &mut [LineFile<L>],
    columns: Columns,
    keys: &[u64],
    out: &mut [bool],
) -> Result<(), FilterError> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present (checked).
            return unsafe { test_insert_avx2(group, columns, keys, out) };
        }
    }
    // SAFETY: portable code needs no CPU feature.
    unsafe { test_insert_with::<L, L::Portable>(group, columns, keys, out) }
}

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

    fn insert_rows(bands: &mut [Self], keys: &[u64]) -> Result<(), FilterError> {
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

    fn query_insert_rows(bands: &mut [Self], keys: &[u64], out: &mut [bool]) -> Result<u64, FilterError> {
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

    fn test_insert_rows(bands: &mut [Self], keys: &[u64], out: &mut [bool]) -> Result<(), FilterError> {
        test_insert_split(bands, keys, out, any_earlier_threads(bands.len(), out.len()))
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
) -> Result<u64, FilterError> {
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

/// "Any earlier" with lines probed and set by `K` for the bands `bands`
/// (columns `columns` of `keys`): the rows a block at a
/// time, each band's column of the block in row order (bands are independent
/// under this rule), its lines prefetched `COLUMN_AHEAD` keys ahead (a key's
/// lines do not depend on earlier inserts). A block's keys stay in cache
/// while its columns are read.
///
/// # Safety
/// The CPU has `K`'s target features.
#[inline(always)]
unsafe fn test_insert_with<L: Layout, K: Kernel<L>>(
    bands: &mut [LineFile<L>],
    columns: Columns,
    keys: &[u64],
    out: &mut [bool],
) -> Result<(), FilterError> {
    let b = columns.stride;
    let n = out.len();
    out.fill(false);
    let mut locs = Vec::with_capacity(BLOCK_ROWS.min(n));
    for start in (0..n).step_by(BLOCK_ROWS) {
        let end = (start + BLOCK_ROWS).min(n);
        for (i, f) in bands.iter_mut().enumerate() {
            locs.clear();
            let column = start * b + columns.first + i;
            locs.extend(keys[column..end * b].iter().step_by(b).map(|&k| f.locate(k)));
            // SAFETY: `K`'s features are present (caller).
            let (added, full) = unsafe { test_insert_column::<L, K>(f, &locs, &mut out[start..end]) }?;
            f.count_new_keys(added);
            if let Some(e) = full {
                return Err(f.full(e));
            }
        }
    }
    Ok(())
}

/// Tests and sets the keys at `locs` in `f`, in order, or-ing "was present"
/// into `out`: the keys added, and the failure that stopped it (nothing was
/// added for that key).
///
/// # Safety
/// The CPU has `K`'s target features.
#[inline(always)]
unsafe fn test_insert_column<L: Layout, K: Kernel<L>>(
    f: &mut LineFile<L>,
    locs: &[L::Loc],
    out: &mut [bool],
) -> Result<(u64, Option<super::Full>), FilterError> {
    let shape = f.shape();
    let data = f.data_mut()?;
    locs.iter().take(COLUMN_AHEAD).for_each(|l| L::prefetch(data, *l));
    let mut added = 0u64;
    for (r, (loc, o)) in locs.iter().zip(out.iter_mut()).enumerate() {
        if let Some(ahead) = locs.get(r + COLUMN_AHEAD) {
            L::prefetch(data, *ahead);
        }
        // SAFETY (both): forwarded from the caller; nothing was written to
        // the key's lines between its probe and its insert.
        match unsafe { K::probe(data, *loc, shape) } {
            None => *o = true,
            Some(p) => match unsafe { K::insert(data, *loc, shape, p) } {
                Ok(()) => added += 1,
                Err(e) => return Ok((added, Some(e))),
            },
        }
    }
    Ok((added, None))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn test_insert_avx2<L: Layout>(
    bands: &mut [LineFile<L>],
    columns: Columns,
    keys: &[u64],
    out: &mut [bool],
) -> Result<(), FilterError> {
    // SAFETY: AVX2 is enabled in this function.
    unsafe { test_insert_with::<L, L::Avx2>(bands, columns, keys, out) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn query_insert_avx2<L: Layout>(bands: &mut [LineFile<L>], keys: &[u64], out: &mut [bool]) -> Result<u64, FilterError> {
    // SAFETY: AVX2 is enabled in this function.
    unsafe { query_insert_with::<L, L::Avx2>(bands, keys, out) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::band_set::{test_insert_columns, BandSet};
    use crate::filters::blocked::Blocked;
    use crate::filters::cuckoo::Cuckoo;
    use crate::filters::lines::splitmix;
    use crate::filters::mapped::test_dir;
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
        assert!(matches!(ro.query_insert(&[1, 2, 3], &mut [false]), Err(FilterError::ReadOnly { .. })));
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

    /// Any earlier (AVX2 when present) against the column-by-column default
    /// of `BandFilter` (`test_insert_columns`) and against the loop over the reference kernel `R`:
    /// same flags, bytes and counts. 9000 rows cross row blocks; a small key
    /// alphabet makes many rows collide.
    fn any_earlier_equals_columns_and_reference<L: Layout, R: Kernel<L>>(name: &str, capacity: u64, p: f64) {
        let d = test_dir(name);
        let (b, n) = (4, 9000);
        let mut st = 5u64;
        let keys: Vec<u64> = (0..n * b).map(|_| splitmix(&mut st) % 3000).collect();
        let mut bands = BandSet::new(files::<L>(&d, "f", b as u64, capacity, p, 31)).unwrap();
        let mut out = vec![false; n];
        bands.test_insert(&keys, &mut out).unwrap();
        assert!(out.iter().any(|&x| x) && out.iter().any(|&x| !x));
        let mut columns = files::<L>(&d, "c", b as u64, capacity, p, 31);
        let mut c = vec![true; n];
        test_insert_columns(&mut columns, &keys, &mut c).unwrap();
        assert_eq!(c, out);
        let mut slow = files::<L>(&d, "s", b as u64, capacity, p, 31);
        let mut s = vec![true; n];
        // SAFETY: the reference kernels are portable code.
        unsafe { test_insert_with::<L, R>(&mut slow, Columns { first: 0, stride: b }, &keys, &mut s) }.unwrap();
        assert_eq!(s, out);
        // The bands shared among 2 and 3 threads (at b = 4, both make two groups of two bands).
        let mut split: Vec<Vec<LineFile<L>>> = (2..=3).map(|t| files::<L>(&d, &format!("t{t}"), b as u64, capacity, p, 31)).collect();
        for (t, filters) in (2..=3).zip(split.iter_mut()) {
            let mut o = vec![true; n];
            test_insert_split(filters, &keys, &mut o, t).unwrap();
            assert_eq!(o, out, "{t} threads");
            for (x, y) in bands.filters().iter().zip(filters.iter()) {
                assert_eq!((x.data(), x.elem_count()), (y.data(), y.elem_count()), "{t} threads");
            }
        }
        for ((x, y), z) in bands.filters().iter().zip(&slow).zip(&columns) {
            assert_eq!(x.data(), y.data());
            assert_eq!(x.data(), z.data());
            assert_eq!((x.elem_count(), y.elem_count()), (z.elem_count(), z.elem_count()));
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn blocked_band_loops() {
        roundtrip_and_keep_first::<Blocked>("lines-blocked-bands");
        equals_naive_and_reference::<Blocked, <Blocked as Layout>::Portable>("lines-blocked-naive", 300, 1e-2);
        any_earlier_equals_columns_and_reference::<Blocked, <Blocked as Layout>::Portable>("lines-blocked-any", 3000, 1e-2);
    }

    #[test]
    fn cuckoo_band_loops() {
        roundtrip_and_keep_first::<Cuckoo>("lines-cuckoo-bands");
        equals_naive_and_reference::<Cuckoo, <Cuckoo as Layout>::Portable>("lines-cuckoo-naive", 1000, 1e-2);
        any_earlier_equals_columns_and_reference::<Cuckoo, <Cuckoo as Layout>::Portable>("lines-cuckoo-any", 3000, 1e-2);
    }

    /// A cuckoo filter too small for its keys: any earlier stops with the
    /// "full" error, and the keys added before it stay counted in the header.
    #[test]
    fn any_earlier_full_cuckoo_is_an_error() {
        let d = test_dir("lines-cuckoo-any-full");
        let mut bands = BandSet::new(files::<Cuckoo>(&d, "f", 2, 50, 1e-2, 3)).unwrap();
        let mut st = 9u64;
        let keys: Vec<u64> = (0..20_000).map(|_| splitmix(&mut st)).collect();
        let err = bands.test_insert(&keys, &mut vec![false; 10_000]).unwrap_err();
        assert!(err.to_string().contains("full"), "{err}");
        // The same with the bands on two threads: the error comes back, not a panic or a partial answer.
        let mut split = files::<Cuckoo>(&d, "g", 2, 50, 1e-2, 3);
        let err = test_insert_split(&mut split, &keys, &mut vec![false; 10_000], 2).unwrap_err();
        assert!(err.to_string().contains("full"), "{err}");
        let counted = bands.filters()[0].elem_count();
        assert!(counted > 0);
        drop(bands);
        assert_eq!(LineFile::<Cuckoo>::open(&d.join("f-0"), false).unwrap().elem_count(), counted);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
