//! Colour operators: `fn.brightness`, `fn.contrast`, `fn.brightness_contrast`
//! ([`brightness_contrast`]); `fn.hsv`, `fn.hue`, `fn.saturation`, `fn.color_twist`
//! ([`color_twist`]); `fn.color_space_conversion` ([`conversion`]);
//! `fn.experimental.equalize` ([`equalize`]).
//!
//! Each of the first seven is an affine map of each pixel, fixed per sample, so they share
//! one plan and one kernel on each backend: the operator turns its arguments into a
//! [`Transform`] per sample (DALI's formulas, in DALI's f32 operation order), and the kernel
//! applies it. Brightness and contrast scale every element (any channel count); the
//! `color_twist` family multiplies RGB pixels by a 3x3 matrix (DALI's linear approximation in
//! YIQ space) and adds an offset. Results are DALI 2.4's cpu operator's bit for bit
//! (`tests/test_color.py`): the same f32 products and sums, without fused multiply-adds, then
//! `ConvertSat`.
//!
//! Inputs are channel-last images (`HWC`), sequences (`FHWC`) and volumes (`DHWC`); a 4-D
//! input without a layout is a sequence, as in DALI. Arguments are per sample (constants or
//! argument inputs). Where DALI reads a wrong channel count as garbage (`color_twist` on 4
//! channels) or aborts (1 channel), Sluice raises an error naming the sample.

pub mod brightness_contrast;
pub mod color_twist;
pub mod conversion;
pub mod equalize;
mod gpu;

pub use brightness_contrast::{BRIGHTNESS, BRIGHTNESS_CONTRAST, CONTRAST};
pub use color_twist::{COLOR_TWIST, HSV, HUE, SATURATION};
pub use conversion::COLOR_SPACE_CONVERSION;
pub use equalize::{EQUALIZE, EXPERIMENTAL_EQUALIZE};

use crate::error::{Error, Result};
use crate::ops::{for_each_sample, GpuOperator, OpContext, OpDef, Operator, Workspace};
use crate::tensor::channel::{avx2_twin, dispatch_pair, Channel, PairKernel};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

/// One sample's colour map.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Transform {
    /// `out = in * mul + add`, element by element.
    Scale { mul: f32, add: f32 },
    /// `out[k] = m[k][0] * r + m[k][1] * g + m[k][2] * b + offset` on 3-channel pixels.
    Matrix { m: [[f32; 3]; 3], offset: f32 },
}

/// Which family member an operator is: what its arguments mean and which types it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `brightness`, `contrast`, `brightness_contrast` (DALI's one implementation).
    BrightnessContrast,
    /// `hsv`: hue, saturation, value; UINT8 output unless `dtype` says otherwise.
    Hsv,
    /// `hue`, `saturation`, `color_twist` (the arguments each schema has).
    ColorTwist,
}

impl Kind {
    /// The element types DALI's cpu operator takes and gives.
    fn types(self) -> &'static [DType] {
        match self {
            Kind::BrightnessContrast => &[DType::U8, DType::I16, DType::I32, DType::F32],
            Kind::Hsv | Kind::ColorTwist => &[DType::U8, DType::I16, DType::I32, DType::F32, DType::F16],
        }
    }
}

/// The operator, both backends' planning and the cpu backend.
pub struct Color {
    ctx: OpContext,
    kind: Kind,
    dtype: Option<DType>,
    /// The current batch's maps, one per sample (kept to reuse the allocation).
    transforms: Vec<Transform>,
}

/// A planned batch: the output's metadata and the element types.
struct ColorBatch {
    meta: BatchMeta,
    in_type: DType,
    out_type: DType,
}

impl Color {
    fn new(ctx: &OpContext, kind: Kind) -> Result<Color> {
        let dtype = ctx.args.has("dtype").then(|| ctx.args.dtype("dtype"));
        if let Some(d) = dtype {
            if !kind.types().contains(&d) {
                return Err(Error::arg(&ctx.display_name, "dtype", format!("unsupported type {d}; supported: {}", names(kind.types()))));
            }
        }
        Ok(Color { ctx: ctx.clone(), kind, dtype, transforms: Vec::new() })
    }

