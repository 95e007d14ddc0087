//! Tests of `poisson` (a file of their own: the module stays readable).

use super::*;

/// The dispatched sketch (AVX-512 where the CPU has it), checked
/// against the scalar one.
fn sketch_of(p: &PoissonSketch, hashes: &[u64]) -> Vec<u32> {
    let (mut sig, mut scalar) = (vec![0u32; p.num_perm()], vec![0u32; p.num_perm()]);
    p.sketch(hashes, &mut sig, &mut Walks::default());
    p.sketch_on(Path::Scalar, hashes, &mut scalar, &mut Walks::default());
    assert_eq!(sig, scalar);
    sig
}

/// The reference: every shingle's first arrival in every bin, walked until
/// each bin has one (no horizon at all), then the minimum per bin.
fn naive(p: &PoissonSketch, hashes: &[u64]) -> Vec<u32> {
    let k = p.num_perm();
    let mut sig = vec![EMPTY; k];
    for &h in hashes {
        let mut first = vec![EMPTY; k];
        let mut left = k;
        let mut state = h;
        let mut t = 0.0f64;
        while left > 0 {
            let (r, gap) = next_arrival(&mut state);
            t += gap;
            let j = bin(r, k);
            if first[j] == EMPTY {
                first[j] = (t as f32).to_bits();
                left -= 1;
            }
        }
        for j in 0..k {
            sig[j] = sig[j].min(first[j]);
        }
    }
    sig
}

fn hashes(p: &PoissonSketch, n: usize, base: usize) -> Vec<u64> {
    (base..base + n).map(|i| p.shingle_hash(format!("shingle {i}").as_bytes())).collect()
}

#[test]
fn equals_the_walk_without_horizon() {
    for k in [1usize, 2, 7, 64, 300] {
        let p = PoissonSketch::new(k, 42);
        for n in [1usize, 2, 5, 50, 1000] {
            let hs = hashes(&p, n, 0);
            assert_eq!(sketch_of(&p, &hs), naive(&p, &hs), "k={k} n={n}");
        }
    }
    // Many documents, so that some fill every row in the first horizon
    // and others need one or more extensions.
    let p = PoissonSketch::new(64, 5);
    for base in 0..60 {
        let hs = hashes(&p, 1 + base % 40, 1000 * base);
        assert_eq!(sketch_of(&p, &hs), naive(&p, &hs), "base={base}");
    }
}

#[test]
fn empty_is_max_and_repeats_and_order_do_not_matter() {
    let p = PoissonSketch::new(16, 7);
    assert_eq!(sketch_of(&p, &[]), vec![u32::MAX; 16]);
    let hs = hashes(&p, 40, 0);
    let mut again: Vec<u64> = hs.iter().rev().copied().collect();
    again.extend(hs.iter().copied().take(30));
    assert_eq!(sketch_of(&p, &hs), sketch_of(&p, &again));
    assert!(sketch_of(&p, &hs).iter().all(|&v| v != EMPTY));
}

#[test]
fn a_shingle_repeated_many_times_is_sketched_as_its_distinct_shingles() {
    // Repeats outnumbering the distinct shingles take the sketch over the distinct ones (PoissonSketch::run):
    // the same signature as the walk without horizon, on both paths.
    for k in [16usize, 256] {
        let p = PoissonSketch::new(k, 9);
        let distinct = hashes(&p, 3, 0);
        let repeated: Vec<u64> = (0..20_000).map(|i| distinct[i % 3]).collect();
        assert_eq!(sketch_of(&p, &repeated), naive(&p, &distinct), "k={k}");
        let one = vec![distinct[0]; 100_000];
        assert_eq!(sketch_of(&p, &one), naive(&p, &distinct[..1]), "k={k}");
    }
}

#[test]
fn row_of_a_union_is_the_min_of_the_rows() {
    // The defining property of a MinHash row, whatever the horizon each
    // document's size picked.
    let p = PoissonSketch::new(128, 3);
    let a = hashes(&p, 10, 0);
    let b = hashes(&p, 3000, 5);
    let union: Vec<u64> = a.iter().chain(&b).copied().collect();
    let (sa, sb, su) = (sketch_of(&p, &a), sketch_of(&p, &b), sketch_of(&p, &union));
    for j in 0..128 {
        assert_eq!(su[j], sa[j].min(sb[j]));
    }
}

#[test]
fn seed_changes_the_hash() {
    let (p1, p2) = (PoissonSketch::new(8, 1), PoissonSketch::new(8, 2));
    assert_ne!(p1.shingle_hash(b"a b c d"), p2.shingle_hash(b"a b c d"));
    assert_eq!(p1.shingle_hash(b"a b c d"), xxh3_64_with_seed(b"a b c d", 1));
}

#[test]
fn matching_rows_estimate_jaccard() {
    // Sets of 30 shingles (fewer than k) sharing 20: J = 20/40.
    let p = PoissonSketch::new(4096, 9);
    let a = hashes(&p, 30, 0);
    let b = hashes(&p, 30, 10);
    let (sa, sb) = (sketch_of(&p, &a), sketch_of(&p, &b));
    let matches = sa.iter().zip(&sb).filter(|(x, y)| x == y).count() as f64 / 4096.0;
    // sd = sqrt(0.25 / 4096) = 0.0078: 5 sd.
    assert!((matches - 0.5).abs() < 0.04, "{matches}");
}
