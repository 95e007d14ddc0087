//! The batch functions on several threads: rows are cut into contiguous
//! ranges, one per thread, each with its own clone of the hasher (whose
//! buffers are per document), so results never depend on the thread count.

use crate::minhash::band_keys::{minhash_band_keys, Banding};
use crate::minhash::{self, MinHasher};

/// Fewer rows than this per thread cost more in thread start-up than they save.
const MIN_ROWS_PER_THREAD: usize = 64;

/// Rows per range when `n` rows are shared by at most `threads` threads.
fn rows_per_range(n: usize, threads: usize) -> usize {
    let threads = threads.min(n.div_ceil(MIN_ROWS_PER_THREAD)).max(1);
    n.div_ceil(threads).max(1)
}

/// Runs `work` on consecutive ranges of `per` rows and the matching `parts` of
/// the output, each on its own thread and hasher; on the calling thread when
/// one range holds every row.
fn run<P: Send>(
    hasher: &MinHasher,
    rows: &[Option<&str>],
    per: usize,
    parts: impl Iterator<Item = P>,
    work: impl Fn(&mut MinHasher, &[Option<&str>], P) + Sync,
) {
    if rows.len() <= per {
        for part in parts {
            work(&mut hasher.clone(), rows, part);
        }
        return;
    }
    std::thread::scope(|scope| {
        for (rows, part) in rows.chunks(per).zip(parts) {
            let mut h = hasher.clone();
            let work = &work;
            scope.spawn(move || work(&mut h, rows, part));
        }
    });
}

/// Signatures of `rows` (row-major, `num_perm` per row) on up to `threads` threads.
pub(crate) fn signatures(hasher: &MinHasher, rows: &[Option<&str>], threads: usize) -> Vec<u32> {
    let k = hasher.num_perm();
    let mut out = vec![0u32; rows.len() * k];
    let per = rows_per_range(rows.len(), threads);
    run(hasher, rows, per, out.chunks_mut(per * k), minhash::signatures);
    out
}

/// Fused MinHash + band keys of `rows` on up to `threads` threads:
/// (keys, row-major `b` per row; has_shingles).
pub(crate) fn band_keys(hasher: &MinHasher, rows: &[Option<&str>], banding: Banding, threads: usize) -> (Vec<u64>, Vec<bool>) {
    let (n, b) = (rows.len(), banding.b);
    let mut keys = vec![0u64; n * b];
    let mut has = vec![false; n];
    let per = rows_per_range(n, threads);
    let parts = keys.chunks_mut(per * b).zip(has.chunks_mut(per));
    run(hasher, rows, per, parts, |h, rows, (keys, has)| {
        minhash_band_keys(h, rows, banding, keys, has)
    });
    (keys, has)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minhash::band_keys::BandKey;
    use crate::minhash::{Permutations, Scheme};

    #[test]
    fn ranges_are_never_empty_nor_too_small() {
        assert_eq!(rows_per_range(0, 4), 1);
        assert_eq!(rows_per_range(10, 4), 10);
        assert_eq!(rows_per_range(128, 4), 64);
        assert_eq!(rows_per_range(1000, 3), 334);
        assert_eq!(rows_per_range(1000, 1), 1000);
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let a: Vec<u64> = (0..16).map(|i| 2 * i * 7919 + 1).collect();
        let b: Vec<u64> = (0..16).map(|i| i * 104_729).collect();
        let hasher = MinHasher::new(Permutations::new(Scheme::Affine32, &a, &b).unwrap(), 2, 0);
        let texts: Vec<String> = (0..700).map(|i| format!("w{} w{} w{} x", i % 13, i % 7, i)).collect();
        let rows: Vec<Option<&str>> = texts.iter().enumerate().map(|(i, t)| (i % 9 != 0).then_some(t.as_str())).collect();
        let banding = Banding { b: 4, r: 4, key: BandKey::Mix };
        let one = (signatures(&hasher, &rows, 1), band_keys(&hasher, &rows, banding, 1));
        for threads in [2, 3, 16] {
            assert_eq!(signatures(&hasher, &rows, threads), one.0);
            assert_eq!(band_keys(&hasher, &rows, banding, threads), one.1);
        }
        assert_eq!(band_keys(&hasher, &[], banding, 4), (vec![], vec![]));
    }
}
