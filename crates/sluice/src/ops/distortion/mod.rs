//! The displacement filters `fn.water` and `fn.sphere` (cpu and gpu): every output pixel
//! reads the input at a displaced point. DALI 2.4's operators
//! (`dali/operators/image/remap/{displacement_filter*,water,sphere}.*`), which DALI 2.4
//! registers for both cpu and gpu; checked against DALI 2.4's cpu operator, bit for bit, by
//! `tests/test_distortion.py`:
//!
//! - Output pixel (x, y) of an HWC image samples the input at a point computed in f32 with
//!   no fused multiply-add (DALI's x86 build contracts none): water
//!   `(x + ampl_x * sinf(freq_x * y + phase_x), y + ampl_y * cosf(freq_y * x + phase_y))`
//!   (`water.rs`), sphere a radial stretch about the image centre (`sphere.rs`). The point
//!   is *not* moved to the pixel centre first: an undisplaced pixel is read at its corner.
//! - Sampling is DALI's `Sampler2D` with a constant border ([`Sampler`]): nearest takes the
//!   pixel at `floor` of the point; linear blends the four pixels around the point minus
//!   (0.5, 0.5) as `s0 = a*(1-qx) + b*qx`, `s1 = ...`, `s0 + (s1-s0)*qy` in f32, an outside
//!   tap being the fill value. `floor` is DALI's `floor_int` as x86 computes it: NaN and
//!   points past the int range give INT_MIN ([`floor_int`]), so such a point is outside
//!   (a 1x1 sphere divides 0 by 0: nearest gives the fill, linear NaN, i.e. 0 for UINT8).
//!   UINT8 results round half away from zero and saturate (`Channel::sat_f32`).
//! - `fill_value` becomes the element type as DALI's C++ assignment does on x86 (the
//!   conversion `erase::fill_word` reproduces: 300 -> 44, -1.7 -> 255, 77.6 -> 77, NaN -> 0).
//! - `mask` (an argument input, one value per sample): 0 copies the sample unchanged.
//! - Types UINT8 and FLOAT; layout HWC, or 3 dimensions without a layout (the output is
//!   then "HWC", as DALI's); any number of channels; the output has the input's shape.
//!
//! Both backends share [`Distortion::plan_batch`] (checks, masks, and for water the row
//! and column offsets of the batch, see below); the cpu kernel is [`remap`], the gpu runs
//! `distortion.cu`, one launch per batch, which repeats it operation for operation.
//!
//! `sinf` and `cosf`: DALI's cpu operator calls the C library's (glibc's) `sinf` / `cosf`.
//! Rust's `f32::sin` / `f32::cos` are LLVM's `llvm.sin.f32` / `llvm.cos.f32`, which become
//! calls to that same `sinf` / `cosf` on linux-gnu (compiler-builtins supplies only the
//! exactly-rounded math functions there, not these), so the values are the same bits, in the
//! same process; `water.rs`'s tests check that `f32::sin` is the C library's `sinf`. They
//! are not correctly rounded: over 400k arguments glibc 2.36's `sinf` differed from
//! `(float)sin((double)x)` 1.3% of the time and NumPy's float32 `sin` 15% of the time, so
//! the Python reference calls libm's `sinf` through ctypes, and the GPU (whose `sinf` is
//! another approximation still) never evaluates them: the offset of row y,
//! `ampl_x * sinf(freq_x * y + phase_x)`, depends on y alone and the column offset on x
//! alone, so the plan computes them once per row and column on the host (DALI evaluates both
//! per pixel: H + W calls instead of 2 * H * W) and both backends read the tables. The
//! arguments are constants, so the tables are kept across batches and only grow.
//!
//! Why not `warp::kernel`'s sampler (warp_affine, rotate): the arithmetic is the same, but
//! its `floor_i32` saturates and maps NaN to 0 where DALI's `floor_int` gives INT_MIN (a
//! NaN point would read pixel (0, 0) instead of the fill), its fill is converted with
//! ConvertSat where this one is a C++ assignment (77.6 is 78 there, 77 here), and it has a
//! clamping border this filter never uses.
//!
//! Where Sluice departs from DALI 2.4:
//! - A constant `mask=0` leaves the images unchanged, as documented; DALI reads `mask` only
//!   when it is an argument input and transforms every image for a constant 0.
//! - A `mask` input must hold one value per sample, of any numeric type (non-zero applies
//!   the filter). DALI wants INT32, reads the first value of a longer one and crashes on an
//!   empty one.
//! - Any number of channels; DALI's cpu operator keeps the fill values in a stack array of
//!   1024 and writes past it for more.
//! - The gpu backend equals the cpu. DALI's gpu evaluates CUDA's `sinf` / `cosf` per pixel
//!   and its `floor_int` saturates, so it differs from its own cpu (its test allows 1 of
//!   mean error).

