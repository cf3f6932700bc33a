//! `fn.segmentation.random_mask_pixel` (cpu, as DALI 2.4): the coordinates (INT64, one per
//! dimension of the mask) of a pixel drawn uniformly from a mask's foreground, or from all of
//! its pixels (`dali/operators/segmentation/random_mask_pixel.cc`).
//!
//! Per sample (all arguments may come per sample): with `foreground` 0, each coordinate is
//! drawn uniformly in its extent; otherwise the foreground's pixels are counted, one of them
//! is drawn uniformly and its flat index becomes coordinates. The foreground is the pixels
//! equal to `value` (when it is representable in the mask's type, as DALI checks with a
//! round trip through `int`; otherwise there is none) or above `threshold` (default 0,
//! compared as f32). A mask without foreground falls back to a uniform pixel, as in DALI.
//! The draws are Sluice's (a Philox stream per sample), so positions equal DALI's in
//! distribution, not value: `tests/test_segmentation.py` checks DALI's invariants on both.
//! A mask with no pixels at all is an error naming the sample (DALI draws from an empty
//! range, which is undefined).

use crate::error::{Error, Result};
use crate::ops::{for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::rng::SampleRng;
use crate::tensor::{DType, TensorList};

/// Schema and backend.
pub static RANDOM_MASK_PIXEL: OpDef = OpDef {
    schema: OpSchema {
        name: "segmentation__RandomMaskPixel",
        doc: "Selects random pixel coordinates in a mask, sampled from a uniform distribution.

Based on run-time argument `foreground`, it returns either only foreground pixels or any pixels. Pixels are classified as foreground either when their value exceeds a given `threshold` or when it's equal to a specific `value`.",
        devices: &[Device::Cpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("value", T::Int, D::Optional, "All pixels equal to this value are interpreted as foreground. This argument is mutually exclusive with `threshold` argument and is meant to be used only with integer inputs."),
            tensor_arg("threshold", T::Float, D::Float(0.0), "All pixels with a value above this threshold are interpreted as foreground. This argument is mutually exclusive with `value` argument."),
            tensor_arg("foreground", T::Int, D::Int(0), "If different than 0, the pixel position is sampled uniformly from all foreground pixels. If 0, the pixel position is sampled uniformly from all available pixels."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(RandomMaskPixel::new(ctx)?))),
    mixed: None,
    gpu: None,
};

const MASK_TYPES: [DType; 11] = [DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::I32, DType::U64, DType::I64, DType::F32, DType::F64, DType::Bool];

struct RandomMaskPixel {
    ctx: OpContext,
    by_value: bool,
}

impl RandomMaskPixel {
    fn new(ctx: &OpContext) -> Result<RandomMaskPixel> {
        let by_value = ctx.given("value");
        if by_value && ctx.given("threshold") {
            return Err(Error::arg(&ctx.display_name, "threshold", "Arguments ``value`` and ``threshold`` can not be provided together"));
        }
        Ok(RandomMaskPixel { ctx: ctx.clone(), by_value })
    }
}

/// Which pixels are foreground.
#[derive(Clone, Copy)]
enum Foreground {
    /// Equal to this value (already known to be representable in the mask's type).
    Equal(f64),
    /// Above this threshold (compared as f32).
    Above(f32),
    /// `value` cannot be represented in the mask's type: no pixel is foreground.
    Nothing,
}

/// A mask element type: its value as C++ converts it to float (for `threshold`) and as f64
/// (exact for every value `value` can select, see [`cast_value`]).
trait MaskElement: bytemuck::Pod {
    fn as_f32(self) -> f32;
    fn as_f64(self) -> f64;
}

macro_rules! mask_element {
    ($($t:ty),*) => {$(impl MaskElement for $t {
        #[inline(always)]
        fn as_f32(self) -> f32 { self as f32 }
        #[inline(always)]
        fn as_f64(self) -> f64 { self as f64 }
    })*};
}
mask_element!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

/// The number of foreground elements of `mask` and, when `k` is given, the flat index of the
/// `k`-th one (a typed loop per rule, so each compiles to a plain comparison).
fn foreground<T: MaskElement>(mask: &[T], fg: Foreground, k: Option<u64>) -> (u64, Option<usize>) {
    fn scan<T: Copy>(mask: &[T], hit: impl Fn(T) -> bool, k: Option<u64>) -> (u64, Option<usize>) {
        match k {
            None => (mask.iter().filter(|&&x| hit(x)).count() as u64, None),
            Some(k) => (0, mask.iter().enumerate().filter(|&(_, &x)| hit(x)).nth(k as usize).map(|(i, _)| i)),
        }
    }
    match fg {
        Foreground::Equal(v) => scan(mask, |x: T| x.as_f64() == v, k),
        Foreground::Above(t) => scan(mask, |x: T| x.as_f32() > t, k),
        Foreground::Nothing => (0, None),
    }
}

/// [`foreground`] on a sample's bytes of type `dtype` (BOOL is read as UINT8).
fn foreground_bytes(dtype: DType, bytes: &[u8], fg: Foreground, k: Option<u64>) -> (u64, Option<usize>) {
    match dtype {
        DType::U8 | DType::Bool => foreground::<u8>(bytes, fg, k),
        DType::I8 => foreground::<i8>(bytemuck::cast_slice(bytes), fg, k),
        DType::U16 => foreground::<u16>(bytemuck::cast_slice(bytes), fg, k),
        DType::I16 => foreground::<i16>(bytemuck::cast_slice(bytes), fg, k),
        DType::U32 => foreground::<u32>(bytemuck::cast_slice(bytes), fg, k),
        DType::I32 => foreground::<i32>(bytemuck::cast_slice(bytes), fg, k),
        DType::U64 => foreground::<u64>(bytemuck::cast_slice(bytes), fg, k),
        DType::I64 => foreground::<i64>(bytemuck::cast_slice(bytes), fg, k),
        DType::F32 => foreground::<f32>(bytemuck::cast_slice(bytes), fg, k),
        _ => foreground::<f64>(bytemuck::cast_slice(bytes), fg, k),
    }
}

/// `static_cast<T>(value)` for the mask's type, as f64, when it survives DALI's check
/// `static_cast<int>(static_cast<T>(value)) == value`; else `None`.
fn cast_value(dtype: DType, value: i64) -> Option<f64> {
    let v = value as i32;
    let (t, back): (f64, i64) = match dtype {
        DType::U8 => (v as u8 as f64, v as u8 as i64),
        DType::I8 => (v as i8 as f64, v as i8 as i64),
        DType::U16 => (v as u16 as f64, v as u16 as i64),
        DType::I16 => (v as i16 as f64, v as i16 as i64),
        DType::U32 => (v as u32 as f64, v as u32 as i32 as i64),
        DType::U64 => (v as i64 as u64 as f64, v as i64),
        DType::I32 | DType::I64 => (v as f64, v as i64),
        DType::Bool => ((v != 0) as u8 as f64, (v != 0) as i64),
        DType::F32 => ((v as f32) as f64, (v as f32) as i32 as i64),
        _ => (v as f64, v as i64),
    };
    (back == value).then_some(t)
}

impl Operator for RandomMaskPixel {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let ctx = &self.ctx;
        let op = ctx.display_name.as_str();
        let mask = ws.inputs[0];
        let dtype = mask.dtype();
        if !MASK_TYPES.contains(&dtype) {
            return Err(Error::type_mismatch(op, format!("Unexpected data type: {}", dtype.dali_name())));
        }
        let ndim = mask.ndim();
        let n = mask.len();
        let (value, threshold, foreground) = (ws.per_sample(ctx, "value"), ws.per_sample(ctx, "threshold"), ws.per_sample(ctx, "foreground"));
        let mut rules = Vec::with_capacity(n);
        for i in 0..n {
            let wants = foreground.get(op, i)?.unwrap_or(0.0) != 0.0;
            let rule = if !wants {
                None
            } else if self.by_value {
                let v = value.get(op, i)?.expect("given") as i64;
                Some(cast_value(dtype, v).map_or(Foreground::Nothing, Foreground::Equal))
            } else {
                Some(Foreground::Above(threshold.get(op, i)?.unwrap_or(0.0) as f32))
            };
            if mask.numel(i) == 0 {
                return Err(Error::data(ctx.at(ws.iteration, i, mask.source_info(i)), format!("cannot draw a pixel from an empty mask of shape {:?}", mask.shape(i))));
            }
            rules.push(rule);
        }
        let mut out = TensorList::uniform(DType::I64, &[ndim], n);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let mut rng: SampleRng = ws.rng(ctx, i);
            let shape = mask.shape(i);
            let mut pos = vec![0i64; ndim];
            let flat = rules[i].and_then(|fg| {
                let bytes = mask.bytes(i);
                let (count, _) = foreground_bytes(dtype, bytes, fg, None);
                (count > 0).then(|| foreground_bytes(dtype, bytes, fg, Some(rng.below(count))).1.expect("k is below the count"))
            });
            match flat {
                Some(mut flat) => {
                    for d in (0..ndim).rev() {
                        pos[d] = (flat % shape[d]) as i64;
                        flat /= shape[d];
                    }
                }
                None => {
                    for d in 0..ndim {
                        pos[d] = rng.below(shape[d] as u64) as i64;
                    }
                }
            }
            for (d, p) in pos.iter().enumerate() {
                dst[d * 8..d * 8 + 8].copy_from_slice(&p.to_le_bytes());
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}
