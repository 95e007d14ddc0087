//! Each text's distinct shingles as sorted 64-bit hashes: what verification's
//! template rule counts (a shingle's document frequency over a sample of the
//! documents the pass kept, lshbloom_udf/spark/verify/templates.py).
//!
//! The hash is xxh3-64 (seed 0) of the shingle's UTF-8 bytes. Unlike the
//! exact overlaps (`overlap`), two distinct shingles may share a hash: among
//! `m` distinct shingles the chance that any two do is about `m² / 2^65`
//! (10^-5 at m = 10^7), and a collision only merges two shingles' counts.

use xxhash_rust::xxh3::xxh3_64;

use crate::text::shingles::{ShingleSettings, Shingler};

/// Fewer texts than this per thread cost more in thread start-up than they save.
const MIN_TEXTS_PER_THREAD: usize = 64;

/// The distinct shingle hashes of `text`, sorted ascending, appended to `out`.
fn append_hashes(shingler: &mut Shingler, text: &str, out: &mut Vec<u64>) {
    let start = out.len();
    shingler.for_each(text, |s| out.push(xxh3_64(s)));
    out[start..].sort_unstable();
    let mut kept = start;
    for i in start..out.len() {
        if kept == start || out[i] != out[kept - 1] {
            out[kept] = out[i];
            kept += 1;
        }
    }
    out.truncate(kept);
}

/// Each text's distinct shingle hashes, sorted: `(hashes, offsets)` with text
/// `i`'s at `hashes[offsets[i]..offsets[i + 1]]` (`offsets` has one more entry
/// than `texts`; None or an empty text has none). Computed on up to `threads`
/// threads over contiguous ranges: the result does not depend on the count.
pub(crate) fn hash_sets(settings: ShingleSettings, texts: &[Option<&str>], threads: usize) -> (Vec<u64>, Vec<usize>) {
    let threads = threads.min(texts.len().div_ceil(MIN_TEXTS_PER_THREAD)).max(1);
    let per = texts.len().div_ceil(threads).max(1);
    let parts: Vec<(Vec<u64>, Vec<usize>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = texts
            .chunks(per)
            .map(|chunk| {
                scope.spawn(move || {
                    let mut shingler = Shingler::with_settings(settings);
                    let (mut hashes, mut ends) = (Vec::new(), Vec::with_capacity(chunk.len()));
                    for text in chunk {
                        append_hashes(&mut shingler, text.unwrap_or(""), &mut hashes);
                        ends.push(hashes.len());
                    }
                    (hashes, ends)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("hashing thread")).collect()
    });
    let mut offsets = Vec::with_capacity(texts.len() + 1);
    offsets.push(0);
    let mut hashes = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
    for (part, ends) in parts {
        let base = hashes.len();
        hashes.extend_from_slice(&part);
        offsets.extend(ends.into_iter().map(|e| base + e));
    }
    (hashes, offsets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::shingles::{Unit, NORM_LOWER, NORM_PUNCT};

    fn settings(unit: Unit, ngram: usize) -> ShingleSettings {
        ShingleSettings { unit, ngram, flags: NORM_LOWER | NORM_PUNCT }
    }

    /// The reference: the shingle set's members hashed one by one.
    fn reference(settings: ShingleSettings, text: &str) -> Vec<u64> {
        let mut h: Vec<u64> = Shingler::with_settings(settings).shingle_set(text).iter().map(|s| xxh3_64(s)).collect();
        h.sort_unstable();
        h
    }

    fn corpus() -> Vec<String> {
        (0..300)
            .map(|i| match i % 4 {
                0 => String::new(),
                1 => format!("The cat sat on the mat {} times, the cat sat.", i % 7),
                2 => "文档去重 测试 文本".repeat(i % 5 + 1),
                _ => format!("word{} ", i).repeat(i % 9),
            })
            .collect()
    }

    #[test]
    fn matches_the_hashed_shingle_sets_on_any_thread_count() {
        let texts = corpus();
        let mut refs: Vec<Option<&str>> = texts.iter().map(|t| Some(t.as_str())).collect();
        refs.push(None);
        for (unit, n) in [(Unit::Words, 2), (Unit::Chars, 5), (Unit::Mixed, 9)] {
            let s = settings(unit, n);
            let (h1, o1) = hash_sets(s, &refs, 1);
            assert_eq!(o1.len(), refs.len() + 1);
            for (i, t) in refs.iter().enumerate() {
                assert_eq!(h1[o1[i]..o1[i + 1]], reference(s, t.unwrap_or("")), "text {i}");
            }
            for threads in [2, 3, 16] {
                assert_eq!(hash_sets(s, &refs, threads), (h1.clone(), o1.clone()));
            }
        }
    }

    #[test]
    fn no_texts_give_one_offset() {
        assert_eq!(hash_sets(settings(Unit::Words, 3), &[], 4), (vec![], vec![0]));
    }
}
