//! The driver pass (`BandSet::query_insert`, keep first, or with `all`
//! `BandSet::test_insert`, any earlier; `all-columns`: any earlier band by band
//! through `add_many`, the loop before the line formats had their own) of
//! blocked and cuckoo filters on the same band-key matrix, without Python: the
//! micro-benchmark behind benchmarks/filters.py's driver-pass figure, for
//! profiling (`valgrind --tool=callgrind`, `perf stat`).
//!
//! ```text
//! cargo run --release --example filters_pass -- [docs] [bands] [repeat] [blocked|cuckoo|both] [first|all|all-columns]
//! ```
//!
//! Keys: uniform random, a quarter of the rows sharing one band key with an
//! earlier row (as benchmarks/filters.py); filters sized for `docs` keys at the
//! defaults' per-band rate, in /dev/shm when present; best of `repeat`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use _native::filters::band_set::{test_insert_columns, BandSet};
use _native::filters::lines::{Layout, LineFile};
use _native::hash::splitmix::next as splitmix;

fn band_matrix(n: usize, b: usize) -> Vec<u64> {
    let mut st = 1u64;
    let mut keys: Vec<u64> = (0..n * b).map(|_| splitmix(&mut st) % ((1 << 61) - 1)).collect();
    for row in 1..n {
        let r = splitmix(&mut st);
        if r.is_multiple_of(4) {
            let src = (splitmix(&mut st) % row as u64) as usize;
            let band = (splitmix(&mut st) % b as u64) as usize;
            keys[row * b + band] = keys[src * b + band];
        }
    }
    keys
}

fn run<L: Layout>(dir: &Path, ext: &str, keys: &[u64], n: usize, b: usize, p_band: f64, rule: &str) -> (f64, Vec<bool>) {
    let files: Vec<LineFile<L>> = (0..b)
        .map(|i| {
            let p = dir.join(format!("band-{i}.{ext}"));
            let _ = std::fs::remove_file(&p);
            LineFile::<L>::create(&p, n as u64, p_band, i as u64).unwrap()
        })
        .collect();
    let mut out = vec![false; n];
    let start = Instant::now();
    if rule == "all-columns" {
        let mut files = files;
        for (k, o) in keys.chunks(8192 * b).zip(out.chunks_mut(8192)) {
            test_insert_columns(&mut files, k, o).unwrap();
        }
    } else {
        let mut bands = BandSet::new(files).unwrap();
        for (k, o) in keys.chunks(8192 * b).zip(out.chunks_mut(8192)) {
            match rule {
                "first" => bands.query_insert(k, o).unwrap(),
                "all" => bands.test_insert(k, o).unwrap(),
                _ => panic!("rule: first, all or all-columns"),
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    (0..b).for_each(|i| std::fs::remove_file(dir.join(format!("band-{i}.{ext}"))).unwrap());
    (secs, out)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: usize| args.get(i).map_or(d, |s| s.parse().unwrap());
    let (n, b, repeat) = (arg(1, 200_000), arg(2, 85), arg(3, 3));
    let which = args.get(4).map_or("both", String::as_str);
    let rule = args.get(5).map_or("first", String::as_str);
    let p_band = -((-1e-5f64).ln_1p() / b as f64).exp_m1();
    let root = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let dir = root.join(format!("lshbloom-filters-pass-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let keys = band_matrix(n, b);
    let (mut best_b, mut best_c) = (f64::INFINITY, f64::INFINITY);
    let mut differ = 0;
    for _ in 0..repeat {
        let mut reference = None;
        if which != "cuckoo" {
            let (s, out) = run::<_native::filters::blocked::Blocked>(&dir, "bbf", &keys, n, b, p_band, rule);
            best_b = best_b.min(s);
            reference = Some(out);
        }
        if which != "blocked" {
            let (s, out) = run::<_native::filters::cuckoo::Cuckoo>(&dir, "cbf", &keys, n, b, p_band, rule);
            best_c = best_c.min(s);
            if let Some(r) = reference {
                // The layouts' false positives differ: a few decisions may too.
                differ = r.iter().zip(&out).filter(|(x, y)| x != y).count();
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let keys_per_s = |s: f64| (n * b) as f64 / s / 1e6;
    println!(
        "docs {n} bands {b} p_band {p_band:.3e} rule {rule}: blocked {:.2} M keys/s, cuckoo {:.2} M keys/s, cuckoo/blocked {:.3}, decisions differing {differ}",
        keys_per_s(best_b),
        keys_per_s(best_c),
        best_b / best_c
    );
}
