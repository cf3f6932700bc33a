//! The random draws of the noise operators, as pure functions of a Philox key and counter:
//! every element's (or pixel's) draw depends on nothing but the sample's stream and the
//! element's index, so any split of the work over threads, chunks or GPU threads gives the
//! same values. `noise.cu` is the CUDA twin of every function here, operation for
//! operation (its sums and products are `__dadd_rn`/`__dmul_rn`, so NVRTC fuses none of
//! them). Normals are `rng::box_muller`'s, whose logarithm, sine and cosine are written out
//! in both (the same bits); only the Poisson draws' `ln` and `exp` are the platform's (glibc
//! here, CUDA's libdevice there, which may differ in the last bit).
//!
//! - [`block`]: block `k` of a sample stream of `rng.rs` (`SampleRng`), salt-and-pepper's
//!   draws for pixels `2k` (words 0-1) and `2k + 1` (words 2-3). (Gaussian noise draws with `rng::normals`, two normals a block, so
//!   that element `e` is `random.normal`'s value `e`.)
//! - [`poisson`]: a Poisson draw from a stream of its own per element (a key derived from the
//!   sample stream, [`element_key`]; the counter holds the element index and the round), as
//!   it needs a varying number of uniforms: inversion below λ = 10 (one uniform), Hörmann's
//!   PTRS transformed rejection from 10 (one block per round, ~1.1 rounds on average; NumPy's
//!   `random_poisson_ptrs` with its `loggam`), a normal approximation from λ = 1e10, where
//!   PTRS's log-density difference loses its precision and the skew (1/√λ) is below 1e-5.


pub(super) use crate::rng::u53;
use crate::rng::philox4x32_10;

/// Block `k` of the stream named by `key` and counter words `stream` (`SampleRng::key_and_stream`).
/// `k` wraps at 2^32, as the stream's own counter does.
#[inline(always)]
pub(super) fn block(key: [u32; 2], stream: [u32; 3], k: u64) -> [u32; 4] {
    philox4x32_10([k as u32, stream[0], stream[1], stream[2]], key)
}

/// The key of the per-element streams of one sample: the first two words of block 2^32 - 1
/// of the sample stream (a block the Poisson draws never read otherwise). A per-element
/// stream then counts `[round, element low, element high, 0]` under it.
pub(super) fn element_key(key: [u32; 2], stream: [u32; 3]) -> [u32; 2] {
    let b = block(key, stream, u32::MAX as u64);
    [b[0], b[1]]
}

/// Round `j` of element `e`'s stream under an [`element_key`].
#[inline(always)]
fn element_block(key: [u32; 2], e: u64, j: u32) -> [u32; 4] {
    philox4x32_10([j, e as u32, (e >> 32) as u32, 0], key)
}


/// A standard normal from one block, as `SampleRng::normal` computes it from the same block.
#[inline(always)]
pub(super) fn normal(b: [u32; 4]) -> f64 {
    crate::rng::box_muller(b).0
}

/// Below this mean, inversion; from it, PTRS.
const PTRS_FROM: f64 = 10.0;
/// From this mean on, a normal approximation.
const NORMAL_FROM: f64 = 1e10;
/// Bound on inversion steps and PTRS rounds: never reached in practice (inversion needs
/// about λ + 1 steps, PTRS accepts 9 rounds in 10), it keeps a kernel from ever spinning.
const MAX_STEPS: u32 = 1000;

