//! A document's distinct shingles as hashes, reusing the SHA-1 of words seen
//! in earlier documents.

use super::MinHasher;
use crate::text::distinct::{read_u64, short_fp, MASKS};
use crate::prefetch::prefetch;
use crate::hash::sha1::sha1_hash32_many;
use crate::text::shingles::Shingler;
use crate::text::distinct::DistinctSet;

/// A short shingle (<= 16 bytes) by value, and its word-table slot:
/// (a, b, len, slot), `a` and `b` its zero-padded little-endian words.
pub(super) type ShortKey = (u64, u64, u32, u32);

/// A direct-mapped table of short shingles (<= 16 bytes), kept across the
/// documents a `MinHasher` processes. Each entry holds the shingle by value
/// (two zero-padded words and its length), its `sha1_hash32`, and the stamp of
/// the last document that emitted it. One lookup per shingle both drops
/// repeats within a document (stamp = this document) and reuses the SHA-1 of
/// a word seen in an earlier document (a corpus's vocabulary repeats).
///
/// Exactness: a signature is the minimum over the hashes emitted for a
/// document. Every distinct shingle is emitted at least once (its first
/// occurrence either misses, or hits an entry whose stamp is an older
/// document), with its own SHA-1 (entries are compared by value). A shingle
/// may be emitted more than once when two shingles of a document evict each
/// other from one entry; a repeated value cannot change a minimum.
#[derive(Debug, Clone)]
pub(super) struct WordTable {
    entries: Vec<WordEntry>,
    stamp: u32,
}

#[derive(Debug, Clone, Copy, Default)]
#[repr(align(32))]
struct WordEntry {
    a: u64,
    b: u64,
    /// length + 1; 0 = empty entry.
    len1: u32,
    hash: u32,
    stamp: u32,
    /// `hash` is filled in (a claimed entry waits for the document's SHA-1 batch).
    ready: bool,
}

impl WordEntry {
    #[inline(always)]
    fn holds(&self, a: u64, b: u64, n: u32) -> bool {
        self.a == a && self.b == b && self.len1 == n + 1
    }
}

const WORD_BITS: u32 = 15;
/// Prefetch distance of the word-table probes, in shingles.
const PREFETCH_AHEAD: usize = 16;

thread_local! {
    /// One word table per thread, kept across calls: SHA-1 of a word does not
    /// depend on any parameter, and stamps are unique per document per thread,
    /// so a Spark task's Python worker keeps its vocabulary warm from one Arrow
    /// batch to the next.
    pub(super) static WORDS: std::cell::RefCell<WordTable> = std::cell::RefCell::new(WordTable::new());
}

/// Empties this thread's word table (benchmarks use it to time a cold start).
pub(crate) fn reset_word_table() {
    WORDS.with(|w| *w.borrow_mut() = WordTable::new());
}

impl WordTable {
    fn new() -> Self {
        WordTable { entries: Vec::new(), stamp: 0 }
    }

    /// Starts a new document.
    fn next_document(&mut self) {
        if self.entries.is_empty() {
            self.entries = vec![WordEntry::default(); 1 << WORD_BITS];
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // Wrapped after 2^32 documents: forget every stamp once.
            self.entries.iter_mut().for_each(|e| e.stamp = 0);
            self.stamp = 1;
        }
    }

    /// Looks up every key of this document: appends the hash of each word
    /// seen before and first met in this document to `hashes`, and each word
    /// whose hash is unknown to `pending` (claiming its entry).
    #[inline(always)]
    fn probe(&mut self, keys: &[ShortKey], hashes: &mut Vec<u32>, pending: &mut Vec<ShortKey>) {
        let stamp = self.stamp;
        let entries = &mut self.entries;
        // Prefetching PREFETCH_AHEAD shingles ahead: the line arrives about
        // when it is needed and is still in L1 then.
        for &(_, _, _, slot) in keys.iter().take(PREFETCH_AHEAD) {
            prefetch(entries, slot as usize);
        }
        // Hits are the common case and whether a hit is this document's
        // first sight of the word is unpredictable: emit branch-free into a
        // buffer sized for the worst case, then truncate.
        let base = hashes.len();
        hashes.resize(base + keys.len(), 0);
        let mut count = base;
        for (i, &(a, b, n, slot)) in keys.iter().enumerate() {
            if let Some(&(_, _, _, ahead)) = keys.get(i + PREFETCH_AHEAD) {
                prefetch(entries, ahead as usize);
            }
            let entry = &mut entries[slot as usize];
            if entry.holds(a, b, n) {
                let fresh = entry.stamp != stamp;
                entry.stamp = stamp;
                hashes[count] = entry.hash;
                count += usize::from(fresh & entry.ready);
                if fresh & !entry.ready {
                    pending.push((a, b, n, slot));
                }
            } else {
                // Claim the entry now (so repeats in this document are
                // dropped); its hash is filled in by `fill_pending`.
                *entry = WordEntry { a, b, len1: n + 1, hash: 0, stamp, ready: false };
                pending.push((a, b, n, slot));
            }
        }
        hashes.truncate(count);
    }

