//! The row loops of a band set of pybloomfiltermmap3 files.

use super::file::BloomFile;
use crate::filters::band_set::{BandFilter, FilterFile};
use crate::filters::error::FilterError;
use crate::prefetch::prefetch;

impl BandFilter for BloomFile {
    fn query_rows(bands: &[BloomFile], keys: &[u64], out: &mut [bool]) {
        let b = bands.len();
        for (row, o) in keys.chunks_exact(b).zip(out.iter_mut()) {
            *o = row.iter().zip(bands).any(|(&k, f)| f.contains(k));
        }
    }

    fn insert_rows(bands: &mut [BloomFile], keys: &[u64]) -> Result<(), FilterError> {
        let b = bands.len();
        let mut pos = Vec::new();
        for row in keys.chunks_exact(b) {
            for (&k, f) in row.iter().zip(bands.iter_mut()) {
                f.add_one(k, &mut pos)?;
            }
        }
        Ok(())
    }

    fn query_insert_rows(bands: &mut [BloomFile], keys: &[u64], out: &mut [bool]) -> Result<u64, FilterError> {
        let b = bands.len();
        // Band i's positions of a row are pos[offsets[i]..offsets[i + 1]].
        let mut offsets = Vec::with_capacity(b + 1);
        offsets.push(0);
        for f in bands.iter() {
            offsets.push(offsets[offsets.len() - 1] + f.num_hashes());
        }
        let mut pos = Vec::with_capacity(offsets[b]);
        let mut next = Vec::with_capacity(offsets[b]);
        let mut inserted = 0u64;
        let mut rows = keys.chunks_exact(b);
        if let Some(first) = rows.next() {
            positions_prefetched(bands, first, &mut pos);
        }
        for o in out.iter_mut() {
            // Software prefetch across documents: the bit positions of the next
            // document do not depend on this one's inserts, so compute them and
            // start their cache-line loads before this document's tests.
            next.clear();
            if let Some(row) = rows.next() {
                positions_prefetched(bands, row, &mut next);
            }
            let dup = bands
                .iter()
                .enumerate()
                .any(|(i, f)| BloomFile::test_positions(f.data(), &pos[offsets[i]..offsets[i + 1]]));
            *o = dup;
            if !dup {
                for (i, f) in bands.iter_mut().enumerate() {
                    let data = f.data_mut()?;
                    BloomFile::set_positions(data, &pos[offsets[i]..offsets[i + 1]]);
                }
                inserted += 1;
            }
            std::mem::swap(&mut pos, &mut next);
        }
        Ok(inserted)
    }

    fn count_new_keys(&mut self, n: u64) {
        if self.count_correct {
            self.core_mut().elem_count += n;
        }
    }
}

/// Bit positions of one row's band keys (band after band) appended to `pos`,
/// each one's cache line prefetched.
#[inline]
fn positions_prefetched(bands: &[BloomFile], row: &[u64], pos: &mut Vec<u64>) {
    for (&k, f) in row.iter().zip(bands) {
        let start = pos.len();
        f.positions(k, pos);
        let data = f.data();
        for &p in &pos[start..] {
            prefetch(data, (p >> 3) as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::BandFilters;
    use super::*;
    use crate::filters::band_set::FilterFile;
    use crate::filters::mapped::test_dir;

    #[test]
    fn band_filters_keep_first() {
        let d = test_dir("bloom-bands");
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
        assert!(matches!(ro.query_insert(&[1, 2, 3], &mut [false]), Err(FilterError::ReadOnly { .. })));
        assert!(matches!(ro.insert(&[1, 2, 3]), Err(FilterError::ReadOnly { .. })));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
