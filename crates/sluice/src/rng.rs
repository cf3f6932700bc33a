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
/// `fn.noise.gaussian` (and its CUDA twin in `noise.cu`, bit for bit: see [`box_muller`])
/// draw with it. Blocks go four at a time through [`box_muller_x4`], in AVX2 where the CPU
/// has it (the same operations in the same order: the same bits).
pub fn normals(key: [u32; 2], stream: [u32; 3], range: std::ops::Range<usize>, mut f: impl FnMut(usize, f64)) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked above).
        return unsafe { normals_avx2(key, stream, range, &mut f) };
    }
    normals_portable(key, stream, range, &mut f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn normals_avx2<F: FnMut(usize, f64)>(key: [u32; 2], stream: [u32; 3], range: std::ops::Range<usize>, f: &mut F) {
    normals_portable(key, stream, range, f)
}

#[inline(always)]
fn normals_portable<F: FnMut(usize, f64)>(key: [u32; 2], stream: [u32; 3], range: std::ops::Range<usize>, f: &mut F) {
    let mut e = range.start;
    let pair = |j: usize| box_muller(philox4x32_10([j as u32, stream[0], stream[1], stream[2]], key));
    if e % 2 == 1 && e < range.end {
        f(e, pair(e / 2).1);
        e += 1;
    }
    // Whole groups of four blocks (eight values).
    while e + 8 <= range.end {
        let j = e / 2;
        let (c, s) = box_muller_x4(key, stream, j);
        for k in 0..4 {
            f(e + 2 * k, c[k]);
            f(e + 2 * k + 1, s[k]);
        }
        e += 8;
    }
    while e < range.end {
        let (c, s) = pair(e / 2);
        f(e, c);
        if e + 1 < range.end {
            f(e + 1, s);
        }
        e += 2;
    }
}

/// [`box_muller`] of blocks `j .. j + 4` of the stream: four independent blocks, which the
/// core computes side by side (a plain loop: a closure here would be compiled without the
/// caller's AVX2). The same bits as four calls.
#[inline(always)]
fn box_muller_x4(key: [u32; 2], stream: [u32; 3], j: usize) -> ([f64; 4], [f64; 4]) {
    let mut blocks = [[0u32; 4]; 4];
    for (k, b) in blocks.iter_mut().enumerate() {
        *b = philox4x32_10([(j + k) as u32, stream[0], stream[1], stream[2]], key);
    }
    let mut c = [0.0; 4];
    let mut s = [0.0; 4];
    for l in 0..4 {
        (c[l], s[l]) = box_muller(blocks[l]);
    }
    (c, s)
}

/// Uniform in [0, 1) from 53 bits of two words, the first the high one (what
/// [`SampleRng::next_f64`] reads from the stream).
#[inline(always)]
pub(crate) fn u53(hi: u32, lo: u32) -> f64 {
    ((((hi as u64) << 32) | lo as u64) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Box-Muller on one block: `r cos(2 pi u2)` and `r sin(2 pi u2)` with `r = sqrt(-2 ln u1)`,
/// `u1 = 1 - u53(w0, w1)` in (0, 1] and `u2 = u53(w2, w3)`. The logarithm and the sine and
/// cosine are [`portable_ln`] and [`portable_sincos_turn`]: products, sums, one quotient and
/// one square root, all correctly rounded IEEE operations with no fused multiply-add, so
/// every CPU and the CUDA twin (`noise.cu`, `__dmul_rn` & co.) give the same bits. (glibc's
/// and CUDA's `log` and `cos` may differ in the last bit.)
#[inline(always)]
pub(crate) fn box_muller(b: [u32; 4]) -> (f64, f64) {
    let u1 = 1.0 - u53(b[0], b[1]);
    let u2 = u53(b[2], b[3]);
    let r = (-2.0 * portable_ln(u1)).sqrt();
    let (sin, cos) = portable_sincos_turn(u2);
    (r * cos, r * sin)
}

/// `ln(x)` for a positive normal `x`, within an ulp: fdlibm's `__ieee754_log` reduction
/// (`x = 2^k m`, `m` in [sqrt(2)/2, sqrt(2)), `f = m - 1`, `s = f / (2 + f)`) and its
/// polynomial. Branch-free, so four lanes vectorize.
#[inline(always)]
pub(crate) fn portable_ln(x: f64) -> f64 {
    const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-01;
    const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
    const LG1: f64 = 6.666_666_666_666_735_130e-01;
    const LG2: f64 = 3.999_999_999_940_941_908e-01;
    const LG3: f64 = 2.857_142_874_366_239_149e-01;
    const LG4: f64 = 2.222_219_843_214_978_396e-01;
    const LG5: f64 = 1.818_357_216_161_805_012e-01;
    const LG6: f64 = 1.531_383_769_920_937_332e-01;
    const LG7: f64 = 1.479_819_860_511_658_591e-01;
    let bits = x.to_bits();
    // m in [1, 2) from the mantissa; above sqrt(2) it is halved and k counts one more.
    let m1 = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    let high = m1 > std::f64::consts::SQRT_2;
    let m = if high { m1 * 0.5 } else { m1 };
    let k = ((bits >> 52) & 0x7ff) as i64 - 1023 + high as i64;
    let f = m - 1.0; // exact: m is within a factor 2 of 1
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (LG2 + w * (LG4 + w * LG6));
    let t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
    let r = t2 + t1;
    let hfsq = 0.5 * f * f;
    let dk = k as f64;
    dk * LN2_HI - ((hfsq - (s * (hfsq + r) + dk * LN2_LO)) - f)
}

/// `(sin, cos)` of `2 pi u` for `u` in [0, 1), within an ulp or two: the quarter turn `q`
/// nearest to `u` (`4u - q` is exact), fdlibm's sine and cosine kernels on the rest (at most
/// an eighth of a turn), then the quadrant. Branch-free.
#[inline(always)]
pub(crate) fn portable_sincos_turn(u: f64) -> (f64, f64) {
    const S1: f64 = -1.666_666_666_666_663_243_48e-01;
    const S2: f64 = 8.333_333_333_322_489_461_24e-03;
    const S3: f64 = -1.984_126_982_985_794_931_34e-04;
    const S4: f64 = 2.755_731_370_707_006_767_89e-06;
    const S5: f64 = -2.505_076_025_340_686_341_95e-08;
    const S6: f64 = 1.589_690_995_211_550_102_21e-10;
    const C1: f64 = 4.166_666_666_666_660_190_37e-02;
    const C2: f64 = -1.388_888_888_887_410_957_49e-03;
    const C3: f64 = 2.480_158_728_947_672_941_78e-05;
    const C4: f64 = -2.755_731_435_139_066_330_35e-07;
    const C5: f64 = 2.087_572_321_298_174_827_90e-09;
    const C6: f64 = -1.135_964_755_778_819_482_65e-11;
    let u4 = u * 4.0;
    let q = (u4 + 0.5) as i64; // the nearest quarter turn (0..=4); truncation is floor here
    let x = (u4 - q as f64) * std::f64::consts::FRAC_PI_2; // in [-pi/4, pi/4]
    let z = x * x;
    let v = z * x;
    let sin = x + v * (S1 + z * (S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)))));
    let rc = z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))));
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    let cos = w + (((1.0 - w) - hz) + z * rc);
    // Quarter turn q: (sin, cos) of x + q pi / 2.
    let (s, c) = if q & 1 == 1 { (cos, -sin) } else { (sin, cos) };
    if q & 2 == 2 { (-s, -c) } else { (s, c) }
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
        u53(self.next_u32(), self.next_u32())
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
        // Four words, in stream order: the two uniforms' high and low halves.
        let b = [self.next_u32(), self.next_u32(), self.next_u32(), self.next_u32()];
        box_muller(b).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_math_is_within_an_ulp_or_two() {
        // ln over (0, 1] (Box-Muller's range: down to 2^-53) and beyond.
        let mut worst: f64 = 0.0;
        let mut x = 2f64.powi(-53);
        while x < 4.0 {
            for y in [x, x * 1.000_000_123, x * 1.414_213_562_373_095, x * 1.414_213_562_373_096, x * 1.999_999_9] {
                let (ours, libm) = (portable_ln(y), y.ln());
                let ulps = ((ours - libm) / (libm.abs().max(f64::MIN_POSITIVE) * f64::EPSILON)).abs();
                worst = worst.max(if libm == 0.0 { (ours / f64::EPSILON).abs() } else { ulps });
            }
            x *= 1.37;
        }
        assert!(worst <= 2.0, "ln: {worst} ulps");
        assert_eq!(portable_ln(1.0), 0.0);
        // sin and cos of a turn fraction: against the platform's (whose 2 pi u rounds once).
        let mut worst: f64 = 0.0;
        for k in 0..100_000 {
            let u = k as f64 / 100_000.0 + 1.234e-7;
            let (s, c) = portable_sincos_turn(u);
            let t = std::f64::consts::TAU * u;
            worst = worst.max((s - t.sin()).abs()).max((c - t.cos()).abs());
        }
        assert!(worst < 4e-15, "sincos: {worst}");
        for (u, s, c) in [(0.0, 0.0, 1.0), (0.25, 1.0, 0.0), (0.5, 0.0, -1.0), (0.75, -1.0, 0.0)] {
            let (ps, pc) = portable_sincos_turn(u);
            assert!((ps - s).abs() < 1e-16 && (pc - c).abs() < 1e-16, "{u}: {ps} {pc}");
        }
        let (s, c) = portable_sincos_turn(1.0 - f64::EPSILON / 2.0);
        assert!(s.abs() < 1e-15 && c == 1.0, "{s} {c}");
    }

    /// `cargo test --release -p sluice rng::tests::normals_speed -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn normals_speed() {
        let (key, stream) = SampleRng::new(1, 2, 3, 4).key_and_stream();
        let mut out = vec![0u8; 921_600];
        let t = std::time::Instant::now();
        for _ in 0..10 {
            normals(key, stream, 0..out.len(), |e, z| out[e] = (128.0 + 10.0 * z).round_ties_even().clamp(0.0, 255.0) as u8);
        }
        eprintln!("normals: {:.2} ns per value", t.elapsed().as_secs_f64() * 1e9 / (10.0 * out.len() as f64));
        assert!(out.iter().any(|&v| v != out[0]));
    }

    #[test]
    fn four_lanes_give_the_bits_of_one() {
        let (key, stream) = SampleRng::new(11, 4, 9, 3).key_and_stream();
        for j in [0usize, 1, 5, u32::MAX as usize - 2] {
            let (c, s) = box_muller_x4(key, stream, j);
            for k in 0..4 {
                let one = box_muller(philox4x32_10([(j + k) as u32, stream[0], stream[1], stream[2]], key));
                assert_eq!((c[k].to_bits(), s[k].to_bits()), (one.0.to_bits(), one.1.to_bits()), "block {}", j + k);
            }
        }
        let mut portable = vec![0.0; 37];
        normals_portable(key, stream, 3..40, &mut |e, z| portable[e - 3] = z);
        let mut dispatched = vec![0.0; 37];
        normals(key, stream, 3..40, |e, z| dispatched[e - 3] = z);
        assert_eq!(portable, dispatched);
    }

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
        assert_eq!((whole[14], whole[15]), box_muller(b));
        // ...which is Box-Muller with the platform's math, within its last bits.
        let u = |hi: u32, lo: u32| ((((hi as u64) << 32) | lo as u64) >> 11) as f64 / (1u64 << 53) as f64;
        let (r, t) = ((-2.0 * (1.0 - u(b[0], b[1])).ln()).sqrt(), std::f64::consts::TAU * u(b[2], b[3]));
        assert!((whole[14] - r * t.cos()).abs() < 1e-14 && (whole[15] - r * t.sin()).abs() < 1e-14);
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
