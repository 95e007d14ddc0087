//! Cumulative stage timings of the default keys path (mixed 11-grams after
//! dehyphen,nfkc,lower,punct; poisson k=256; 64x4 mix band keys), one thread.
//!
//!     cargo run --release --example keys_stages -- DOCS_FILE [REPEAT]
//!
//! DOCS_FILE: documents separated by U+0001 (benchmarks/keys_stages.py writes
//! one from the scale benchmark's Parquet). Under callgrind, use REPEAT = 1.

use std::time::Instant;

use _native::minhash::band_keys::{minhash_band_keys, BandKey, Banding};
use _native::minhash::{MinHasher, Permutations, Scheme};
use _native::text::shingles::{normalize, ShingleSettings, Shingler, Unit, NORM_ALL, NORM_DEHYPHEN};
use xxhash_rust::xxh3::xxh3_64_with_seed;

fn best<F: FnMut()>(repeat: usize, mut f: F) -> f64 {
    (0..repeat)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let text = std::fs::read_to_string(&args[1]).expect("docs file");
    let repeat: usize = args.get(2).map_or(5, |r| r.parse().unwrap());
    let stage = args.get(3).map(String::as_str).unwrap_or("all");
    let docs: Vec<&str> = text.split('\u{1}').collect();
    let flags = NORM_ALL | NORM_DEHYPHEN;
    let settings = ShingleSettings { unit: Unit::Mixed, ngram: 11, flags };
    let seed = 0x0123_4567_89AB_CDEF;
    let perms = Permutations::new(Scheme::Poisson, &[seed; 256], &[0; 256]).unwrap();
    let mut sh = Shingler::with_settings(settings);
    let mut hasher = MinHasher::with_shingles(perms, settings);
    let rows: Vec<Option<&str>> = docs.iter().map(|d| Some(*d)).collect();
    let banding = Banding { b: 64, r: 4, key: BandKey::Mix };
    let (mut keys, mut has) = (vec![0u64; rows.len() * 64], vec![false; rows.len()]);
    let mut shingles = 0usize;
    let mut hashes = Vec::new();
    let mut t = [0.0f64; 4];
    let run = |name: &str| stage == "all" || stage == name;
    if run("normalize") {
        t[0] = best(repeat, || docs.iter().for_each(|d| {
            std::hint::black_box(normalize(d, flags));
        }));
    }
    if run("shingle") {
        t[1] = best(repeat, || {
            shingles = 0;
            docs.iter().for_each(|d| shingles += sh.for_each(d, |s| {
                std::hint::black_box(s);
            }))
        });
    }
    if run("hash") {
        t[2] = best(repeat, || docs.iter().for_each(|d| {
            hashes.clear();
            sh.for_each(d, |s| hashes.push(xxh3_64_with_seed(s, seed)));
            std::hint::black_box(&hashes);
        }));
    }
    if run("keys") {
        t[3] = best(repeat, || minhash_band_keys(&mut hasher, &rows, banding, &mut keys, &mut has));
    }
    let (n, bytes) = (docs.len() as f64, text.len() as f64);
    let per = |s: f64| (s * 1e9 / n / 1e3, s * 1e9 / shingles.max(1) as f64);
    println!("{} docs, {:.0} bytes/doc, {:.0} shingles/doc", docs.len(), bytes / n, shingles as f64 / n);
    let names = ["normalize", "+ shingle windows", "+ xxh3", "+ sketch + band keys (all)"];
    for (i, name) in names.iter().enumerate() {
        let (us_doc, ns_sh) = per(t[i]);
        println!("{name:<28} {:8.1} ms {us_doc:7.2} us/doc {ns_sh:6.2} ns/shingle", t[i] * 1e3);
    }
    println!("docs/s (all, 1 thread): {:.0}", n / t[3]);
}
