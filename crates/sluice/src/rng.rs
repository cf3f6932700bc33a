//! Counter-based randomness. Every random decision is a pure function of
//! (pipeline seed, operator id, iteration, sample, draw), computed with Philox4x32-10, so a
//! batch is bit-identical whatever the thread count or the order samples are processed in.

/// Philox4x32-10 block function (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
pub(crate) fn philox4x32_10(mut ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    const M0: u64 = 0xD251_1F53;
    const M1: u64 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;
    let mut k = key;
    for _ in 0..10 {
        let p0 = M0 * ctr[0] as u64;
        let p1 = M1 * ctr[2] as u64;
        ctr = [
            ((p1 >> 32) as u32) ^ ctr[1] ^ k[0],
            p1 as u32,
            ((p0 >> 32) as u32) ^ ctr[3] ^ k[1],
            p0 as u32,
        ];
        k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
    }
    ctr
}

/// Standard normals by index in the stream of `SampleRng::key_and_stream`, two per block:
/// Box-Muller on block `e / 2` gives value `e`, its cosine half for even `e` and its sine half
/// for odd `e` (the block counter wraps at 2^32). Calls `f(e, value)` for every `e` in
/// `range`, in order. Any split of the indices gives the same values, and each block gives
/// two values for one logarithm and one square root. `fn.random.normal` and
/// `fn.noise.gaussian` (and its CUDA twin in `noise.cu`) draw with it.
pub fn normals(key: [u32; 2], stream: [u32; 3], range: std::ops::Range<usize>, mut f: impl FnMut(usize, f64)) {
    let u53 = |hi: u32, lo: u32| ((((hi as u64) << 32) | lo as u64) >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
    let mut e = range.start;
    while e < range.end {
        let b = philox4x32_10([(e / 2) as u32, stream[0], stream[1], stream[2]], key);
        let u1 = 1.0 - u53(b[0], b[1]); // (0, 1]: ln is finite
        let u2 = u53(b[2], b[3]);
        let r = (-2.0 * u1.ln()).sqrt();
        let t = std::f64::consts::TAU * u2;
        if e % 2 == 1 {
            f(e, r * t.sin());
            e += 1;
            continue;
        }
        f(e, r * t.cos());
        if e + 1 < range.end {
            f(e + 1, r * t.sin());
        }
        e += 2;
    }
}

/// SplitMix64 finaliser: spreads a seed and an operator id over the 64-bit Philox key.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The random stream of one (operator, iteration, sample). Cheap to create: no state beyond
/// the key, the counter and one buffered block.
#[derive(Debug, Clone)]
pub struct SampleRng {
    key: [u32; 2],
    ctr: [u32; 4],
    block: [u32; 4],
    used: usize,
}

impl SampleRng {
    /// The stream for `sample` of `iteration` of the operator keyed by `seed` and `op_id`.
    pub fn new(seed: u64, op_id: u64, iteration: u64, sample: u64) -> SampleRng {
        let k = mix64(seed ^ mix64(op_id.wrapping_add(0x9E37_79B9_7F4A_7C15)));
        SampleRng {
            key: [k as u32, (k >> 32) as u32],
            ctr: [0, sample as u32, iteration as u32, (iteration >> 32) as u32 ^ ((sample >> 32) as u32) << 16],
            block: [0; 4],
            used: 4,
        }
    }

    /// The stream's Philox key and counter words 1..3: its block `k` (the `k`-th group of
    /// four `next_u32`, the block the `k`-th `normal()` reads) is
    /// `philox4x32_10([k, w[0], w[1], w[2]], key)`. For kernels and per-element draws that
    /// compute a block directly instead of reading the stream in order.
    pub fn key_and_stream(&self) -> ([u32; 2], [u32; 3]) {
        (self.key, [self.ctr[1], self.ctr[2], self.ctr[3]])
    }

    /// Next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        if self.used == 4 {
            self.block = philox4x32_10(self.ctr, self.key);
            self.ctr[0] = self.ctr[0].wrapping_add(1);
            self.used = 0;
        }
        let v = self.block[self.used];
        self.used += 1;
        v
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        (self.next_u32() as u64) << 32 | self.next_u32() as u64
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next_f64()
    }

    /// Uniform integer in [0, n) without modulo bias (Lemire's method). `n` must be > 0.
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            let low = m as u64;
            if low >= n.wrapping_neg() % n {
                return (m >> 64) as u64;
            }
        }
    }

    /// True with probability `p`.
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }

    /// Standard normal (Box-Muller; one value per two uniforms, so the stream position
    /// depends only on how many values were drawn).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1]: ln is finite
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normals_by_index_do_not_depend_on_the_split() {
        let (key, stream) = SampleRng::new(5, 3, 2, 1).key_and_stream();
        let mut whole = vec![0.0; 1001];
        normals(key, stream, 0..1001, |e, z| whole[e] = z);
        for (a, b) in [(0, 1), (1, 2), (3, 700), (700, 1001), (1000, 1001)] {
            let mut part = vec![f64::NAN; b - a];
            normals(key, stream, a..b, |e, z| part[e - a] = z);
            assert_eq!(part, whole[a..b], "{a}..{b}");
        }
        // Values 2j and 2j + 1 are the two halves of Box-Muller on block j.
        let b = philox4x32_10([7, stream[0], stream[1], stream[2]], key);
        let u = |hi: u32, lo: u32| ((((hi as u64) << 32) | lo as u64) >> 11) as f64 / (1u64 << 53) as f64;
        let (r, t) = ((-2.0 * (1.0 - u(b[0], b[1])).ln()).sqrt(), std::f64::consts::TAU * u(b[2], b[3]));
        assert_eq!((whole[14], whole[15]), (r * t.cos(), r * t.sin()));
        let mean = whole.iter().sum::<f64>() / 1001.0;
        let var = whole.iter().map(|z| (z - mean) * (z - mean)).sum::<f64>() / 1000.0;
        assert!(mean.abs() < 0.15 && (var - 1.0).abs() < 0.15, "mean {mean} variance {var}");
        // Neighbouring values are independent: no correlation between the halves.
        let corr = (0..500).map(|j| whole[2 * j] * whole[2 * j + 1]).sum::<f64>() / 500.0;
        assert!(corr.abs() < 0.15, "{corr}");
    }

    #[test]
    fn philox_matches_the_published_known_answer() {
        // Known-answer test from the Random123 distribution (philox4x32_10, pi digits).
        let out = philox4x32_10(
            [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
            [0xa409_3822, 0x299f_31d0],
        );
        assert_eq!(out, [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]);
    }

    #[test]
    fn same_key_same_stream_different_sample_different_stream() {
        let a: Vec<u32> = (0..8).map({ let mut r = SampleRng::new(42, 3, 7, 1); move |_| r.next_u32() }).collect();
        let b: Vec<u32> = (0..8).map({ let mut r = SampleRng::new(42, 3, 7, 1); move |_| r.next_u32() }).collect();
        let c: Vec<u32> = (0..8).map({ let mut r = SampleRng::new(42, 3, 7, 2); move |_| r.next_u32() }).collect();
        let d: Vec<u32> = (0..8).map({ let mut r = SampleRng::new(42, 4, 7, 1); move |_| r.next_u32() }).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }

    #[test]
    fn uniform_and_below_stay_in_range_and_cover_it() {
        let mut r = SampleRng::new(1, 1, 1, 1);
        let mut hits = [0u32; 5];
        for _ in 0..10_000 {
            let x = r.uniform(-2.0, 3.0);
            assert!((-2.0..3.0).contains(&x));
            hits[r.below(5) as usize] += 1;
        }
        assert!(hits.iter().all(|&h| (1800..2200).contains(&h)), "{hits:?}");
        let mean: f64 = (0..20_000).map(|_| r.normal()).sum::<f64>() / 20_000.0;
        assert!(mean.abs() < 0.03, "{mean}");
    }
}
