//! MurmurHash3_x64_128 (a port of pybloomfiltermmap3's MurmurHash3.c,
//! little-endian): the pybloomfiltermmap3 format's key hash, and its 64-bit
//! finalizer `fmix64`, which the `Mix` band keys use too.

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

#[inline(always)]
pub(crate) fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// MurmurHash3_x64_128 of `data` with a 32-bit seed; returns (h1, h2): the
/// reference the specialized [`murmur3_u64`] is tested against.
#[cfg(test)]
pub(crate) fn murmur3_x64_128(data: &[u8], seed: u32) -> (u64, u64) {
    let len = data.len();
    let mut h1 = u64::from(seed);
    let mut h2 = u64::from(seed);
    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let mut k1 = u64::from_le_bytes(block[0..8].try_into().unwrap());
        let mut k2 = u64::from_le_bytes(block[8..16].try_into().unwrap());
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
        h1 = h1.rotate_left(27).wrapping_add(h2).wrapping_mul(5).wrapping_add(0x52dc_e729);
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
        h2 = h2.rotate_left(31).wrapping_add(h1).wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    let mut k1 = 0u64;
    let mut k2 = 0u64;
    for (i, &byte) in tail.iter().enumerate() {
        if i < 8 {
            k1 ^= u64::from(byte) << (8 * i);
        } else {
            k2 ^= u64::from(byte) << (8 * (i - 8));
        }
    }
    if tail.len() > 8 {
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
    }
    if !tail.is_empty() {
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
    }
    finalize(h1, h2, len as u64)
}

/// The last step of MurmurHash3_x64_128, over a message of `len` bytes.
#[inline(always)]
fn finalize(mut h1: u64, mut h2: u64, len: u64) -> (u64, u64) {
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// MurmurHash3_x64_128 of the 8 little-endian bytes of `key` (specialized).
#[inline(always)]
pub(crate) fn murmur3_u64(key: u64, seed: u32) -> (u64, u64) {
    let h1 = u64::from(seed) ^ key.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
    finalize(h1, u64::from(seed), 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur3_known_vectors() {
        // Reference outputs of the C MurmurHash3_x64_128 (as used by mmh3.hash128 /
        // mmh3.hash64, little-endian halves).
        assert_eq!(murmur3_x64_128(b"", 0), (0, 0));
        assert_eq!(
            murmur3_x64_128(b"hello", 0),
            (0xcbd8a7b341bd9b02, 0x5b1e906a48ae1d19)
        );
        assert_eq!(
            murmur3_x64_128(b"The quick brown fox jumps over the lazy dog", 0),
            (0xe34bbc7bbc071b6c, 0x7a433ca9c49a9347)
        );
    }

    #[test]
    fn murmur3_u64_specialization_matches_generic() {
        let mut x = 0x0123_4567_89ab_cdefu64;
        for seed in [0u32, 1, 42, 0xFFFF_FFFF, 2_147_483_648] {
            for _ in 0..1000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                assert_eq!(murmur3_u64(x, seed), murmur3_x64_128(&x.to_le_bytes(), seed));
            }
        }
    }

    #[test]
    fn murmur3_all_tail_lengths() {
        // MurmurHash3_x64_128(bytes 0, 1, ..., len-1; seed 7), from the C source
        // compiled as is (pybloomfiltermmap3-0.6.3/src/MurmurHash3.c).
        const EXPECTED: &[(usize, u64, u64)] = &[
            (0, 0xf402c55ac5dec98f, 0x2de586f681711c02),
            (1, 0x7d480f9fa80ec469, 0x719af4070b74d89d),
            (2, 0xe782918eb8b27e84, 0x008f0e9b03c4ab1c),
            (3, 0x72ca291a6a777918, 0x1f31ec190045b159),
            (4, 0xee50d1d3f7ce76ab, 0x3d32fe53f455d0ac),
            (5, 0x89977ab6ddbbfa1e, 0x14a47f01c8a25694),
            (6, 0x1f57c8a69f7a7e91, 0x13ce9b785340fa25),
            (7, 0xd957d6ca33cdb458, 0xc603c22f4db48e84),
            (8, 0xb1add0ce5e581561, 0xbb431fe101d9f8f4),
            (9, 0xdc2366f6bc543c1c, 0xf9328dba8f5f8217),
            (10, 0x84bfddeb15040a1e, 0x8f2e83c960036bec),
            (11, 0x14d2ce892ad595a7, 0xedbb07d04e6feca5),
            (12, 0x2ff54948468a1945, 0xb97b510dfb038b57),
            (13, 0xdabd72ebe3032eea, 0xdcb62a4db60b577e),
            (14, 0x73e4765cebd53674, 0xf9bb7c88f5e61c8b),
            (15, 0x688bea6b8b27a4ae, 0x1955659341ae9e4b),
            (16, 0xbdccfbf89cfd226f, 0xfe917a495ceec318),
            (17, 0x779e800196ee1661, 0x0edef569f03ff70b),
            (18, 0x9560d0deaff5d8ba, 0x203eb0ce438ba5b2),
            (19, 0x3555ea0d60a9b9ba, 0x1ebb9df91d23e0f7),
            (20, 0x0145ea95e7b8f63e, 0xe217fd399d03054f),
            (21, 0x956af06e2789ab6b, 0x0f8c1707ad220ef7),
            (22, 0xf4fc21cd01c25740, 0xc28e2f2ba16ffb26),
            (23, 0xb5c714b6795025ba, 0x0a3d1dc90daf6960),
            (24, 0xf4efcaaae938c3cc, 0x86c3b81454570ad0),
            (25, 0xb5c90f3689eec1e0, 0xd0375b1140279277),
            (26, 0x7f3d8c6e9ef38984, 0xd1d7691c1ea44bb8),
            (27, 0x071184fa9465c6b1, 0xdc02d99e6b1e7abc),
            (28, 0x4ef5dabc5202871b, 0x448586906a510c6d),
            (29, 0x315e16ddd4e230b4, 0x10c106308da15dac),
            (30, 0x4e842f25c6f38330, 0xe4185866f257f31a),
            (31, 0x04365954be67f77e, 0x5a9e408d5359e11c),
            (32, 0x39a625dafaff2a0f, 0x471ed6ce98720555),
            (33, 0xc01074f451f7d7f0, 0x66d3eaa938ac0eb5),
            (34, 0x548401b8346762cb, 0xd2cbc7b875568a27),
            (35, 0x56a3f8161cd5c18e, 0x24b68eee6bf686d6),
            (36, 0x5bc46b6c00ec6022, 0xf8a29522b82125e9),
            (37, 0xdfa273e707b3b1a6, 0xa00e3d0be380f002),
            (38, 0xa109b985c9fb40eb, 0x12776b8094aaa632),
            (39, 0xb16adbae50ede124, 0x767a04c6c91fb43c),
            (40, 0x345a060429ccb14b, 0xe3e244e7186f73c9),
        ];
        let data: Vec<u8> = (0..40u8).collect();
        for &(len, h1, h2) in EXPECTED {
            assert_eq!(murmur3_x64_128(&data[..len], 7), (h1, h2), "len {len}");
        }
        // 8-byte key, seed 42.
        assert_eq!(
            murmur3_x64_128(&123_456_789u64.to_le_bytes(), 42),
            (0x99598a7d2e0a8c2b, 0x93d587ff0c99c65e)
        );
        assert_eq!(murmur3_u64(123_456_789, 42), (0x99598a7d2e0a8c2b, 0x93d587ff0c99c65e));
    }
}
