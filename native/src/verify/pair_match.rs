//! Which (band, key) pairs of many documents equal a pair of a few: round 1
//! of verification's candidates on the driver
//! (lshbloom_udf/spark/verify/sources.py), and the earlier runs' records
//! sharing a band with this run's flagged documents
//! (lshbloom_udf/spark/verify/crossrun.py, keys from b-bit sketches).
//!
//! The few (the pass's flagged documents, `F` of them) are indexed band by
//! band: band `i`'s keys, bijectively mixed (splitmix64's finalizer, so
//! structured keys such as datasketch's sums spread too) and sorted, with a
//! bucket table on the mixed keys' top bits. A band's index is ~12 bytes per
//! flagged document, so at `F = 10^5` it stays in the cache while a chunk of
//! the many is looked up in it. Matching is exact: the mix is a bijection, so
//! equal mixed keys are equal keys.

use crate::prefetch::prefetch;

use crate::hash::splitmix::mix;

/// Band `i`'s key of a b-bit MinHash sketch (a byte a value), from its bytes `[i·r, (i+1)·r)`: packed
/// little-endian when they fit in 8 bytes, else folded through [`mix`] (cross-run verification's candidates,
/// lshbloom_udf/spark/verify/crossrun.py: every earlier document that shares a band's `r` MinHash values shares these
/// bytes).
#[inline]
fn sketch_band_key(bytes: &[u8]) -> u64 {
    if bytes.len() <= 8 {
        let mut packed = [0u8; 8];
        packed[..bytes.len()].copy_from_slice(bytes);
        u64::from_le_bytes(packed)
    } else {
        bytes
            .iter()
            .enumerate()
            .fold(0, |v, (j, &x)| mix(v ^ u64::from(x) ^ ((j as u64) << 8)))
    }
}

/// The `m × b` band keys (row-major) of `m` sketches of `k` bytes: [`sketch_band_key`] of each band's `r` bytes,
/// to index (the flagged documents) and to look up ([`PairIndex::matches`]: the earlier runs' records).
pub(crate) fn sketch_band_keys(sketches: &[u8], k: usize, b: usize, r: usize) -> Vec<u64> {
    assert!(k >= 1 && sketches.len().is_multiple_of(k), "sketches must be m × k");
    assert!(b * r <= k, "b · r must not exceed the sketch's k bytes");
    sketches
        .chunks_exact(k)
        .flat_map(|s| (0..b).map(move |i| sketch_band_key(&s[i * r..(i + 1) * r])))
        .collect()
}

/// Documents between two prefetch steps of a band's lookups (`match_band`).
const LOOKUP_AHEAD: usize = 8;

#[derive(Debug, Clone)]
struct Band {
    /// Mixed keys, sorted.
    keys: Vec<u64>,
    /// The flagged document (its index in the input) of each key.
    docs: Vec<u32>,
    /// `keys[starts[t]..starts[t + 1]]` have top bits `t`.
    starts: Vec<u32>,
    /// One bit per slot of the mixed keys' low bits, set where a key is: 16 to 32 slots per key (2 to 4
    /// bytes), at most [`FILTER_MAX_BITS`] a band, so that it stays in the core's cache. Most keys looked up
    /// are not indexed, and this answers them there (docs/benchmarks.md, "The records scan, cut"). Empty: no
    /// filter (more keys than a cache-sized one holds: it would cost a miss of its own before the bucket's).
    filter: Vec<u64>,
    filter_mask: u64,
}

/// The largest filter a band gets: 2^20 bits (128 KiB), for up to 2^16 indexed keys.
const FILTER_MAX_BITS: u32 = 20;

impl Band {
    #[inline]
    fn may_hold(&self, mixed: u64) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        let slot = mixed & self.filter_mask;
        self.filter[(slot >> 6) as usize] & (1 << (slot & 63)) != 0
    }
}

