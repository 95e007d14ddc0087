//! Exact overlaps of many pairs drawn from one table of texts: verification's
//! `|S_d ∩ S_e|`, `|S_d|`, `|S_e|` on the driver, where a text is in many pairs
//! (a flagged document with its strongest candidates, an anchor of a template
//! family with every sibling).
//!
//! Each text's shingle set is built once while it stays among a thread's
//! most recently used (within [`CACHE_BYTES`]), as a [`ShingleList`]: the distinct
//! shingles sorted by (xxh3-64, bytes), in an arena. Two lists intersect by a
//! merge on the hash; equal hashes are then compared by their bytes, so the
//! count is exact (a hash only orders). A pair then costs a merge of the two
//! lists (linear, no hashing), not a shingling of both texts as
//! [`crate::overlap::overlaps`] does for each pair.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use xxhash_rust::xxh3::xxh3_64;

use crate::overlap::{over_pairs, Overlap};
use crate::shingles::{ShingleSettings, Shingler};

/// The bytes of lists a thread keeps: the later texts of consecutive pairs
/// repeat, and the anchors of a template family (up to `b · anchors` texts)
/// recur across the whole range; 64 MiB holds ~800 lists of 3 kB pages.
pub const CACHE_BYTES: usize = 64 << 20;

/// Bytes of a shingle kept in its entry: a shorter shingle (a mixed or
/// character 11-gram: 11-12 bytes) is compared without reading the arena.
const HEAD: usize = 16;

/// One distinct shingle of a [`ShingleList`]: its hash, length, first
/// [`HEAD`] bytes (zero-padded) and where the whole is in the arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    hash: u64,
    head: [u64; 2],
    start: u32,
    len: u32,
}

/// A text's distinct shingles, sorted by (hash, length, bytes).
#[derive(Debug, Default)]
pub struct ShingleList {
    arena: Vec<u8>,
    entries: Vec<Entry>,
    /// The entries' hashes, apart: a merge reads 8 bytes per shingle, and an
    /// entry only where two hashes are equal.
    hashes: Vec<u64>,
}