mod gpu;
mod jitter;
mod jpeg_compression;
mod jpeg_compression_gpu;
mod sphere;
mod water;

pub use jitter::JITTER;
pub use jpeg_compression::JPEG_COMPRESSION_DISTORTION;
pub use sphere::SPHERE;
pub use water::WATER;

use crate::error::{Error, Result};
use crate::ops::erase::fill_word;
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgSchema, ArgType as T, OpContext, Operator, PerSample, Workspace};
use crate::tensor::channel::Channel;
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

use jitter::JitterMap;
use sphere::SphereMap;
use water::{Wave, WaterMap};

/// The arguments DALI's `DisplacementFilter` schema gives both operators.
const DISPLACEMENT_ARGS: &[ArgSchema] = &[
    tensor_arg(
        "mask",
        T::Int,
        D::Int(1),
        "Whether to apply the distortion to the image: 0 leaves it unchanged, any other value applies it. Usually an argument input (e.g. `fn.random.coin_flip()`), one value per sample.",
    ),
    arg("interp_type", T::InterpType, D::Int(0), "Interpolation: INTERP_NN (the default) or INTERP_LINEAR."),
    arg(
        "fill_value",
        T::Float,
        D::Float(0.0),
        "Value of the pixels that read outside the image, in every channel. Converted to the input type as a C++ assignment does (truncated).",
    ),
];

/// Which filter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    Water(Wave),
    Sphere,
    /// `nDegree`.
    Jitter(u32),
}

/// One sample as the kernels see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SamplePlan {
    pub h: usize,
    pub w: usize,
    pub c: usize,
    /// False: `mask` is 0 for this sample, which is copied.
    pub apply: bool,
}

/// Where output pixel (x, y) reads the source: DALI's displacement functor.
pub(crate) trait Displacement {
    fn source(&self, x: usize, y: usize) -> (f32, f32);
}

/// The operator (either filter), both backends' planning and the cpu backend.
pub struct Distortion {
    ctx: OpContext,
    kind: Kind,
    linear: bool,
    fill: f32,
    samples: Vec<SamplePlan>,
    /// Water: the offsets of rows `0..rows.len()` (added to x) and of columns (added to y).
    rows: Vec<f32>,
    cols: Vec<f32>,
    /// Jitter: each sample's Philox key and stream words.
    streams: Vec<([u32; 2], [u32; 3])>,
}

impl Distortion {
    fn new(ctx: &OpContext, kind: Kind) -> Result<Distortion> {
        let linear = match ctx.args.int("interp_type") {
            0 => false,
            1 => true,
            v => {
                return Err(Error::arg(&ctx.display_name, "interp_type", format!(
                    "unsupported interpolation type {v}: only INTERP_NN (0) and INTERP_LINEAR (1) are supported for this operation"
                )))
            }
        };
        // DALI keeps `fill_value` as a float.
        let fill = ctx.args.float("fill_value") as f32;
        // Jitter's points are whole pixels: both samplers read the pixel (nearest does it
        // without the blend, which would turn an infinite neighbour into NaN).
        let linear = linear && !matches!(kind, Kind::Jitter(_));
        Ok(Distortion { ctx: ctx.clone(), kind, linear, fill, samples: Vec::new(), rows: Vec::new(), cols: Vec::new(), streams: Vec::new() })
    }

