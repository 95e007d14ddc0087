//! A key's bit positions in a pybloomfiltermmap3 file, besides the
//! MurmurHash3 of `crate::hash::murmur3`: the key's Python `hash()`, and the
//! fixed-divisor remainder that turns a hash into a bit position.

/// Python's `hash()` of a non-negative int that fits in a u64.
#[inline(always)]
pub(crate) fn py_int_hash(x: u64) -> u64 {
    crate::minhash::mod_mersenne61(x)
}

/// Fast `x % d` for a fixed 64-bit divisor (Lemire, Kaser & Kurz, "Faster
/// remainder by direct computation", with a 128-bit fraction: exact for all u64).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FastMod {
    d: u64,
    m: u128,
}

impl FastMod {
    pub(crate) fn new(d: u64) -> FastMod {
        assert!(d > 0);
        // ceil(2^128 / d); wraps to 0 for d == 1, which then yields 0 as required.
        FastMod {
            d,
            m: (u128::MAX / u128::from(d)).wrapping_add(1),
        }
    }

    #[inline(always)]
    pub(crate) fn rem(&self, x: u64) -> u64 {
        let low = self.m.wrapping_mul(u128::from(x));
        let d = u128::from(self.d);
        let hi = (low >> 64) * d;
        let lo = ((low as u64 as u128) * d) >> 64;
        ((hi + lo) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fastmod_matches_rem() {
        let mut x = 99u64;
        let divisors = [1u64, 2, 3, 7, 128, 1000, 31_536_008, (1 << 40) + 5, u64::MAX, u64::MAX - 1, 1 << 63];
        for &d in &divisors {
            let fm = FastMod::new(d);
            for v in [0, 1, d - 1, d, d.wrapping_add(1), u64::MAX, u64::MAX - 1] {
                assert_eq!(fm.rem(v), v % d, "{v} % {d}");
            }
            for _ in 0..20_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                assert_eq!(fm.rem(x), x % d, "{x} % {d}");
            }
        }
    }
}