    /// Checks the batch, computes every sample's [`Transform`] into `self.transforms` and
    /// describes the output. Shared by both backends.
    fn plan_batch(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<ColorBatch> {
        let name = &self.ctx.display_name;
        let n = input.len();
        let at = |i: usize| self.ctx.at(ws.iteration, i, input.source_info(i.min(n.saturating_sub(1))));
        let layout = match (input.layout().as_str(), input.ndim()) {
            ("", 3) => Layout::from("HWC"),
            ("", 4) => Layout::from("FHWC"),
            ("HWC", 3) | ("FHWC", 4) | ("DHWC", 4) => input.layout().clone(),
            (l, nd) => {
                let got = if l.is_empty() { format!("{nd} dimensions without a layout") } else { format!("layout \"{l}\"") };
                return Err(Error::type_mismatch(name, format!("input 0: {got} does not match any of the allowed layouts: HWC, FHWC, DHWC (channels last)")));
            }
        };
        let in_type = input.dtype();
        if !self.kind.types().contains(&in_type) {
            return Err(Error::data(at(0), format!("unsupported input type {in_type}; supported: {}", names(self.kind.types()))));
        }
        let out_type = match (self.dtype, self.kind) {
            (Some(d), _) => d,
            (None, Kind::Hsv) => DType::U8, // DALI's `hsv` defaults `dtype` to UINT8
            (None, _) => in_type,
        };
        self.transforms.clear();
        for i in 0..n {
            let t = match self.kind {
                Kind::BrightnessContrast => brightness_contrast::transform(&self.ctx, ws, i, in_type, out_type)?,
                Kind::Hsv | Kind::ColorTwist => {
                    let channels = input.shape(i).last().copied().unwrap_or(0);
                    if channels != 3 {
                        return Err(Error::data(at(i), format!("expected 3 channels (RGB), got {channels} in a sample of shape {:?}", input.shape(i))));
                    }
                    color_twist::transform(&self.ctx, ws, i, in_type)?
                }
            };
            self.transforms.push(t);
        }
        let mut meta = BatchMeta::new(out_type, input.ndim(), (0..n).map(|i| input.shape(i)));
        meta.set_layout(layout);
        meta.inherit_source_info(input);
        Ok(ColorBatch { meta, in_type, out_type })
    }
}

/// The affine operators of the family and their kinds: a pair of them in a row runs as one
/// pass on the GPU (`Graph::fuse_color_chains`).
pub fn affine_kind(def: &OpDef) -> Option<Kind> {
    if [&BRIGHTNESS, &CONTRAST, &BRIGHTNESS_CONTRAST].iter().any(|d| def.is(d)) {
        Some(Kind::BrightnessContrast)
    } else if def.is(&HSV) {
        Some(Kind::Hsv)
    } else if [&HUE, &SATURATION, &COLOR_TWIST].iter().any(|d| def.is(d)) {
        Some(Kind::ColorTwist)
    } else {
        None
    }
}

/// The GPU operator running `first` then `second` (affine operators, see [`affine_kind`]) as
/// one pass.
pub fn chain_gpu(first: (Kind, &OpContext), second: (Kind, &OpContext)) -> Result<Box<dyn GpuOperator>> {
    Ok(Box::new(gpu::ColorChainGpu::new(Color::new(first.1, first.0)?, Color::new(second.1, second.0)?)))
}

/// A per-sample float argument as DALI reads it (an f32), `default` when not given; an
/// error naming the sample when it is not finite.
fn float_arg(ctx: &OpContext, ws: &Workspace<'_>, arg: &'static str, i: usize, default: f32) -> Result<f32> {
    let name = &ctx.display_name;
    let v = ws.per_sample(ctx, arg).get(name, i)?.map_or(default, |v| v as f32);
    if !v.is_finite() {
        return Err(Error::arg(name, arg, format!("must be finite; sample {i} has {v}")));
    }
    Ok(v)
}

fn names(types: &[DType]) -> String {
    types.iter().map(|d| d.dali_name()).collect::<Vec<_>>().join(", ")
}

impl Operator for Color {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let ColorBatch { meta, in_type, out_type } = self.plan_batch(ws, input.meta())?;
        let mut out = TensorList::for_overwrite(meta); // every element is written
        let transforms = &self.transforms;
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let job = Job { dst, src: input.bytes(i), transform: transforms[i] };
            dispatch_pair(in_type, out_type, job).expect("types checked by plan_batch")
        })?;
        Ok(vec![out])
    }
}

