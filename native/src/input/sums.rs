//! The input check's sums of every text, computed where the keys stage reads
//! the texts anyway, equal to those of the check's Spark aggregation
//! (`lshbloom_udf/spark/ingest.py`, `inspect_input`).
//!
//! That aggregation hashes each text with Spark's two hash expressions, both
//! seeded 42: `xxhash64` (XXH64 of the UTF-8 bytes) and `hash` (Spark's
//! Murmur3_x86_32 `hashUnsafeBytes`, whose tail is not the reference one:
//! each byte after the last 4-byte block, sign-extended, is a block of its
//! own). A null text hashes to the seed. A hash of several columns chains the
//! seed through them, left to right; a long column is hashed as its 8
//! little-endian bytes (XXH64) or as two 4-byte blocks, low first (Murmur3).
//! The sums are
//!
//! ```text
//! content  = Σ xxhash64(text),            Σ hash(text)
//! sequence = Σ xxhash64(row id, xxhash64(text)),  Σ hash(hash(text), row id)
//! ```
//!
//! exactly, as signed 64- and 32-bit values summed without overflow (the
//! check sums 16-bit pieces in Spark for the same reason), with the number of
//! rows and the longest and total UTF-8 bytes of the non-null texts.

use crate::hash::spark::{murmur3_bytes, murmur3_int, murmur3_long, xxhash64, SPARK_SEED};

/// The sums of the module's docstring over some rows; sums of disjoint rows add up.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InputSums {
    pub(crate) documents: u64,
    pub(crate) content_xxhash: i128,
    pub(crate) content_murmur: i128,
    pub(crate) sequence_xxhash: i128,
    pub(crate) sequence_murmur: i128,
    /// The longest non-null text's UTF-8 bytes (0 when there is none).
    pub(crate) longest: u64,
    /// All non-null texts' UTF-8 bytes.
    pub(crate) bytes: u64,
}

impl InputSums {
    /// Adds the row `row` (its row id) holding `text` (None: null).
    pub(crate) fn add(&mut self, row: i64, text: Option<&[u8]>) {
        let seed = u64::from(SPARK_SEED);
        let (xx, murmur) = match text {
            Some(t) => (xxhash64(t, seed), murmur3_bytes(t, SPARK_SEED)),
            None => (seed, SPARK_SEED),
        };
        self.documents += 1;
        self.content_xxhash += i128::from(xx as i64);
        self.content_murmur += i128::from(murmur as i32);
        let sequence_xx = xxhash64(&xx.to_le_bytes(), xxhash64(&row.to_le_bytes(), seed));
        self.sequence_xxhash += i128::from(sequence_xx as i64);
        self.sequence_murmur += i128::from(murmur3_long(row as u64, murmur3_int(murmur, SPARK_SEED)) as i32);
        if let Some(t) = text {
            self.longest = self.longest.max(t.len() as u64);
            self.bytes += t.len() as u64;
        }
    }

    /// The sums of `texts` at row ids `rows` (same length).
    pub(crate) fn of(rows: &[i64], texts: &[Option<&[u8]>]) -> InputSums {
        assert_eq!(rows.len(), texts.len(), "one row id per text");
        let mut sums = InputSums::default();
        rows.iter().zip(texts).for_each(|(&row, &text)| sums.add(row, text));
        sums
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Spark 4.3's own values (`F.xxhash64`, `F.hash` of the strings, `F.xxhash64("r", "h1")` and
    // `F.hash("h2", "r")` with a row id `r`), taken in a local session.
    #[test]
    fn equals_sparks_hashes() {
        let seed = u64::from(SPARK_SEED);
        // (text, row id, xxhash64(text), hash(text), xxhash64(row id, h1), hash(h2, row id)); the last text
        // has bytes >= 0x80 in its tail (sign extension).
        let cases: [(&str, i64, i64, i32, i64, i32); 3] = [
            ("", 0, -7_444_071_767_201_028_348, 142_593_372, 6_458_904_167_970_118_407, -8_190_859),
            ("abc", 5, 1_423_657_621_850_124_518, 1_322_437_556, 5_459_859_782_379_174_551, 26_829_984),
            ("héllo wörld ☃ 漢字", (3 << 40) + 17, 6_633_947_901_112_985_293, 1_425_377_077,
             -7_123_807_648_143_236_777, -2_032_883_389),
        ];
        for (text, row, h1, h2, s1, s2) in cases {
            let (x, m) = (xxhash64(text.as_bytes(), seed), murmur3_bytes(text.as_bytes(), SPARK_SEED));
            assert_eq!((x as i64, m as i32), (h1, h2), "{text:?}");
            assert_eq!(xxhash64(&x.to_le_bytes(), xxhash64(&row.to_le_bytes(), seed)) as i64, s1, "{text:?}");
            assert_eq!(murmur3_long(row as u64, murmur3_int(m, SPARK_SEED)) as i32, s2, "{text:?}");
            let one = InputSums::of(&[row], &[Some(text.as_bytes())]);
            assert_eq!((one.content_xxhash, one.content_murmur), (i128::from(h1), i128::from(h2)));
            assert_eq!((one.sequence_xxhash, one.sequence_murmur), (i128::from(s1), i128::from(s2)));
        }
    }

    #[test]
    fn sums_add_up_and_nulls_hash_to_the_seed() {
        let texts: Vec<Option<&[u8]>> = vec![Some(b"one"), None, Some("två ☃".as_bytes()), Some(b"")];
        let rows = [0i64, 1, 2, 1 << 40];
        let all = InputSums::of(&rows, &texts);
        let (a, b) = (InputSums::of(&rows[..2], &texts[..2]), InputSums::of(&rows[2..], &texts[2..]));
        assert_eq!(all.documents, 4);
        assert_eq!(all.content_xxhash, a.content_xxhash + b.content_xxhash);
        assert_eq!(all.sequence_murmur, a.sequence_murmur + b.sequence_murmur);
        assert_eq!((all.longest, all.bytes), ("två ☃".len() as u64, 3 + "två ☃".len() as u64));
        let null = InputSums::of(&[7], &[None]);
        assert_eq!((null.content_xxhash, null.content_murmur), (42, 42));
        assert_eq!((null.longest, null.bytes), (0, 0));
    }
}
