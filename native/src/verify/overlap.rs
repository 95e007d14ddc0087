//! Exact overlaps of shingle sets: verification's `|S_d ∩ S_e|`, `|S_d|` and
//! `|S_e|` of text pairs (lshbloom_udf/spark/verify/similarity.py), by the index's
//! shingling.
//!
//! Exact means the shingles' bytes are compared, not their hashes: a hash
//! only picks the slot ([`DistinctSet`], one arena per set, no allocation per
//! shingle). Python's reference is `frozenset(shingles(text))` (`shingle_set`),
//! which the tests compare with.

use crate::text::distinct::DistinctSet;
use crate::text::shingles::{ShingleSettings, Shingler};

/// The three sizes verification's rule needs of a pair (later `d`, earlier `e`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Overlap {
    /// `|S_d ∩ S_e|`
    pub(crate) common: u64,
    /// `|S_d|`
    pub(crate) left: u64,
    /// `|S_e|`
    pub(crate) right: u64,
}

/// Computes overlaps of many pairs, keeping the last earlier text's set: pairs
/// sorted by their earlier text shingle it once (a kept document with many
/// copies is the common case).
pub(crate) struct OverlapCounter {
    shingler: Shingler,
    right: DistinctSet,
    right_text: Option<String>,
    left: DistinctSet,
}

impl OverlapCounter {
    /// Same preconditions as [`Shingler::with_settings`].
    pub(crate) fn new(settings: ShingleSettings) -> Self {
        OverlapCounter {
            shingler: Shingler::with_settings(settings),
            right: DistinctSet::new(),
            right_text: None,
            left: DistinctSet::new(),
        }
    }

    /// The overlap of `left`'s shingle set with `right`'s (None: no shingles).
    pub(crate) fn overlap(&mut self, left: Option<&str>, right: Option<&str>) -> Overlap {
        let right = right.unwrap_or("");
        if self.right_text.as_deref() != Some(right) {
            let set = &mut self.right;
            set.clear();
            set.reserve(expected_shingles(right));
            self.shingler.for_each_span(right, |buf, start, end| {
                set.insert_in(buf, start, end);
            });
            self.right_text = Some(right.to_owned());
        }
        let (set, seen) = (&self.right, &mut self.left);
        seen.clear();
        seen.reserve(expected_shingles(left.unwrap_or("")));
        let mut common = 0u64;
        self.shingler
            .for_each_span(left.unwrap_or(""), |buf, start, end| {
                // Each distinct shingle of the left text counts once.
                common += u64::from(seen.insert_in_noting(buf, start, end, set).1);
            });
        Overlap {
            common,
            left: seen.len() as u64,
            right: set.len() as u64,
        }
    }
}

/// About how many distinct shingles `text` has, to size its set once: 3/4 of
/// its bytes (character shingles of a whitespace-free text number its code
/// points, minus the n-gram; word shingles fewer). An error either way costs
/// only speed: one more doubling, or a larger table.
pub(crate) fn expected_shingles(text: &str) -> usize {
    text.len() / 4 * 3
}

/// Fewer pairs than this per thread cost more in thread start-up than they save.
const MIN_PAIRS_PER_THREAD: usize = 256;

/// The overlaps of aligned pairs `(lefts[i], rights[i])` on up to `threads`
/// threads (contiguous ranges, a counter each: the result does not depend on
/// the thread count).
pub(crate) fn overlaps(
    settings: ShingleSettings,
    lefts: &[Option<&str>],
    rights: &[Option<&str>],
    threads: usize,
) -> Vec<Overlap> {
    over_pairs(
        (lefts, rights),
        threads,
        || OverlapCounter::new(settings),
        |counter, l, r| counter.overlap(*l, *r),
    )
}

