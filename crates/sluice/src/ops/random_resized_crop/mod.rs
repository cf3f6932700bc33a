//! `fn.random_resized_crop` (cpu and gpu): a random window per sample, drawn as DALI's
//! `RandomCropGenerator` (shared with `decoders.image_random_crop`, see
//! [`crate::ops::decoders::random_crop_window`]), resized to `size` in one pass by the resize
//! operator's kernel with the window as its region of interest — no intermediate crop. Both
//! backends plan the batch with the same code (so they cut the same windows); the gpu one
//! then resamples every sample in one launch (`resize::GpuResampler`).

mod gpu;

use crate::error::{Error, Result};
use crate::ops::decoders::random_crop_window::{CropWindow, RandomCropParams, RANDOM_CROP_ARGS};
use crate::ops::resize::kernel::{axis_filter, FilterKind, Plan};
use crate::ops::resize::{Extents, Planes};
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backends.
pub static RANDOM_RESIZED_CROP: OpDef = OpDef {
    schema: OpSchema {
        name: "RandomResizedCrop",
        doc: "Crops a random window (area in random_area of the image, aspect ratio in random_aspect_ratio) and resizes it to size [H, W], in one resampling pass. HWC or CHW images, FHWC, FCHW or CFHW sequences (one window per sequence).",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[
            &[
                arg("size", T::FloatList, D::Required, "Output size [H, W], or one value for both."),
                arg("interp_type", T::InterpType, D::Int(1), "Interpolation for scaling up and down (default INTERP_LINEAR)."),
                arg("min_filter", T::InterpType, D::Optional, "Filter used when scaling down; interp_type when not given."),
                arg("mag_filter", T::InterpType, D::Optional, "Filter used when scaling up; interp_type when not given."),
                arg("minibatch_size", T::Int, D::Int(32), "Ignored on CPU."),
                arg("antialias", T::Bool, D::Bool(true), "Widen the filter when scaling down (not for INTERP_NN)."),
                arg("dtype", T::DType, D::Optional, "Output type: the input type (default) or FLOAT."),
                arg("temp_buffer_hint", T::Int, D::Int(0), "Ignored on CPU."),
            ],
            RANDOM_CROP_ARGS,
        ],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(RandomResizedCrop::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _dev| Ok(Box::new(gpu::RandomResizedCropGpu::new(ctx)?))),
};

struct RandomResizedCrop {
    ctx: OpContext,
    size: [usize; 2],
    min: FilterKind,
    mag: FilterKind,
    antialias: bool,
    dtype: Option<DType>,
    gen: RandomCropParams,
}

impl RandomResizedCrop {
    fn new(ctx: &OpContext) -> Result<RandomResizedCrop> {
        let op = &ctx.display_name;
        let s = ctx.args.floats("size");
        let size = match s.len() {
            1 => [s[0], s[0]],
            2 => [s[0], s[1]],
            _ => return Err(Error::arg(op, "size", format!("must be [H, W] or one value, got {s:?}"))),
        };
        if size.iter().any(|v| !(v.is_finite() && v.round() >= 1.0)) {
            return Err(Error::arg(op, "size", format!("extents must be at least 1, got {s:?}")));
        }
        let filter = |a: &str| -> Result<FilterKind> {
            let id = ctx.args.opt_int(a).unwrap_or_else(|| ctx.args.int("interp_type"));
            FilterKind::from_interp(id).ok_or_else(|| Error::arg(op, a, format!("unknown interpolation type {id}")))
        };
        filter("interp_type")?;
        let (min, mag) = (filter("min_filter")?, filter("mag_filter")?);
        let dtype = if ctx.args.has("dtype") { Some(ctx.args.dtype("dtype")) } else { None };
        Ok(RandomResizedCrop {
            ctx: ctx.clone(),
            size: [size[0].round() as usize, size[1].round() as usize],
            min,
            mag,
            antialias: ctx.args.bool("antialias"),
            dtype,
            gen: RandomCropParams::from_args(ctx)?,
        })
    }
}

#[allow(clippy::too_many_arguments)]
/// The resampling plan that maps window `w` of `planes` images of `h` x `wd` x `c` onto `size`.
pub fn window_plan(h: usize, wd: usize, c: usize, planes: usize, w: CropWindow, size: [usize; 2], min: FilterKind, mag: FilterKind, antialias: bool) -> Plan {
    let mut p = Plan { in_h: h, in_w: wd, c, planes, out_h: size[0], out_w: size[1], origin: [w.y as f32, w.x as f32], scale: [0.0; 2], end: [(w.y + w.h) as f32, (w.x + w.w) as f32], filter: [None, None] };
    let len = [w.h as f32, w.w as f32];
    for d in 0..2 {
        p.scale[d] = len[d] / size[d] as f32;
        p.filter[d] = axis_filter(min, mag, antialias, len[d], size[d]);
    }
    p
}

impl RandomResizedCrop {
    /// Checks the batch and draws every sample's window: the resampling plans and the
    /// output's type. Shared by both backends.
    fn plan(&self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<(Vec<Plan>, DType, Planes)> {
        let ctx = &self.ctx;
        let batch_err = |m: String| Error::data(ctx.at(ws.iteration, 0, input.source_info(0)), m);
        let planes = Planes::of(input).map_err(batch_err)?;
        if planes.spatial_ndim() != 2 {
            // As DALI: the crop window is drawn in 2-D.
            let layout = input.layout();
            return Err(batch_err(format!("volumes (layout '{layout}') are not supported: expected HWC, CHW, FHWC, FCHW or CFHW")));
        }
        let mut plans = Vec::with_capacity(input.len());
        for i in 0..input.len() {
            let Extents { h, w, c, planes: count, .. } = planes.split(input.shape(i));
            if h == 0 || w == 0 {
                return Err(Error::data(ctx.at(ws.iteration, i, input.source_info(i)), "empty image: nothing to crop"));
            }
            // One window for the sample: every frame of a sequence gets it, as in DALI.
            let window = self.gen.window(&mut ws.rng(ctx, i), h, w);
            plans.push(window_plan(h, w, c, count, window, self.size, self.min, self.mag, self.antialias));
        }
        Ok((plans, self.dtype.unwrap_or(input.dtype()), planes))
    }

    /// The output batch's shapes and layout.
    fn output_meta(plans: &[Plan], out_type: DType, input: &BatchMeta, planes: Planes) -> BatchMeta {
        let shapes: Vec<Vec<usize>> = plans.iter().enumerate().map(|(i, p)| planes.resized(input.shape(i), [1, p.out_h, p.out_w])).collect();
        let mut meta = BatchMeta::new(out_type, input.ndim(), shapes.iter().map(|s| &s[..]));
        meta.set_layout(if input.layout().is_empty() { "HWC".into() } else { input.layout().clone() });
        meta.inherit_source_info(input);
        meta
    }
}

impl Operator for RandomResizedCrop {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let ctx = &self.ctx;
        let input = ws.inputs[0];
        let in_type = input.dtype();
        let (plans, out_type, planes) = self.plan(ws, input.meta())?;
        let mut out = TensorList::from_meta(Self::output_meta(&plans, out_type, input.meta(), planes));
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let p = &plans[i];
            let src = input.bytes(i);
            let res = crate::ops::resize::resample_sample(in_type, out_type, dst, src, p, None);
            res.map_err(|m| Error::data(ctx.at(ws.iteration, i, input.source_info(i)), m))
        })?;
        Ok(vec![out])
    }
}

