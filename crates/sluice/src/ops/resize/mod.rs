//! `fn.resize`: resizes images (HWC, CHW) and sequences (FHWC, FCHW, CFHW: every frame alike)
//! with DALI 2.4's sizing rules (`ResizeAttr`) and separable resampling filters (see
//! [`kernel`]). Each sample is a run of planes one plan resamples ([`Planes`]).
//!
//! Sizing, per spatial axis in shape order (H, W), in DALI's f32/f64 mix: the requested
//! extents come from `resize_y`/`resize_x`, `size` or `resize_shorter`/`resize_longer`
//! (which imply `not_smaller` / `not_larger`); missing extents follow `mode`; `max_size`
//! caps them; the output extent is `max(1, round_half_away(|extent|))`. With
//! `subpixel_scale` a fractional extent keeps the scale and shrinks/grows the source ROI
//! about its centre instead. Negative extents flip the axis (as in DALI).

mod crop_mirror;
mod gpu;
pub mod kernel;

pub use crop_mirror::{FAST_RESIZE_CROP_MIRROR, RESIZE_CROP_MIRROR};

pub(crate) use gpu::GpuResampler;

use kernel::{axis_filter, FilterKind, Plan};

use crate::error::{Error, Result};
use crate::ops::crop::window::CropSpec;
use crate::ops::{arg, removed_arg, for_each_sample, tensor_arg, ArgDefault as D, ArgSchema, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, PerSampleList, Workspace, MAX_LIST};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

/// The sizing, region, filter and type arguments, shared with `resize_crop_mirror`.
pub(crate) const RESIZE_ARGS: &[ArgSchema] = &[
    removed_arg("image_type", T::ImageType),
    tensor_arg("resize_x", T::Float, D::Optional, "Output width; 0 or missing keeps the aspect ratio from resize_y. Negative flips."),
    tensor_arg("resize_y", T::Float, D::Optional, "Output height; 0 or missing keeps the aspect ratio from resize_x. Negative flips."),
    tensor_arg("resize_shorter", T::Float, D::Optional, "Length of the shorter side; keeps the aspect ratio (mode not_smaller)."),
    tensor_arg("resize_longer", T::Float, D::Optional, "Length of the longer side; keeps the aspect ratio (mode not_larger)."),
    tensor_arg("size", T::FloatList, D::Optional, "Output size in shape order [H, W]; 0 extents are computed according to mode."),
    arg("mode", T::Str, D::Optional, "\"default\", \"stretch\", \"not_smaller\" or \"not_larger\"."),
    arg("max_size", T::FloatList, D::Optional, "Limit of the output size, per axis [H, W] or one value for both."),
    arg("subpixel_scale", T::Bool, D::Bool(true), "Adjust the input ROI to keep the exact scale when the output size is fractional."),
    tensor_arg("roi_start", T::FloatList, D::Optional, "Start of the input region of interest [y, x]."),
    tensor_arg("roi_end", T::FloatList, D::Optional, "End of the input region of interest [y, x]."),
    arg("roi_relative", T::Bool, D::Bool(false), "ROI coordinates are relative (0..1) to the input size."),
    arg("interp_type", T::InterpType, D::Optional, "Interpolation for both upscaling and downscaling (default INTERP_LINEAR)."),
    arg("min_filter", T::InterpType, D::Optional, "Filter used when scaling down."),
    arg("mag_filter", T::InterpType, D::Optional, "Filter used when scaling up."),
    arg("dtype", T::DType, D::Optional, "Output type: the input type (default) or FLOAT."),
    arg("temp_buffer_hint", T::Int, D::Int(0), "Ignored on CPU."),
    arg("minibatch_size", T::Int, D::Int(32), "Ignored on CPU."),
];

/// `antialias`, on by default (`fast_resize_crop_mirror` turns it off).
pub(crate) const ANTIALIAS: ArgSchema = arg("antialias", T::Bool, D::Bool(true), "Widen the filter when scaling down (not for INTERP_NN).");

/// Schema and backends.
pub static RESIZE: OpDef = OpDef {
    schema: OpSchema {
        name: "Resize",
        doc: "Resizes images (HWC, CHW) and sequences (FHWC, FCHW, CFHW; uint8, int16, int32 or float) with separable resampling filters, reproducing DALI's sizing modes and filters.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[RESIZE_ARGS, &[ANTIALIAS]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Resize::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, dev| Ok(Box::new(gpu::ResizeGpu::new(ctx, dev)?))),
};

/// DALI's `ResizeMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Default,
    Stretch,
    NotSmaller,
    NotLarger,
}

