//! Which documents of one set share a (band, key) with an earlier one of the
//! same set: round 2 of verification's candidates on the driver
//! (lshbloom_udf/spark/verify_sources.py: the documents round 1 unflagged,
//! which are kept now, checked against each other).
//!
//! Documents are the rows of an `n × b` key matrix in row order, so "later"
//! is the larger index. Band by band, the (key, document) pairs are sorted;
//! each run of `g` equal keys gives its `g (g - 1) / 2` (later, earlier)
//! pairs. Bands are independent, so they are shared among threads; the pairs
//! of every band are then sorted together and each kept once, so the result
//! does not depend on the number of threads. The work is `O(b n log n)` plus
//! the pairs found (a key shared by many documents gives quadratically many,
//! as it would to any exact join).

/// Fewer keys than this in all are matched on the calling thread.
const SPLIT_MIN_KEYS: usize = 1 << 16;

/// Every distinct `(later, earlier)` pair of documents of `keys` (row-major
/// `n × b`: document `j`'s key of band `i` at `j * b + i`) that share a key in
/// some band, sorted, on up to `threads` threads.
pub fn shared_pairs(keys: &[u64], b: usize, threads: usize) -> Vec<(u32, u32)> {
    assert!(b >= 1 && keys.len().is_multiple_of(b), "keys must be n × b");
    assert!(
        u32::try_from(keys.len() / b).is_ok(),
        "at most 2^32 - 1 documents"
    );
    let threads = if keys.len() < SPLIT_MIN_KEYS { 1 } else { threads.clamp(1, b) };
    let per = b.div_ceil(threads);
    let bands_of = |first: usize| first..(first + per).min(b);
    let mut packed: Vec<u64> = if threads == 1 {
        band_pairs(keys, b, 0..b)
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..b)
                .step_by(per)
                .map(|first| scope.spawn(move || band_pairs(keys, b, bands_of(first))))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a band thread panicked"))
                .collect()
        })
    };
    packed.sort_unstable();
    packed.dedup();
    packed
        .into_iter()
        .map(|p| ((p >> 32) as u32, p as u32))
        .collect()
}

/// The pairs of `bands`, each packed as `later << 32 | earlier` (so that
/// sorting the packed values sorts by (later, earlier)), repeats included.
fn band_pairs(keys: &[u64], b: usize, bands: std::ops::Range<usize>) -> Vec<u64> {
    let n = keys.len() / b;
    let mut column: Vec<(u64, u32)> = Vec::with_capacity(n);
    let mut out = Vec::new();
    for band in bands {
        column.clear();
        column.extend((0..n).map(|j| (keys[j * b + band], j as u32)));
        // By key, then document: within a run of equal keys the documents ascend.
        column.sort_unstable();
        let mut start = 0;
        while start < column.len() {
            let key = column[start].0;
            let end = start + column[start..].iter().take_while(|e| e.0 == key).count();
            for later in start + 1..end {
                let high = u64::from(column[later].1) << 32;
                out.extend(column[start..later].iter().map(|e| high | u64::from(e.1)));
            }
            start = end;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::splitmix;

    fn reference(keys: &[u64], b: usize) -> Vec<(u32, u32)> {
        let n = keys.len() / b;
        let mut out = Vec::new();
        for later in 0..n {
            for earlier in 0..later {
                if (0..b).any(|i| keys[later * b + i] == keys[earlier * b + i]) {
                    out.push((later as u32, earlier as u32));
                }
            }
        }
        out
    }

    #[test]
    fn equals_the_quadratic_reference_on_any_number_of_threads() {
        let mut seed = 11u64;
        // Small key ranges: many shared keys, runs of several documents, pairs sharing several bands.
        for (b, n, range) in [(4, 300, 40u64), (3, 1, 3), (8, 200, 1000), (1, 50, 5), (2, 0, 4), (64, 1200, 200)] {
            let keys: Vec<u64> = (0..n * b).map(|_| splitmix(&mut seed) % range).collect();
            let want = reference(&keys, b);
            for threads in [1, 2, 3, 64, 100] {
                assert_eq!(shared_pairs(&keys, b, threads), want, "b={b} n={n} threads={threads}");
            }
        }
    }

    #[test]
    fn keys_are_shared_only_within_their_own_band() {
        // Document 1's band-1 key is document 0's band-0 key: no pair.
        assert_eq!(shared_pairs(&[1, 2, 9, 1], 2, 1), vec![]);
        assert_eq!(shared_pairs(&[1, 2, 1, 2, 0, 2], 2, 2), vec![(1, 0), (2, 0), (2, 1)]);
    }

    #[test]
    fn extreme_keys_pair_up() {
        assert_eq!(shared_pairs(&[u64::MAX, 0, u64::MAX, 0], 1, 1), vec![(2, 0), (3, 1)]);
    }
}
