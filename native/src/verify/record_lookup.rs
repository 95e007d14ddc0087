//! The lookup of a kept index's records by band key (Python: `lshbloom_udf/index/lookup.py`, which writes the
//! arrays and documents the layout).
//!
//! Per band `i` of a run of `n` records: the sorted 32-bit keys' fences (every `fence_every`-th key), their low
//! bytes (fragments) and their groups (`position / group_rows`); the records' sketches, two 4-bit values a byte.
//! A query of key `x` in band `i`: the fences bound the entries that may hold `x`, the fragments pick them, and
//! each named group's records are compared on band `i`'s `r` 4-bit values. At most `cap` records per query and
//! band, the earliest positions.

/// One run's lookup arrays (row-major, as the files hold them).
pub(crate) struct RunLookup<'a> {
    /// `(b, ⌈n / fence_every⌉)` fences.
    pub fence: &'a [u32],
    /// `(b, n)` fragments.
    pub fragment: &'a [u8],
    /// `(b, n)` groups.
    pub group: &'a [u16],
    /// `(n, ⌈k / 2⌉)` packed 4-bit sketches.
    pub sketch: &'a [u8],
    pub n: usize,
    pub b: usize,
    pub r: usize,
    pub group_rows: usize,
    pub fence_every: usize,
}

/// What to look up: per query and band its 32-bit key and its band's `r` 4-bit values (`(q, b)`, `(q, b, r)`).
pub(crate) struct Queries<'a> {
    pub keys: &'a [u32],
    pub values: &'a [u8],
    pub cap: usize,
}

/// One query in one band.
#[derive(Clone, Copy)]
struct BandQuery<'a> {
    band: usize,
    key: u32,
    values: &'a [u8],
    cap: usize,
}