/// How the requested size is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Separate,
    Size,
    Shorter,
    Longer,
}

/// The sizing settings shared by all samples.
#[derive(Debug, Clone, Copy)]
pub struct Sizing {
    pub mode: Mode,
    pub max_size: Option<[f32; 2]>,
    pub subpixel_scale: bool,
}

/// Output extents and source ROI of one sample: `(out [H, W], src_lo, src_hi)` where a
/// flipped axis has `src_lo > src_hi` (DALI's `CalculateSampleParams`).
pub fn sample_params(s: &Sizing, requested: [f32; 2], in_lo: [f32; 2], in_hi: [f32; 2]) -> ([usize; 2], [f32; 2], [f32; 2]) {
    let (mut req, mut lo, mut hi) = (requested, in_lo, in_hi);
    let mut in_size = [0f32; 2];
    for d in 0..2 {
        let mut sz = hi[d] - lo[d];
        if sz < 0.0 {
            std::mem::swap(&mut hi[d], &mut lo[d]);
            req[d] = -req[d];
            sz = -sz;
        }
        in_size[d] = sz;
    }
    adjust_output_size(s, &mut req, &in_size);
    let mut out = [0usize; 2];
    for d in 0..2 {
        let o = req[d];
        let flip = o < 0.0;
        out[d] = (o.abs().round() as i64).max(1) as usize;
        if flip {
            std::mem::swap(&mut lo[d], &mut hi[d]);
        }
        if s.subpixel_scale && out[d] as f32 != o.abs() {
            let adj = (out[d] as f64 / o.abs() as f64).clamp(-10.0, 10.0);
            let center = (lo[d] as f64 + hi[d] as f64) * 0.5;
            lo[d] = (center + (lo[d] as f64 - center) * adj).clamp(-1e9, 1e9) as f32;
            hi[d] = (center + (hi[d] as f64 - center) * adj).clamp(-1e9, 1e9) as f32;
        }
    }
    (out, lo, hi)
}

/// DALI's `ResizeAttr::AdjustOutputSize`.
fn adjust_output_size(s: &Sizing, out: &mut [f32; 2], in_size: &[f32; 2]) {
    let mut scale = [1f64; 2];
    let mut mask = [false; 2];
    let mut provided = 0;
    for d in 0..2 {
        mask[d] = out[d] != 0.0 && in_size[d] != 0.0;
        scale[d] = if in_size[d] != 0.0 { (out[d] / in_size[d]) as f64 } else { 1.0 };
        provided += mask[d] as usize;
    }
    if provided == 0 {
        *out = *in_size;
        return;
    }
    let cap = |out: &mut [f32; 2]| {
        if let Some(m) = s.max_size {
            for d in 0..2 {
                if m[d] > 0.0 && out[d].abs() > m[d] {
                    out[d] = m[d].copysign(out[d]);
                }
            }
        }
    };
    match s.mode {
        Mode::Default => {
            if provided < 2 {
                let mut avg = 1f64;
                for d in 0..2 {
                    if mask[d] {
                        avg *= scale[d].abs();
                    }
                }
                for d in 0..2 {
                    if !mask[d] {
                        out[d] = (in_size[d] as f64 * avg) as f32;
                    }
                }
            }
            cap(out);
        }
        Mode::Stretch => {
            for d in 0..2 {
                if !mask[d] {
                    out[d] = in_size[d];
                }
            }
            cap(out);
        }
        Mode::NotSmaller | Mode::NotLarger => {
            let mut fin = 0f64;
            let mut first = true;
            for d in 0..2 {
                if mask[d] {
                    let sc = scale[d].abs() as f32 as f64;
                    if first || (s.mode == Mode::NotSmaller && sc > fin) || (s.mode == Mode::NotLarger && sc < fin) {
                        fin = sc;
                    }
                    first = false;
                }
            }
            if let Some(m) = s.max_size {
                for d in 0..2 {
                    if m[d] > 0.0 {
                        let sc = m[d] as f64 / in_size[d] as f64;
                        if sc < fin {
                            fin = sc;
                        }
                    }
                }
            }
            for d in 0..2 {
                if !mask[d] || scale[d].abs() != fin {
                    scale[d] = fin.copysign(scale[d]);
                    out[d] = (in_size[d] as f64 * scale[d]) as f32;
                }
            }
        }
    }
}

