//! An exact set of byte strings, reused across documents: drops repeated
//! shingles before they are SHA-1 hashed (text repeats most of its words).
//! Membership compares the bytes; the 64-bit fingerprint only picks the slot.

/// Distinct byte strings in insertion order, backed by one arena.
#[derive(Debug, Clone)]
pub struct DistinctSet {
    arena: Vec<u8>,
    spans: Vec<(u32, u32)>,
    fps: Vec<u64>,
    /// Open addressing: (generation, span index). A slot whose generation is
    /// not the current one is empty, so clearing is O(1). Generation 0 is
    /// never current.
    table: Vec<(u32, u32)>,
    generation: u32,
    /// Only the first 2^bits slots are in use: sized for the current
    /// document, so a small document after a large one stays in L1.
    bits: u32,
}

const MIN_BITS: u32 = 8;

#[inline(always)]
fn read_u64(s: &[u8], at: usize) -> u64 {
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
        self.bits = MIN_BITS;
        self.next_generation();
    }

    fn next_generation(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Generation counter wrapped: really clear once every 2^32 uses.
            self.table.iter_mut().for_each(|e| *e = (0, 0));
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
    fn reserve_one(&mut self) {
        if self.table.len() < 1 << self.bits {
            self.table.resize(1 << self.bits, (0, 0));
        }
        if (self.spans.len() + 1) * 2 <= 1 << self.bits {
            return;
        }
        self.bits += 1;
        if self.table.len() < 1 << self.bits {
            self.table.resize(1 << self.bits, (0, 0));
        }
        self.next_generation();
        let (bits, g) = (self.bits, self.generation);
        let mask = (1usize << bits) - 1;
        for (i, &fp) in self.fps.iter().enumerate() {
            let mut slot = (fp >> (64 - bits)) as usize;
            while self.table[slot].0 == g {
                slot = (slot + 1) & mask;
            }
            self.table[slot] = (g, i as u32);
        }
    }

    /// Adds `s` unless an equal string is already present; returns whether it was new.
    pub fn insert(&mut self, s: &[u8]) -> bool {
        self.reserve_one();
        let fp = fingerprint(s);
        let bits = self.bits;
        let mask = (1usize << bits) - 1;
        let g = self.generation;
        let mut slot = (fp >> (64 - bits)) as usize;
        loop {
            let (eg, idx) = self.table[slot];
            if eg != g {
                break;
            }
            let idx = idx as usize;
            if self.fps[idx] == fp {
                let (start, len) = self.spans[idx];
                if len as usize == s.len() && &self.arena[start as usize..start as usize + s.len()] == s {
                    return false;
                }
            }
            slot = (slot + 1) & mask;
        }
        let start = u32::try_from(self.arena.len()).expect("document too large (> 4 GiB of shingles)");
        let len = u32::try_from(s.len()).expect("shingle too large");
        self.arena.extend_from_slice(s);
        self.table[slot] = (g, self.spans.len() as u32);
        self.spans.push((start, len));
        self.fps.push(fp);
        true
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