/// A Poisson draw of mean `lam` (>= 0; NaN counts as 0; +inf gives +inf) for element `e`,
/// as an integral f64 (no integer type overflows, whatever the mean).
pub(super) fn poisson(lam: f64, key: [u32; 2], e: u64) -> f64 {
    if !(lam > 0.0) {
        return 0.0;
    }
    if lam < PTRS_FROM {
        // Inversion: the smallest k with u <= P(X <= k).
        let w = element_block(key, e, 0);
        let u = u53(w[0], w[1]);
        let mut p = (-lam).exp();
        let mut f = p;
        let mut k = 0.0;
        while u > f && k < MAX_STEPS as f64 {
            k += 1.0;
            p = p * lam / k;
            f += p;
        }
        return k;
    }
    if lam < NORMAL_FROM {
        // Hörmann (1993), "The transformed rejection method for generating Poisson random
        // variables", as NumPy's random_poisson_ptrs; round j reads block j.
        let slam = lam.sqrt();
        let loglam = lam.ln();
        let b = 0.931 + 2.53 * slam;
        let a = -0.059 + 0.02483 * b;
        let log_invalpha = (1.1239 + 1.1328 / (b - 3.4)).ln();
        let vr = 0.9277 - 3.6224 / (b - 2.0);
        for j in 0..MAX_STEPS {
            let w = element_block(key, e, j);
            let u = u53(w[0], w[1]) - 0.5;
            let v = u53(w[2], w[3]);
            let us = 0.5 - u.abs();
            let k = ((2.0 * a / us + b) * u + lam + 0.43).floor();
            if us >= 0.07 && v <= vr {
                return k;
            }
            if k < 0.0 || (us < 0.013 && v > us) {
                continue;
            }
            if v.ln() + log_invalpha - (a / (us * us) + b).ln() <= -lam + k * loglam - loggam(k + 1.0) {
                return k;
            }
        }
        return (lam + 0.5).floor();
    }
    if lam <= f64::MAX {
        let z = normal(element_block(key, e, 0));
        return (lam + lam.sqrt() * z + 0.5).floor().max(0.0);
    }
    lam
}

const LOGGAM_A: [f64; 10] = [
    8.333333333333333e-02, -2.777777777777778e-03, 7.936507936507937e-04, -5.952380952380952e-04, 8.417508417508418e-04,
    -1.917526917526918e-03, 6.410256410256410e-03, -2.955065359477124e-02, 1.796443723688307e-01, -1.39243221690590e+00,
];
/// ln(2π).
const LG2PI: f64 = 1.8378770664093453e+00;

