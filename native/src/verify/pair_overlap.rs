//! Exact overlaps of many pairs drawn from one table of texts: verification's
//! `|S_d ∩ S_e|`, `|S_d|`, `|S_e|` on the driver, where a text is in many pairs
//! (a flagged document with its strongest candidates, an anchor of a template
//! family with every sibling).
//!
//! The pairs come sorted by their later text `d`: its shingle set
//! ([`DistinctSet`]) is built once for its consecutive pairs. An earlier text
//! `e` in [`CACHED_FROM`] pairs or more (a template's anchor, a source with
//! many copies) is shingled once, before the pairs, into a [`ProbeList`] shared
//! by every thread (the most frequent first, within a budget of bytes): a pair
//! then costs one probe of `d`'s set per shingle of `e`, no shingling. Any
//! other `e` is shingled for its pair and probed as it goes
//! ([`crate::verify::overlap`]'s way). Either way the shingles' bytes are compared: the
//! counts are exact.

use crate::text::distinct::{short_fp, DistinctSet};
use crate::verify::overlap::{expected_shingles, over_pairs, Overlap};
use crate::text::shingles::{ShingleSettings, Shingler};

/// The cached texts a thread builds the lists of at a time: the budget is
/// checked after each batch, so it is passed by at most one batch's lists.
const BUILD_BATCH: usize = 16;

/// The sets here are reserved for this many times a text's expected shingles
/// (a table at most 1/8 full where [`DistinctSet::reserve`] alone leaves it
/// 1/4 to 1/2 full): about half the probes find their shingle, so the
/// branches on a slot's content mispredict less where the first slot decides
/// (benchmarks/overlap_reuse.py measures it).
const SPARSE: usize = 4;

/// The pairs an earlier text must be in to be cached: a list is ~10x its
/// text's bytes, read back from memory for each pair, where shingling the text
/// again reads only the text; at two pairs the two cost about the same.
pub(crate) const CACHED_FROM: u32 = 3;

/// A short shingle (<= 16 bytes) as [`DistinctSet`] keeps it: two zero-padded
/// words and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ShortKey {
    a: u64,
    b: u64,
    len: u32,
}

/// A text's distinct shingles, to count how many another text's set holds:
/// the short ones by value, the longer ones by their bytes.
#[derive(Debug, Default)]
pub(crate) struct ProbeList {
    short: Vec<ShortKey>,
    long: Vec<u8>,
    long_spans: Vec<(u32, u32)>,
}

impl ProbeList {
    /// The distinct shingles of `text` (None: none), through `scratch` (emptied first).
    pub(crate) fn new(shingler: &mut Shingler, scratch: &mut DistinctSet, text: Option<&str>) -> Self {
        let text = text.unwrap_or("");
        scratch.clear();
        scratch.reserve(SPARSE * expected_shingles(text));
        shingler.for_each_span(text, |buf, start, end| {
            scratch.insert_in(buf, start, end);
        });
        let mut list = ProbeList::default();
        for i in 0..scratch.len() {
            match scratch.short_key(i) {
                Some((a, b, len, _)) => list.short.push(ShortKey { a, b, len }),
                None => {
                    let s = scratch.get(i);
                    list.long_spans
                        .push((list.long.len() as u32, s.len() as u32));
                    list.long.extend_from_slice(s);
                }
            }
        }
        list.short.shrink_to_fit();
        list
    }

    pub(crate) fn len(&self) -> usize {
        self.short.len() + self.long_spans.len()
    }

    /// The memory the list holds.
    pub(crate) fn memory(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.short.capacity() * std::mem::size_of::<ShortKey>()
            + self.long.capacity()
            + self.long_spans.capacity() * std::mem::size_of::<(u32, u32)>()
    }

    /// `|self ∩ set|`: each shingle of the list probed in `set`.
    pub(crate) fn common(&self, set: &DistinctSet) -> u64 {
        let short = self
            .short
            .iter()
            .filter(|k| {
                set.contains_short(k.a, k.b, k.len as usize, short_fp(k.a, k.b, k.len as usize))
            })
            .count();
        let long = self
            .long_spans
            .iter()
            .filter(|&&(start, len)| {
                set.contains(&self.long[start as usize..(start + len) as usize])
            })
            .count();
        (short + long) as u64
    }
}

/// The earlier texts shingled before the pairs: `slot[text]` indexes `lists`
/// (`u32::MAX`: not cached).
struct Cached {
    slot: Vec<u32>,
    lists: Vec<ProbeList>,
}