pub(crate) struct Resize {
    ctx: OpContext,
    method: Method,
    sizing: Sizing,
    /// True when `roi_start` and `roi_end` are given (constants or argument inputs).
    roi: bool,
    roi_relative: bool,
    min: FilterKind,
    mag: FilterKind,
    antialias: bool,
    dtype: Option<DType>,
    /// `resize_crop_mirror`: each resized sample is then cropped (`crop*` arguments) and
    /// flipped (`mirror`), folded into the source window of one resampling.
    crop_mirror: bool,
    plans: Vec<Plan>,
}

/// The layouts the resize family takes, each a run of planes resampled alike (DALI's 2-D
/// layouts; a 3-D input without a layout is HWC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Planes {
    Hwc,
    Chw,
    /// Frames of HWC images.
    Fhwc,
    /// Frames of CHW images: every channel of every frame is a plane.
    Fchw,
    /// Channels of frame sequences: every frame of every channel is a plane.
    Cfhw,
}

impl Planes {
    /// The layout of a batch, or an error message naming the layouts taken.
    pub(crate) fn of(meta: &BatchMeta) -> std::result::Result<Planes, String> {
        match (meta.layout().as_str(), meta.ndim()) {
            ("", 3) | ("HWC", 3) => Ok(Planes::Hwc),
            ("CHW", 3) => Ok(Planes::Chw),
            ("FHWC", 4) => Ok(Planes::Fhwc),
            ("FCHW", 4) => Ok(Planes::Fchw),
            ("CFHW", 4) => Ok(Planes::Cfhw),
            ("", nd) => Err(format!("expected an HWC image (3 dimensions) or a layout, got {nd} dimensions without one")),
            (l, nd) => Err(format!("unsupported layout '{l}' ({nd} dimensions): expected HWC, CHW, FHWC, FCHW or CFHW")),
        }
    }

    /// (H, W, interleaved channels, planes) of a sample of this layout.
    pub(crate) fn split(self, s: &[usize]) -> (usize, usize, usize, usize) {
        match self {
            Planes::Hwc => (s[0], s[1], s[2], 1),
            Planes::Chw => (s[1], s[2], 1, s[0]),
            Planes::Fhwc => (s[1], s[2], s[3], s[0]),
            Planes::Fchw | Planes::Cfhw => (s[2], s[3], 1, s[0] * s[1]),
        }
    }

    /// The output shape of a sample of shape `s` resampled to `out_h` x `out_w`.
    pub(crate) fn resized(self, s: &[usize], out_h: usize, out_w: usize) -> Vec<usize> {
        match self {
            Planes::Hwc => vec![out_h, out_w, s[2]],
            Planes::Chw => vec![s[0], out_h, out_w],
            Planes::Fhwc => vec![s[0], out_h, out_w, s[3]],
            Planes::Fchw | Planes::Cfhw => vec![s[0], s[1], out_h, out_w],
        }
    }
}

fn supported(d: DType) -> bool {
    matches!(d, DType::U8 | DType::I16 | DType::I32 | DType::F32)
}

