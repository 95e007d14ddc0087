//! An exact set of byte strings, reused across documents: drops repeated
//! shingles before they are SHA-1 hashed (text repeats most of its words).
//! Membership compares the bytes; the 64-bit fingerprint only picks the slot.

/// Distinct byte strings in insertion order, backed by one arena.
#[derive(Debug, Clone)]
pub struct DistinctSet {
    arena: Vec<u8>,
    spans: Vec<(u32, u32)>,
    fps: Vec<u64>,
    /// The slot of each string (for re-inserting when the table grows).
    slots_by_idx: Vec<Slot>,
    /// Open addressing: (fingerprint, generation, span index). A slot whose
    /// generation is not the current one is empty, so clearing is O(1).
    /// Generation 0 is never current. The fingerprint sits in the slot so a
    /// probe needs no second memory access unless the fingerprints match.
    table: Vec<Slot>,
    generation: u32,
    /// Only the first 2^bits slots are in use: sized for the current
    /// document, so a small document after a large one stays in L1.
    bits: u32,
}

const MIN_BITS: u32 = 8;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// Short strings (<= 16 bytes): the bytes as two zero-padded LE words and
    /// `tag` = length. Long strings: `a` = fingerprint, `b` = index of the
    /// string, `tag` = LONG.
    a: u64,
    b: u64,
    generation: u32,
    tag: u32,
}

const LONG: u32 = u32::MAX;

/// `MASKS[n]`: the low `n` bytes of two words (n <= 16).
pub(crate) const MASKS: [(u64, u64); 17] = {
    let mut m = [(0u64, 0u64); 17];
    let mut n = 0;
    while n <= 16 {
        let lo = if n >= 8 { u64::MAX } else { (1u64 << (8 * n)) - 1 };
        let hi = if n >= 16 { u64::MAX } else if n <= 8 { 0 } else { (1u64 << (8 * (n - 8))) - 1 };
        m[n] = (lo, hi);
        n += 1;
    }
    m
};

#[inline(always)]
pub(crate) fn short_fp(a: u64, b: u64, n: usize) -> u64 {
    const K0: u64 = 0xa076_1d64_78bd_642f;
    const K1: u64 = 0xe703_7ed1_a0b4_28db;
    fold_mul(a ^ K0 ^ (n as u64), b ^ K1)
}

/// Byte equality, inline for the short strings shingles usually are.
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if (8..=16).contains(&n) {
        return read_u64(a, 0) == read_u64(b, 0) && read_u64(a, n - 8) == read_u64(b, n - 8);
    }
    if (4..8).contains(&n) {
        return read_u32(a, 0) == read_u32(b, 0) && read_u32(a, n - 4) == read_u32(b, n - 4);
    }
    a == b
}

#[inline(always)]
pub(crate) fn read_u64(s: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(s[at..at + 8].try_into().unwrap())
}

#[inline(always)]
fn read_u32(s: &[u8], at: usize) -> u64 {
    u64::from(u32::from_le_bytes(s[at..at + 4].try_into().unwrap()))
}

/// 64x64 -> 128-bit multiply, folded (wyhash's mixing step).
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// A fast 64-bit hash of a short byte string (overlapping reads, no copies).
#[inline(always)]
fn fingerprint(s: &[u8]) -> u64 {
    const K0: u64 = 0xa076_1d64_78bd_642f;
    const K1: u64 = 0xe703_7ed1_a0b4_28db;
    const K2: u64 = 0x8ebc_6af0_9c88_c6e3;
    let n = s.len();
    let (a, b) = if n >= 8 {
        // All full words but the last, then the last 8 bytes (may overlap).
        let mut h = K2 ^ n as u64;
        let mut i = 0;
        while i + 8 < n {
            h = fold_mul(h ^ read_u64(s, i), K1);
            i += 8;
        }
        (h, read_u64(s, n - 8))
    } else if n >= 4 {
        (read_u32(s, 0), read_u32(s, n - 4))
    } else if n > 0 {
        (
            u64::from(s[0]) << 16 | u64::from(s[n / 2]) << 8 | u64::from(s[n - 1]),
            0,
        )
    } else {
        (0, 0)
    };
    fold_mul(a ^ K0 ^ (n as u64), b ^ K1)
}

