//! Sizing a blocked filter by its exact false-positive rate (see the module
//! docs of `blocked`).

use super::LANES;

const LANE_BITS: f64 = 32.0;

/// `(1 − (31/32)^j)^16`: false-positive rate of a block holding `j` keys.
#[inline]
pub(crate) fn block_fp(j: f64) -> f64 {
    (-(j * (1.0 - 1.0 / LANE_BITS).ln()).exp_m1()).abs().powi(LANES as i32)
}

/// The textbook estimate `f(n / B)` (every block at the mean load).
pub(crate) fn fp_rate_textbook(n: f64, num_blocks: u64) -> f64 {
    block_fp(n / num_blocks as f64)
}

/// The false-positive rate of a blocked filter of `num_blocks` blocks holding
/// `n` keys: `Σ_j Poisson(j; n/B) · block_fp(j)`.
pub(crate) fn fp_rate(n: f64, num_blocks: u64) -> f64 {
    let lam = n / num_blocks as f64;
    if lam <= 0.0 {
        return 0.0;
    }
    // Sum from the mode outwards until terms are negligible.
    let mode = lam.floor();
    let ln_pmf = |j: f64| -> f64 { j * lam.ln() - lam - ln_gamma(j + 1.0) };
    let mut total = 0.0;
    let mut j = mode;
    loop {
        let t = (ln_pmf(j)).exp() * block_fp(j);
        total += t;
        if (t < total * 1e-17 && j > lam + 10.0) || j > lam + 50.0 + 50.0 * lam.sqrt() {
            break;
        }
        j += 1.0;
    }
    let mut j = mode - 1.0;
    while j >= 0.0 {
        let t = (ln_pmf(j)).exp() * block_fp(j);
        total += t;
        if t < total * 1e-17 {
            break;
        }
        j -= 1.0;
    }
    total
}

/// ln Γ(x) for x ≥ 1 (Lanczos, g = 7; relative error < 1e-13 here).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, &g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The smallest number of blocks whose exact rate at `capacity` keys is at
/// most `error_rate`.
pub(crate) fn num_blocks_for(capacity: u64, error_rate: f64) -> Result<u64, String> {
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(format!("error_rate must be in (0, 1), got {error_rate}"));
    }
    if capacity == 0 {
        return Err("capacity must be >= 1".into());
    }
    let n = capacity as f64;
    let mut hi: u64 = 1;
    while fp_rate(n, hi) > error_rate {
        hi = hi.checked_mul(2).ok_or("blocked filter too large")?;
    }
    let mut lo = hi / 2; // fp(lo) > p (or lo == 0)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fp_rate(n, mid) <= error_rate {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_gamma_matches_factorials() {
        let mut f = 0.0f64;
        for j in 1..60 {
            f += (j as f64).ln();
            assert!((ln_gamma(j as f64 + 1.0) - f).abs() < 1e-9 * f.max(1.0), "{j}");
        }
    }

    #[test]
    fn exact_rate_exceeds_textbook_at_low_p() {
        // At the textbook size for 1e-7 the real rate is clearly higher.
        let n = 1_000_000f64;
        let mut b = 1u64;
        while fp_rate_textbook(n, b) > 1e-7 {
            b *= 2;
        }
        let (mut lo, mut hi) = (b / 2, b);
        while hi - lo > 1 {
            let m = (lo + hi) / 2;
            if fp_rate_textbook(n, m) <= 1e-7 {
                hi = m
            } else {
                lo = m
            }
        }
        assert!(fp_rate(n, hi) > 2e-7, "exact {} at textbook size", fp_rate(n, hi));
        let ours = num_blocks_for(1_000_000, 1e-7).unwrap();
        assert!(ours > hi);
        assert!(fp_rate(n, ours) <= 1e-7 && fp_rate(n, ours - 1) > 1e-7);
    }
}
