//! Noise operators: `fn.noise.gaussian`, `fn.noise.salt_and_pepper`, `fn.noise.shot`
//! (cpu and gpu). The output has the input's type, shape and layout; every element is
//! DALI 2.4's formula (`dali/operators/random/noise/*.h`, applied per element as its
//! `rng_base_cpu.h` does):
//!
//! - gaussian: `ConvertSat<T>(in + n)`, n ~ N(mean, stddev²), added in float for 8- and
//!   16-bit integers and FLOAT, in double for 32- and 64-bit integers (DALI's `FloatType`).
//! - salt_and_pepper: one uniform u per element, or per pixel with `per_channel=False` (the
//!   pixel's channels then all keep their value, or all take salt, or all pepper; the
//!   channels are the layout's `C`, which must be first or last, or the last dimension for
//!   an empty layout): `u < prob` corrupts, `u < prob * salt_vs_pepper` (an f32 product)
//!   with salt. `salt_val`/`pepper_val` convert to the type as C++'s `static_cast` does on
//!   x86 (`tensor::element::store_static_cast`: 300.0 as UINT8 is 44, -5.0 is 251, as
//!   DALI gives); not given: the type's maximum and minimum, 1 and -1 for FLOAT.
//! - shot: `ConvertSat<T>(poisson(max(0, in * (1 / factor))) * factor)` in f32 as DALI.
//!
//! Types: UINT8, INT8, UINT16, INT16, UINT32, INT32, UINT64, INT64, FLOAT (DALI's list);
//! others are an error naming the type. Arguments are per sample (constants or argument
//! inputs); a bad value is an error naming the operator, the argument and the sample.
//!
//! Randomness cannot be DALI's bits (its generator is a per-sample `mt19937_64` on the cpu,
//! cuRAND on the gpu, each its own): parity is in distribution (`tests/test_noise.py`: DALI's
//! tests ported, with their PSNR-against-NumPy checks, and moments and proportions on both
//! libraries). Every draw is a pure function of (seed, operator, iteration, sample, element)
//! ([`draw`]), so results do not depend on the thread count, and the gpu backend draws the
//! same numbers: gpu equals cpu exactly for salt_and_pepper, and for gaussian and shot up to
//! the last bit CUDA's `log`/`cos`/`sin`/`exp` may differ by from glibc's (which moves an output
//! by one unit of rounding, or flips a rejection test, with a probability below 1e-9 per
//! element). Gaussian noise of element e is `random.normal`'s value e of the same stream, so
//! `fn.noise.gaussian(x, seed=s)` is `x + fn.random.normal(x, seed=s)`, bit for bit, for
//! FLOAT input (DALI's test_noise_gaussian.py checks this, within 0.1).
//!
//! Where Sluice departs from DALI 2.4:
//! - shot with `factor=0` returns the input, as DALI's documentation says; DALI 2.4's
//!   operator returns zeros (its `Generate` returns the input, `Apply` multiplies it by 0).
//! - shot without `factor` uses 12, what DALI 2.4's operator does (it falls back to its
//!   default-constructed distribution), not the 20 its schema documents.
//! - gaussian refuses a negative `stddev` (as `random.normal` does); DALI's
//!   `std::normal_distribution` takes it silently (the noise of |stddev|).
//! - salt_and_pepper with `per_channel=False` on a scalar, or on channels of extent 0, is an
//!   error or nothing to do, where DALI 2.4 crashes (a division by zero).
//! - A sample of more than 2^32 elements (pixels) reuses its draws from element 2^32 on, as
//!   `random.normal`'s stream does.

mod draw;
mod gpu;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::element::{store_f64, store_static_cast};
use crate::tensor::{BatchMeta, DType, TensorList};

const SALT_VAL_DOC: &str = "Value of \"salt\". If not provided, the salt value will be 1.0 for floating point types or the maximum value of the input data type otherwise, converted to the data type of the input.";
const PEPPER_VAL_DOC: &str = "Value of \"pepper\". If not provided, the pepper value will be -1.0 for floating point types or the minimum value of the input data type otherwise, converted to the data type of the input.";
const PER_CHANNEL_DOC: &str = "Determines whether the noise should be generated for each channel independently. If set to True, the noise is generated for each channel independently, resulting in some channels being corrupted and others kept intact. If set to False, the noise is generated once and applied to all channels, so that all channels in a pixel should either be kept intact, take the \"pepper\" value, or the \"salt\" value. Per-channel noise generation requires the input layout to contain a channels ('C') dimension, or be empty; in the case of the layout being empty, channel-last layout is assumed.";