impl Cached {
    fn get(&self, text: u32) -> Option<&ProbeList> {
        self.lists.get(self.slot[text as usize] as usize)
    }
}

/// The [`ProbeList`]s of the texts that are the earlier side of [`CACHED_FROM`]
/// pairs or more, the most frequent first (then the first text), while their memory
/// stays within `budget`; built on `threads` threads.
fn cache_recurring(
    settings: ShingleSettings,
    texts: &[Option<&str>],
    rights: &[u32],
    threads: usize,
    budget: usize,
) -> Cached {
    let mut count = vec![0u32; texts.len()];
    for &r in rights {
        count[r as usize] += 1;
    }
    let mut recurring: Vec<u32> = (0..texts.len() as u32)
        .filter(|&t| count[t as usize] >= CACHED_FROM)
        .collect();
    recurring.sort_by_key(|&t| (std::cmp::Reverse(count[t as usize]), t));
    let mut cached = Cached {
        slot: vec![u32::MAX; texts.len()],
        lists: Vec::new(),
    };
    let (mut bytes, threads) = (0usize, threads.max(1));
    'batches: for batch in recurring.chunks(BUILD_BATCH * threads) {
        let per = batch.len().div_ceil(threads);
        let built: Vec<Vec<ProbeList>> = std::thread::scope(|scope| {
            let handles: Vec<_> = batch
                .chunks(per)
                .map(|part| {
                    scope.spawn(move || {
                        let (mut shingler, mut scratch) =
                            (Shingler::with_settings(settings), DistinctSet::new());
                        part.iter()
                            .map(|&t| {
                                ProbeList::new(&mut shingler, &mut scratch, texts[t as usize])
                            })
                            .collect()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a list builder panicked"))
                .collect()
        });
        for (&t, list) in batch.iter().zip(built.into_iter().flatten()) {
            bytes += list.memory();
            if bytes > budget {
                break 'batches;
            }
            cached.slot[t as usize] = cached.lists.len() as u32;
            cached.lists.push(list);
        }
    }
    cached
}

/// A thread's state over its range of pairs: the later text's set, kept over
/// its consecutive pairs, and a set for an uncached earlier text.
struct PairCounter<'a> {
    shingler: Shingler,
    later: DistinctSet,
    later_text: Option<u32>,
    earlier: DistinctSet,
    texts: &'a [Option<&'a str>],
    cached: &'a Cached,
}

impl PairCounter<'_> {
    fn overlap(&mut self, later: u32, earlier: u32) -> Overlap {
        if self.later_text != Some(later) {
            let (set, text) = (&mut self.later, self.texts[later as usize].unwrap_or(""));
            set.clear();
            set.reserve(SPARSE * expected_shingles(text));
            self.shingler.for_each_span(text, |buf, start, end| {
                set.insert_in(buf, start, end);
            });
            self.later_text = Some(later);
        }
        let (common, right) = match self.cached.get(earlier) {
            Some(list) => (list.common(&self.later), list.len()),
            None => {
                let (set, seen) = (&self.later, &mut self.earlier);
                let text = self.texts[earlier as usize].unwrap_or("");
                seen.clear();
                seen.reserve(SPARSE * expected_shingles(text));
                let mut common = 0u64;
                self.shingler.for_each_span(text, |buf, start, end| {
                    // Each distinct shingle of the earlier text counts once.
                    common += u64::from(seen.insert_in_noting(buf, start, end, set).1);
                });
                (common, seen.len())
            }
        };
        Overlap {
            common,
            left: self.later.len() as u64,
            right: right as u64,
        }
    }
}

