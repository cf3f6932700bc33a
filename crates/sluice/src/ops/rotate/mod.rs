//! `fn.rotate`: rotates images (HWC) and sequences of images (FHWC) by `angle` degrees,
//! counter-clockwise, on CPU, reproducing DALI 2.4's output size and pixel values (see
//! [`kernel`] for the exact rules). Volumes (DHWC) and channel-first layouts are rejected.
//! A per-frame `angle` (`fn.per_frame`) turns each frame by its own angle onto the one canvas
//! DALI gives the sequence ([`canvas::sequence_canvas_size`]).

mod gpu;
pub mod canvas;

use crate::ops::warp::kernel::{self, Border, Interp};
use crate::tensor::channel::Channel;

use crate::error::{Error, Result};
use crate::ops::args::element_as_f64;
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

/// Schema and backends.
pub static ROTATE: OpDef = OpDef {
    schema: OpSchema {
        name: "Rotate",
        doc: "Rotates the images by the specified angle (degrees, counter-clockwise with the top-left corner at (0,0)). Accepts HWC and FHWC uint8, int16, int32 and float inputs.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("angle", T::Float, D::Required, "Angle, in degrees, by which the image is rotated counter-clockwise.").per_frame(),
            tensor_arg("axis", T::FloatList, D::Optional, "Axis of a 3-D rotation; accepted for compatibility, volumes are not supported.").per_frame(),
            arg("fill_value", T::Float, D::Optional, "Value used to fill areas outside the source image; when not given, the border pixel is repeated."),
            arg("keep_size", T::Bool, D::Bool(false), "Keep the original canvas size instead of fitting the rotated image."),
            tensor_arg("size", T::FloatList, D::FloatList(&[]), "Output size [H, W] in pixels; non-integer sizes are rounded."),
            arg("interp_type", T::InterpType, D::Int(1), "Interpolation: INTERP_NN or INTERP_LINEAR (the CPU backend supports these two)."),
            arg("dtype", T::DType, D::Optional, "Output data type; the input type when not given."),
        ]],
        arg_aliases: &[("output_dtype", "dtype")],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Rotate::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _dev| Ok(Box::new(gpu::RotateGpu::new(ctx)?))),
};

struct Rotate {
    ctx: OpContext,
    interp: Interp,
    border: Border,
    keep_size: bool,
    /// The constant `size` argument, rounded (H, W).
    size: Option<(usize, usize)>,
    dtype: Option<DType>,
    /// Per-sample plan of the current batch, kept to avoid reallocating every iteration.
    plan: Vec<Plan>,
}

#[derive(Clone, Copy)]
struct Plan {
    angle: f32,
    out_h: usize,
    out_w: usize,
}

/// A checked batch: the output's shapes and layout, the element types, and whether samples
/// are FHWC sequences (the per-sample plans are in `Rotate::plan`).
struct RotateBatch {
    meta: BatchMeta,
    in_type: DType,
    out_type: DType,
    sequence: bool,
}

fn supported(d: DType) -> bool {
    matches!(d, DType::U8 | DType::I16 | DType::I32 | DType::F32)
}

impl Rotate {
    fn new(ctx: &OpContext) -> Result<Rotate> {
        let name = &ctx.display_name;
        let interp = match ctx.args.int("interp_type") {
            0 => Interp::Nearest,
            1 => Interp::Linear,
            v => return Err(Error::arg(name, "interp_type", format!("only INTERP_NN (0) and INTERP_LINEAR (1) are supported by the CPU backend, got {v}"))),
        };
        let border = match ctx.args.opt_float("fill_value") {
            Some(v) => Border::Fill(v as f32),
            None => Border::Clamp,
        };
        let size = if ctx.args.has("size") && !ctx.arg_input_names.iter().any(|n| n == "size") {
            let s = ctx.args.floats("size");
            match s {
                [] => None,
                [h, w] => {
                    let ok = |v: f64| v.is_finite() && v > 0.0;
                    if !ok(*h) || !ok(*w) {
                        return Err(Error::arg(name, "size", format!("extents must be positive, got {s:?}")));
                    }
                    // DALI: max(roundf(s), 1).
                    Some(((*h as f32).round().max(1.0) as usize, (*w as f32).round().max(1.0) as usize))
                }
                _ => return Err(Error::arg(name, "size", format!("must be [H, W] (channels excluded), got {s:?}"))),
            }
        } else {
            None
        };
        let dtype = if ctx.args.has("dtype") { Some(ctx.args.dtype("dtype")) } else { None };
        if let Some(d) = dtype {
            if !supported(d) {
                return Err(Error::arg(name, "dtype", format!("must be UINT8, INT16, INT32 or FLOAT, got {d}")));
            }
        }
        Ok(Rotate { ctx: ctx.clone(), interp, border, keep_size: ctx.args.bool("keep_size"), size, dtype, plan: Vec::new() })
    }