/// `pair(state, lefts[i], rights[i])` of aligned pairs on up to `threads`
/// threads: contiguous ranges, a `state()` each (a counter, a cache), so the
/// result does not depend on the thread count.
pub(crate) fn over_pairs<L: Sync, R: Sync, S>(
    (lefts, rights): (&[L], &[R]),
    threads: usize,
    state: impl Fn() -> S + Sync,
    pair: impl Fn(&mut S, &L, &R) -> Overlap + Sync,
) -> Vec<Overlap> {
    assert_eq!(lefts.len(), rights.len(), "pairs must be aligned");
    let n = lefts.len();
    let threads = threads.min(n.div_ceil(MIN_PAIRS_PER_THREAD)).max(1);
    let per = n.div_ceil(threads).max(1);
    let mut out = vec![Overlap::default(); n];
    let (state, pair) = (&state, &pair);
    std::thread::scope(|scope| {
        for ((part, ls), rs) in out
            .chunks_mut(per)
            .zip(lefts.chunks(per))
            .zip(rights.chunks(per))
        {
            scope.spawn(move || {
                let mut s = state();
                for ((o, l), r) in part.iter_mut().zip(ls).zip(rs) {
                    *o = pair(&mut s, l, r);
                }
            });
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::shingles::{Unit, NORM_LOWER, NORM_PUNCT};
    use std::collections::HashSet;

    fn reference(settings: ShingleSettings, l: &str, r: &str) -> Overlap {
        let mut sh = Shingler::with_settings(settings);
        let a: HashSet<Vec<u8>> = sh.shingle_set(l).into_iter().collect();
        let b: HashSet<Vec<u8>> = sh.shingle_set(r).into_iter().collect();
        Overlap {
            common: a.intersection(&b).count() as u64,
            left: a.len() as u64,
            right: b.len() as u64,
        }
    }

    const TEXTS: [&str; 6] = [
        "the quick brown fox jumps over the lazy dog",
        "the quick brown fox jumps over the lazy cat",
        "The Quick, brown fox! jumps over the lazy dog the quick brown fox",
        "",
        "敏捷的棕色狐狸跳过了懒狗 the fox 敏捷的棕色狐狸",
        "a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a",
    ];

    #[test]
    fn equals_the_set_reference_in_every_unit() {
        for unit in [Unit::Words, Unit::Chars, Unit::Mixed] {
            for ngram in [1, 2, 5, 11] {
                let settings = ShingleSettings {
                    unit,
                    ngram,
                    flags: NORM_LOWER | NORM_PUNCT,
                };
                let mut c = OverlapCounter::new(settings);
                for l in TEXTS {
                    for r in TEXTS {
                        assert_eq!(
                            c.overlap(Some(l), Some(r)),
                            reference(settings, l, r),
                            "{unit:?} {ngram} {l:?} {r:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_cached_right_set_follows_the_right_text() {
        let settings = ShingleSettings::words(2, 0);
        let (l, r) = (
            vec![Some(TEXTS[0]); 3],
            vec![Some(TEXTS[1]), Some(TEXTS[1]), Some(TEXTS[0])],
        );
        let got = overlaps(settings, &l, &r, 1);
        assert_eq!(got[0], got[1]);
        assert_eq!(
            got[2],
            Overlap {
                common: 8,
                left: 8,
                right: 8
            }
        );
        assert_eq!(got[0].common, 7);
    }

    #[test]
    fn threads_do_not_change_the_result() {
        let settings = ShingleSettings {
            unit: Unit::Mixed,
            ngram: 5,
            flags: NORM_LOWER,
        };
        let ls: Vec<Option<&str>> = (0..2000).map(|i| Some(TEXTS[i % 6])).collect();
        let rs: Vec<Option<&str>> = (0..2000).map(|i| Some(TEXTS[(i / 7) % 6])).collect();
        assert_eq!(
            overlaps(settings, &ls, &rs, 1),
            overlaps(settings, &ls, &rs, 3)
        );
    }

    #[test]
    fn none_and_empty_have_no_shingles() {
        let settings = ShingleSettings::words(3, 0);
        let got = overlaps(
            settings,
            &[None, Some(TEXTS[0])],
            &[Some(TEXTS[0]), None],
            1,
        );
        assert_eq!(
            got[0],
            Overlap {
                common: 0,
                left: 0,
                right: 7
            }
        );
        assert_eq!(
            got[1],
            Overlap {
                common: 0,
                left: 7,
                right: 0
            }
        );
    }

    #[test]
    fn long_shingles_compare_bytes() {
        // Shingles longer than 16 bytes take DistinctSet's long path: compared byte by byte.
        let settings = ShingleSettings::words(4, 0);
        let l = "internationalization localization globalization standardization";
        let r = "internationalization localization globalization standardisation";
        assert_eq!(
            overlaps(settings, &[Some(l)], &[Some(r)], 1)[0],
            Overlap {
                common: 0,
                left: 1,
                right: 1
            }
        );
        assert_eq!(
            overlaps(settings, &[Some(l)], &[Some(l)], 1)[0],
            Overlap {
                common: 1,
                left: 1,
                right: 1
            }
        );
    }
}
