//! `fn.resize`: resizes images (HWC, CHW), sequences (FHWC, FCHW, CFHW: every frame alike)
//! and volumes (DHWC, CDHW, FDHWC, FCDHW, CFDHW) with DALI 2.4's sizing rules (`ResizeAttr`)
//! and separable resampling filters (see [`kernel`], and [`volume`] for the depth axis).
//! Each sample is a run of planes (images or volumes) one plan resamples ([`Planes`]).
//!
//! Sizing, per spatial axis in shape order ((D,) H, W), in DALI's f32/f64 mix: the requested
//! extents come from `resize_z`/`resize_y`/`resize_x`, `size` or
//! `resize_shorter`/`resize_longer` (which imply `not_smaller` / `not_larger`); missing
//! extents follow `mode` (in `default`, the geometric mean of the given scales); `max_size`
//! caps them; the output extent is `max(1, round_half_away(|extent|))`. With
//! `subpixel_scale` a fractional extent keeps the scale and shrinks/grows the source ROI
//! about its centre instead. Negative extents flip the axis (as in DALI).

mod crop_mirror;
mod gpu;
pub mod kernel;
pub mod volume;

pub use crop_mirror::{FAST_RESIZE_CROP_MIRROR, RESIZE_CROP_MIRROR};

pub(crate) use gpu::GpuResampler;

use kernel::{axis_filter, FilterKind, Plan};
use volume::Depth;

use crate::error::{Error, Result};
use crate::ops::crop::window::CropSpec;
use crate::ops::{arg, removed_arg, for_each_sample, tensor_arg, ArgDefault as D, ArgSchema, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, PerSampleList, Workspace, MAX_LIST};
use crate::tensor::{BatchMeta, DType, TensorList};

/// The sizing, region, filter and type arguments, shared with `resize_crop_mirror`.
pub(crate) const RESIZE_ARGS: &[ArgSchema] = &[
    removed_arg("image_type", T::ImageType),
    tensor_arg("resize_x", T::Float, D::Optional, "Output width; 0 or missing keeps the aspect ratio from resize_y. Negative flips."),
    tensor_arg("resize_y", T::Float, D::Optional, "Output height; 0 or missing keeps the aspect ratio from resize_x. Negative flips."),
    tensor_arg("resize_z", T::Float, D::Optional, "Output depth of a volume; 0 or missing keeps the aspect ratio. Negative flips."),
    tensor_arg("resize_shorter", T::Float, D::Optional, "Length of the shorter side; keeps the aspect ratio (mode not_smaller)."),
    tensor_arg("resize_longer", T::Float, D::Optional, "Length of the longer side; keeps the aspect ratio (mode not_larger)."),
    tensor_arg("size", T::FloatList, D::Optional, "Output size in shape order ([D,] H, W) or one value for all; 0 extents are computed according to mode."),
    arg("mode", T::Str, D::Optional, "\"default\", \"stretch\", \"not_smaller\" or \"not_larger\"."),
    arg("max_size", T::FloatList, D::Optional, "Limit of the output size, per axis ([D,] H, W) or one value for all."),
    arg("subpixel_scale", T::Bool, D::Bool(true), "Adjust the input ROI to keep the exact scale when the output size is fractional."),
    tensor_arg("roi_start", T::FloatList, D::Optional, "Start of the input region of interest ([z,] y, x)."),
    tensor_arg("roi_end", T::FloatList, D::Optional, "End of the input region of interest ([z,] y, x)."),
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
        doc: "Resizes images (HWC, CHW), sequences (FHWC, FCHW, CFHW) and volumes (DHWC, CDHW, FDHWC, FCDHW, CFDHW; uint8, int16, uint16, int32 or float) with separable resampling filters, reproducing DALI's sizing modes and filters.",
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
    pub subpixel_scale: bool,
}

/// `max_size`'s values (one, or one per spatial axis).
#[derive(Debug, Clone, Copy)]
pub struct MaxSize {
    values: [f32; 3],
    len: usize,
}

impl MaxSize {
    /// The limit of each of `N` axes, or an error when the count fits neither.
    pub fn per_axis<const N: usize>(&self) -> std::result::Result<[f32; N], String> {
        match self.len {
            1 => Ok([self.values[0]; N]),
            l if l == N => Ok(std::array::from_fn(|d| self.values[d])),
            l => Err(format!("has {l} values; expected 1 or {N} for {N} spatial dimensions")),
        }
    }
}