    /// The per-sample `size` argument input, truncated to integers as DALI does.
    fn size_input(&self, batch: &TensorList, i: usize) -> Result<(usize, usize)> {
        let name = &self.ctx.display_name;
        if batch.numel(i) != 2 {
            return Err(Error::arg(name, "size", format!("argument input must hold [H, W] per sample; sample {i} has shape {:?}", batch.shape(i))));
        }
        let (h, w) = (element_as_f64(batch, i, 0), element_as_f64(batch, i, 1));
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        if !ok(h) || !ok(w) {
            return Err(Error::arg(name, "size", format!("extents must be >= 0; sample {i} has [{h}, {w}]")));
        }
        Ok((h as usize, w as usize))
    }
}

/// Frames, height, width, channels of sample `i` in a batch of the given layout.
fn geometry(shape: &[usize], sequence: bool) -> (usize, usize, usize, usize) {
    if sequence {
        (shape[0], shape[1], shape[2], shape[3])
    } else {
        (1, shape[0], shape[1], shape[2])
    }
}

impl Rotate {
    /// Checks the batch, plans every sample (angle, output size) into `self.plan` and sizes
    /// the output. Shared by both backends.
    fn plan_batch(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<RotateBatch> {
        let name = self.ctx.display_name.clone();
        let n = input.len();
        let batch_err = |m: String| Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), m);
        let layout = input.layout();
        let sequence = match (layout.as_str(), input.ndim()) {
            ("", 3) | ("HWC", 3) => false,
            ("FHWC", 4) => true,
            (l, nd) if l.contains('D') => {
                return Err(batch_err(format!("volumetric (3-D) rotation is not supported; got layout '{l}' ({nd} dimensions)")));
            }
            ("", nd) => return Err(batch_err(format!("expected an HWC image (3 dimensions) or an FHWC sequence with its layout set, got {nd} dimensions"))),
            (l, _) => return Err(batch_err(format!("unsupported layout '{l}': expected HWC or FHWC (channels last)"))),
        };
        let in_type = input.dtype();
        let out_type = self.dtype.unwrap_or(in_type);
        if !supported(in_type) {
            return Err(batch_err(format!("unsupported input type {in_type}: expected UINT8, INT16, INT32 or FLOAT")));
        }
        if out_type != in_type && in_type != DType::F32 && out_type != DType::F32 {
            return Err(batch_err(format!("cannot convert {in_type} to {out_type}: the output type must be the input type or FLOAT (or FLOAT to an integer type)")));
        }

        let angle = ws.per_sample(&self.ctx, "angle");
        let size_input = ws.arg_inputs.get("size").copied();
        self.plan.clear();
        for i in 0..n {
            let a = angle.get(&name, i)?.ok_or_else(|| Error::arg(&name, "angle", "is required"))?;
            if !a.is_finite() {
                return Err(Error::arg(&name, "angle", format!("must be finite; sample {i} has {a}")));
            }
            let (_, h, w, _) = geometry(input.shape(i), sequence);
            if h == 0 || w == 0 || h > i32::MAX as usize || w > i32::MAX as usize {
                return Err(Error::data(self.ctx.at(ws.iteration, i, input.source_info(i)), format!("cannot rotate an image of shape {:?}", input.shape(i))));
            }
            let a = a as f32;
            let (out_h, out_w) = if let Some(b) = size_input {
                self.size_input(b, i)?
            } else if let Some(s) = self.size {
                s
            } else if self.keep_size {
                (h, w)
            } else {
                canvas::rotated_canvas_size(h, w, a)
            };
            self.plan.push(Plan { angle: a, out_h, out_w });
        }
        // Per-frame angles (the executor runs the operator on the frames of each sequence):
        // the frames of a sequence share one canvas, DALI's for the sequence.
        if let Some(counts) = ws.frames.filter(|_| size_input.is_none() && self.size.is_none() && !self.keep_size) {
            let mut first = 0;
            for &f in counts {
                if f > 0 {
                    let (_, h, w, _) = geometry(input.shape(first), sequence);
                    let frames = &mut self.plan[first..first + f];
                    let (out_h, out_w) = canvas::sequence_canvas_size(h, w, frames.iter().map(|p| p.angle));
                    for p in frames {
                        (p.out_h, p.out_w) = (out_h, out_w);
                    }
                }
                first += f;
            }
        }