/// The overlaps of pairs `(texts[lefts[i]], texts[rights[i]])` (later, earlier)
/// on up to `threads` threads (contiguous ranges: the result does not depend on
/// the thread count), the recurring earlier texts cached within `cache_bytes`
/// (the module's docs). Pairs sorted by their left text build its set once.
pub(crate) fn indexed_overlaps(
    settings: ShingleSettings,
    texts: &[Option<&str>],
    (lefts, rights): (&[u32], &[u32]),
    threads: usize,
    cache_bytes: usize,
) -> Vec<Overlap> {
    assert!(
        lefts
            .iter()
            .chain(rights)
            .all(|&i| (i as usize) < texts.len()),
        "pair indices must be below the number of texts"
    );
    let cached = cache_recurring(settings, texts, rights, threads, cache_bytes);
    over_pairs(
        (lefts, rights),
        threads,
        || PairCounter {
            shingler: Shingler::with_settings(settings),
            later: DistinctSet::new(),
            later_text: None,
            earlier: DistinctSet::new(),
            texts,
            cached: &cached,
        },
        |counter, &l, &r| counter.overlap(l, r),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::lines::splitmix;
    use crate::verify::overlap::overlaps;
    use crate::text::shingles::{Unit, NORM_LOWER, NORM_PUNCT};

    fn texts(seed: &mut u64, n: usize) -> Vec<String> {
        // A small vocabulary: texts share many shingles; some are empty or repeat another.
        let words = [
            "alpha",
            "beta",
            "gamma",
            "delta",
            "敏捷的",
            "狐狸",
            "x",
            "internationalization",
        ];
        (0..n)
            .map(|i| {
                if i % 17 == 3 {
                    return String::new();
                }
                let len = (splitmix(seed) % 60) as usize;
                (0..len)
                    .map(|_| words[(splitmix(seed) % words.len() as u64) as usize])
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    #[test]
    fn equals_the_pairwise_overlaps_in_every_unit_thread_count_and_cache() {
        let mut seed = 5u64;
        let owned = texts(&mut seed, 150);
        let mut table: Vec<Option<&str>> = owned.iter().map(|t| Some(t.as_str())).collect();
        table.push(None);
        let m = 3000;
        let mut lefts: Vec<u32> = (0..m)
            .map(|_| (splitmix(&mut seed) % table.len() as u64) as u32)
            .collect();
        lefts.sort_unstable();
        // Text 0 is the earlier side of a third of the pairs; the others recur by chance, or not at all.
        let rights: Vec<u32> = (0..m)
            .map(|i| {
                if i % 3 == 0 {
                    0
                } else {
                    (splitmix(&mut seed) % table.len() as u64) as u32
                }
            })
            .collect();
        for unit in [Unit::Words, Unit::Chars, Unit::Mixed] {
            for ngram in [1, 3, 11] {
                let settings = ShingleSettings {
                    unit,
                    ngram,
                    flags: NORM_LOWER | NORM_PUNCT,
                };
                let ls: Vec<Option<&str>> = lefts.iter().map(|&i| table[i as usize]).collect();
                let rs: Vec<Option<&str>> = rights.iter().map(|&i| table[i as usize]).collect();
                let want = overlaps(settings, &ls, &rs, 1);
                // No cache, room for a few lists (the most frequent: text 0 first), room for every one.
                for cache in [0, 20_000, usize::MAX] {
                    for threads in [1, 2, 5] {
                        assert_eq!(
                            indexed_overlaps(settings, &table, (&lefts, &rights), threads, cache),
                            want,
                            "{unit:?} {ngram} {threads} {cache}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_cache_takes_the_most_frequent_recurring_texts_within_its_budget() {
        let settings = ShingleSettings::words(2, 0);
        let table = [
            Some("a b c d"),
            Some("a b c"),
            Some("b c d e f"),
            Some("x y"),
        ];
        // Earlier sides: text 1 four times, text 2 three times, text 3 twice, text 0 never.
        let rights = [1, 1, 2, 1, 2, 3, 2, 1, 3];
        let all = cache_recurring(settings, &table, &rights, 2, usize::MAX);
        assert_eq!(
            (
                all.get(1).map(ProbeList::len),
                all.get(2).map(ProbeList::len)
            ),
            (Some(2), Some(4))
        );
        assert!(all.get(0).is_none() && all.get(3).is_none());
        let one = all.get(1).unwrap().memory();
        let first = cache_recurring(settings, &table, &rights, 2, one);
        assert!(first.get(1).is_some() && first.get(2).is_none());
        assert!(cache_recurring(settings, &table, &rights, 1, one - 1)
            .lists
            .is_empty());
    }

    #[test]
    fn cached_long_shingles_compare_bytes() {
        // 4-word shingles past 16 bytes are kept by their bytes: one differing byte at the end counts.
        let settings = ShingleSettings::words(4, 0);
        let earlier = "internationalization localization globalization standardization";
        let table = [
            Some(earlier),
            Some("internationalization localization globalization standardisation"),
            Some(earlier),
        ];
        // Three pairs: the earlier text is cached.
        assert!(cache_recurring(settings, &table, &[0, 0, 0], 1, usize::MAX).get(0).is_some());
        let got = indexed_overlaps(settings, &table, (&[1, 1, 2], &[0, 0, 0]), 1, usize::MAX);
        assert_eq!(got[0], got[1]);
        assert_eq!(
            got[0],
            Overlap {
                common: 0,
                left: 1,
                right: 1
            }
        );
        assert_eq!(
            got[2],
            Overlap {
                common: 1,
                left: 1,
                right: 1
            }
        );
    }
}