/// The (band, key) pairs of the few documents, band by band.
#[derive(Debug, Clone)]
pub(crate) struct PairIndex {
    b: usize,
    shift: u32,
    bands: Vec<Band>,
}

impl PairIndex {
    /// Indexes `keys` (row-major, `n × b`: document `j`'s key of band `i` at `j * b + i`).
    pub(crate) fn new(keys: &[u64], b: usize) -> Self {
        assert!(b >= 1 && keys.len().is_multiple_of(b), "keys must be n × b");
        let n = keys.len() / b;
        assert!(u32::try_from(n).is_ok(), "at most 2^32 - 1 documents");
        // ~4 keys per bucket: the table is a third of the band's index.
        let bits = (usize::BITS - n.max(1).leading_zeros())
            .saturating_sub(2)
            .clamp(1, 22);
        let shift = 64 - bits;
        let bands = (0..b)
            .map(|i| {
                let mut pairs: Vec<(u64, u32)> =
                    (0..n).map(|j| (mix(keys[j * b + i]), j as u32)).collect();
                pairs.sort_unstable();
                let mut starts = vec![0u32; (1usize << bits) + 1];
                for &(k, _) in &pairs {
                    starts[(k >> shift) as usize + 1] += 1;
                }
                for t in 1..starts.len() {
                    starts[t] += starts[t - 1];
                }
                let filter_bits = (usize::BITS - n.max(1).leading_zeros() + 4).max(6);
                let filter_mask = (1u64 << filter_bits) - 1;
                let mut filter = Vec::new();
                if filter_bits <= FILTER_MAX_BITS {
                    filter = vec![0u64; 1 << (filter_bits - 6)];
                    for &(k, _) in &pairs {
                        let slot = k & filter_mask;
                        filter[(slot >> 6) as usize] |= 1 << (slot & 63);
                    }
                }
                let (keys, docs) = pairs.into_iter().unzip();
                Band { keys, docs, starts, filter, filter_mask }
            })
            .collect();
        PairIndex { b, shift, bands }
    }

    pub(crate) fn bands(&self) -> usize {
        self.b
    }

    /// Every `(document of keys, indexed document)` sharing a (band, key), band
    /// after band (one band's index stays in the cache while the documents are
    /// looked up in it); `keys` is row-major `m × b`,
    /// `only` (length `m`, or empty: all) says which of its documents count.
    pub(crate) fn matches(&self, keys: &[u64], only: &[bool]) -> Vec<(u32, u32)> {
        let b = self.b;
        assert!(keys.len().is_multiple_of(b), "keys must be m × b");
        let m = keys.len() / b;
        assert!(
            only.is_empty() || only.len() == m,
            "only must have one flag per document"
        );
        assert!(
            u32::try_from(m).is_ok(),
            "at most 2^32 - 1 documents per call"
        );
        let mut out = Vec::new();
        for (i, band) in self.bands.iter().enumerate() {
            self.match_band(band, &keys[i..], m, only, &mut out);
        }
        out
    }

    /// The indexed documents of `band` whose key is `key`, each pushed as `(j, document)`.
    #[inline]
    fn lookup(&self, band: &Band, key: u64, j: u32, out: &mut Vec<(u32, u32)>) {
        let k = mix(key);
        if !band.may_hold(k) {
            return;
        }
        let t = (k >> self.shift) as usize;
        let (lo, hi) = (band.starts[t] as usize, band.starts[t + 1] as usize);
        // Buckets hold ~1 key on average: a short scan of a sorted run.
        for at in lo..hi {
            let here = band.keys[at];
            if here == k {
                out.push((j, band.docs[at]));
            } else if here > k {
                break;
            }
        }
    }