        let shapes: Vec<[usize; 4]> = (0..n)
            .map(|i| {
                let (f, _, _, c) = geometry(input.shape(i), sequence);
                let p = self.plan[i];
                [f, p.out_h, p.out_w, c]
            })
            .collect();
        let mut meta = BatchMeta::new(out_type, input.ndim(), shapes.iter().map(|s| if sequence { &s[..] } else { &s[1..] }));
        meta.set_layout(if layout.is_empty() { Layout::empty() } else { layout.clone() });
        meta.inherit_source_info(input);
        Ok(RotateBatch { meta, in_type, out_type, sequence })
    }
}

impl Operator for Rotate {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let RotateBatch { meta, in_type, out_type, sequence } = self.plan_batch(ws, input.meta())?;
        let mut out = TensorList::from_meta(meta);

        let (plan, interp, border, ctx) = (&self.plan, self.interp, self.border, &self.ctx);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let (frames, h, w, c) = geometry(input.shape(i), sequence);
            let p = plan[i];
            let m = canvas::rotation_mapping(h, w, p.out_h, p.out_w, p.angle);
            let job = Job { dst, src: input.bytes(i), frames, h, w, c, out_h: p.out_h, out_w: p.out_w, m, interp, border };
            let res = match (in_type, out_type) {
                (DType::U8, DType::U8) => job.run::<u8, u8>(),
                (DType::U8, DType::F32) => job.run::<u8, f32>(),
                (DType::I16, DType::I16) => job.run::<i16, i16>(),
                (DType::I16, DType::F32) => job.run::<i16, f32>(),
                (DType::I32, DType::I32) => job.run::<i32, i32>(),
                (DType::I32, DType::F32) => job.run::<i32, f32>(),
                (DType::F32, DType::F32) => job.run::<f32, f32>(),
                (DType::F32, DType::U8) => job.run::<f32, u8>(),
                (DType::F32, DType::I16) => job.run::<f32, i16>(),
                (DType::F32, DType::I32) => job.run::<f32, i32>(),
                _ => Err(format!("cannot convert {in_type} to {out_type}")),
            };
            res.map_err(|m| Error::data(ctx.at(ws.iteration, i, input.source_info(i)), m))
        })?;
        Ok(vec![out])
    }
}

/// One sample's work, type-erased until [`Job::run`] picks the element types.
struct Job<'a> {
    dst: &'a mut [u8],
    src: &'a [u8],
    frames: usize,
    h: usize,
    w: usize,
    c: usize,
    out_h: usize,
    out_w: usize,
    m: [[f32; 3]; 2],
    interp: Interp,
    border: Border,
}

impl Job<'_> {
    fn run<I: Channel, O: Channel>(self) -> std::result::Result<(), String> {
        let src: &[I] = bytemuck::try_cast_slice(self.src).map_err(|e| format!("misaligned input sample: {e:?}"))?;
        let dst: &mut [O] = bytemuck::try_cast_slice_mut(self.dst).map_err(|e| format!("misaligned output sample: {e:?}"))?;
        let (in_frame, out_frame) = (self.h * self.w * self.c, self.out_h * self.out_w * self.c);
        for f in 0..self.frames {
            kernel::warp_affine(
                &mut dst[f * out_frame..(f + 1) * out_frame],
                self.out_h,
                self.out_w,
                &src[f * in_frame..(f + 1) * in_frame],
                self.h,
                self.w,
                self.c,
                &self.m,
                self.interp,
                self.border,
            );
        }
        Ok(())
    }
}
