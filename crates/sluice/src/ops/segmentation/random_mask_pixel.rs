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

/// The mask's element `k` (of `dtype`) as f64, and as C++ converts it to float.
macro_rules! for_each_typed {
    ($dtype:expr, $bytes:expr, |$v:ident: f64, $f:ident: f32| $body:expr) => {
        match $dtype {
            DType::U8 | DType::Bool => $bytes.iter().map(|&x| { let $v = x as f64; let $f = x as f32; $body }).sum::<u64>(),
            DType::I8 => $bytes.iter().map(|&x| { let $v = x as i8 as f64; let $f = x as i8 as f32; $body }).sum::<u64>(),
            DType::U16 => bytemuck::cast_slice::<u8, u16>($bytes).iter().map(|&x| { let $v = x as f64; let $f = x as f32; $body }).sum::<u64>(),
            DType::I16 => bytemuck::cast_slice::<u8, i16>($bytes).iter().map(|&x| { let $v = x as f64; let $f = x as f32; $body }).sum::<u64>(),
            DType::U32 => bytemuck::cast_slice::<u8, u32>($bytes).iter().map(|&x| { let $v = x as f64; let $f = x as f32; $body }).sum::<u64>(),
            DType::I32 => bytemuck::cast_slice::<u8, i32>($bytes).iter().map(|&x| { let $v = x as f64; let $f = x as f32; $body }).sum::<u64>(),
            DType::U64 => bytemuck::cast_slice::<u8, u64>($bytes).iter().map(|&x| { let $v = x as f64; let $f = x as f32; $body }).sum::<u64>(),
            DType::I64 => bytemuck::cast_slice::<u8, i64>($bytes).iter().map(|&x| { let $v = x as f64; let $f = x as f32; $body }).sum::<u64>(),
            DType::F32 => bytemuck::cast_slice::<u8, f32>($bytes).iter().map(|&x| { let $v = x as f64; let $f = x; $body }).sum::<u64>(),
            _ => bytemuck::cast_slice::<u8, f64>($bytes).iter().map(|&x| { let $v = x; let $f = x as f32; $body }).sum::<u64>(),
        }
    };
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

impl Foreground {
    fn test(self, v: f64, f: f32) -> bool {
        match self {
            Foreground::Equal(x) => v == x,
            Foreground::Above(t) => f > t,
            Foreground::Nothing => false,
        }
    }
}

/// The flat index of the `k`-th foreground pixel of `bytes`.
fn kth(dtype: DType, bytes: &[u8], fg: Foreground, k: u64) -> usize {
    let mut seen = 0u64;
    let mut found = usize::MAX;
    let mut index = 0usize;
    // One pass that stops counting at the k-th hit (the macro sums, so it goes on cheaply).
    for_each_typed!(dtype, bytes, |v: f64, f: f32| {
        let hit = fg.test(v, f);
        if hit {
            if seen == k {
                found = index;
            }
            seen += 1;
        }
        index += 1;
        0
    });
    found
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
                let count = for_each_typed!(dtype, bytes, |v: f64, f: f32| fg.test(v, f) as u64);
                (count > 0).then(|| kth(dtype, bytes, fg, rng.below(count)))
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
