//! Sizing a cuckoo filter by its false-positive rate (see the module docs of
//! `cuckoo`).

use super::{BUCKET_BITS, MAX_FP_BITS, MIN_FP_BITS};

/// The designed maximum load, as a fraction: slots filled at capacity ≤ 18/20.
/// Past ~90 % buckets fill and inserts kick (a random walk of cache misses);
/// the driver pass at 95 % ran at 0.7x its speed at 90 % (docs/benchmarks.md).
pub(crate) const MAX_LOAD_NUM: u64 = 18;
pub(crate) const MAX_LOAD_DEN: u64 = 20;

/// Fingerprint widths that fill whole SIMD lanes: a bucket's scan is one
/// compare per half line (AVX2) instead of a gather per four slots (the
/// driver pass ~1.3x faster; docs/benchmarks.md).
pub(crate) const LANE_WIDTHS: [u32; 4] = [8, 16, 32, 64];

/// A lane width is chosen when it needs at most this many times the buckets
/// of the least width: up to 15 % more bytes for the faster scan. At the
/// defaults' per-band rates (~1e-7) that is 32-bit fingerprints, 1.125x the
/// buckets of 28-bit ones and ~1.05x a classic Bloom filter's bits.
pub(crate) const LANE_SLACK: f64 = 1.15;

/// Is `fp_bits` one of [`LANE_WIDTHS`]?
#[inline(always)]
pub(crate) fn is_lane_width(fp_bits: u32) -> bool {
    LANE_WIDTHS.contains(&fp_bits)
}

/// A filter's shape: fingerprint bits, slots per bucket, buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub(crate) fp_bits: u32,
    pub(crate) slots: u32,
    pub(crate) num_buckets: u64,
}

/// Slots of `fp_bits` bits in one 512-bit bucket.
pub(crate) fn slots_for(fp_bits: u32) -> u32 {
    BUCKET_BITS / fp_bits
}

/// `1 − (1 − q)^(2n/B)`, `q = 1/(2^f − 1)`: the rate of `num_buckets`
/// buckets of `fp_bits`-bit fingerprints holding `n` keys.
pub(crate) fn fp_rate(n: f64, num_buckets: u64, fp_bits: u32) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    let q = 1.0 / ((fp_bits as f64).exp2() - 1.0);
    -((2.0 * n / num_buckets as f64) * (-q).ln_1p()).exp_m1()
}

/// The least B with `fp_rate(n, B, f) ≤ p` (the closed form, then corrected
/// for rounding); None if it is beyond 2^62.
fn buckets_for_rate(n: u64, p: f64, fp_bits: u32) -> Option<u64> {
    let q = 1.0 / ((fp_bits as f64).exp2() - 1.0);
    let b = (2.0 * n as f64 * (-q).ln_1p() / (-p).ln_1p()).ceil();
    if b.is_nan() || b >= (1u64 << 62) as f64 {
        return None;
    }
    let mut b = (b as u64).max(1);
    while fp_rate(n as f64, b, fp_bits) > p {
        b += 1;
    }
    while b > 1 && fp_rate(n as f64, b - 1, fp_bits) <= p {
        b -= 1;
    }
    Some(b)
}

/// The least B keeping `n` keys at most [`MAX_LOAD_NUM`] / [`MAX_LOAD_DEN`] of the slots.
fn buckets_for_load(n: u64, slots: u32) -> u64 {
    let num = u128::from(n) * u128::from(MAX_LOAD_DEN);
    let den = u128::from(MAX_LOAD_NUM) * u128::from(slots);
    num.div_ceil(den).max(1) as u64
}

/// The cuckoo filter for `capacity` keys at rate `error_rate`: the fewest
/// buckets over the lane widths if that is within [`LANE_SLACK`] of the
/// fewest over every width, else the fewest over every width.
pub(crate) fn geometry(capacity: u64, error_rate: f64) -> Result<Geometry, String> {
    let least = least_geometry(capacity, error_rate, MIN_FP_BITS..=MAX_FP_BITS)?;
    match least_geometry(capacity, error_rate, LANE_WIDTHS) {
        Ok(lanes) if lanes.num_buckets as f64 <= least.num_buckets as f64 * LANE_SLACK => Ok(lanes),
        _ => Ok(least),
    }
}

/// The fewest buckets over the fingerprint widths `widths` (ties: the wider).
fn least_geometry(capacity: u64, error_rate: f64, widths: impl IntoIterator<Item = u32>) -> Result<Geometry, String> {
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(format!("error_rate must be in (0, 1), got {error_rate}"));
    }
    if capacity == 0 {
        return Err("capacity must be >= 1".into());
    }
    let mut best: Option<Geometry> = None;
    for f in widths {
        let slots = slots_for(f);
        let Some(by_rate) = buckets_for_rate(capacity, error_rate, f) else { continue };
        let b = by_rate.max(buckets_for_load(capacity, slots));
        if best.is_none_or(|g| b <= g.num_buckets) {
            best = Some(Geometry { fp_bits: f, slots, num_buckets: b });
        }
    }
    best.ok_or_else(|| "cuckoo filter too large".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classic_bits(n: f64, p: f64) -> f64 {
        -n * p.ln() / std::f64::consts::LN_2.powi(2)
    }

    #[test]
    fn geometry_meets_rate_and_load_and_is_least() {
        for (n, p) in [(1_000u64, 1e-2), (1_000_000, 1e-3), (1_000_000, 1.2e-7), (1_000_000_000, 1.2e-12)] {
            let g = geometry(n, p).unwrap();
            assert!(fp_rate(n as f64, g.num_buckets, g.fp_bits) <= p);
            assert!(n * MAX_LOAD_DEN <= g.num_buckets * u64::from(g.slots) * MAX_LOAD_NUM);
            // No width does better with fewer buckets than the slack allows
            // (none at all unless a lane width was chosen).
            let slack = if is_lane_width(g.fp_bits) { LANE_SLACK } else { 1.0 };
            let b = ((g.num_buckets as f64 / slack).ceil() as u64).min(g.num_buckets) - 1;
            for f in MIN_FP_BITS..=MAX_FP_BITS {
                let fits = fp_rate(n as f64, b, f) <= p && n * MAX_LOAD_DEN <= b * u64::from(slots_for(f)) * MAX_LOAD_NUM;
                assert!(!fits, "n {n} p {p}: f {f} fits in {b} buckets");
            }
        }
    }

    #[test]
    fn lane_width_at_the_defaults_rate() {
        // p_effective 1e-5 over 64 bands (grow: generation 0 at half of it).
        for p in [1.5625e-7, 7.8125e-8] {
            let g = geometry(10_000_000, p).unwrap();
            assert_eq!((g.fp_bits, g.slots), (32, 16), "p {p}");
        }
        // Far from it the least width wins.
        assert!(!is_lane_width(geometry(10_000_000, 1e-5).unwrap().fp_bits));
    }

    #[test]
    fn about_classic_bloom_bits_at_low_rates() {
        let n = 10_000_000u64;
        for (p, most) in [(1.5625e-7, 1.10), (7.8125e-8, 1.05), (1.2e-12, 0.92), (1e-5, 1.05)] {
            let g = geometry(n, p).unwrap();
            let ratio = (g.num_buckets * 512) as f64 / classic_bits(n as f64, p);
            assert!(ratio <= most, "p {p}: {ratio}x classic");
        }
    }

    #[test]
    fn rejects_bad_arguments() {
        assert!(geometry(0, 1e-3).is_err());
        assert!(geometry(10, 0.0).is_err());
        assert!(geometry(10, 1.0).is_err());
    }
}