    /// Checks the batch, reads `mask`, fills `self.samples` (and grows the water tables to
    /// the batch's largest image) and returns the output's metadata. Shared by both backends.
    fn plan_batch(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<BatchMeta> {
        let op = self.ctx.display_name.clone();
        let op = op.as_str();
        let n = input.len();
        self.samples.clear();
        let layout = input.layout();
        if input.ndim() != 3 || !(layout.is_empty() || layout.as_str() == "HWC") {
            let got = if layout.is_empty() { format!("{} dimensions without a layout", input.ndim()) } else { format!("layout \"{layout}\"") };
            return Err(Error::type_mismatch(op, format!("input 0: {got} does not match any of the allowed layouts: HWC")));
        }
        let mut meta = input.clone();
        // DALI gives an input without a layout its schema's layout.
        meta.set_layout(Layout::from("HWC"));
        if n == 0 {
            return Ok(meta);
        }
        let dtype = input.dtype();
        if dtype != DType::U8 && dtype != DType::F32 {
            return Err(Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), format!("unsupported input type {dtype}; supported: UINT8, FLOAT")));
        }
        let mask = ws.per_sample(&self.ctx, "mask");
        if let PerSample::Input { batch, .. } = mask {
            if batch.len() != n {
                return Err(Error::arg(op, "mask", format!("argument input has {} samples, the batch has {n}", batch.len())));
            }
        }
        let (mut max_h, mut max_w) = (0, 0);
        for i in 0..n {
            let (h, w, c) = (input.shape(i)[0], input.shape(i)[1], input.shape(i)[2]);
            // DALI's sizes and coordinates are ints.
            if h > i32::MAX as usize || w > i32::MAX as usize {
                return Err(Error::data(self.ctx.at(ws.iteration, i, input.source_info(i)), format!("image of {h} x {w} pixels: at most {} per side", i32::MAX)));
            }
            let apply = mask.get(op, i)?.is_none_or(|m| m != 0.0);
            self.samples.push(SamplePlan { h, w, c, apply });
            if apply {
                max_h = max_h.max(h);
                max_w = max_w.max(w);
            }
        }
        self.streams.clear();
        if let Kind::Jitter(_) = self.kind {
            self.streams.extend((0..n).map(|i| ws.rng(&self.ctx, i).key_and_stream()));
        }
        if let Kind::Water(wave) = self.kind {
            for y in self.rows.len()..max_h {
                self.rows.push(wave.row(y));
            }
            for x in self.cols.len()..max_w {
                self.cols.push(wave.col(x));
            }
        }
        Ok(meta)
    }
}

impl Operator for Distortion {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let meta = self.plan_batch(ws, input.meta())?;
        let dtype = meta.dtype();
        let mut out = TensorList::for_overwrite(meta); // every element is written
        let this = &*self;
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let s = this.samples[i];
            let src = input.bytes(i);
            if !s.apply {
                dst.copy_from_slice(src);
                return Ok(());
            }
            match dtype {
                DType::U8 => this.remap_sample::<u8>(dst, src, i, s),
                DType::F32 => this.remap_sample::<f32>(dst, src, i, s),
                t => unreachable!("{t}: refused by plan_batch"),
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

impl Distortion {
    fn remap_sample<P: Channel>(&self, dst: &mut [u8], src: &[u8], i: usize, s: SamplePlan) {
        let (dst, src): (&mut [P], &[P]) = (bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(src));
        let fill = fill_as::<P>(self.fill);
        match self.kind {
            Kind::Water(_) => remap(dst, src, s, &WaterMap { rows: &self.rows, cols: &self.cols }, self.linear, fill),
            Kind::Sphere => remap(dst, src, s, &SphereMap::new(s.h, s.w), self.linear, fill),
            Kind::Jitter(n_degree) => {
                let (key, stream) = self.streams[i];
                remap(dst, src, s, &JitterMap { key, stream, n_degree, h: s.h, w: s.w }, false, fill)
            }
        }
    }
}

/// `fill_value` as an element of `P`, converted as DALI's `In fill[c] = fill_value_` is on
/// x86 ([`fill_word`]: a truncating conversion whose low bytes are kept for integers).
pub(crate) fn fill_as<P: Channel>(v: f32) -> P {
    let word = fill_word(P::DTYPE, v).to_le_bytes();
    bytemuck::pod_read_unaligned(&word[..std::mem::size_of::<P>()])
}

/// `static_cast<int>(std::floor(v))` as DALI's x86 build computes it (its `floor_int`):
/// CVTTSS2SI gives INT_MIN for NaN and for values outside the int range, which therefore
/// land outside any image. Written without a libm call.
#[inline(always)]
pub(crate) fn floor_int(v: f32) -> i32 {
    if (-2_147_483_648.0..2_147_483_648.0).contains(&v) {
        // Truncation, then one down for negative non-integers (exact: |v| < 2^31, and
        // floats from 2^24 up are integers).
        let t = v as i32;
        if (t as f32) > v { t - 1 } else { t }
    } else {
        i32::MIN
    }
}

/// An HWC image read with DALI's constant border.
pub(crate) struct Sampler<'a, P> {
    pub data: &'a [P],
    pub w: usize,
    pub h: usize,
    pub c: usize,
    pub fill: P,
}

impl<P: Channel> Sampler<'_, P> {
    /// Offset of pixel (x, y), or `None` outside (`all_in_range`: negative coordinates
    /// wrap to large unsigned values).
    #[inline(always)]
    fn at(&self, x: i32, y: i32) -> Option<usize> {
        ((x as u32 as usize) < self.w && (y as u32 as usize) < self.h).then(|| (y as usize * self.w + x as usize) * self.c)
    }