/// `fn.noise.gaussian`.
pub static GAUSSIAN: OpDef = OpDef {
    schema: OpSchema {
        name: "noise__Gaussian",
        doc: "Applies gaussian noise to the input. The shape and data type of the output will match the input.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("mean", T::Float, D::Float(0.0), "Mean of the distribution."),
            tensor_arg("stddev", T::Float, D::Float(1.0), "Standard deviation of the distribution (>= 0)."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(Noise::new(ctx, Kind::Gaussian)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::NoiseGpu::new(Noise::new(ctx, Kind::Gaussian))))),
};

/// `fn.noise.salt_and_pepper`.
pub static SALT_AND_PEPPER: OpDef = OpDef {
    schema: OpSchema {
        name: "noise__SaltAndPepper",
        doc: "Applies salt-and-pepper noise to the input. The shape and data type of the output will match the input.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("prob", T::Float, D::Float(0.05), "Probability of an output value to take a salt or pepper value."),
            tensor_arg("salt_vs_pepper", T::Float, D::Float(0.5), "Probability of a corrupted output value to take a salt value."),
            tensor_arg("salt_val", T::Float, D::Optional, SALT_VAL_DOC),
            tensor_arg("pepper_val", T::Float, D::Optional, PEPPER_VAL_DOC),
            arg("per_channel", T::Bool, D::Bool(false), PER_CHANNEL_DOC),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(Noise::new(ctx, Kind::SaltAndPepper)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::NoiseGpu::new(Noise::new(ctx, Kind::SaltAndPepper))))),
};

/// `fn.noise.shot`.
pub static SHOT: OpDef = OpDef {
    schema: OpSchema {
        name: "noise__Shot",
        doc: "Applies shot noise to the input: output = poisson(max(0, input / factor)) * factor if factor != 0, the input if factor == 0. \
              Each event increases the output by `factor`; the input holds the expected values. The shape and data type of the output will match the input.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[tensor_arg(
            "factor",
            T::Float,
            D::Optional,
            "Factor parameter. Not given: 12, what DALI 2.4's operator applies (its schema documents 20).",
        )]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(Noise::new(ctx, Kind::Shot)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::NoiseGpu::new(Noise::new(ctx, Kind::Shot))))),
};

/// The input (and output) types, DALI's list.
const TYPES: [DType; 9] = [DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::I32, DType::U64, DType::I64, DType::F32];

/// `factor` when not given (see the module docs).
const SHOT_DEFAULT_FACTOR: f32 = 12.0;

/// Which operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gaussian,
    SaltAndPepper,
    Shot,
}

impl Kind {
    /// The middle part of the kernel names (`noise_<kind>_<type>`).
    fn kernel_name(self) -> &'static str {
        match self {
            Kind::Gaussian => "gaussian",
            Kind::SaltAndPepper => "salt_and_pepper",
            Kind::Shot => "shot",
        }
    }
}

/// One sample's noise parameters.
#[derive(Debug, Clone, Copy)]
enum Params {
    Gaussian { mean: f64, stddev: f64 },
    /// `salt` and `pepper`: the element's bytes (little-endian, first `size` bytes).
    SaltAndPepper { prob: f32, salt_prob: f32, salt: [u8; 8], pepper: [u8; 8] },
    Shot { factor: f32 },
}

/// One sample's plan: its random stream, how draws map to elements, its parameters.
#[derive(Debug, Clone, Copy)]
struct SamplePlan {
    /// Philox key and counter words 1..3 of the sample stream (gaussian, salt_and_pepper);
    /// for shot the per-element key ([`draw::element_key`]) and zeros.
    key: [u32; 2],
    stream: [u32; 3],
    /// Draws: elements, or pixels when one draw covers a pixel's channels.
    pixels: usize,
    /// Elements per draw, and where they are: element (p, c) is `p * p_stride + c * c_stride`.
    channels: usize,
    p_stride: usize,
    c_stride: usize,
    params: Params,
}