impl Default for DistinctSet {
    fn default() -> Self {
        Self::new()
    }
}

impl DistinctSet {
    pub fn new() -> Self {
        DistinctSet {
            arena: Vec::new(),
            spans: Vec::new(),
            fps: Vec::new(),
            slots_by_idx: Vec::new(),
            table: Vec::new(),
            generation: 1,
            bits: MIN_BITS,
        }
    }

    /// Empties the set (O(1) amortized).
    pub fn clear(&mut self) {
        self.arena.clear();
        self.spans.clear();
        self.fps.clear();
        self.slots_by_idx.clear();
        self.bits = MIN_BITS;
        self.next_generation();
    }

    /// Sizes an empty set's table for `n` strings, so that it does not grow
    /// (and re-insert) on the way there: a caller that knows about how many
    /// strings are coming saves the doublings from the smallest table. No
    /// effect on a non-empty set, or beyond what the table already holds.
    pub(crate) fn reserve(&mut self, n: usize) {
        let want = (2 * n.max(1)).next_power_of_two().trailing_zeros().max(MIN_BITS);
        if !self.is_empty() || want <= self.bits {
            return;
        }
        self.bits = want;
        if self.table.len() < 1 << want {
            self.table.resize(1 << want, Slot::default());
        }
    }

    fn next_generation(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Generation counter wrapped: really clear once every 2^32 uses.
            self.table.iter_mut().for_each(|e| *e = Slot::default());
            self.generation = 1;
        }
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Makes room for one more string: doubles the active part of the table
    /// (re-inserting under a new generation) when it would be over half full.
    #[inline(always)]
    fn reserve_one(&mut self) {
        if (self.spans.len() + 1) * 2 <= self.table.len().min(1 << self.bits) {
            return;
        }
        self.grow();
    }

    #[cold]
    fn grow(&mut self) {
        if self.table.len() < 1 << self.bits {
            self.table.resize(1 << self.bits, Slot::default());
        }
        if (self.spans.len() + 1) * 2 <= 1 << self.bits {
            return;
        }
        self.bits += 1;
        if self.table.len() < 1 << self.bits {
            self.table.resize(1 << self.bits, Slot::default());
        }
        self.next_generation();
        let (bits, g) = (self.bits, self.generation);
        let mask = (1usize << bits) - 1;
        for (i, &fp) in self.fps.iter().enumerate() {
            let mut slot = (fp >> (64 - bits)) as usize;
            while self.table[slot].generation == g {
                slot = (slot + 1) & mask;
            }
            let mut e = self.slots_by_idx[i];
            e.generation = g;
            self.table[slot] = e;
        }
    }

    /// Adds `s` unless an equal string is already present; returns whether it was new.
    #[inline]
    pub fn insert(&mut self, s: &[u8]) -> bool {
        if s.len() <= 16 {
            let mut pad = [0u8; 16];
            pad[..s.len()].copy_from_slice(s);
            return self.insert_short(read_u64(&pad, 0), read_u64(&pad, 8), s);
        }
        self.insert_long(s)
    }