impl Resize {
    fn new(ctx: &OpContext) -> Result<Resize> {
        let name = ctx.display_name.as_str();
        let separate = ctx.given("resize_x") || ctx.given("resize_y");
        let count = separate as usize + ctx.given("size") as usize + ctx.given("resize_shorter") as usize + ctx.given("resize_longer") as usize;
        if count != 1 {
            let what = if count == 0 { "no output size given" } else { "more than one way of giving the output size" };
            let arg = ["resize_shorter", "resize_longer", "size", "resize_x"].into_iter().find(|a| ctx.given(a)).unwrap_or("size");
            return Err(Error::arg(name, arg, format!(
                "{what}: use exactly one of resize_x/resize_y, size, resize_shorter or resize_longer"
            )));
        }
        if ctx.given("mode") && (ctx.given("resize_shorter") || ctx.given("resize_longer")) {
            let a = if ctx.given("resize_shorter") { "resize_shorter" } else { "resize_longer" };
            return Err(Error::arg(name, a, "is mutually exclusive with 'mode'"));
        }
        let method = if separate {
            Method::Separate
        } else if ctx.given("size") {
            Method::Size
        } else if ctx.given("resize_shorter") {
            Method::Shorter
        } else {
            Method::Longer
        };
        let mode = match method {
            Method::Shorter => Mode::NotSmaller,
            Method::Longer => Mode::NotLarger,
            _ => match ctx.args.opt_str("mode").unwrap_or("default") {
                "default" => Mode::Default,
                "stretch" => Mode::Stretch,
                "not_smaller" => Mode::NotSmaller,
                "not_larger" => Mode::NotLarger,
                m => return Err(Error::arg(name, "mode", format!("must be \"default\", \"stretch\", \"not_smaller\" or \"not_larger\", got \"{m}\""))),
            },
        };
        let pair = |a: &str| -> Result<Option<[f32; 2]>> {
            if !ctx.args.has(a) {
                return Ok(None);
            }
            let v = ctx.args.floats(a);
            let p = match v {
                [x] => [*x as f32, *x as f32],
                [y, x] => [*y as f32, *x as f32],
                _ => return Err(Error::arg(name, a, format!("must have 1 or 2 values ([H, W]), got {v:?}"))),
            };
            if p.iter().any(|x| !x.is_finite()) {
                return Err(Error::arg(name, a, format!("must be finite, got {v:?}")));
            }
            Ok(Some(p))
        };
        // Constant `size` / `roi_*` are checked here, so bad values fail at build; they are
        // read (like argument inputs) per batch in `plan_batch`.
        pair("size")?;
        let max_size = pair("max_size")?;
        if let Some(m) = max_size {
            if m.iter().any(|&v| v < 0.0) {
                return Err(Error::arg(name, "max_size", format!("must not be negative, got {m:?}")));
            }
        }
        pair("roi_start")?;
        pair("roi_end")?;
        let roi = ctx.given("roi_start");
        if roi != ctx.given("roi_end") {
            return Err(Error::arg(name, "roi_start", "roi_start and roi_end must be given together"));
        }
        let interp = |a: &str| -> Result<Option<FilterKind>> {
            match ctx.args.opt_int(a) {
                None => Ok(None),
                Some(id) => FilterKind::from_interp(id).map(Some).ok_or_else(|| Error::arg(name, a, format!("unknown interpolation type {id}"))),
            }
        };
        let it = interp("interp_type")?;
        let min = interp("min_filter")?.or(it).unwrap_or(FilterKind::Triangular);
        let mag = interp("mag_filter")?.or(it).unwrap_or(FilterKind::Linear);
        let dtype = if ctx.args.has("dtype") { Some(ctx.args.dtype("dtype")) } else { None };
        if let Some(d) = dtype {
            if !supported(d) {
                return Err(Error::arg(name, "dtype", format!("must be UINT8, INT16, INT32 or FLOAT, got {d}")));
            }
        }
        Ok(Resize {
            ctx: ctx.clone(),
            method,
            sizing: Sizing { mode, max_size, subpixel_scale: ctx.args.bool("subpixel_scale") },
            roi,
            roi_relative: ctx.args.bool("roi_relative"),
            min,
            mag,
            antialias: ctx.args.bool("antialias"),
            dtype,
            crop_mirror: false,
            plans: Vec::new(),
        })
    }
}

/// A planned batch: output metadata and element types (the per-sample plans stay in
/// `Resize::plans`). Shared by the cpu and gpu backends.
pub(crate) struct ResizeBatch {
    pub meta: BatchMeta,
    pub in_type: DType,
    pub out_type: DType,
}

impl Resize {
    pub(crate) fn from_ctx(ctx: &OpContext) -> Result<Resize> {
        Resize::new(ctx)
    }

    /// The planning of `resize_crop_mirror`.
    pub(crate) fn crop_mirror(ctx: &OpContext) -> Result<Resize> {
        Ok(Resize { crop_mirror: true, ..Resize::new(ctx)? })
    }

    pub(crate) fn ctx(&self) -> &OpContext {
        &self.ctx
    }

    /// Per-sample geometry and filters of the last planned batch.
    pub(crate) fn plans(&self) -> &[Plan] {
        &self.plans
    }

