//! The band loops of blocked files (those of `lines`) against a naive
//! per-row loop and the portable kernel.

#[cfg(test)]
mod tests {
    use super::super::{splitmix, Blocked, BlockedBands, BlockedFile, Portable};
    use crate::bandset::FilterFile;
    use crate::error::BloomError;
    use crate::lines::bands::query_insert_with;
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
        // SAFETY: portable code needs no CPU feature.
        let inserted = unsafe { query_insert_with::<Blocked, Portable>(&mut slow, &keys, &mut s) }.unwrap();
        assert_eq!(a, s);
        assert!(a.iter().any(|&x| x) && a.iter().any(|&x| !x));
        for (x, y) in fast.filters().iter().zip(&slow) {
            assert_eq!(x.data(), y.data());
            assert_eq!(x.elem_count(), inserted);
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
