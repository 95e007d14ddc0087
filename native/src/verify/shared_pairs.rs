//! Which documents of one set share a (band, key) with an earlier one of the
//! same set, at most a few per bucket: round 2 of verification's candidates on
//! the driver (lshbloom_udf/spark/verify/sources.py: the documents round 1
//! unflagged, which are kept now, checked against each other).
//!
//! Documents are the rows of an `n × b` key matrix in row order, so "later"
//! is the larger index. Band by band, the (key, document) pairs are sorted;
//! a bucket (a run of `g` equal keys) pairs each member with the first
//! `anchors` members before it (its *anchors*), not with all `g - 1`: pages
//! made from one template fill a few buckets of every band with a large share
//! of the family, and pairing all of them is `O(g²)`. A true copy shares most
//! of its bands with its source, most of them in buckets that hold only the
//! two (or the copies of one source, whose earliest is the anchor), so the
//! bound costs no true source (docs/algorithm.md §8, "Bounded candidates").
//!
//! Each pair found is reported once with the number of bands it was found in
//! and the size of the smallest bucket it was found in: the evidence
//! verification ranks candidates by. The work is `O(b n log n)` plus at most
//! `b · anchors` entries per document, linear in `n` whatever the keys.

/// Fewer keys than this in all are matched on the calling thread.
const SPLIT_MIN_KEYS: usize = 1 << 16;

/// A candidate pair of documents and the evidence the bands give for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SharedPair {
    pub(crate) later: u32,
    pub(crate) earlier: u32,
    /// Bands in which the two share a bucket (and the earlier one anchors it).
    pub(crate) bands: u32,
    /// The fewest documents in one of those buckets.
    pub(crate) smallest_bucket: u32,
}

/// Every distinct `(later, earlier)` pair of documents of `keys` (row-major
/// `n × b`: document `j`'s key of band `i` at `j * b + i`) in which `earlier`
/// is one of the first `anchors` members of a bucket that `later` is in,
/// sorted by (later, earlier), on up to `threads` threads (the result does not
/// depend on their number).
pub(crate) fn shared_pairs(keys: &[u64], b: usize, anchors: usize, threads: usize) -> Vec<SharedPair> {
    assert!(b >= 1 && keys.len().is_multiple_of(b), "keys must be n × b");
    assert!(anchors >= 1, "at least one anchor per bucket");
    assert!(
        u32::try_from(keys.len() / b).is_ok(),
        "at most 2^32 - 1 documents"
    );
    let threads = if keys.len() < SPLIT_MIN_KEYS {
        1
    } else {
        threads.clamp(1, b)
    };
    let per = b.div_ceil(threads);
    let bands_of = |first: usize| first..(first + per).min(b);
    let mut found: Vec<(u64, u32)> = if threads == 1 {
        band_pairs(keys, b, anchors, 0..b)
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..b)
                .step_by(per)
                .map(|first| scope.spawn(move || band_pairs(keys, b, anchors, bands_of(first))))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a band thread panicked"))
                .collect()
        })
    };
    found.sort_unstable();
    merge(&found)
}

/// One [`SharedPair`] per run of equal packed pairs of the sorted `found`.
fn merge(found: &[(u64, u32)]) -> Vec<SharedPair> {
    let mut out: Vec<SharedPair> = Vec::new();
    for &(packed, size) in found {
        let (later, earlier) = ((packed >> 32) as u32, packed as u32);
        match out.last_mut() {
            Some(p) if p.later == later && p.earlier == earlier => {
                p.bands += 1;
                p.smallest_bucket = p.smallest_bucket.min(size);
            }
            _ => out.push(SharedPair {
                later,
                earlier,
                bands: 1,
                smallest_bucket: size,
            }),
        }
    }
    out
}

