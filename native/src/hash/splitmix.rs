//! SplitMix64 (Steele, Lea and Flood 2014): the one home of its finalizer and
//! its generator, which the Poisson sketch's arrival streams, the filters'
//! rate measurements and verification's key mixing all use.

/// The generator's increment (the golden ratio's 64-bit fraction).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The finalizer: a bijection on u64 that spreads every input bit over the
/// output (so structured keys, such as datasketch's band sums, spread too).
#[inline(always)]
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The next value of the stream whose state is `state`.
#[inline(always)]
pub fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GAMMA);
    mix(*state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_streams_values() {
        // SplitMix64 seeded with 0 (the values of the reference implementation, Vigna's splitmix64.c).
        let mut state = 0u64;
        assert_eq!(next(&mut state), 0xE220_A839_7B1D_CDAF);
        assert_eq!(next(&mut state), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(next(&mut state), 0x06C4_5D18_8009_454F);
    }
}
