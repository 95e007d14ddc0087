//! Pinned digests of signatures and band keys on a fixed mixed-script corpus,
//! for every unit, scheme and normalization the product offers. Indexes built
//! earlier and the datasketch-equality tests depend on these outputs being
//! bit-identical, so any speed work on normalization, shingling or hashing
//! must leave every digest here unchanged. (The digests were taken from the
//! code before it was optimized.)

use super::{MinHasher, Permutations, Scheme};
use crate::minhash::band_keys::{minhash_band_keys, BandKey, Banding};
use crate::text::shingles::{ShingleSettings, Unit, NORM_ALL, NORM_DEHYPHEN, NORM_LOWER, NORM_NFKC, NORM_PUNCT};

/// Fragments chosen to hit every branch of normalization and shingling:
/// ASCII with case, punctuation and every Python whitespace kind; line-break
/// hyphens; NFKC (fullwidth, ligatures, compatibility, combining marks);
/// special lowercasing (final sigma, dotted I, ß); dense scripts (Han, kana,
/// Hangul, halfwidth katakana, supplementary Han); non-BMP symbols.
const FRAGMENTS: &[&str] = &[
    "The Quick Brown Fox, jumps over the lazy dog!",
    "don't stop\u{2014}now; (really) \"quoted\" [x] {y} a_b @home #tag 50% & more?",
    "docu-\nment hyphen-\r\nated end-\n  of-line",
    "tabs\tand\u{0B}vertical\u{0C}feeds\u{1C}\u{1D}\u{1E}\u{1F}seps\u{85}nel\u{A0}nbsp",
    "\u{2000}en\u{2003}em\u{2009}thin\u{200A}hair\u{2028}line\u{2029}para\u{202F}nnb\u{205F}math\u{3000}ideo",
    "\u{FF21}\u{FF22}\u{FF23}\u{FF01} \u{FB01}ne \u{FB02}ow \u{2460}\u{2461} \u{33A1} \u{2126}",
    "cafe\u{301} nai\u{308}ve \u{212B}ngstrom \u{1E9B}\u{323}",
    "\u{39F}\u{394}\u{39F}\u{3A3} \u{391}\u{3A3}\u{3A3}\u{39F}\u{3A3} \u{130}stanbul STRASSE Stra\u{DF}e \u{1E9E}",
    "\u{6F22}\u{5B57}\u{3068}\u{304B}\u{306A}\u{3001}\u{30AB}\u{30BF}\u{30AB}\u{30CA}\u{3002}\u{65E5}\u{672C}\u{8A9E}\u{306E}\u{6587}\u{7AE0}",
    "\u{D55C}\u{AD6D}\u{C5B4} \u{D14D}\u{C2A4}\u{D2B8}\u{FF0C}\u{FF76}\u{FF80}\u{FF76}\u{FF85} \u{20000}\u{2A6D6}",
    "\u{41F}\u{440}\u{438}\u{432}\u{435}\u{442}, \u{43C}\u{438}\u{440}! \u{627}\u{644}\u{639}\u{631}\u{628}\u{64A}\u{629} \u{5E2}\u{5D1}\u{5E8}\u{5D9}\u{5EA}",
    "emoji \u{1F600}\u{1F680} math \u{1D400}\u{1D401} \u{2E80}\u{3005}\u{3021}\u{31F0}",
    "MiXeD 123 4.5e6 x+y=z $5 <tag> a|b ~c ^d `e`",
    "\u{00BF}Qu\u{E9}? \u{00A1}S\u{ED}! \u{00AB}guillemets\u{00BB} \u{2018}single\u{2019} \u{201C}double\u{201D}",
    "a", "",
];

fn lcg(state: &mut u64) -> u64 {
    *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *state >> 33
}

/// 300 documents of 0 to ~60 fragments joined by varied separators (some
/// long enough for many shingles, some too short for one window).
pub(crate) fn corpus() -> Vec<String> {
    let seps = [" ", "\n", "", "\t", "  ", "-\n", "\u{3000}"];
    let mut state = 0x5EED;
    (0..300)
        .map(|i| {
            let parts = match i % 5 {
                0 => lcg(&mut state) % 3,
                1 => 1 + lcg(&mut state) % 8,
                _ => 1 + lcg(&mut state) % 60,
            };
            let mut doc = String::new();
            for _ in 0..parts {
                doc.push_str(FRAGMENTS[(lcg(&mut state) % FRAGMENTS.len() as u64) as usize]);
                doc.push_str(seps[(lcg(&mut state) % seps.len() as u64) as usize]);
            }
            doc
        })
        .collect()
}