    /// Checks the input and computes every sample's output size, source window and filters.
    pub(crate) fn plan_batch(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<ResizeBatch> {
        let name = self.ctx.display_name.clone();
        let n = input.len();
        let batch_err = |m: String| Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), m);
        let layout = input.layout();
        let planes = Planes::of(input).map_err(batch_err)?;
        let in_type = input.dtype();
        let out_type = self.dtype.unwrap_or(in_type);
        if !supported(in_type) {
            return Err(batch_err(format!("unsupported input type {in_type}: expected UINT8, INT16, INT32 or FLOAT")));
        }
        if out_type != in_type && out_type != DType::F32 {
            return Err(batch_err(format!("cannot convert {in_type} to {out_type}: dtype must be the input type or FLOAT")));
        }
        let (rx, ry) = (ws.per_sample(&self.ctx, "resize_x"), ws.per_sample(&self.ctx, "resize_y"));
        let short = ws.per_sample(&self.ctx, "resize_shorter");
        let long = ws.per_sample(&self.ctx, "resize_longer");
        let size = ws.per_sample_list(&self.ctx, "size");
        let (roi_start, roi_end) = (ws.per_sample_list(&self.ctx, "roi_start"), ws.per_sample_list(&self.ctx, "roi_end"));
        // [H, W] of sample i from a list argument: two values, or one for both.
        let mut buf = [0f64; MAX_LIST];
        let mut hw = |arg: &PerSampleList, a: &str, i: usize| -> Result<[f64; 2]> {
            let v = arg.get(&name, a, i, &[1, 2], &mut buf)?.unwrap_or(&[0.0]);
            let p = [v[0], v[v.len() - 1]];
            if p.iter().any(|x| !x.is_finite()) {
                return Err(Error::arg(&name, a, format!("must be finite; sample {i} has {v:?}")));
            }
            Ok(p)
        };
        let crop = if self.crop_mirror { Some(CropSpec::new(&self.ctx, ws, true)?) } else { None };
        let mirror = ws.per_sample(&self.ctx, "mirror");
        self.plans.clear();
        for i in 0..n {
            let shape = input.shape(i);
            let (h, w, c, plane_count) = planes.split(shape);
            let requested = match self.method {
                Method::Separate => [ry.get(&name, i)?.unwrap_or(0.0) as f32, rx.get(&name, i)?.unwrap_or(0.0) as f32],
                Method::Size => hw(&size, "size", i)?.map(|v| v as f32),
                Method::Shorter | Method::Longer => {
                    let (p, a) = if self.method == Method::Shorter { (&short, "resize_shorter") } else { (&long, "resize_longer") };
                    let v = p.get(&name, i)?.unwrap_or(0.0) as f32;
                    if !v.is_finite() {
                        return Err(Error::arg(&name, a, format!("must be finite; sample {i} has {v}")));
                    }
                    [v, v]
                }
            };
            if requested.iter().any(|v| !v.is_finite()) {
                return Err(Error::arg(&name, "resize_x", format!("sizes must be finite; sample {i} asks for {requested:?}")));
            }
            if h == 0 || w == 0 {
                return Err(Error::data(self.ctx.at(ws.iteration, i, input.source_info(i)), format!("cannot resize an empty image of shape {shape:?}")));
            }
            let (mut lo, mut hi) = ([0f32; 2], [h as f32, w as f32]);
            if self.roi {
                let (a, b) = (hw(&roi_start, "roi_start", i)?, hw(&roi_end, "roi_end", i)?);
                for d in 0..2 {
                    let ext = if d == 0 { h } else { w } as f64;
                    let (mut l, mut u) = (a[d] as f32 as f64, b[d] as f32 as f64);
                    if self.roi_relative {
                        l *= ext;
                        u *= ext;
                    }
                    if (u - l).abs() < 1e-3 {
                        let off = if l <= u { 0.5e-3 } else { -0.5e-3 };
                        l -= off;
                        u += off;
                    }
                    lo[d] = l as f32;
                    hi[d] = u as f32;
                }
            }
            let (mut out, mut slo, mut shi) = sample_params(&self.sizing, requested, lo, hi);
            if let Some(crop) = &crop {
                let m = mirror.get(&name, i)?.unwrap_or(0.0) as i64;
                crop_and_mirror(&self.ctx, crop, ws.iteration, input.source_info(i), i, m, &mut out, &mut slo, &mut shi)?;
            }
            let mut plan = Plan { in_h: h, in_w: w, c, planes: plane_count, out_h: out[0], out_w: out[1], origin: [0.0; 2], scale: [0.0; 2], filter: [None, None] };
            for d in 0..2 {
                plan.origin[d] = slo[d];
                plan.scale[d] = (shi[d] - slo[d]) / out[d] as f32;
                plan.filter[d] = axis_filter(self.min, self.mag, self.antialias, (shi[d] - slo[d]).abs(), out[d]);
            }
            self.plans.push(plan);
        }
        let shapes: Vec<Vec<usize>> = self.plans.iter().enumerate().map(|(i, p)| planes.resized(input.shape(i), p.out_h, p.out_w)).collect();
        let mut meta = BatchMeta::new(out_type, input.ndim(), shapes.iter().map(|s| &s[..]));
        meta.set_layout(if layout.is_empty() { Layout::empty() } else { layout.clone() });
        meta.inherit_source_info(input);
        Ok(ResizeBatch { meta, in_type, out_type })
    }
}