/// The pairs of `bands`, each packed as `later << 32 | earlier` (so that
/// sorting the packed values sorts by (later, earlier)) with its bucket's
/// size; a pair shows once per band it is found in.
fn band_pairs(
    keys: &[u64],
    b: usize,
    anchors: usize,
    bands: std::ops::Range<usize>,
) -> Vec<(u64, u32)> {
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
            let size = (end - start) as u32;
            for later in start + 1..end {
                let high = u64::from(column[later].1) << 32;
                let first = &column[start..later.min(start.saturating_add(anchors))];
                out.extend(first.iter().map(|e| (high | u64::from(e.1), size)));
            }
            start = end;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::lines::splitmix;

    /// Quadratic: for every pair, the bands in which the earlier one is among
    /// the first `anchors` documents holding that band's key.
    fn reference(keys: &[u64], b: usize, anchors: usize) -> Vec<SharedPair> {
        let n = keys.len() / b;
        let key = |j: usize, i: usize| keys[j * b + i];
        let mut out = Vec::new();
        for later in 0..n {
            for earlier in 0..later {
                let (mut bands, mut smallest) = (0u32, u32::MAX);
                for i in 0..b {
                    let members: Vec<usize> =
                        (0..n).filter(|&d| key(d, i) == key(later, i)).collect();
                    if key(earlier, i) == key(later, i)
                        && members.iter().position(|&d| d == earlier).unwrap() < anchors
                    {
                        bands += 1;
                        smallest = smallest.min(members.len() as u32);
                    }
                }
                if bands > 0 {
                    out.push(SharedPair {
                        later: later as u32,
                        earlier: earlier as u32,
                        bands,
                        smallest_bucket: smallest,
                    });
                }
            }
        }
        out
    }

    #[test]
    fn equals_the_quadratic_reference_on_any_number_of_threads() {
        let mut seed = 11u64;
        // Small key ranges: many shared keys, runs of several documents, pairs sharing several bands.
        for (b, n, range) in [
            (4, 300, 40u64),
            (3, 1, 3),
            (8, 200, 1000),
            (1, 50, 5),
            (2, 0, 4),
            (64, 120, 60),
        ] {
            let keys: Vec<u64> = (0..n * b).map(|_| splitmix(&mut seed) % range).collect();
            for anchors in [1, 2, 4, usize::MAX] {
                let want = reference(&keys, b, anchors);
                for threads in [1, 2, 3, 64, 100] {
                    assert_eq!(
                        shared_pairs(&keys, b, anchors, threads),
                        want,
                        "b={b} n={n} anchors={anchors} threads={threads}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_bucket_pairs_each_member_with_its_first_anchors_only() {
        // One band, five documents in one bucket: with 2 anchors, 1 pairs with 0, the others with 0 and 1.
        let got: Vec<(u32, u32)> = shared_pairs(&[7; 5], 1, 2, 1)
            .iter()
            .map(|p| (p.later, p.earlier))
            .collect();
        assert_eq!(
            got,
            vec![(1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (4, 0), (4, 1)]
        );
        // Entries grow as n · anchors, not n².
        assert_eq!(
            shared_pairs(&vec![7; 10_000], 1, 4, 1).len(),
            4 * 10_000 - 10
        );
    }

    #[test]
    fn the_evidence_counts_bands_and_the_smallest_bucket() {
        // Documents 0 and 2 share bands 0 and 1; band 0's bucket holds all three, band 1's only the two.
        let keys = [5, 1, 5, 2, 5, 1];
        let want = vec![
            SharedPair {
                later: 1,
                earlier: 0,
                bands: 1,
                smallest_bucket: 3,
            },
            SharedPair {
                later: 2,
                earlier: 0,
                bands: 2,
                smallest_bucket: 2,
            },
            SharedPair {
                later: 2,
                earlier: 1,
                bands: 1,
                smallest_bucket: 3,
            },
        ];
        assert_eq!(shared_pairs(&keys, 2, 4, 1), want);
    }

    #[test]
    fn keys_are_shared_only_within_their_own_band() {
        // Document 1's band-1 key is document 0's band-0 key: no pair.
        assert_eq!(shared_pairs(&[1, 2, 9, 1], 2, 4, 1), vec![]);
    }

    #[test]
    fn extreme_keys_pair_up() {
        let got: Vec<(u32, u32)> = shared_pairs(&[u64::MAX, 0, u64::MAX, 0], 1, 1, 1)
            .iter()
            .map(|p| (p.later, p.earlier))
            .collect();
        assert_eq!(got, vec![(2, 0), (3, 1)]);
    }
}