/// ln Γ(x) for x >= 1: NumPy's `random_loggam` (Stirling's series from 7 up, the recurrence
/// below), operation for operation.
pub(super) fn loggam(x: f64) -> f64 {
    if x == 1.0 || x == 2.0 {
        return 0.0;
    }
    let n = if x < 7.0 { (7.0 - x) as i64 } else { 0 };
    let mut x0 = x + n as f64;
    let x2 = (1.0 / x0) * (1.0 / x0);
    let mut gl0 = LOGGAM_A[9];
    for k in (0..9).rev() {
        gl0 = gl0 * x2 + LOGGAM_A[k];
    }
    let mut gl = gl0 / x0 + 0.5 * LG2PI + (x0 - 0.5) * x0.ln() - x0;
    for _ in 0..n {
        gl -= (x0 - 1.0).ln();
        x0 -= 1.0;
    }
    gl
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SampleRng;

    #[test]
    fn block_k_is_the_block_the_sample_streams_kth_normal_reads() {
        for (seed, op, it, sample) in [(0u64, 0u64, 0u64, 0u64), (12345, 0, 3, 2), (7, 9, 1 << 33, 5)] {
            let mut rng = SampleRng::new(seed, op, it, sample);
            let (key, stream) = SampleRng::new(seed, op, it, sample).key_and_stream();
            for k in 0..40 {
                assert_eq!(normal(block(key, stream, k)).to_bits(), rng.normal().to_bits(), "value {k}");
            }
            let mut words = SampleRng::new(seed, op, it, sample);
            for k in 0..10 {
                let b = block(key, stream, k);
                for w in b {
                    assert_eq!(w, words.next_u32());
                }
            }
        }
    }

    #[test]
    fn element_streams_differ_from_each_other_and_from_the_sample_stream() {
        let (key, stream) = SampleRng::new(1, 2, 3, 4).key_and_stream();
        let ek = element_key(key, stream);
        assert_ne!(ek, key);
        assert_ne!(element_block(ek, 0, 0), element_block(ek, 1, 0));
        assert_ne!(element_block(ek, 0, 0), element_block(ek, 0, 1));
        assert_ne!(element_block(ek, 1 << 32, 0), element_block(ek, 0, 0));
        let (key2, stream2) = SampleRng::new(1, 2, 3, 5).key_and_stream();
        assert_ne!(element_key(key2, stream2), ek);
    }

    #[test]
    fn loggam_matches_lgamma() {
        for x in [1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 11.0, 50.0, 1e3] {
            // ln Γ(x) = ln((x - 1)!)
            let want: f64 = (1..(x as u64)).map(|k| (k as f64).ln()).sum::<f64>();
            let got = loggam(x);
            assert!((got - want).abs() <= 1e-12 * want.abs().max(1.0), "{x}: {got} vs {want}");
        }
        // Stirling's value at 1e10 (the sum above loses precision there).
        let x: f64 = 1e10;
        let stirling = (x - 0.5) * x.ln() - x + 0.5 * LG2PI + 1.0 / (12.0 * x);
        assert!((loggam(x) - stirling).abs() < 1e-3);
    }

    fn moments(lam: f64, n: u64) -> (f64, f64) {
        let (key, stream) = SampleRng::new(3, 1, 0, 0).key_and_stream();
        let key = element_key(key, stream);
        let xs: Vec<f64> = (0..n).map(|e| poisson(lam, key, e)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
        assert!(xs.iter().all(|x| *x >= 0.0 && x.fract() == 0.0));
        (mean, var)
    }

    #[test]
    fn poisson_has_mean_and_variance_lambda_in_every_regime() {
        let n = 40_000;
        for lam in [0.05f64, 0.7, 3.0, 9.99, 10.0, 37.5, 1000.0, 2.5e6, 3e12] {
            let (mean, var) = moments(lam, n);
            // 5 standard errors of the mean and of the variance (excess kurtosis 1/λ).
            let se_mean = (lam / n as f64).sqrt();
            let se_var = lam * ((2.0 + 1.0 / lam) / n as f64).sqrt();
            assert!((mean - lam).abs() < 5.0 * se_mean, "λ {lam}: mean {mean}");
            assert!((var - lam).abs() < 5.0 * se_var, "λ {lam}: variance {var}");
        }
    }

    #[test]
    fn poisson_small_means_follow_the_probability_mass_function() {
        let n = 100_000;
        let (key, stream) = SampleRng::new(8, 0, 2, 1).key_and_stream();
        let key = element_key(key, stream);
        for lam in [1.5f64, 12.0] {
            let mut hist = vec![0u32; 64];
            for e in 0..n {
                hist[(poisson(lam, key, e) as usize).min(63)] += 1;
            }
            let mut pk = (-lam).exp();
            for (k, &h) in hist.iter().enumerate().take(40) {
                if k > 0 {
                    pk *= lam / k as f64;
                }
                let got = h as f64 / n as f64;
                assert!((got - pk).abs() < 5.0 * (pk / n as f64).sqrt() + 1e-4, "λ {lam}, k {k}: {got} vs {pk}");
            }
        }
    }

    #[test]
    fn poisson_edge_means() {
        let key = [1, 2];
        assert_eq!(poisson(0.0, key, 0), 0.0);
        assert_eq!(poisson(-3.0, key, 0), 0.0);
        assert_eq!(poisson(f64::NAN, key, 0), 0.0);
        assert_eq!(poisson(f64::INFINITY, key, 0), f64::INFINITY);
        assert!(poisson(1e300, key, 0) > 0.0);
        assert_eq!(poisson(5.0, key, 7), poisson(5.0, key, 7));
    }
}