fn fnv(digest: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *digest = (*digest ^ u64::from(b)).wrapping_mul(0x100_0000_01B3);
    }
}

fn perms(scheme: Scheme, k: usize) -> Permutations {
    let (a, b): (Vec<u64>, Vec<u64>) = match scheme {
        Scheme::Affine32 => {
            (0..k as u64).map(|i| (i * 2_654_435_761 + 12_345) as u32 as u64 | 1).unzip_with(|i| i * 40_503 % (1 << 32))
        }
        Scheme::Legacy => {
            (0..k as u64).map(|i| (i + 1) * 0x1234_5678_9ABC % ((1 << 61) - 1)).unzip_with(|i| i * 0xDEAD_BEEF % ((1 << 61) - 1))
        }
        Scheme::Poisson => (vec![0x0123_4567_89AB_CDEF; k], vec![0; k]),
    };
    Permutations::new(scheme, &a, &b).unwrap()
}

/// `(a_i, b(i))` for i in 0..k, from an iterator of `a_i`.
trait UnzipWith {
    fn unzip_with(self, b: impl Fn(u64) -> u64) -> (Vec<u64>, Vec<u64>);
}

impl<I: Iterator<Item = u64>> UnzipWith for I {
    fn unzip_with(self, b: impl Fn(u64) -> u64) -> (Vec<u64>, Vec<u64>) {
        self.enumerate().map(|(i, a)| (a, b(i as u64))).unzip()
    }
}

/// Digest of the signatures of the corpus (plus one null row).
fn signature_digest(scheme: Scheme, unit: Unit, ngram: usize, flags: u32) -> u64 {
    let texts = corpus();
    let mut rows: Vec<Option<&str>> = texts.iter().map(|t| Some(t.as_str())).collect();
    rows.push(None);
    let mut hasher = MinHasher::with_shingles(perms(scheme, 64), ShingleSettings { unit, ngram, flags });
    let mut sig = vec![0u32; 64];
    let mut digest = 0xCBF2_9CE4_8422_2325;
    for row in rows {
        let has = hasher.signature(row, &mut sig);
        fnv(&mut digest, &[u8::from(has)]);
        sig.iter().for_each(|v| fnv(&mut digest, &v.to_le_bytes()));
    }
    digest
}

#[test]
fn default_band_keys_are_pinned() {
    // The defaults: mixed 11-grams after dehyphen,nfkc,lower,punct; poisson,
    // 256 permutations, 64 bands of 4 with the mix key.
    let texts = corpus();
    let rows: Vec<Option<&str>> = texts.iter().map(|t| Some(t.as_str())).collect();
    let settings = ShingleSettings { unit: Unit::Mixed, ngram: 11, flags: NORM_ALL | NORM_DEHYPHEN };
    let mut hasher = MinHasher::with_shingles(perms(Scheme::Poisson, 256), settings);
    let banding = Banding { b: 64, r: 4, key: BandKey::Mix };
    let mut keys = vec![0u64; rows.len() * 64];
    let mut has = vec![false; rows.len()];
    minhash_band_keys(&mut hasher, &rows, banding, &mut keys, &mut has);
    let mut digest = 0xCBF2_9CE4_8422_2325;
    keys.iter().for_each(|k| fnv(&mut digest, &k.to_le_bytes()));
    has.iter().for_each(|&h| fnv(&mut digest, &[u8::from(h)]));
    assert_eq!(digest, PINNED_DEFAULT_KEYS, "{digest:#018x}");
}

#[test]
fn signatures_of_every_unit_scheme_and_normalization_are_pinned() {
    let flag_sets = [0, NORM_NFKC, NORM_LOWER, NORM_PUNCT, NORM_ALL, NORM_ALL | NORM_DEHYPHEN];
    let units = [(Unit::Words, 1), (Unit::Words, 4), (Unit::Chars, 5), (Unit::Mixed, 5), (Unit::Mixed, 11)];
    let mut got = Vec::new();
    for scheme in [Scheme::Affine32, Scheme::Legacy, Scheme::Poisson] {
        for &(unit, ngram) in &units {
            for &flags in &flag_sets {
                got.push(signature_digest(scheme, unit, ngram, flags));
            }
        }
    }
    let mut all = 0xCBF2_9CE4_8422_2325;
    got.iter().for_each(|d| fnv(&mut all, &d.to_le_bytes()));
    assert_eq!(all, PINNED_SIGNATURES, "{all:#018x} {got:x?}");
}

const PINNED_DEFAULT_KEYS: u64 = 0x7f2e_2979_3eb9_2220;
const PINNED_SIGNATURES: u64 = 0xe75a_5d15_c86c_34a1;