    /// SHA-1 of the `pending` words in one batch: appended to `hashes` and
    /// stored in the entries that still hold them.
    fn fill_pending(&mut self, pending: &[ShortKey], scratch: &mut Vec<u32>, hashes: &mut Vec<u32>) {
        scratch.clear();
        let msgs: Vec<[u8; 16]> = pending
            .iter()
            .map(|&(a, b, _, _)| {
                let mut m = [0u8; 16];
                m[..8].copy_from_slice(&a.to_le_bytes());
                m[8..].copy_from_slice(&b.to_le_bytes());
                m
            })
            .collect();
        sha1_hash32_many(msgs.iter().zip(pending.iter()).map(|(m, p)| &m[..p.2 as usize]), scratch);
        for (&(a, b, n, slot), &h) in pending.iter().zip(scratch.iter()) {
            hashes.push(h);
            let entry = &mut self.entries[slot as usize];
            if entry.holds(a, b, n) {
                entry.hash = h;
                entry.ready = true;
            }
        }
    }
}

/// The document's short shingles as keys into `keys`, its long ones into
/// `distinct`. Collected before any probe because the table is larger than
/// L2: the probes then run with software prefetch.
#[inline(always)]
fn split_shingles(shingler: &mut Shingler, text: &str, keys: &mut Vec<ShortKey>, distinct: &mut DistinctSet) {
    let mask = (1usize << WORD_BITS) - 1;
    keys.clear();
    shingler.for_each_span(text, |buf, s, e| {
        let n = e - s;
        if n > 16 {
            distinct.insert(&buf[s..e]);
            return;
        }
        let (a, b) = if s + 16 <= buf.len() {
            let (m0, m1) = MASKS[n];
            (read_u64(buf, s) & m0, read_u64(buf, s + 8) & m1)
        } else {
            let mut pad = [0u8; 16];
            pad[..n].copy_from_slice(&buf[s..e]);
            (read_u64(&pad, 0), read_u64(&pad, 8))
        };
        let slot = (short_fp(a, b, n) >> (64 - WORD_BITS)) as usize & mask;
        keys.push((a, b, n as u32, slot as u32));
    });
}

impl MinHasher {
    /// The hash of every distinct shingle of `text` into `self.hashes` (some
    /// possibly more than once, see [`WordTable`]).
    pub(super) fn emit_hashes(&mut self, text: &str, words: &mut WordTable) {
        let MinHasher { shingler, distinct, hashes, pending, scratch, keys, .. } = self;
        distinct.clear();
        hashes.clear();
        pending.clear();
        words.next_document();
        split_shingles(shingler, text, keys, distinct);
        words.probe(keys, hashes, pending);
        if !pending.is_empty() {
            words.fill_pending(pending, scratch, hashes);
        }
        if !distinct.is_empty() {
            sha1_hash32_many(distinct.iter(), hashes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{lcg, naive_affine};
    use super::super::{sha1_hash32, Permutations, Scheme};
    use super::*;

    #[test]
    fn cached_hashes_equal_sha1_across_documents() {
        // Many documents sharing a vocabulary (cache hits), words of every
        // length 1..=30 (short and long keys), and cache-slot collisions.
        let vocab: Vec<String> = (0..5000).map(|i| "x".repeat(1 + i % 30) + &format!("{i}")).collect();
        let perms = Permutations::new(Scheme::Affine32, &[1, 3, 5, 7], &[9, 1, 2, 3]).unwrap();
        let mut mh = MinHasher::new(perms, 1, 0);
        let mut st = 5u64;
        for _ in 0..50 {
            let doc: Vec<&str> = (0..300).map(|_| vocab[(lcg(&mut st) % 5000) as usize].as_str()).collect();
            let text = doc.join(" ");
            let mut sig = vec![0u32; 4];
            mh.signature(Some(&text), &mut sig);
            let mut words: Vec<&str> = doc.clone();
            words.sort_unstable();
            words.dedup();
            let hashes: Vec<u32> = words.iter().map(|w| sha1_hash32(w.as_bytes())).collect();
            assert_eq!(sig, naive_affine(&[1, 3, 5, 7], &[9, 1, 2, 3], &hashes));
        }
    }

    #[test]
    fn word_table_evictions_keep_signatures_exact() {
        // Documents of 6000 distinct short words out of 300k: many pairs share
        // a table entry within one document and evict each other; words are
        // repeated in different orders; long (> 16 byte) words mixed in.
        let vocab: Vec<String> = (0..300_000u32)
            .map(|i| if i % 97 == 0 { format!("long-word-number-{i:08}") } else { format!("w{i}") })
            .collect();
        let a: Vec<u64> = (0..8).map(|i| 2 * i + 1).collect();
        let b: Vec<u64> = (0..8).map(|i| 3 * i + 7).collect();
        let a32: Vec<u32> = a.iter().map(|&x| x as u32).collect();
        let b32: Vec<u32> = b.iter().map(|&x| x as u32).collect();
        let mut mh = MinHasher::new(Permutations::new(Scheme::Affine32, &a, &b).unwrap(), 1, 0);
        let mut st = 77u64;
        for _ in 0..6 {
            let mut doc: Vec<&str> = (0..6000).map(|_| vocab[(lcg(&mut st) % 300_000) as usize].as_str()).collect();
            let again: Vec<&str> = doc.iter().rev().copied().collect();
            doc.extend(again);
            let mut sig = vec![0u32; 8];
            assert!(mh.signature(Some(&doc.join(" ")), &mut sig));
            let mut words = doc.clone();
            words.sort_unstable();
            words.dedup();
            let hashes: Vec<u32> = words.iter().map(|w| sha1_hash32(w.as_bytes())).collect();
            assert_eq!(sig, naive_affine(&a32, &b32, &hashes));
        }
    }
}