impl RunLookup<'_> {
    fn packed_width(&self) -> usize {
        self.sketch.len().checked_div(self.n).unwrap_or(0)
    }

    /// Band `band`'s `j`-th 4-bit value of the record at `position`.
    fn value(&self, position: usize, band: usize, j: usize) -> u8 {
        let column = band * self.r + j;
        let byte = self.sketch[position * self.packed_width() + column / 2];
        (byte >> ((column % 2) * 4)) & 0x0F
    }

    /// The entries `[lo, lo + span)` of band `band` that may hold key `x`.
    fn span(&self, band: usize, x: u32, cap: usize) -> (usize, usize) {
        let fences = self.n.div_ceil(self.fence_every);
        let row = &self.fence[band * fences..(band + 1) * fences];
        let left = row.partition_point(|&f| f < x);
        let right = row.partition_point(|&f| f <= x);
        let lo = left.saturating_sub(1) * self.fence_every;
        let hi = (right * self.fence_every).min(self.n);
        (lo, hi.saturating_sub(lo).min(cap + 2 * self.fence_every))
    }

    /// The positions of the records whose band `q.band` has key `q.key` and 4-bit values `q.values` (at most
    /// `q.cap`, the earliest), appended to `out`; `groups` a buffer.
    fn band_matches(&self, q: &BandQuery, groups: &mut Vec<u16>, out: &mut Vec<u32>) {
        let BandQuery {
            band,
            key: x,
            values,
            cap,
        } = *q;
        let (lo, span) = self.span(band, x, cap);
        let entries = band * self.n + lo..band * self.n + lo + span;
        groups.clear();
        groups.extend(
            self.fragment[entries.clone()]
                .iter()
                .zip(&self.group[entries])
                .filter(|(&f, _)| f == x as u8)
                .map(|(_, &g)| g),
        );
        groups.sort_unstable();
        groups.dedup();
        let start = out.len();
        for &g in groups.iter() {
            let first = g as usize * self.group_rows;
            for position in first..(first + self.group_rows).min(self.n) {
                if (0..self.r).all(|j| self.value(position, band, j) == values[j]) {
                    out.push(position as u32);
                }
            }
        }
        out[start..].sort_unstable();
        out.truncate(start + (out.len() - start).min(cap));
    }

    /// `(query, position)` of every record sharing a band with each query (a pair once per band it shares), band
    /// by band, each band's queries in key order (so that the fences and fragments are read in their order).
    pub(crate) fn matches(&self, queries: &Queries) -> (Vec<u32>, Vec<u32>) {
        let (mut owner, mut position) = (Vec::new(), Vec::new());
        if self.n == 0 {
            return (owner, position);
        }
        let count = queries.keys.len() / self.b;
        let (mut groups, mut found) = (Vec::new(), Vec::new());
        let mut order: Vec<(u32, u32)> = Vec::with_capacity(count);
        for band in 0..self.b {
            order.clear();
            order.extend((0..count).map(|q| (queries.keys[q * self.b + band], q as u32)));
            order.sort_unstable();
            for &(x, q) in &order {
                found.clear();
                let at = (q as usize * self.b + band) * self.r;
                let values = &queries.values[at..at + self.r];
                let query = BandQuery {
                    band,
                    key: x,
                    values,
                    cap: queries.cap,
                };
                self.band_matches(&query, &mut groups, &mut found);
                owner.extend(std::iter::repeat_n(q, found.len()));
                position.extend_from_slice(&found);
            }
        }
        (owner, position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds the arrays as the Python writer does, for `keys` (per record and band) and 4-bit `values`.
    #[allow(clippy::needless_range_loop)] // `band` indexes the inner vectors (`keys[p][band]`), not `keys`
    fn arrays(
        keys: &[Vec<u32>],
        values: &[Vec<u8>],
        b: usize,
        r: usize,
        g: usize,
        f: usize,
    ) -> Owned {
        let n = keys.len();
        let (mut fence, mut fragment, mut group) = (Vec::new(), Vec::new(), Vec::new());
        for band in 0..b {
            let mut order: Vec<usize> = (0..n).collect();
            let key = |p: usize| keys[p][band];
            order.sort_by_key(|&p| (key(p), p));
            for (e, &p) in order.iter().enumerate() {
                if e % f == 0 {
                    fence.push(key(p));
                }
                fragment.push(key(p) as u8);
                group.push((p / g) as u16);
            }
        }
        let width = (b * r).div_ceil(2);
        let mut sketch = vec![0u8; n * width];
        for (p, v) in values.iter().enumerate() {
            for (c, &x) in v.iter().enumerate() {
                sketch[p * width + c / 2] |= x << ((c % 2) * 4);
            }
        }
        Owned {
            fence,
            fragment,
            group,
            sketch,
            n,
            b,
            r,
            g,
            f,
        }
    }

    struct Owned {
        fence: Vec<u32>,
        fragment: Vec<u8>,
        group: Vec<u16>,
        sketch: Vec<u8>,
        n: usize,
        b: usize,
        r: usize,
        g: usize,
        f: usize,
    }

    impl Owned {
        fn lookup(&self) -> RunLookup<'_> {
            RunLookup {
                fence: &self.fence,
                fragment: &self.fragment,
                group: &self.group,
                sketch: &self.sketch,
                n: self.n,
                b: self.b,
                r: self.r,
                group_rows: self.g,
                fence_every: self.f,
            }
        }
    }

    #[test]
    fn finds_every_record_with_the_key_and_values_earliest_first() {
        let (b, r) = (2, 2);
        // Record p: band 0 key p % 7, band 1 key 100 + p; values = key's low nibbles.
        let keys: Vec<Vec<u32>> = (0..50u32).map(|p| vec![p % 7, 100 + p]).collect();
        let values: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| vec![k[0] as u8 & 15, 1, k[1] as u8 & 15, 2])
            .collect();
        for g in [1, 3] {
            let owned = arrays(&keys, &values, b, r, g, 4);
            let q = Queries {
                keys: &[3, 110],
                values: &[3, 1, 110 & 15, 2],
                cap: 64,
            };
            let (owner, position) = owned.lookup().matches(&q);
            let mut want: Vec<u32> = (0..50).filter(|p| p % 7 == 3).collect();
            want.push(10);
            assert_eq!(owner, vec![0; want.len()]);
            assert_eq!(position, want, "group rows {g}");
            let capped = Queries { cap: 2, ..q };
            assert_eq!(owned.lookup().matches(&capped).1, vec![3, 10, 10]);
        }
    }

    #[test]
    fn a_key_no_record_has_finds_nothing_and_an_empty_run_too() {
        let keys: Vec<Vec<u32>> = (0..20u32).map(|p| vec![p * 2]).collect();
        let values: Vec<Vec<u8>> = keys.iter().map(|k| vec![k[0] as u8 & 15]).collect();
        let owned = arrays(&keys, &values, 1, 1, 2, 4);
        let q = Queries {
            keys: &[5, 1000],
            values: &[5, 8],
            cap: 64,
        };
        assert_eq!(owned.lookup().matches(&q), (vec![], vec![]));
        let empty = arrays(&[], &[], 1, 1, 1, 4);
        assert_eq!(empty.lookup().matches(&q), (vec![], vec![]));
    }
}