/// One sample's work, typed by [`dispatch_pair`].
struct Job<'a> {
    dst: &'a mut [u8],
    src: &'a [u8],
    transform: Transform,
}

impl PairKernel for Job<'_> {
    type Output = Result<()>;

    fn run<I: Channel, O: Channel>(self) -> Result<()> {
        let src: &[I] = bytemuck::cast_slice(self.src);
        let dst: &mut [O] = bytemuck::cast_slice_mut(self.dst);
        match self.transform {
            Transform::Scale { mul, add } => scale(dst, src, mul, add),
            Transform::Matrix { m, offset } => matrix(dst, src, &m, offset),
        }
        Ok(())
    }
}

avx2_twin!(
    /// `ConvertSat(in * mul + add)` per element, in blocks: the f32 products and sums, then the
    /// rounding, as vector code (8 lanes with AVX2). For 8-bit images this is faster than
    /// DALI's table of 256 conversions, with the same values.
    fn scale<I: Channel, O: Channel>(dst: &mut [O], src: &[I], mul: f32, add: f32) => scale_body
);

#[inline(always)]
fn scale_body<I: Channel, O: Channel>(dst: &mut [O], src: &[I], mul: f32, add: f32) {
    const BLOCK: usize = 256;
    let mut values = [0.0f32; BLOCK];
    for (d, s) in dst.chunks_mut(BLOCK).zip(src.chunks(BLOCK)) {
        let values = &mut values[..s.len()];
        for (v, &s) in values.iter_mut().zip(s) {
            *v = s.to_f32() * mul + add;
        }
        O::sat_f32_row(d, values);
    }
}

/// `ConvertSat(m * rgb + offset)` per pixel, summing each row left to right as DALI's
/// `mat * vec` does. Blocks of pixels are split into channel planes first, so the arithmetic
/// and the rounding run as vector code; only the (de)interleaving is per pixel.
fn matrix<I: Channel, O: Channel>(dst: &mut [O], src: &[I], m: &[[f32; 3]; 3], offset: f32) {
    const BLOCK: usize = 512;
    let (mut r, mut g, mut b) = ([0.0f32; BLOCK], [0.0f32; BLOCK], [0.0f32; BLOCK]);
    let mut out = [[0.0f32; BLOCK]; 3];
    for (d, s) in dst.chunks_mut(3 * BLOCK).zip(src.chunks(3 * BLOCK)) {
        let n = s.len() / 3;
        let (r, g, b) = (&mut r[..n], &mut g[..n], &mut b[..n]);
        for (((px, r), g), b) in s.chunks_exact(3).zip(r.iter_mut()).zip(g.iter_mut()).zip(b.iter_mut()) {
            (*r, *g, *b) = (px[0].to_f32(), px[1].to_f32(), px[2].to_f32());
        }
        for (k, o) in out.iter_mut().enumerate() {
            let [m0, m1, m2] = m[k];
            let o = &mut o[..n];
            for (((o, &r), &g), &b) in o.iter_mut().zip(r.iter()).zip(g.iter()).zip(b.iter()) {
                *o = m0 * r + m1 * g + m2 * b + offset;
            }
            O::round_block(o);
        }
        let [o0, o1, o2] = &out;
        for (((px, &x), &y), &z) in d.chunks_exact_mut(3).zip(o0.iter()).zip(o1.iter()).zip(o2.iter()) {
            px[0] = O::from_rounded(x);
            px[1] = O::from_rounded(y);
            px[2] = O::from_rounded(z);
        }
    }
}