/// The operator, both backends' planning and the cpu backend.
pub struct Noise {
    ctx: OpContext,
    kind: Kind,
    /// salt_and_pepper's `per_channel=False`: one draw per pixel.
    per_pixel: bool,
    /// The current batch's plans, one per sample (kept to reuse the allocation).
    plans: Vec<SamplePlan>,
}

impl Noise {
    fn new(ctx: &OpContext, kind: Kind) -> Noise {
        let per_pixel = kind == Kind::SaltAndPepper && !ctx.args.bool("per_channel");
        Noise { ctx: ctx.clone(), kind, per_pixel, plans: Vec::new() }
    }

    /// Checks the batch, fills `self.plans` and returns the output's metadata (the input's).
    /// Shared by both backends.
    fn plan(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<BatchMeta> {
        let name = &self.ctx.display_name;
        let dtype = input.dtype();
        if !TYPES.contains(&dtype) {
            let supported: Vec<&str> = TYPES.iter().map(|d| d.dali_name()).collect();
            return Err(Error::data(
                self.ctx.at(ws.iteration, 0, input.source_info(0)),
                format!("unsupported input type {dtype}; supported: {}", supported.join(", ")),
            ));
        }
        let ndim = input.ndim();
        // per_channel=False: the channel dimension, first or last (DALI's rule).
        let channel_dim = if self.per_pixel {
            let layout = input.layout();
            let found = if layout.is_empty() { ndim.checked_sub(1) } else { layout.find('C') };
            match found {
                Some(d) if d == 0 || d + 1 == ndim => Some(d),
                _ => {
                    let got = if layout.is_empty() { format!("no layout and {ndim} dimensions") } else { format!("layout \"{layout}\"") };
                    return Err(Error::type_mismatch(name, format!(
                        "per_channel=False: 'C' should be the first or the last dimension in the layout, except for empty layouts where channel-last is assumed; got {got}"
                    )));
                }
            }
        } else {
            None
        };
        self.plans.clear();
        for i in 0..input.len() {
            let numel = input.numel(i);
            let (pixels, channels, p_stride, c_stride) = match channel_dim {
                None => (numel, 1, 1, 0),
                Some(d) => {
                    let shape = input.shape(i);
                    let c = shape[d];
                    let pixels = if c == 0 { 0 } else { numel / c };
                    if d + 1 == ndim {
                        (pixels, c, c, 1) // channels last (also a 1-D sample: one pixel)
                    } else {
                        (pixels, c, 1, pixels) // channels first: planes of `pixels`
                    }
                }
            };
            let (key, stream) = ws.rng(&self.ctx, i).key_and_stream();
            let (key, stream) = match self.kind {
                Kind::Shot => (draw::element_key(key, stream), [0; 3]),
                _ => (key, stream),
            };
            let params = self.params(ws, i, dtype)?;
            self.plans.push(SamplePlan { key, stream, pixels, channels, p_stride, c_stride, params });
        }
        Ok(input.clone())
    }

    /// Sample `i`'s arguments, checked.
    fn params(&self, ws: &Workspace<'_>, i: usize, dtype: DType) -> Result<Params> {
        let name = &self.ctx.display_name;
        let get = |arg: &'static str| ws.per_sample(&self.ctx, arg).get(name, i);
        let finite = |arg: &'static str, v: f64| -> Result<f64> {
            if v.is_finite() {
                Ok(v)
            } else {
                Err(Error::arg(name, arg, format!("must be finite; sample {i} has {v}")))
            }
        };
        Ok(match self.kind {
            Kind::Gaussian => {
                let mean = finite("mean", get("mean")?.unwrap_or(0.0))?;
                let stddev = finite("stddev", get("stddev")?.unwrap_or(1.0))?;
                if stddev < 0.0 {
                    return Err(Error::arg(name, "stddev", format!("must be >= 0; sample {i} has {stddev}")));
                }
                Params::Gaussian { mean, stddev }
            }
            Kind::SaltAndPepper => {
                let prob = get("prob")?.unwrap_or(0.05) as f32;
                let salt_vs_pepper = get("salt_vs_pepper")?.unwrap_or(0.5) as f32;
                for (arg, v) in [("prob", prob), ("salt_vs_pepper", salt_vs_pepper)] {
                    if !(0.0..=1.0).contains(&v) {
                        return Err(Error::arg(name, arg, format!("must be within [0, 1]; sample {i} has {v}")));
                    }
                }
                let (max, min) = type_limits(dtype);
                let salt = get("salt_val")?.map_or(max, |v| store_static_cast(dtype, v as f32));
                let pepper = get("pepper_val")?.map_or(min, |v| store_static_cast(dtype, v as f32));
                Params::SaltAndPepper { prob, salt_prob: prob * salt_vs_pepper, salt, pepper }
            }
            Kind::Shot => {
                let factor = get("factor")?.map_or(SHOT_DEFAULT_FACTOR, |v| v as f32);
                finite("factor", factor as f64)?;
                Params::Shot { factor }
            }
        })
    }
}