    /// [`PairIndex::matches`] of one band: `column[j * b]` is document `j`'s
    /// key. The lookups are independent, so each document's cache lines are
    /// prefetched ahead of it in three steps: its key (the column is strided
    /// by b keys: a line per document), its bucket start, its first indexed key.
    #[inline]
    fn match_band(&self, band: &Band, column: &[u64], m: usize, only: &[bool], out: &mut Vec<(u32, u32)>) {
        let b = self.b;
        let bucket = |k: u64| (mix(k) >> self.shift) as usize;
        for j in 0..m {
            prefetch(column, (j + 3 * LOOKUP_AHEAD) * b);
            if let Some(&k) = column.get((j + 2 * LOOKUP_AHEAD) * b) {
                prefetch(&band.starts, bucket(k));
            }
            if let Some(&k) = column.get((j + LOOKUP_AHEAD) * b) {
                prefetch(&band.keys, band.starts[bucket(k)] as usize);
            }
            if !only.is_empty() && !only[j] {
                continue;
            }
            self.lookup(band, column[j * b], j as u32, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(few: &[u64], many: &[u64], only: &[bool], b: usize) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        for j in 0..many.len() / b {
            if !only.is_empty() && !only[j] {
                continue;
            }
            for i in 0..b {
                for f in 0..few.len() / b {
                    if few[f * b + i] == many[j * b + i] {
                        out.push((j as u32, f as u32));
                    }
                }
            }
        }
        out
    }

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn equals_the_quadratic_reference() {
        let mut seed = 7u64;
        for (b, nf, nm, range) in [
            (4, 50, 300, 40u64),
            (3, 1, 20, 3),
            (8, 500, 200, 1000),
            (1, 0, 10, 5),
            // Past 2^16 indexed keys a band has no filter: every lookup goes to its buckets.
            (1, 70_000, 60, 200_000),
        ] {
            // Small key ranges: many shared keys, within the few too (copies of one source share keys).
            let few: Vec<u64> = (0..nf * b).map(|_| lcg(&mut seed) % range).collect();
            let many: Vec<u64> = (0..nm * b).map(|_| lcg(&mut seed) % range).collect();
            let only: Vec<bool> = (0..nm).map(|j| j % 3 != 1).collect();
            let index = PairIndex::new(&few, b);
            let mut got = index.matches(&many, &only);
            let mut want = reference(&few, &many, &only, b);
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want, "b={b} nf={nf}");
            let mut all = index.matches(&many, &[]);
            let mut want_all = reference(&few, &many, &[], b);
            all.sort_unstable();
            want_all.sort_unstable();
            assert_eq!(all, want_all);
        }
    }

    #[test]
    fn sketch_band_keys_are_the_bands_bytes() {
        let s: Vec<u8> = (1..=8).collect();
        assert_eq!(sketch_band_keys(&s, 8, 2, 4), vec![0x0403_0201, 0x0807_0605]);
        assert_eq!(sketch_band_keys(&s, 8, 1, 8), vec![0x0807_0605_0403_0201]);
        // Past 8 bytes a band is folded: equal bytes give equal keys, another byte another key.
        let long: Vec<u8> = (0..20).collect();
        let mut other = long.clone();
        other[19] = 0;
        let keys = sketch_band_keys(&long, 20, 2, 10);
        assert_ne!(keys[0], keys[1]);
        assert_eq!(keys[0], sketch_band_keys(&other, 20, 2, 10)[0]);
        assert_ne!(keys[1], sketch_band_keys(&other, 20, 2, 10)[1]);
    }

    #[test]
    fn keys_match_only_in_their_own_band() {
        let index = PairIndex::new(&[1, 2], 2);
        assert_eq!(index.matches(&[2, 1], &[]), vec![]);
        assert_eq!(
            index.matches(&[1, 9, 9, 2, 1, 2], &[]),
            vec![(0, 0), (2, 0), (1, 0), (2, 0)]
        );
    }

    #[test]
    fn extreme_keys_are_found() {
        let index = PairIndex::new(&[0, u64::MAX, u64::MAX, 0], 2);
        assert_eq!(
            index.matches(&[0, 0, u64::MAX, u64::MAX], &[]),
            vec![(0, 0), (1, 1), (0, 1), (1, 0)]
        );
    }
}
