//! The band loops of cuckoo files (those of `lines`) against a naive per-row
//! loop and the portable kernel.

#[cfg(test)]
mod tests {
    use super::super::scan::ScanKernel;
    use super::super::{Cuckoo, CuckooBands, CuckooFile};
    use crate::bandset::FilterFile;
    use crate::error::BloomError;
    use crate::lines::bands::query_insert_with;
    use crate::lines::splitmix;
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
        // The slot-by-slot scan (the first kernel) decides and writes the same.
        let mut slow = mk("s");
        let mut s = vec![false; 1000];
        // SAFETY: portable code needs no CPU feature.
        unsafe { query_insert_with::<Cuckoo, ScanKernel>(&mut slow, &keys, &mut s) }.unwrap();
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