    /// DALI's nearest sampler: the pixel at `floor` of the point, else the fill.
    #[inline(always)]
    pub fn nearest(&self, out: &mut [P], sx: f32, sy: f32) {
        match self.at(floor_int(sx), floor_int(sy)) {
            Some(p) => out.copy_from_slice(&self.data[p..p + self.c]),
            None => out.fill(self.fill),
        }
    }

    /// DALI's linear sampler: the four pixels around the point minus (0.5, 0.5), each one
    /// outside being the fill, blended in f32 in DALI's order.
    #[inline(always)]
    pub fn linear(&self, out: &mut [P], sx: f32, sy: f32) {
        let (x, y) = (sx - 0.5, sy - 0.5);
        let (x0, y0) = (floor_int(x), floor_int(y));
        // An int sum in DALI (never past INT_MAX: floor_int is below 2^31 - 128 or INT_MIN).
        let (x1, y1) = (x0.wrapping_add(1), y0.wrapping_add(1));
        let qx = x - x0 as f32;
        let px = 1.0 - qx;
        let qy = y - y0 as f32;
        let taps = [self.at(x0, y0), self.at(x1, y0), self.at(x0, y1), self.at(x1, y1)];
        let v = |t: Option<usize>, k: usize| match t {
            Some(p) => self.data[p + k].to_f32(),
            None => self.fill.to_f32(),
        };
        for (k, o) in out.iter_mut().enumerate() {
            let s0 = v(taps[0], k) * px + v(taps[1], k) * qx;
            let s1 = v(taps[2], k) * px + v(taps[3], k) * qx;
            *o = P::sat_f32(s0 + (s1 - s0) * qy);
        }
    }
}