impl ShingleList {
    pub fn new(shingler: &mut Shingler, text: Option<&str>) -> Self {
        let mut list = ShingleList::default();
        shingler.for_each_span(text.unwrap_or(""), |buf, start, end| {
            let s = &buf[start..end];
            let mut head = [0u8; HEAD];
            head[..s.len().min(HEAD)].copy_from_slice(&s[..s.len().min(HEAD)]);
            let (a, b) = head.split_at(8);
            list.entries.push(Entry {
                hash: xxh3_64(s),
                head: [
                    u64::from_be_bytes(a.try_into().expect("8")),
                    u64::from_be_bytes(b.try_into().expect("8")),
                ],
                start: list.arena.len() as u32,
                len: s.len() as u32,
            });
            list.arena.extend_from_slice(s);
        });
        // By hash alone first (a u64 compare), then each run of equal hashes (a
        // repeated shingle, or rarely a collision) by the whole order.
        let arena = &list.arena;
        list.entries.sort_unstable_by_key(|e| e.hash);
        let mut start = 0;
        while start < list.entries.len() {
            let hash = list.entries[start].hash;
            let end = start
                + list.entries[start..]
                    .iter()
                    .take_while(|e| e.hash == hash)
                    .count();
            if end - start > 1 {
                list.entries[start..end].sort_unstable_by(|a, b| order(a, b, arena, arena));
            }
            start = end;
        }
        list.entries
            .dedup_by(|a, b| order(a, b, arena, arena) == Ordering::Equal);
        list.hashes = list.entries.iter().map(|e| e.hash).collect();
        list
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The memory the list holds.
    pub fn memory(&self) -> usize {
        self.arena.capacity()
            + self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.hashes.capacity() * std::mem::size_of::<u64>()
    }

    /// `|self ∩ other|`, by a merge: both are sorted by [`order`] and distinct.
    pub fn common(&self, other: &ShingleList) -> u64 {
        let (a, b) = (&self.hashes, &other.hashes);
        let (mut i, mut j, mut n) = (0, 0, 0u64);
        while i < a.len() && j < b.len() {
            let by_hash = a[i].cmp(&b[j]);
            let by_entry = || {
                order(
                    &self.entries[i],
                    &other.entries[j],
                    &self.arena,
                    &other.arena,
                )
            };
            match if by_hash == Ordering::Equal {
                by_entry()
            } else {
                by_hash
            } {
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

/// By hash, then length, then bytes: the head in the entry, the rest (of a
/// shingle longer than [`HEAD`]) in its arena. Equal means equal bytes.
#[inline]
fn order(a: &Entry, b: &Entry, arena_a: &[u8], arena_b: &[u8]) -> Ordering {
    (a.hash, a.len, a.head)
        .cmp(&(b.hash, b.len, b.head))
        .then_with(|| {
            if (a.len as usize) <= HEAD {
                return Ordering::Equal;
            }
            let tail_a = &arena_a[a.start as usize + HEAD..(a.start + a.len) as usize];
            let tail_b = &arena_b[b.start as usize + HEAD..(b.start + b.len) as usize];
            tail_a.cmp(tail_b)
        })
}

/// A thread's most recently used lists, by text index, within a budget of bytes.
struct ListCache {
    shingler: Shingler,
    /// Slot of a cached text.
    at: HashMap<u32, usize>,
    /// (text, last use, list); a freed slot keeps an empty list.
    slots: Vec<(u32, u64, ShingleList)>,
    free: Vec<usize>,
    /// Last use -> slot: the least recently used first.
    order: BTreeMap<u64, usize>,
    bytes: usize,
    budget: usize,
    clock: u64,
}

impl ListCache {
    fn new(settings: ShingleSettings, budget: usize) -> Self {
        ListCache {
            budget,
            shingler: Shingler::with_settings(settings),
            at: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            order: BTreeMap::new(),
            bytes: 0,
            clock: 0,
        }
    }

    /// The slot of text `id`'s list, built if missing; the least recently used
    /// lists make room for it, except `keep` (the pair's other list).
    fn slot(&mut self, id: u32, texts: &[Option<&str>], keep: Option<usize>) -> usize {
        self.clock += 1;
        if let Some(&at) = self.at.get(&id) {
            self.order.remove(&self.slots[at].1);
            self.slots[at].1 = self.clock;
            self.order.insert(self.clock, at);
            return at;
        }
        let list = ShingleList::new(&mut self.shingler, texts[id as usize]);
        while self.bytes + list.memory() > self.budget {
            let Some((&stamp, &old)) = self.order.iter().find(|(_, &at)| Some(at) != keep) else {
                break;
            };
            self.order.remove(&stamp);
            self.at.remove(&self.slots[old].0);
            self.bytes -= self.slots[old].2.memory();
            self.slots[old].2 = ShingleList::default();
            self.free.push(old);
        }
        self.bytes += list.memory();
        let entry = (id, self.clock, list);
        let at = match self.free.pop() {
            Some(at) => {
                self.slots[at] = entry;
                at
            }
            None => {
                self.slots.push(entry);
                self.slots.len() - 1
            }
        };
        self.at.insert(id, at);
        self.order.insert(self.clock, at);
        at
    }

    fn overlap(&mut self, left: u32, right: u32, texts: &[Option<&str>]) -> Overlap {
        let l = self.slot(left, texts, None);
        let r = self.slot(right, texts, Some(l));
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
    overlaps_within(settings, texts, (lefts, rights), threads, CACHE_BYTES)
}

/// [`indexed_overlaps`] with `cache_bytes` of lists per thread.
fn overlaps_within(
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
    over_pairs(
        (lefts, rights),
        threads,
        || ListCache::new(settings, cache_bytes),
        |cache, &l, &r| cache.overlap(l, r, texts),
    )
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
        // Entries with the same (forged) hash, length and head but other bytes past the head share nothing.
        let entry = Entry {
            hash: 7,
            head: [1, 2],
            start: 0,
            len: 18,
        };
        let a = ShingleList {
            arena: b"0123456789abcdefXY".to_vec(),
            entries: vec![entry],
            hashes: vec![7],
        };
        let b = ShingleList {
            arena: b"0123456789abcdefXZ".to_vec(),
            entries: vec![entry],
            hashes: vec![7],
        };
        assert_eq!(a.common(&b), 0);
        assert_eq!(a.common(&a), 1);
        // Short shingles are decided by the head alone.
        let short = |head| ShingleList {
            arena: Vec::new(),
            entries: vec![Entry {
                hash: 7,
                head,
                start: 0,
                len: 2,
            }],
            hashes: vec![7],
        };
        assert_eq!(short([1, 0]).common(&short([2, 0])), 0);
        assert_eq!(short([1, 0]).common(&short([1, 0])), 1);
    }
}