/// The default salt and pepper of a type, as element bytes: its maximum and minimum, 1 and
/// -1 for FLOAT.
fn type_limits(dtype: DType) -> ([u8; 8], [u8; 8]) {
    let (hi, lo): (i128, i128) = match dtype {
        DType::F32 => return (pad(&1.0f32.to_le_bytes()), pad(&(-1.0f32).to_le_bytes())),
        DType::U8 => (u8::MAX as i128, 0),
        DType::I8 => (i8::MAX as i128, i8::MIN as i128),
        DType::U16 => (u16::MAX as i128, 0),
        DType::I16 => (i16::MAX as i128, i16::MIN as i128),
        DType::U32 => (u32::MAX as i128, 0),
        DType::I32 => (i32::MAX as i128, i32::MIN as i128),
        DType::U64 => (u64::MAX as i128, 0),
        DType::I64 => (i64::MAX as i128, i64::MIN as i128),
        _ => unreachable!("types checked by plan"),
    };
    // Two's complement: the low `size` bytes of the value are the element.
    let bytes = |v: i128| pad(&v.to_le_bytes()[..8]);
    (bytes(hi), bytes(lo))
}

fn pad(b: &[u8]) -> [u8; 8] {
    let mut out = [0u8; 8];
    out[..b.len()].copy_from_slice(b);
    out
}

