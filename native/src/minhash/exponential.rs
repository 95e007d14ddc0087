//! Exp(1) variates from a stream of random words by Marsaglia and Tsang's
//! ziggurat (2000, 256 layers): one table lookup, one compare and one multiply
//! for 98.9 % of the draws, a logarithm only in the rare rejection path. The
//! draw is a fixed function of the words it reads, which is all the `poisson`
//! sketch needs to be deterministic.

use std::sync::OnceLock;

/// The start of the tail layer.
const R: f64 = 7.697_117_470_131_487;
/// The area of every layer.
const V: f64 = 3.949_659_822_581_572e-3;
const M2: f64 = 4_294_967_296.0;

pub(super) struct Tables {
    pub(super) ke: [u32; 256],
    pub(super) we: [f64; 256],
    fe: [f64; 256],
}

pub(super) fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let (mut ke, mut we, mut fe) = ([0u32; 256], [0f64; 256], [0f64; 256]);
        let q = V / (-R).exp();
        ke[0] = ((R / q) * M2) as u32;
        ke[1] = 0;
        we[0] = q / M2;
        we[255] = R / M2;
        fe[0] = 1.0;
        fe[255] = (-R).exp();
        let (mut de, mut te) = (R, R);
        for i in (1..=254).rev() {
            de = -(V / de + (-de).exp()).ln();
            ke[i + 1] = ((de / te) * M2) as u32;
            te = de;
            fe[i] = (-de).exp();
            we[i] = de / M2;
        }
        Tables { ke, we, fe }
    })
}

/// A uniform in (0, 1] from a word's low 32 bits.
#[inline(always)]
fn uniform(r: u64) -> f64 {
    ((r & 0xFFFF_FFFF) + 1) as f64 * (1.0 / M2)
}

/// An Exp(1) variate from the low 32 bits of `r`, drawing more words from
/// `next` only when the first is rejected.
#[inline(always)]
pub(crate) fn exponential(r: u64, next: &mut impl FnMut() -> u64) -> f64 {
    match exponential_fast(r) {
        Some(x) => x,
        None => rejected(tables(), r as u32, next),
    }
}

/// The ziggurat's fast path alone: the draw of [`exponential`] when the
/// first word is accepted (98.9 %), else `None`. Lets a hot loop keep its
/// random state in registers and leave the rejection to an outlined call.
#[inline(always)]
pub(crate) fn exponential_fast(r: u64) -> Option<f64> {
    let t = tables();
    let jz = r as u32;
    let iz = (jz & 255) as usize;
    (jz < t.ke[iz]).then(|| f64::from(jz) * t.we[iz])
}

#[cold]
fn rejected(t: &Tables, mut jz: u32, next: &mut impl FnMut() -> u64) -> f64 {
    let mut iz = (jz & 255) as usize;
    loop {
        if iz == 0 {
            return R - uniform(next()).ln();
        }
        let x = f64::from(jz) * t.we[iz];
        if t.fe[iz] + uniform(next()) * (t.fe[iz - 1] - t.fe[iz]) < (-x).exp() {
            return x;
        }
        jz = next() as u32;
        iz = (jz & 255) as usize;
        if jz < t.ke[iz] {
            return f64::from(jz) * t.we[iz];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::lines::splitmix;

    #[test]
    fn draws_follow_exp1() {
        let n = 2_000_000usize;
        let mut st = 12345u64;
        let mut xs: Vec<f64> = (0..n)
            .map(|_| {
                let r = splitmix(&mut st);
                let mut next = || splitmix(&mut st);
                exponential(r, &mut next)
            })
            .collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        // sd of the mean 1/sqrt(n) = 0.0007, of the variance sqrt(8/n) = 0.002: 5 sd.
        assert!((mean - 1.0).abs() < 0.0035, "mean {mean}");
        assert!((var - 1.0).abs() < 0.01, "variance {var}");
        // Kolmogorov-Smirnov against 1 - e^-x: the 0.1 % critical value is 1.95/sqrt(n).
        xs.sort_by(f64::total_cmp);
        let d = xs
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let f = -(-x).exp_m1();
                (f - i as f64 / n as f64).abs().max(((i + 1) as f64 / n as f64 - f).abs())
            })
            .fold(0.0, f64::max);
        assert!(d < 1.95 / (n as f64).sqrt(), "KS distance {d}");
        // The tail beyond the ziggurat's base layer is reached and right: P[X > R] = e^-R.
        let tail = xs.iter().filter(|&&x| x > R).count() as f64 / n as f64;
        assert!(tail > 0.0 && (tail - (-R).exp()).abs() < 5.0 * ((-R).exp() / n as f64).sqrt());
    }
}
