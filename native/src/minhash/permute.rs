//! The permutation kernels: for every shingle hash, `sig[k] = min(sig[k],
//! phv_k(h))`. One portable body per scheme, compiled again under
//! `#[target_feature]` and picked at run time, so one wheel runs everywhere.

use super::{fmix32, mod_mersenne61};

#[inline(always)]
fn affine32_body(a: &[u32], b: &[u32], hashes: &[u32], sig: &mut [u32]) {
    let k = sig.len();
    let (a, b) = (&a[..k], &b[..k]);
    // Four hashes per pass over the signature: a quarter of the loads/stores of
    // `sig`, `a` and `b`; each inner loop is a plain slice loop LLVM vectorizes.
    let mut chunks = hashes.chunks_exact(4);
    for c in &mut chunks {
        let (h0, h1, h2, h3) = (fmix32(c[0]), fmix32(c[1]), fmix32(c[2]), fmix32(c[3]));
        for ((s, &ak), &bk) in sig.iter_mut().zip(a).zip(b) {
            let v0 = ak.wrapping_mul(h0).wrapping_add(bk);
            let v1 = ak.wrapping_mul(h1).wrapping_add(bk);
            let v2 = ak.wrapping_mul(h2).wrapping_add(bk);
            let v3 = ak.wrapping_mul(h3).wrapping_add(bk);
            *s = (*s).min(v0.min(v1)).min(v2.min(v3));
        }
    }
    for &h in chunks.remainder() {
        let h = fmix32(h);
        for ((s, &ak), &bk) in sig.iter_mut().zip(a).zip(b) {
            *s = (*s).min(ak.wrapping_mul(h).wrapping_add(bk));
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn affine32_avx2(a: &[u32], b: &[u32], hashes: &[u32], sig: &mut [u32]) {
    affine32_body(a, b, hashes, sig)
}

/// The same loop compiled for AVX-512 (16 lanes of vpmulld/vpaddd/vpminud).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn affine32_avx512(a: &[u32], b: &[u32], hashes: &[u32], sig: &mut [u32]) {
    affine32_body(a, b, hashes, sig)
}

fn affine32_generic(a: &[u32], b: &[u32], hashes: &[u32], sig: &mut [u32]) {
    affine32_body(a, b, hashes, sig)
}

/// The widest kernel this CPU runs (detected once): "avx512", "avx2" or "generic".
pub(crate) fn simd_backend() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "avx512";
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return "avx2";
        }
    }
    "generic"
}

/// affine32 update: AVX-512 or AVX2 when the CPU has it (detected at run
/// time, so one wheel runs everywhere), else portable code.
pub fn update_affine32(a: &[u32], b: &[u32], hashes: &[u32], sig: &mut [u32]) {
    assert!(a.len() >= sig.len() && b.len() >= sig.len());
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            unsafe { affine32_avx512(a, b, hashes, sig) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            unsafe { affine32_avx2(a, b, hashes, sig) };
            return;
        }
    }
    affine32_generic(a, b, hashes, sig)
}

#[inline(always)]
fn legacy_body(a: &[u64], b: &[u64], hashes: &[u32], sig: &mut [u32]) {
    let k = sig.len();
    let (a, b) = (&a[..k], &b[..k]);
    for &h in hashes {
        let h = u64::from(h);
        for ((s, &ak), &bk) in sig.iter_mut().zip(a).zip(b) {
            let v = (mod_mersenne61(ak.wrapping_mul(h).wrapping_add(bk)) & 0xFFFF_FFFF) as u32;
            *s = (*s).min(v);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn legacy_avx2(a: &[u64], b: &[u64], hashes: &[u32], sig: &mut [u32]) {
    legacy_body(a, b, hashes, sig)
}

/// legacy update, AVX2 when the CPU has it.
pub fn update_legacy(a: &[u64], b: &[u64], hashes: &[u32], sig: &mut [u32]) {
    assert!(a.len() >= sig.len() && b.len() >= sig.len());
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            unsafe { legacy_avx2(a, b, hashes, sig) };
            return;
        }
    }
    legacy_body(a, b, hashes, sig)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{lcg, naive_affine};
    use super::super::MERSENNE61;
    use super::*;

    #[test]
    fn affine32_matches_naive_for_all_remainders() {
        let mut st = 7u64;
        for k in [1usize, 7, 8, 9, 128, 256, 257] {
            let a: Vec<u32> = (0..k).map(|_| (lcg(&mut st) as u32) | 1).collect();
            let b: Vec<u32> = (0..k).map(|_| lcg(&mut st) as u32).collect();
            for nh in 0..10 {
                let hashes: Vec<u32> = (0..nh).map(|_| lcg(&mut st) as u32).collect();
                let mut sig = vec![u32::MAX; k];
                update_affine32(&a, &b, &hashes, &mut sig);
                assert_eq!(sig, naive_affine(&a, &b, &hashes));
                let mut sig2 = vec![u32::MAX; k];
                affine32_generic(&a, &b, &hashes, &mut sig2);
                assert_eq!(sig2, sig);
                #[cfg(target_arch = "x86_64")]
                {
                    if std::arch::is_x86_feature_detected!("avx2") {
                        let mut s3 = vec![u32::MAX; k];
                        // SAFETY: AVX2 present (checked).
                        unsafe { affine32_avx2(&a, &b, &hashes, &mut s3) };
                        assert_eq!(s3, sig);
                    }
                    if std::arch::is_x86_feature_detected!("avx512f") {
                        let mut s4 = vec![u32::MAX; k];
                        // SAFETY: AVX-512F present (checked).
                        unsafe { affine32_avx512(&a, &b, &hashes, &mut s4) };
                        assert_eq!(s4, sig);
                    }
                }
            }
        }
    }

    #[test]
    fn legacy_matches_u128_arithmetic() {
        let mut st = 99u64;
        let k = 33;
        let a: Vec<u64> = (0..k).map(|_| 1 + lcg(&mut st) % (MERSENNE61 - 1)).collect();
        let b: Vec<u64> = (0..k).map(|_| lcg(&mut st) % MERSENNE61).collect();
        let hashes: Vec<u32> = (0..17).map(|_| lcg(&mut st) as u32).chain([0, u32::MAX]).collect();
        let mut sig = vec![u32::MAX; k];
        update_legacy(&a, &b, &hashes, &mut sig);
        for kk in 0..k {
            let expect = hashes
                .iter()
                .map(|&h| {
                    let x = (u128::from(a[kk]) * u128::from(h) + u128::from(b[kk])) % (1u128 << 64);
                    ((x % u128::from(MERSENNE61)) & 0xFFFF_FFFF) as u32
                })
                .min()
                .unwrap();
            assert_eq!(sig[kk], expect);
        }
    }
}
