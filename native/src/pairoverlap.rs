//! Exact overlaps of many pairs drawn from one table of texts: verification's
//! `|S_d ∩ S_e|`, `|S_d|`, `|S_e|` on the driver, where a text is in many pairs
//! (a flagged document with its strongest candidates, an anchor of a template
//! family with every sibling).
//!
//! Each text's shingle set is built once while it stays among a thread's
//! [`CACHED_SETS`] most recently used, as a [`ShingleList`]: the distinct
//! shingles sorted by (xxh3-64, bytes), in an arena. Two lists intersect by a
//! merge on the hash; equal hashes are then compared by their bytes, so the
//! count is exact (a hash only orders). A pair then costs a merge of the two
//! lists (linear, no hashing), not a shingling of both texts as
//! [`crate::overlap::overlaps`] does for each pair.

use std::cmp::Ordering;

use xxhash_rust::xxh3::xxh3_64;

use crate::overlap::Overlap;
use crate::shingles::{ShingleSettings, Shingler};

/// The sets a thread keeps: the later texts of consecutive pairs repeat, and
/// the anchors of a family recur across the whole range.
pub const CACHED_SETS: usize = 64;

/// Fewer pairs than this per thread cost more in thread start-up than they save.
const MIN_PAIRS_PER_THREAD: usize = 256;

/// A text's distinct shingles, sorted by (hash, bytes).
#[derive(Debug, Default)]
pub struct ShingleList {
    arena: Vec<u8>,
    /// (hash, start, end) in `arena`.
    entries: Vec<(u64, u32, u32)>,
}

impl ShingleList {
    pub fn new(shingler: &mut Shingler, text: Option<&str>) -> Self {
        let mut list = ShingleList::default();
        shingler.for_each_span(text.unwrap_or(""), |buf, start, end| {
            let s = &buf[start..end];
            let at = list.arena.len() as u32;
            list.arena.extend_from_slice(s);
            list.entries.push((xxh3_64(s), at, list.arena.len() as u32));
        });
        let arena = &list.arena;
        let bytes = |e: &(u64, u32, u32)| &arena[e.1 as usize..e.2 as usize];
        list.entries
            .sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| bytes(a).cmp(bytes(b))));
        list.entries
            .dedup_by(|a, b| a.0 == b.0 && bytes(a) == bytes(b));
        list
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn bytes(&self, i: usize) -> &[u8] {
        let (_, start, end) = self.entries[i];
        &self.arena[start as usize..end as usize]
    }

    /// `|self ∩ other|`, by a merge on (hash, bytes): both are sorted that way and distinct.
    pub fn common(&self, other: &ShingleList) -> u64 {
        let (mut i, mut j, mut n) = (0, 0, 0u64);
        while i < self.entries.len() && j < other.entries.len() {
            let order = self.entries[i]
                .0
                .cmp(&other.entries[j].0)
                .then_with(|| self.bytes(i).cmp(other.bytes(j)));
            match order {
                Ordering::Less => i += 1,
                Ordering::Greater => j += 1,
                Ordering::Equal => {
                    n += 1;
                    i += 1;
                    j += 1;
                }
            }
        }
        n
    }
}

/// A thread's most recently used lists, by text index.
struct ListCache {
    shingler: Shingler,
    slots: Vec<(u32, u64, ShingleList)>,
    clock: u64,
}

impl ListCache {
    fn new(settings: ShingleSettings) -> Self {
        ListCache {
            shingler: Shingler::with_settings(settings),
            slots: Vec::new(),
            clock: 0,
        }
    }

    /// The slot of text `id`'s list, built (into the least recently used slot once full) if missing.
    fn slot(&mut self, id: u32, texts: &[Option<&str>]) -> usize {
        self.clock += 1;
        if let Some(at) = self.slots.iter().position(|s| s.0 == id) {
            self.slots[at].1 = self.clock;
            return at;
        }
        let list = ShingleList::new(&mut self.shingler, texts[id as usize]);
        if self.slots.len() < CACHED_SETS {
            self.slots.push((id, self.clock, list));
            return self.slots.len() - 1;
        }
        let oldest = (0..self.slots.len())
            .min_by_key(|&at| self.slots[at].1)
            .expect("a full cache has slots");
        self.slots[oldest] = (id, self.clock, list);
        oldest
    }

    fn overlap(&mut self, left: u32, right: u32, texts: &[Option<&str>]) -> Overlap {
        let l = self.slot(left, texts);
        let r = self.slot(right, texts); // the left one was used last: not the one evicted
        let (a, b) = (&self.slots[l].2, &self.slots[r].2);
        Overlap {
            common: a.common(b),
            left: a.len() as u64,
            right: b.len() as u64,
        }
    }
}

/// The overlaps of pairs `(texts[lefts[i]], texts[rights[i]])` on up to
/// `threads` threads (contiguous ranges, a cache each: the result does not
/// depend on the thread count). Pairs sorted by one side reuse its lists most.
pub fn indexed_overlaps(
    settings: ShingleSettings,
    texts: &[Option<&str>],
    lefts: &[u32],
    rights: &[u32],
    threads: usize,
) -> Vec<Overlap> {
    assert_eq!(lefts.len(), rights.len(), "pairs must be aligned");
    assert!(
        lefts
            .iter()
            .chain(rights)
            .all(|&i| (i as usize) < texts.len()),
        "pair indices must be below the number of texts"
    );
    let n = lefts.len();
    let threads = threads.min(n.div_ceil(MIN_PAIRS_PER_THREAD)).max(1);
    let per = n.div_ceil(threads).max(1);
    let mut out = vec![Overlap::default(); n];
    std::thread::scope(|scope| {
        for ((part, ls), rs) in out
            .chunks_mut(per)
            .zip(lefts.chunks(per))
            .zip(rights.chunks(per))
        {
            scope.spawn(move || {
                let mut cache = ListCache::new(settings);
                for ((o, &l), &r) in part.iter_mut().zip(ls).zip(rs) {
                    *o = cache.overlap(l, r, texts);
                }
            });
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::splitmix;
    use crate::overlap::overlaps;
    use crate::shingles::{Unit, NORM_LOWER, NORM_PUNCT};

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
    fn equals_the_pairwise_overlaps_in_every_unit_and_thread_count() {
        let mut seed = 5u64;
        let owned = texts(&mut seed, 150);
        let mut table: Vec<Option<&str>> = owned.iter().map(|t| Some(t.as_str())).collect();
        table.push(None);
        let m = 3000;
        // Past CACHED_SETS distinct texts: lists are evicted and built again.
        let lefts: Vec<u32> = (0..m)
            .map(|_| (splitmix(&mut seed) % table.len() as u64) as u32)
            .collect();
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
                for threads in [1, 2, 5] {
                    assert_eq!(
                        indexed_overlaps(settings, &table, &lefts, &rights, threads),
                        want,
                        "{unit:?} {ngram} {threads}"
                    );
                }
            }
        }
    }

    #[test]
    fn equal_hashes_are_compared_by_their_bytes() {
        // Two lists whose entries carry the same (forged) hash but different bytes share nothing.
        let a = ShingleList {
            arena: b"ab".to_vec(),
            entries: vec![(7, 0, 2)],
        };
        let b = ShingleList {
            arena: b"cd".to_vec(),
            entries: vec![(7, 0, 2)],
        };
        assert_eq!(a.common(&b), 0);
        assert_eq!(a.common(&a), 1);
    }
}