/// Output extents and source ROI of one sample: `(out, src_lo, src_hi)` per spatial axis in
/// shape order, where a flipped axis has `src_lo > src_hi` (DALI's `CalculateSampleParams`);
/// `max_size` caps the extents.
pub fn sample_params<const N: usize>(s: &Sizing, max_size: Option<[f32; N]>, requested: [f32; N], in_lo: [f32; N], in_hi: [f32; N]) -> ([usize; N], [f32; N], [f32; N]) {
    let (mut req, mut lo, mut hi) = (requested, in_lo, in_hi);
    let mut in_size = [0f32; N];
    for d in 0..N {
        let mut sz = hi[d] - lo[d];
        if sz < 0.0 {
            std::mem::swap(&mut hi[d], &mut lo[d]);
            req[d] = -req[d];
            sz = -sz;
        }
        in_size[d] = sz;
    }
    adjust_output_size(s.mode, max_size, &mut req, &in_size);
    let mut out = [0usize; N];
    for d in 0..N {
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

/// DALI's `AdjustOutputSize`.
fn adjust_output_size<const N: usize>(mode: Mode, max_size: Option<[f32; N]>, out: &mut [f32; N], in_size: &[f32; N]) {
    let mut scale = [1f64; N];
    let mut mask = [false; N];
    let mut provided = 0;
    for d in 0..N {
        mask[d] = out[d] != 0.0 && in_size[d] != 0.0;
        scale[d] = if in_size[d] != 0.0 { (out[d] / in_size[d]) as f64 } else { 1.0 };
        provided += mask[d] as usize;
    }
    if provided == 0 {
        *out = *in_size;
        return;
    }
    let cap = |out: &mut [f32; N]| {
        if let Some(m) = max_size {
            for d in 0..N {
                if m[d] > 0.0 && out[d].abs() > m[d] {
                    out[d] = m[d].copysign(out[d]);
                }
            }
        }
    };
    match mode {
        Mode::Default => {
            if provided < N {
                // The missing extents take the geometric mean of the given scales.
                let mut avg = 1f64;
                for d in 0..N {
                    if mask[d] {
                        avg *= scale[d].abs();
                    }
                }
                if provided > 1 {
                    avg = avg.powf(1.0 / provided as f64);
                }
                for d in 0..N {
                    if !mask[d] {
                        out[d] = (in_size[d] as f64 * avg) as f32;
                    }
                }
            }
            cap(out);
        }
        Mode::Stretch => {
            for d in 0..N {
                if !mask[d] {
                    out[d] = in_size[d];
                }
            }
            cap(out);
        }
        Mode::NotSmaller | Mode::NotLarger => {
            let mut fin = 0f64;
            let mut first = true;
            for d in 0..N {
                if mask[d] {
                    let sc = scale[d].abs() as f32 as f64;
                    if first || (mode == Mode::NotSmaller && sc > fin) || (mode == Mode::NotLarger && sc < fin) {
                        fin = sc;
                    }
                    first = false;
                }
            }
            if let Some(m) = max_size {
                for d in 0..N {
                    if m[d] > 0.0 {
                        let sc = m[d] as f64 / in_size[d] as f64;
                        if sc < fin {
                            fin = sc;
                        }
                    }
                }
            }
            for d in 0..N {
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
    /// `max_size` as given: one value for every axis, or one per axis.
    max_size: Option<MaxSize>,
    min: FilterKind,
    mag: FilterKind,
    antialias: bool,
    dtype: Option<DType>,
    /// `resize_crop_mirror`: each resized sample is then cropped (`crop*` arguments) and
    /// flipped (`mirror`), folded into the source window of one resampling.
    crop_mirror: bool,
    plans: Vec<Plan>,
    /// The depth axis of every sample of the last batch, when it held volumes (empty for
    /// images): each sample's plan then resamples the (H, W) of every slice.
    depths: Vec<Depth>,
}

/// The layouts the resize family takes, each a run of planes resampled alike: images or, for
/// 3-D layouts, volumes (DALI's layouts; a 3-D input without a layout is HWC).
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
    Dhwc,
    /// Channels of volumes: every channel is a volume.
    Cdhw,
    /// Frames of DHWC volumes.
    Fdhwc,
    /// Frames of CDHW volumes: every channel of every frame is a volume.
    Fcdhw,
    /// Channels of volume sequences: every frame of every channel is a volume.
    Cfdhw,
}

/// A sample as the resize family sees it: `planes` volumes of `d x h x w x c` each (`d` is
/// 1 for images).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extents {
    pub d: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub planes: usize,
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
            ("DHWC", 4) => Ok(Planes::Dhwc),
            ("CDHW", 4) => Ok(Planes::Cdhw),
            ("FDHWC", 5) => Ok(Planes::Fdhwc),
            ("FCDHW", 5) => Ok(Planes::Fcdhw),
            ("CFDHW", 5) => Ok(Planes::Cfdhw),
            ("", nd) => Err(format!("expected an HWC image (3 dimensions) or a layout, got {nd} dimensions without one")),
            (l, nd) => Err(format!(
                "unsupported layout '{l}' ({nd} dimensions): expected HWC, CHW, FHWC, FCHW, CFHW, DHWC, CDHW, FDHWC, FCDHW or CFDHW"
            )),
        }
    }

    /// 3 for volumes, 2 for images.
    pub(crate) fn spatial_ndim(self) -> usize {
        match self {
            Planes::Hwc | Planes::Chw | Planes::Fhwc | Planes::Fchw | Planes::Cfhw => 2,
            _ => 3,
        }
    }

    /// The extents of a sample of this layout.
    pub(crate) fn split(self, s: &[usize]) -> Extents {
        let e = |d, h, w, c, planes| Extents { d, h, w, c, planes };
        match self {
            Planes::Hwc => e(1, s[0], s[1], s[2], 1),
            Planes::Chw => e(1, s[1], s[2], 1, s[0]),
            Planes::Fhwc => e(1, s[1], s[2], s[3], s[0]),
            Planes::Fchw | Planes::Cfhw => e(1, s[2], s[3], 1, s[0] * s[1]),
            Planes::Dhwc => e(s[0], s[1], s[2], s[3], 1),
            Planes::Cdhw => e(s[1], s[2], s[3], 1, s[0]),
            Planes::Fdhwc => e(s[1], s[2], s[3], s[4], s[0]),
            Planes::Fcdhw | Planes::Cfdhw => e(s[2], s[3], s[4], 1, s[0] * s[1]),
        }
    }

    /// The output shape of a sample of shape `s` resampled to `out` ([D, H, W]; D is
    /// ignored for images).
    pub(crate) fn resized(self, s: &[usize], out: [usize; 3]) -> Vec<usize> {
        let [d, h, w] = out;
        match self {
            Planes::Hwc => vec![h, w, s[2]],
            Planes::Chw => vec![s[0], h, w],
            Planes::Fhwc => vec![s[0], h, w, s[3]],
            Planes::Fchw | Planes::Cfhw => vec![s[0], s[1], h, w],
            Planes::Dhwc => vec![d, h, w, s[3]],
            Planes::Cdhw => vec![s[0], d, h, w],
            Planes::Fdhwc => vec![s[0], d, h, w, s[4]],
            Planes::Fcdhw | Planes::Cfdhw => vec![s[0], s[1], d, h, w],
        }
    }
}

fn supported(d: DType) -> bool {
    matches!(d, DType::U8 | DType::I16 | DType::U16 | DType::I32 | DType::F32)
}

impl Resize {
    fn new(ctx: &OpContext) -> Result<Resize> {
        let name = ctx.display_name.as_str();
        let separate = ctx.given("resize_x") || ctx.given("resize_y") || ctx.given("resize_z");
        let count = separate as usize + ctx.given("size") as usize + ctx.given("resize_shorter") as usize + ctx.given("resize_longer") as usize;
        if count != 1 {
            let what = if count == 0 { "no output size given" } else { "more than one way of giving the output size" };
            let arg = ["resize_shorter", "resize_longer", "size", "resize_x"].into_iter().find(|a| ctx.given(a)).unwrap_or("size");
            return Err(Error::arg(name, arg, format!(
                "{what}: use exactly one of resize_x/resize_y/resize_z, size, resize_shorter or resize_longer"
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
        // Constant lists hold one value for every axis or one per spatial axis ([D,] H, W);
        // whether the input needs 2 or 3 is checked per batch.
        let list = |a: &str| -> Result<Option<&[f64]>> {
            if !ctx.args.has(a) {
                return Ok(None);
            }
            let v = ctx.args.floats(a);
            if !(1..=3).contains(&v.len()) {
                return Err(Error::arg(name, a, format!("must have one value, or one per spatial axis ([D,] H, W); got {v:?}")));
            }
            if v.iter().any(|x| !x.is_finite()) {
                return Err(Error::arg(name, a, format!("must be finite, got {v:?}")));
            }
            Ok(Some(v))
        };
        // Constant `size` / `roi_*` are checked here, so bad values fail at build; they are
        // read (like argument inputs) per batch in `plan_batch`.
        list("size")?;
        let max_size = match list("max_size")? {
            None => None,
            Some(v) if v.iter().any(|&m| m < 0.0) => return Err(Error::arg(name, "max_size", format!("must not be negative, got {v:?}"))),
            Some(v) => Some(MaxSize { values: std::array::from_fn(|d| v.get(d).copied().unwrap_or(0.0) as f32), len: v.len() }),
        };
        list("roi_start")?;
        list("roi_end")?;
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
                return Err(Error::arg(name, "dtype", format!("must be UINT8, INT16, UINT16, INT32 or FLOAT, got {d}")));
            }
        }
        Ok(Resize {
            ctx: ctx.clone(),
            method,
            sizing: Sizing { mode, subpixel_scale: ctx.args.bool("subpixel_scale") },
            max_size,
            roi,
            roi_relative: ctx.args.bool("roi_relative"),
            min,
            mag,
            antialias: ctx.args.bool("antialias"),
            dtype,
            crop_mirror: false,
            plans: Vec::new(),
            depths: Vec::new(),
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

    /// Per-sample depth axes of the last planned batch: empty unless it held volumes.
    pub(crate) fn depths(&self) -> &[Depth] {
        &self.depths
    }

    /// Checks the input and computes every sample's output size, source window and filters.
    pub(crate) fn plan_batch(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<ResizeBatch> {
        let batch_err = |m: String| Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), m);
        let layout = input.layout();
        let planes = Planes::of(input).map_err(batch_err)?;
        let in_type = input.dtype();
        let out_type = self.dtype.unwrap_or(in_type);
        if !supported(in_type) {
            return Err(batch_err(format!("unsupported input type {in_type}: expected UINT8, INT16, UINT16, INT32 or FLOAT")));
        }
        if out_type != in_type && out_type != DType::F32 {
            return Err(batch_err(format!("cannot convert {in_type} to {out_type}: dtype must be the input type or FLOAT")));
        }
        self.plans.clear();
        self.depths.clear();
        let shapes = if planes.spatial_ndim() == 2 {
            self.plan_samples::<2>(ws, input, planes)?
        } else {
            self.plan_samples::<3>(ws, input, planes)?
        };
        let mut meta = BatchMeta::new(out_type, input.ndim(), shapes.iter().map(|s| &s[..]));
        meta.set_layout(layout.clone());
        meta.name_guessed_layout();
        meta.inherit_source_info(input);
        Ok(ResizeBatch { meta, in_type, out_type })
    }

    /// Plans every sample of a batch with `N` spatial axes (2: images, 3: volumes), pushing
    /// their plans (and depths), and returns the output shapes.
    fn plan_samples<const N: usize>(&mut self, ws: &Workspace<'_>, input: &BatchMeta, planes: Planes) -> Result<Vec<Vec<usize>>> {
        let name = self.ctx.display_name.clone();
        let n = input.len();
        // The sizing arguments of the spatial axes, in shape order.
        let axis_args = &["resize_z", "resize_y", "resize_x"][3 - N..];
        let (rx, ry, rz) = (ws.per_sample(&self.ctx, "resize_x"), ws.per_sample(&self.ctx, "resize_y"), ws.per_sample(&self.ctx, "resize_z"));
        let separate = [&rz, &ry, &rx];
        let separate = &separate[3 - N..];
        let short = ws.per_sample(&self.ctx, "resize_shorter");
        let long = ws.per_sample(&self.ctx, "resize_longer");
        let size = ws.per_sample_list(&self.ctx, "size");
        let (roi_start, roi_end) = (ws.per_sample_list(&self.ctx, "roi_start"), ws.per_sample_list(&self.ctx, "roi_end"));
        let max_size = match &self.max_size {
            Some(m) => Some(m.per_axis::<N>().map_err(|m| Error::arg(&name, "max_size", m))?),
            None => None,
        };
        // The spatial extents of sample i from a list argument: one per axis, or one for all.
        let mut buf = [0f64; MAX_LIST];
        let mut per_axis = |arg: &PerSampleList, a: &str, i: usize| -> Result<[f64; N]> {
            let v = arg.get(&name, a, i, &[1, N], &mut buf)?.unwrap_or(&[0.0]);
            let p: [f64; N] = std::array::from_fn(|d| v[if v.len() == 1 { 0 } else { d }]);
            if p.iter().any(|x| !x.is_finite()) {
                return Err(Error::arg(&name, a, format!("must be finite; sample {i} has {v:?}")));
            }
            Ok(p)
        };
        let crop = if self.crop_mirror { Some(CropSpec::new(&self.ctx, ws, true)?) } else { None };
        let mirror = ws.per_sample(&self.ctx, "mirror");
        let mut shapes = Vec::with_capacity(n);
        for i in 0..n {
            let shape = input.shape(i);
            let e = planes.split(shape);
            let extent: [usize; N] = std::array::from_fn(|d| [e.d, e.h, e.w][3 - N + d]);
            let requested: [f32; N] = match self.method {
                Method::Separate => {
                    let mut r = [0f32; N];
                    for (d, arg) in separate.iter().enumerate() {
                        r[d] = arg.get(&name, i)?.unwrap_or(0.0) as f32;
                    }
                    r
                }
                Method::Size => per_axis(&size, "size", i)?.map(|v| v as f32),
                Method::Shorter | Method::Longer => {
                    let (p, a) = if self.method == Method::Shorter { (&short, "resize_shorter") } else { (&long, "resize_longer") };
                    let v = p.get(&name, i)?.unwrap_or(0.0) as f32;
                    if !v.is_finite() {
                        return Err(Error::arg(&name, a, format!("must be finite; sample {i} has {v}")));
                    }
                    [v; N]
                }
            };
            if let Some(d) = requested.iter().position(|v| !v.is_finite()) {
                let a = if self.method == Method::Separate { axis_args[d] } else { "size" };
                return Err(Error::arg(&name, a, format!("sizes must be finite; sample {i} asks for {requested:?}")));
            }
            if extent.contains(&0) {
                return Err(Error::data(self.ctx.at(ws.iteration, i, input.source_info(i)), format!("cannot resize an empty image of shape {shape:?}")));
            }
            let (mut lo, mut hi) = ([0f32; N], extent.map(|v| v as f32));
            if self.roi {
                let (a, b) = (per_axis(&roi_start, "roi_start", i)?, per_axis(&roi_end, "roi_end", i)?);
                for d in 0..N {
                    let ext = extent[d] as f64;
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
            let (mut out, mut slo, mut shi) = sample_params(&self.sizing, max_size, requested, lo, hi);
            if let Some(crop) = &crop {
                let m = mirror.get(&name, i)?.unwrap_or(0.0) as i64;
                crop_and_mirror(&self.ctx, crop, ws.iteration, input.source_info(i), i, m, &mut out, &mut slo, &mut shi)?;
            }
            // Axis d of the sample's spatial axes: its scale and filter.
            let axis = |d: usize| {
                let len = shi[d] - slo[d];
                (slo[d], len / out[d] as f32, axis_filter(self.min, self.mag, self.antialias, len.abs(), out[d]), shi[d])
            };
            let (y, x) = (axis(N - 2), axis(N - 1));
            self.plans.push(Plan {
                in_h: e.h,
                in_w: e.w,
                c: e.c,
                planes: e.planes,
                out_h: out[N - 2],
                out_w: out[N - 1],
                origin: [y.0, x.0],
                scale: [y.1, x.1],
                end: [y.3, x.3],
                filter: [y.2, x.2],
            });
            let out_d = if N == 3 {
                let (origin, scale, filter, end) = axis(0);
                self.depths.push(Depth { in_d: e.d, out_d: out[0], origin, scale, end, filter });
                out[0]
            } else {
                1
            };
            shapes.push(planes.resized(shape, [out_d, out[N - 2], out[N - 1]]));
        }
        Ok(shapes)
    }
}

/// Folds the crop window of the resized sample (`out`, DALI's `CropAttr` placement) and the
/// flips of `mirror` (bit 0: horizontal, bit 1: vertical, bit 2: depth) into the source
/// window `slo..shi` of its `N` spatial axes, as DALI's
/// `ResizeCropMirrorAttr::PrepareResizeParams` does (in double precision): the output is the
/// window's size, and one resampling produces resize -> crop -> flip.
#[allow(clippy::too_many_arguments)]
fn crop_and_mirror<const N: usize>(ctx: &OpContext, crop: &CropSpec<'_>, iteration: u64, source: &str, i: usize, mirror: i64, out: &mut [usize; N], slo: &mut [f32; N], shi: &mut [f32; N]) -> Result<()> {
    let depth = if N == 3 { Some(out[0]) } else { None };
    let w = crop.windows(ctx, iteration, source, i, out[N - 2], out[N - 1], depth)?;
    let windows = [w.d.unwrap_or(w.h), w.h, w.w];
    for (d, &win) in windows[3 - N..].iter().enumerate() {
        let ratio = (shi[d] as f64 - slo[d] as f64) / out[d] as f64;
        let offset = slo[d] as f64;
        let (lo, hi) = (win.anchor as f64, win.anchor as f64 + win.len as f64);
        slo[d] = (lo * ratio + offset) as f32;
        shi[d] = (hi * ratio + offset) as f32;
        // DALI's mask: the last spatial dimension (W) is bit 0, H bit 1, D bit 2.
        if mirror & (1 << (N - 1 - d)) != 0 {
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
        let (plans, depths, ctx) = (&self.plans, &self.depths, &self.ctx);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let src = input.bytes(i);
            let res = resample_sample(in_type, out_type, dst, src, &plans[i], depths.get(i));
            res.map_err(|m| Error::data(ctx.at(ws.iteration, i, input.source_info(i)), m))
        })?;
        Ok(out)
    }
}

/// Resamples one sample (its volumes when `depth` is given), dispatching on the (input,
/// output) element types the operator supports. Shared with `random_resized_crop`.
pub(crate) fn resample_sample(in_type: DType, out_type: DType, dst: &mut [u8], src: &[u8], p: &Plan, depth: Option<&Depth>) -> std::result::Result<(), String> {
    match (in_type, out_type) {
        (DType::U8, DType::U8) => run::<u8, u8>(dst, src, p, depth),
        (DType::U8, DType::F32) => run::<u8, f32>(dst, src, p, depth),
        (DType::I16, DType::I16) => run::<i16, i16>(dst, src, p, depth),
        (DType::I16, DType::F32) => run::<i16, f32>(dst, src, p, depth),
        (DType::U16, DType::U16) => run::<u16, u16>(dst, src, p, depth),
        (DType::U16, DType::F32) => run::<u16, f32>(dst, src, p, depth),
        (DType::I32, DType::I32) => run::<i32, i32>(dst, src, p, depth),
        (DType::I32, DType::F32) => run::<i32, f32>(dst, src, p, depth),
        (DType::F32, DType::F32) => run::<f32, f32>(dst, src, p, depth),
        _ => Err(format!("argument 'dtype': cannot convert {in_type} to {out_type}; use the input type or FLOAT")),
    }
}

fn run<I: kernel::Channel, O: kernel::Channel>(dst: &mut [u8], src: &[u8], p: &Plan, depth: Option<&Depth>) -> std::result::Result<(), String> {
    let src: &[I] = bytemuck::try_cast_slice(src).map_err(|e| format!("misaligned input sample: {e:?}"))?;
    let dst: &mut [O] = bytemuck::try_cast_slice_mut(dst).map_err(|e| format!("misaligned output sample: {e:?}"))?;
    match depth {
        Some(z) => volume::resample_volumes(dst, src, p, z),
        None => kernel::resample_planes(dst, src, p),
    }
    Ok(())
}