impl Operator for Noise {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let meta = self.plan(ws, input.meta())?;
        let dtype = meta.dtype();
        let mut out = TensorList::for_overwrite(meta); // every element is written
        let plans = &self.plans;
        for_each_sample(ws.pool, &mut out, |i, dst| {
            apply(dtype, dst, input.bytes(i), &plans[i]);
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// An element type the noise operators take, with what DALI computes it in.
trait Elem: bytemuck::Pod + Send + Sync + 'static {
    const DTYPE: DType;
    /// Gaussian noise is added in f32 (8- and 16-bit integers, FLOAT); in f64 otherwise.
    const ADD_IN_F32: bool;
    fn to_f32(self) -> f32;
    fn to_f64(self) -> f64;
}

macro_rules! elem {
    ($($t:ty => $d:ident, $f32:expr;)*) => {$(
        impl Elem for $t {
            const DTYPE: DType = DType::$d;
            const ADD_IN_F32: bool = $f32;
            #[inline(always)]
            fn to_f32(self) -> f32 { self as f32 }
            #[inline(always)]
            fn to_f64(self) -> f64 { self as f64 }
        }
    )*};
}
elem! {
    u8 => U8, true; i8 => I8, true; u16 => U16, true; i16 => I16, true;
    u32 => U32, false; i32 => I32, false; u64 => U64, false; i64 => I64, false;
    f32 => F32, true;
}

/// DALI's `ConvertSat<T>` of a value (`tensor::element`'s rule: round half away from zero,
/// saturate).
#[inline(always)]
fn sat<T: Elem>(v: f64) -> T {
    let mut b = [0u8; 8];
    store_f64(T::DTYPE, &mut b, 0, v);
    bytemuck::pod_read_unaligned(&b[..std::mem::size_of::<T>()])
}

/// Elements per parallel chunk of a sample.
const CHUNK: usize = 1 << 15;

/// Sample `src` with noise into `dst` (bytes of `dtype`).
fn apply(dtype: DType, dst: &mut [u8], src: &[u8], plan: &SamplePlan) {
    macro_rules! go {
        ($t:ty) => {
            apply_typed::<$t>(bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(src), plan)
        };
    }
    match dtype {
        DType::U8 => go!(u8),
        DType::I8 => go!(i8),
        DType::U16 => go!(u16),
        DType::I16 => go!(i16),
        DType::U32 => go!(u32),
        DType::I32 => go!(i32),
        DType::U64 => go!(u64),
        DType::I64 => go!(i64),
        DType::F32 => go!(f32),
        _ => unreachable!("types checked by plan"),
    }
}

/// Runs `f(first_element, chunk)` over chunks of `chunk` elements of `dst`, in parallel on
/// the pool this runs on (the draws depend on element indices only, so the split is free).
fn chunked<T: Send>(dst: &mut [T], chunk: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    dst.par_chunks_mut(chunk.max(1)).enumerate().for_each(|(k, d)| f(k * chunk, d));
}

fn apply_typed<T: Elem>(dst: &mut [T], src: &[T], plan: &SamplePlan) {
    if dst.is_empty() {
        return;
    }
    let (key, stream) = (plan.key, plan.stream);
    match plan.params {
        Params::Gaussian { mean, stddev } => chunked(dst, CHUNK, |e0, d| {
            // `random.normal`'s value e: mean + stddev * z in f64.
            crate::rng::normals(key, stream, e0..e0 + d.len(), |e, z| d[e - e0] = add_noise(src[e], mean + stddev * z));
        }),
        Params::SaltAndPepper { prob, salt_prob, salt, pepper } => {
            let size = std::mem::size_of::<T>();
            let (salt, pepper): (T, T) = (bytemuck::pod_read_unaligned(&salt[..size]), bytemuck::pod_read_unaligned(&pepper[..size]));
            let (prob, salt_prob) = (prob as f64, salt_prob as f64);
            // Pixel p's uniform: words 0-1 (even p) or 2-3 (odd p) of block p / 2, so one
            // block serves two pixels (the last block is kept: pixels come in order).
            let decider = || {
                let mut cached: (u64, [u32; 4]) = (u64::MAX, [0; 4]);
                move |p: usize| -> Option<T> {
                    let j = (p / 2) as u64;
                    if cached.0 != j {
                        cached = (j, draw::block(key, stream, j));
                    }
                    let b = cached.1;
                    let u = if p % 2 == 0 { draw::u53(b[0], b[1]) } else { draw::u53(b[2], b[3]) };
                    (u < prob).then_some(if u < salt_prob { salt } else { pepper })
                }
            };
            if plan.channels <= 1 || plan.c_stride == 1 {
                // One element per draw, or channels last: chunks of whole pixels.
                let c = plan.channels.max(1);
                chunked(dst, c * (CHUNK / c).max(1), |e0, d| {
                    let mut decide = decider();
                    for (q, px) in d.chunks_exact_mut(c).enumerate() {
                        let p = e0 / c + q;
                        match decide(p) {
                            Some(v) => px.fill(v),
                            None => px.copy_from_slice(&src[p * c..p * c + c]),
                        }
                    }
                });
            } else {
                // Channels first: element e is pixel e % plane of its plane (the pixel's
                // draw is made once per channel; every channel draws the same).
                let plane = plan.c_stride;
                chunked(dst, CHUNK, |e0, d| {
                    let mut decide = decider();
                    for (k, o) in d.iter_mut().enumerate() {
                        let e = e0 + k;
                        *o = decide(e % plane).unwrap_or(src[e]);
                    }
                });
            }
        }
        Params::Shot { factor } => {
            if factor == 0.0 {
                dst.copy_from_slice(src);
                return;
            }
            let inv = 1.0f32 / factor;
            chunked(dst, CHUNK, |e0, d| {
                for (k, o) in d.iter_mut().enumerate() {
                    let e = e0 + k;
                    let lam = src[e].to_f32() * inv;
                    let n = draw::poisson(if lam > 0.0 { lam as f64 } else { 0.0 }, key, e as u64);
                    *o = sat::<T>(((n as f32) * factor) as f64);
                }
            });
        }
    }
}

/// `ConvertSat<T>(x + g)`, added in DALI's `FloatType` for `T`.
#[inline(always)]
fn add_noise<T: Elem>(x: T, g: f64) -> T {
    if T::ADD_IN_F32 {
        sat::<T>((x.to_f32() + g as f32) as f64)
    } else {
        sat::<T>(x.to_f64() + g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_salt_and_pepper_are_the_type_limits() {
        let (s, p) = type_limits(DType::U8);
        assert_eq!((s[0], p[0]), (255, 0));
        let (s, p) = type_limits(DType::I16);
        assert_eq!((i16::from_le_bytes([s[0], s[1]]), i16::from_le_bytes([p[0], p[1]])), (i16::MAX, i16::MIN));
        let (s, p) = type_limits(DType::I64);
        assert_eq!((i64::from_le_bytes(s), i64::from_le_bytes(p)), (i64::MAX, i64::MIN));
        let (s, p) = type_limits(DType::U64);
        assert_eq!((u64::from_le_bytes(s), u64::from_le_bytes(p)), (u64::MAX, 0));
        let (s, p) = type_limits(DType::F32);
        assert_eq!((f32::from_le_bytes([s[0], s[1], s[2], s[3]]), f32::from_le_bytes([p[0], p[1], p[2], p[3]])), (1.0, -1.0));
    }

    #[test]
    fn adding_noise_rounds_and_saturates_in_dalis_float_type() {
        assert_eq!(add_noise(10u8, 2.5), 13); // half away from zero
        assert_eq!(add_noise(250u8, 10.0), 255);
        assert_eq!(add_noise(3i8, -200.0), -128);
        assert_eq!(add_noise(0u64, 1e30), u64::MAX);
        assert_eq!(add_noise(0u64, -5.0), 0);
        assert_eq!(add_noise(1i64 << 60, 0.4), 1i64 << 60);
        // FLOAT adds in f32: the noise rounds to f32 first.
        let g = 0.1f64;
        assert_eq!(add_noise(1.0f32, g), 1.0f32 + 0.1f32);
        // INT32 adds in f64.
        assert_eq!(add_noise(2_000_000_000i32, 0.5), 2_000_000_001);
    }

    fn plan(params: Params, pixels: usize, channels: usize, p_stride: usize, c_stride: usize) -> SamplePlan {
        let (key, stream) = crate::rng::SampleRng::new(5, 0, 1, 2).key_and_stream();
        SamplePlan { key, stream, pixels, channels, p_stride, c_stride, params }
    }

    #[test]
    fn per_pixel_salt_and_pepper_treats_channels_first_and_last_alike() {
        let params = Params::SaltAndPepper { prob: 0.5, salt_prob: 0.25, salt: pad(&[255]), pepper: pad(&[0]) };
        let (h, w, c) = (37, 1001, 3); // several chunks
        let src: Vec<u8> = (0..h * w * c).map(|k| (k % 251) as u8 + 1).collect();
        let mut last = vec![0u8; src.len()];
        apply_typed(&mut last, &src, &plan(params, h * w, c, c, 1));
        // The same image, channels first.
        let planes: Vec<u8> = (0..c).flat_map(|ch| (0..h * w).map(move |p| (ch, p))).map(|(ch, p)| src[p * c + ch]).collect();
        let mut first = vec![0u8; src.len()];
        apply_typed(&mut first, &planes, &plan(params, h * w, c, 1, h * w));
        let (mut salt, mut pepper) = (0, 0);
        for p in 0..h * w {
            let px = &last[p * c..p * c + c];
            let kept = px == &src[p * c..p * c + c];
            assert!(kept || px.iter().all(|&v| v == 255) || px.iter().all(|&v| v == 0), "pixel {p}: {px:?}");
            salt += (!kept && px[0] == 255) as usize;
            pepper += (!kept && px[0] == 0) as usize;
            for ch in 0..c {
                assert_eq!(first[ch * h * w + p], px[ch]);
            }
        }
        let n = (h * w) as f64;
        assert!((salt as f64 / n - 0.25).abs() < 0.01 && (pepper as f64 / n - 0.25).abs() < 0.01, "{salt} {pepper}");
    }

    #[test]
    fn shot_noise_is_a_multiple_of_the_factor_and_zero_factor_copies() {
        let src = vec![40.0f32; 5000];
        let mut dst = vec![0.0f32; 5000];
        apply_typed(&mut dst, &src, &plan(Params::Shot { factor: 4.0 }, 5000, 1, 1, 0));
        assert!(dst.iter().all(|v| v % 4.0 == 0.0));
        let mean = dst.iter().map(|&v| v as f64).sum::<f64>() / 5000.0;
        assert!((mean - 40.0).abs() < 1.0, "{mean}");
        apply_typed(&mut dst, &src, &plan(Params::Shot { factor: 0.0 }, 5000, 1, 1, 0));
        assert_eq!(dst, src);
    }
}