    /// Whether an equal string is present (no insertion).
    #[inline]
    pub(crate) fn contains(&self, s: &[u8]) -> bool {
        if self.spans.is_empty() {
            return false; // the table may not exist yet
        }
        let mask = (1usize << self.bits) - 1;
        let g = self.generation;
        if s.len() <= 16 {
            let mut pad = [0u8; 16];
            pad[..s.len()].copy_from_slice(s);
            let (a, b) = (read_u64(&pad, 0), read_u64(&pad, 8));
            return self.contains_short(a, b, s.len(), short_fp(a, b, s.len()));
        }
        let fp = fingerprint(s);
        let mut slot = (fp >> (64 - self.bits)) as usize;
        loop {
            let e = self.table[slot];
            if e.generation != g {
                return false;
            }
            if e.tag == LONG && e.a == fp && same_bytes(self.get(e.b as usize), s) {
                return true;
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Adds `buf[start..end]`; `buf` may extend past `end` (short strings are
    /// then read as two whole words, without copying).
    #[inline]
    pub(crate) fn insert_in(&mut self, buf: &[u8], start: usize, end: usize) -> bool {
        let n = end - start;
        if n <= 16 && start + 16 <= buf.len() {
            let (m0, m1) = MASKS[n];
            let a = read_u64(buf, start) & m0;
            let b = read_u64(buf, start + 8) & m1;
            return self.insert_short(a, b, &buf[start..end]);
        }
        self.insert(&buf[start..end])
    }

    /// Adds `buf[start..end]` as [`DistinctSet::insert_in`] does and, when it
    /// is new, says whether `other` holds it: `(new, new and in other)`. One
    /// hash serves both tables (verification's intersection, `verify::overlap`).
    #[inline]
    pub(crate) fn insert_in_noting(
        &mut self,
        buf: &[u8],
        start: usize,
        end: usize,
        other: &DistinctSet,
    ) -> (bool, bool) {
        let n = end - start;
        if n <= 16 && start + 16 <= buf.len() {
            let (m0, m1) = MASKS[n];
            let a = read_u64(buf, start) & m0;
            let b = read_u64(buf, start + 8) & m1;
            let fp = short_fp(a, b, n);
            let new = self.insert_short_fp(a, b, fp, &buf[start..end]);
            return (new, new && other.contains_short(a, b, n, fp));
        }
        let s = &buf[start..end];
        let new = self.insert(s);
        (new, new && other.contains(s))
    }

    /// Whether the short string `(a, b)` of `n` bytes with fingerprint `fp` is present
    /// ([`DistinctSet::short_key`] of another set's string: probed without hashing it again).
    #[inline(always)]
    pub(crate) fn contains_short(&self, a: u64, b: u64, n: usize, fp: u64) -> bool {
        if self.spans.is_empty() {
            return false; // the table may not exist yet
        }
        let mask = (1usize << self.bits) - 1;
        let (g, tag) = (self.generation, n as u32);
        let mut slot = (fp >> (64 - self.bits)) as usize;
        loop {
            let e = self.table[slot];
            if e.generation != g {
                return false;
            }
            if e.a == a && e.b == b && e.tag == tag {
                return true;
            }
            slot = (slot + 1) & mask;
        }
    }

    #[inline(always)]
    fn insert_short(&mut self, a: u64, b: u64, s: &[u8]) -> bool {
        self.insert_short_fp(a, b, short_fp(a, b, s.len()), s)
    }

    #[inline(always)]
    fn insert_short_fp(&mut self, a: u64, b: u64, fp: u64, s: &[u8]) -> bool {
        self.reserve_one();
        let n = s.len();
        let mask = (1usize << self.bits) - 1;
        let g = self.generation;
        let tag = n as u32;
        let mut slot = (fp >> (64 - self.bits)) as usize;
        loop {
            let e = self.table[slot];
            if e.generation != g {
                break;
            }
            if e.a == a && e.b == b && e.tag == tag {
                return false;
            }
            slot = (slot + 1) & mask;
        }
        self.push_new(slot, Slot { a, b, generation: g, tag }, fp, s);
        true
    }

    fn insert_long(&mut self, s: &[u8]) -> bool {
        self.reserve_one();
        let fp = fingerprint(s);
        let mask = (1usize << self.bits) - 1;
        let g = self.generation;
        let mut slot = (fp >> (64 - self.bits)) as usize;
        loop {
            let e = self.table[slot];
            if e.generation != g {
                break;
            }
            if e.tag == LONG && e.a == fp {
                let (start, len) = self.spans[e.b as usize];
                if same_bytes(&self.arena[start as usize..(start + len) as usize], s) {
                    return false;
                }
            }
            slot = (slot + 1) & mask;
        }
        let idx = self.spans.len() as u64;
        self.push_new(slot, Slot { a: fp, b: idx, generation: g, tag: LONG }, fp, s);
        true
    }

    #[inline(always)]
    fn push_new(&mut self, slot: usize, e: Slot, fp: u64, s: &[u8]) {
        let start = u32::try_from(self.arena.len()).expect("document too large (> 4 GiB of shingles)");
        let len = u32::try_from(s.len()).expect("shingle too large");
        self.arena.extend_from_slice(s);
        self.table[slot] = e;
        self.slots_by_idx.push(e);
        self.spans.push((start, len));
        self.fps.push(fp);
    }

    /// `(a, b, len, fingerprint)` of the `i`-th distinct string if it is short
    /// (<= 16 bytes, kept by value as two zero-padded words), else None.
    #[inline]
    pub(crate) fn short_key(&self, i: usize) -> Option<(u64, u64, u32, u64)> {
        let e = self.slots_by_idx[i];
        (e.tag != LONG).then_some((e.a, e.b, e.tag, self.fps[i]))
    }

    /// The `i`-th distinct string.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> &[u8] {
        let (start, len) = self.spans[i];
        &self.arena[start as usize..(start + len) as usize]
    }

    /// The distinct strings, in first-insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.spans
            .iter()
            .map(move |&(start, len)| &self.arena[start as usize..(start + len) as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_answers_as_insert_would() {
        let mut d = DistinctSet::new();
        assert!(!d.contains(b"abc"), "an unused set holds nothing");
        let strings: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| format!("{}-{}", i, "x".repeat((i % 40) as usize)).into_bytes())
            .collect();
        for s in strings.iter().step_by(2) {
            d.insert(s);
        }
        for (i, s) in strings.iter().enumerate() {
            assert_eq!(d.contains(s), i % 2 == 0, "{:?}", String::from_utf8_lossy(s));
        }
        // Same fingerprint prefix, different length or byte: short and long paths compare exactly.
        assert!(d.contains(b"0-") && !d.contains(b"0-x") && !d.contains(b"0"));
        assert!(!d.contains(format!("2998-{}", "x".repeat(39)).as_bytes()));
        d.clear();
        assert!(!d.contains(&strings[0]), "a cleared set holds nothing");
        d.insert(b"y");
        assert!(d.contains(b"y") && !d.contains(&strings[0]));
    }

    #[test]
    fn a_reserved_set_answers_as_a_growing_one() {
        let strings: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| format!("{}-{}", i % 1700, "y".repeat((i % 23) as usize)).into_bytes())
            .collect();
        let mut grown = DistinctSet::new();
        let mut reserved = DistinctSet::new();
        for n in [0, 10, 5000, 100] {
            grown.clear();
            reserved.clear();
            reserved.reserve(n);
            for s in &strings {
                assert_eq!(reserved.insert(s), grown.insert(s), "reserve({n})");
            }
            reserved.reserve(100_000); // not empty: no effect
            assert_eq!(reserved.iter().collect::<Vec<_>>(), grown.iter().collect::<Vec<_>>());
            for s in &strings {
                assert!(reserved.contains(s));
            }
            assert!(!reserved.contains(b"absent"));
        }
    }

    #[test]
    fn insert_in_noting_answers_as_insert_then_contains() {
        let mut other = DistinctSet::new();
        let mut a = DistinctSet::new();
        let mut b = DistinctSet::new();
        let text: Vec<u8> = (0..4000u32).flat_map(|i| format!("w{} ", i % 900).into_bytes()).collect();
        for (i, w) in text.chunks(7).enumerate().step_by(3) {
            if i % 2 == 0 {
                other.insert(w);
            }
        }
        for len in [1, 5, 11, 16, 17, 30] {
            a.clear();
            b.clear();
            for start in (0..text.len() - len).step_by(3) {
                let end = start + len;
                let s = &text[start..end];
                let want_new = b.insert(s);
                let want = (want_new, want_new && other.contains(s));
                // the whole buffer (whole words read past `end`) and the buffer cut at `end`
                assert_eq!(a.insert_in_noting(&text, start, end, &other), want, "{len} {start}");
                assert_eq!(a.insert_in_noting(&text[..end], start, end, &other), (false, false));
            }
        }
    }

    #[test]
    fn fresh_set_is_empty() {
        let mut d = DistinctSet::default();
        assert!(d.insert(b"x"));
        assert!(d.insert(b"y"));
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn exact_membership_and_order() {
        let mut d = DistinctSet::new();
        assert!(d.is_empty());
        for w in ["b", "a", "b", "", "a", "", "abcdefghij", "abcdefghik"] {
            d.insert(w.as_bytes());
        }
        let got: Vec<&[u8]> = d.iter().collect();
        assert_eq!(got, vec![&b"b"[..], b"a", b"", b"abcdefghij", b"abcdefghik"]);
        d.clear();
        assert_eq!(d.len(), 0);
        assert!(d.insert(b"a"));
        assert!(!d.insert(b"a"));
    }

    #[test]
    fn many_strings_across_generations() {
        let mut d = DistinctSet::new();
        for round in 0..5u32 {
            d.clear();
            let n = 1000 * (round as usize + 1);
            for i in 0..n {
                assert!(d.insert(format!("w{i}").as_bytes()));
            }
            for i in 0..n {
                assert!(!d.insert(format!("w{i}").as_bytes()));
            }
            assert_eq!(d.len(), n);
            // A smaller document after a large one still starts empty.
            d.clear();
            assert!(d.insert(b"w1"));
            assert_eq!(d.len(), 1);
        }
    }

    #[test]
    fn table_shrinks_back_for_small_documents() {
        let mut d = DistinctSet::new();
        for i in 0..100_000 {
            d.insert(format!("{i}").as_bytes());
        }
        assert!(d.bits >= 18);
        d.clear();
        assert_eq!(d.bits, MIN_BITS);
        for i in 0..100 {
            assert!(d.insert(format!("{i}").as_bytes()));
            assert!(!d.insert(format!("{i}").as_bytes()));
        }
        assert_eq!(d.len(), 100);
    }

    #[test]
    fn generation_wrap_clears_table() {
        let mut d = DistinctSet::new();
        d.insert(b"x");
        d.generation = u32::MAX;
        d.clear();
        assert_eq!(d.generation, 1);
        assert!(d.insert(b"x"));
    }
}

#[cfg(test)]
mod short_key_tests {
    use super::*;

    #[test]
    fn insert_in_agrees_with_insert_for_all_lengths_and_positions() {
        // Words of every length 0..=40 at every offset, with buffers that end
        // right after the word (copy path) and that extend past it (word path).
        let text: Vec<u8> = (0..200u32).map(|i| b'a' + (i * 7 % 26) as u8).collect();
        let mut a = DistinctSet::new();
        let mut b = DistinctSet::new();
        for len in 0..=40usize {
            for start in 0..(text.len() - len) {
                let end = start + len;
                let x = a.insert_in(&text, start, end);
                let y = b.insert(&text[start..end]);
                assert_eq!(x, y, "len {len} start {start}");
                let z = a.insert_in(&text[..end], start, end);
                assert!(!z);
            }
        }
        let ga: Vec<&[u8]> = a.iter().collect();
        let gb: Vec<&[u8]> = b.iter().collect();
        assert_eq!(ga, gb);
        // Same bytes, different lengths are different strings (zero padding).
        let mut c = DistinctSet::new();
        assert!(c.insert(b"ab"));
        assert!(c.insert(b"ab\0"));
        assert!(c.insert(b"ab\0\0\0\0\0\0\0\0\0"));
        assert!(!c.insert_in(b"ab\0xyzzzzzzzzzzzzzzzzz", 0, 3));
        assert_eq!(c.len(), 3);
    }
}