/// The cpu kernel: `dst` (the sample's `s.h` x `s.w` x `s.c` pixels) reads `src` at the
/// points `map` gives, with nearest or linear sampling and `fill` outside.
pub(crate) fn remap<P: Channel, M: Displacement>(dst: &mut [P], src: &[P], s: SamplePlan, map: &M, linear: bool, fill: P) {
    let (h, w, c) = (s.h, s.w, s.c);
    debug_assert_eq!((dst.len(), src.len()), (h * w * c, h * w * c));
    if dst.is_empty() {
        return;
    }
    let sampler = Sampler { data: src, w, h, c, fill };
    for (y, row) in dst.chunks_exact_mut(w * c).enumerate() {
        for (x, px) in row.chunks_exact_mut(c).enumerate() {
            let (sx, sy) = map.source(x, y);
            if linear {
                sampler.linear(px, sx, sy);
            } else {
                sampler.nearest(px, sx, sy);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{ArgValue, Args, OpDef};

    /// The context of `def` (named "distortion.x") with the constant arguments `given`.
    pub(super) fn context(def: &OpDef, given: Vec<(&str, ArgValue)>) -> Result<OpContext> {
        Ok(OpContext {
            args: Args::check(&def.schema, "distortion.x", given.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), &[])?,
            display_name: "distortion.x".into(),
            instance_name: "d".into(),
            op_id: 1,
            seed: 1,
            max_batch_size: 4,
            num_threads: 1,
            device_id: None,
            arg_input_names: vec![],
            resume_samples: 0,
        })
    }

    fn op(def: &OpDef, given: Vec<(&str, ArgValue)>) -> Result<Box<dyn Operator>> {
        (def.cpu.expect("a cpu backend"))(&context(def, given)?)
    }

    fn run(op: &mut dyn Operator, x: &TensorList, mask: Option<&TensorList>) -> Result<TensorList> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let mut arg_inputs = std::collections::HashMap::new();
        if let Some(m) = mask {
            arg_inputs.insert("mask", m);
        }
        let ws = Workspace { inputs: vec![x], arg_inputs, iteration: 0, batch_size: x.len(), frames: None, pool: &pool };
        Ok(op.run(&ws)?.remove(0))
    }

    #[test]
    fn floor_int_is_x86s_truncation_of_the_floor() {
        for (v, want) in [
            (0.0f32, 0),
            (-0.0, 0),
            (0.5, 0),
            (-0.5, -1),
            (2.9999998, 2),
            (-3.0, -3),
            (-3.0000002, -4),
            (16_777_217.0, 16_777_216),
            (2_147_483_520.0, 2_147_483_520), // the largest float below 2^31
            (-2_147_483_648.0, i32::MIN),
        ] {
            assert_eq!(floor_int(v), want, "{v}");
        }
        // x86's "integer indefinite": NaN and everything past the int range.
        for v in [f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 2_147_483_648.0, 1e10, -2_147_483_904.0, -1e10] {
            assert_eq!(floor_int(v), i32::MIN, "{v}");
        }
    }

    #[test]
    fn fill_values_convert_as_a_cpp_assignment() {
        // Read back from DALI 2.4's cpu water (a border pixel).
        for (v, want) in [(300.0f32, 44u8), (-1.7, 255), (77.6, 77), (255.9, 255), (-0.5, 0), (f32::NAN, 0), (1e10, 0)] {
            assert_eq!(fill_as::<u8>(v), want, "{v}");
        }
        assert_eq!(fill_as::<f32>(-1.25), -1.25);
        assert!(fill_as::<f32>(f32::NAN).is_nan());
    }

    fn image(h: usize, w: usize, c: usize) -> Vec<u8> {
        (0..h * w * c).map(|k| (k * 10) as u8).collect()
    }

    #[test]
    fn nearest_reads_the_pixel_at_the_floor_and_fills_outside() {
        let data = image(2, 3, 2);
        let s = Sampler { data: &data, w: 3, h: 2, c: 2, fill: 7u8 };
        let mut px = [0u8; 2];
        s.nearest(&mut px, 1.99, 1.0);
        assert_eq!(px, [80, 90]);
        s.nearest(&mut px, 0.0, 0.999);
        assert_eq!(px, [0, 10]);
        for (x, y) in [(-0.01, 0.0), (3.0, 0.0), (0.0, 2.0), (0.0, -1e-7), (f32::NAN, 0.0), (1e10, 1.0)] {
            s.nearest(&mut px, x, y);
            assert_eq!(px, [7, 7], "({x}, {y})");
        }
    }

    #[test]
    fn linear_samples_at_pixel_centres_and_blends_the_fill_in() {
        let data = image(2, 3, 1); // 0 10 20 / 30 40 50
        let s = Sampler { data: &data, w: 3, h: 2, c: 1, fill: 100u8 };
        let mut px = [0u8];
        // A pixel centre is the pixel.
        s.linear(&mut px, 1.5, 1.5);
        assert_eq!(px, [40]);
        // Halfway between two pixels, and between four.
        s.linear(&mut px, 1.0, 0.5);
        assert_eq!(px, [5]);
        s.linear(&mut px, 2.0, 1.0);
        assert_eq!(px, [30]);
        // The corner point (0, 0) takes three fill taps: (100 * 3 + 0) / 4.
        s.linear(&mut px, 0.0, 0.0);
        assert_eq!(px, [75]);
        // NaN: every tap outside, NaN weights: DALI's ConvertSat gives 0; FLOAT keeps NaN.
        s.linear(&mut px, f32::NAN, 0.0);
        assert_eq!(px, [0]);
        let f: Vec<f32> = data.iter().map(|&v| v as f32).collect();
        let sf = Sampler { data: &f, w: 3, h: 2, c: 1, fill: 100.0f32 };
        let mut pf = [0f32];
        sf.linear(&mut pf, f32::NAN, 0.0);
        assert!(pf[0].is_nan());
        sf.linear(&mut pf, 1.25, 0.5);
        assert_eq!(pf, [7.5]);
        // u8: 127.5 rounds to 128.
        let d = [0u8, 255];
        let s2 = Sampler { data: &d, w: 2, h: 1, c: 1, fill: 0u8 };
        let mut p2 = [0u8];
        // Row 0 with the row below outside (fill 0) would halve it: sample on the row centre.
        s2.linear(&mut p2, 1.0, 0.5);
        assert_eq!(p2, [128]);
    }

    /// Outputs of DALI 2.4's cpu operators on small ramps (tests/test_distortion.py checks
    /// the same against DALI itself on many more).
    #[test]
    fn small_images_equal_dalis() {
        let ramp = |h: usize, w: usize, c: usize, step: usize| TensorList::from_samples(&[vec![h, w, c]], &[(0..h * w * c).map(|k| (k * step) as u8).collect::<Vec<u8>>()]).with_layout("HWC");
        let water = |interp: i64| {
            vec![
                ("ampl_x", ArgValue::Float(1.5)),
                ("ampl_y", ArgValue::Float(-0.75)),
                ("freq_x", ArgValue::Float(0.9)),
                ("freq_y", ArgValue::Float(1.3)),
                ("phase_x", ArgValue::Float(0.1)),
                ("phase_y", ArgValue::Float(0.2)),
                ("fill_value", ArgValue::Float(7.0)),
                ("interp_type", ArgValue::Int(interp)),
            ]
        };
        let x = ramp(3, 4, 2, 10);
        let out = run(&mut *op(&WATER, water(0)).unwrap(), &x, None).unwrap();
        assert_eq!(out.sample::<u8>(0), [7, 7, 7, 7, 40, 50, 60, 70, 20, 30, 40, 50, 140, 150, 7, 7, 100, 110, 120, 130, 220, 230, 7, 7]);
        let out = run(&mut *op(&WATER, water(1)).unwrap(), &x, None).unwrap();
        assert_eq!(out.sample::<u8>(0), [7, 7, 10, 14, 50, 60, 50, 59, 13, 21, 71, 81, 152, 162, 37, 40, 80, 90, 154, 164, 175, 183, 24, 25]);

        let sphere = |interp: i64| vec![("fill_value", ArgValue::Float(300.0)), ("interp_type", ArgValue::Int(interp))];
        let x = ramp(5, 6, 1, 8);
        let out = run(&mut *op(&SPHERE, sphere(0)).unwrap(), &x, None).unwrap();
        assert_eq!(out.sample::<u8>(0), [0, 8, 64, 72, 32, 40, 48, 64, 112, 120, 72, 88, 96, 112, 112, 120, 120, 136, 144, 160, 112, 120, 168, 184, 192, 200, 160, 168, 224, 232]);
        let out = run(&mut *op(&SPHERE, sphere(1)).unwrap(), &x, None).unwrap();
        assert_eq!(out.sample::<u8>(0), [12, 26, 47, 53, 46, 41, 55, 80, 97, 100, 94, 91, 99, 110, 115, 117, 122, 133, 141, 138, 132, 135, 152, 177, 151, 186, 179, 185, 206, 179]);

        // FLOAT, linear, fill -1.25: DALI's bits.
        let xf = TensorList::from_samples(&[vec![5, 6, 1]], &[(0..30).map(|k| k as f32 * 0.5).collect::<Vec<f32>>()]).with_layout("HWC");
        let out = run(&mut *op(&SPHERE, vec![("fill_value", ArgValue::Float(-1.25)), ("interp_type", ArgValue::Int(1))]).unwrap(), &xf, None).unwrap();
        let bits: Vec<u32> = out.sample::<f32>(0).iter().map(|v| v.to_bits()).collect();
        assert_eq!(bits, [
            0xbeb30df4, 0x3fd00001, 0x403d2055, 0x40531dbe, 0x40380000, 0x3fb9b584, 0x405bdf5e, 0x409fe394, 0x40c13dd2, 0x40c7344f, 0x40bcbbc0, 0x40b5bd0c, 0x40c6aaab, 0x40dc0000, 0x40e6aaab,
            0x40e95556, 0x40f40000, 0x4104aaaa, 0x410d217a, 0x4109a220, 0x410465d9, 0x41076117, 0x41180e36, 0x41310829, 0x4104b031, 0x413a0000, 0x41333891, 0x4138b7eb, 0x414e0000, 0x41217f4f,
        ]);
    }

    #[test]
    fn mask_zero_copies_the_sample_and_the_output_is_hwc() {
        let shapes = [vec![4, 5, 3], vec![4, 5, 3]];
        let data: Vec<Vec<u8>> = (0..2).map(|s| (0..60).map(|k| (k * 3 + s) as u8).collect()).collect();
        let x = TensorList::from_samples(&shapes, &data); // no layout: the output says HWC
        let mask = TensorList::from_samples(&[vec![], vec![]], &[vec![0i32], vec![5i32]]);
        let mut water = op(&WATER, vec![]).unwrap();
        let out = run(&mut *water, &x, Some(&mask)).unwrap();
        assert_eq!(out.layout().as_str(), "HWC");
        assert_eq!(out.sample::<u8>(0), &data[0][..]);
        assert_ne!(out.sample::<u8>(1), &data[1][..]);
        // A constant 0 too (DALI ignores constant masks).
        let out = run(&mut *op(&SPHERE, vec![("mask", ArgValue::Int(0))]).unwrap(), &x, None).unwrap();
        assert_eq!(out.sample::<u8>(1), &data[1][..]);
    }

    #[test]
    fn errors_name_the_operator_and_the_argument() {
        let e = op(&WATER, vec![("interp_type", ArgValue::Int(2))]).err().unwrap().to_string();
        assert!(e.contains("distortion.x") && e.contains("interp_type") && e.contains("only INTERP_NN (0) and INTERP_LINEAR (1)"), "{e}");
        let x = TensorList::from_samples(&[vec![4, 5, 3]], &[vec![0u8; 60]]).with_layout("CHW");
        let e = run(&mut *op(&SPHERE, vec![]).unwrap(), &x, None).unwrap_err().to_string();
        assert!(e.contains("distortion.x") && e.contains("layout \"CHW\" does not match any of the allowed layouts: HWC"), "{e}");
        let x = TensorList::from_samples(&[vec![4, 5]], &[vec![0u8; 20]]);
        let e = run(&mut *op(&SPHERE, vec![]).unwrap(), &x, None).unwrap_err().to_string();
        assert!(e.contains("2 dimensions without a layout"), "{e}");
        let x = TensorList::from_samples(&[vec![4, 5, 3]], &[vec![0i16; 60]]).with_layout("HWC");
        let e = run(&mut *op(&WATER, vec![]).unwrap(), &x, None).unwrap_err().to_string();
        assert!(e.contains("distortion.x") && e.contains("unsupported input type INT16; supported: UINT8, FLOAT"), "{e}");
        let x = TensorList::from_samples(&[vec![4, 5, 3], vec![4, 5, 3]], &[vec![0u8; 60], vec![0u8; 60]]).with_layout("HWC");
        let mask = TensorList::from_samples(&[vec![1], vec![2]], &[vec![1i32], vec![1i32, 0]]);
        let e = run(&mut *op(&WATER, vec![]).unwrap(), &x, Some(&mask)).unwrap_err().to_string();
        assert!(e.contains("distortion.x") && e.contains("'mask'") && e.contains("sample 1"), "{e}");
    }
}