/// Folds the crop window of the resized sample (`out`, DALI's `CropAttr` placement) and the
/// flips of `mirror` (bit 0: horizontal, bit 1: vertical) into the source window `slo..shi`,
/// as DALI's `ResizeCropMirrorAttr::PrepareResizeParams` does (in double precision): the
/// output is the window's size, and one resampling produces resize -> crop -> flip.
#[allow(clippy::too_many_arguments)]
fn crop_and_mirror(ctx: &OpContext, crop: &CropSpec<'_>, iteration: u64, source: &str, i: usize, mirror: i64, out: &mut [usize; 2], slo: &mut [f32; 2], shi: &mut [f32; 2]) -> Result<()> {
    let w = crop.windows(ctx, iteration, source, i, out[0], out[1], None)?;
    for (d, win) in [w.h, w.w].into_iter().enumerate() {
        let ratio = (shi[d] as f64 - slo[d] as f64) / out[d] as f64;
        let offset = slo[d] as f64;
        let (lo, hi) = (win.anchor as f64, win.anchor as f64 + win.len as f64);
        slo[d] = (lo * ratio + offset) as f32;
        shi[d] = (hi * ratio + offset) as f32;
        // DALI's mask: the last spatial dimension (W) is bit 0, H bit 1.
        if mirror & (1 << (1 - d)) != 0 {
            std::mem::swap(&mut slo[d], &mut shi[d]);
        }
        out[d] = win.len;
    }
    Ok(())
}

impl Operator for Resize {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let batch = self.plan_batch(ws, input.meta())?;
        Ok(vec![self.resample_batch(ws, input, batch)?])
    }
}

impl Resize {
    /// Runs a batch planned by [`Resize::plan_batch`] on `input`.
    pub(crate) fn resample_batch(&self, ws: &Workspace<'_>, input: &TensorList, batch: ResizeBatch) -> Result<TensorList> {
        let ResizeBatch { meta, in_type, out_type } = batch;
        let mut out = TensorList::for_overwrite(meta); // every output pixel is written
        let (plans, ctx) = (&self.plans, &self.ctx);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let p = &plans[i];
            let src = input.bytes(i);
            let res = resample_sample(in_type, out_type, dst, src, p);
            res.map_err(|m| Error::data(ctx.at(ws.iteration, i, input.source_info(i)), m))
        })?;
        Ok(out)
    }
}

/// Resamples one sample, dispatching on the (input, output) element types the operator
/// supports. Shared with `random_resized_crop`.
pub(crate) fn resample_sample(in_type: DType, out_type: DType, dst: &mut [u8], src: &[u8], p: &Plan) -> std::result::Result<(), String> {
    match (in_type, out_type) {
        (DType::U8, DType::U8) => run::<u8, u8>(dst, src, p),
        (DType::U8, DType::F32) => run::<u8, f32>(dst, src, p),
        (DType::I16, DType::I16) => run::<i16, i16>(dst, src, p),
        (DType::I16, DType::F32) => run::<i16, f32>(dst, src, p),
        (DType::I32, DType::I32) => run::<i32, i32>(dst, src, p),
        (DType::I32, DType::F32) => run::<i32, f32>(dst, src, p),
        (DType::F32, DType::F32) => run::<f32, f32>(dst, src, p),
        _ => Err(format!("argument 'dtype': cannot convert {in_type} to {out_type}; use the input type or FLOAT")),
    }
}

fn run<I: kernel::Channel, O: kernel::Channel>(dst: &mut [u8], src: &[u8], p: &Plan) -> std::result::Result<(), String> {
    let src: &[I] = bytemuck::try_cast_slice(src).map_err(|e| format!("misaligned input sample: {e:?}"))?;
    let dst: &mut [O] = bytemuck::try_cast_slice_mut(dst).map_err(|e| format!("misaligned output sample: {e:?}"))?;
    kernel::resample_planes(dst, src, p);
    Ok(())
}
