//! `fn.rotate`: rotates images (HWC) and sequences of images (FHWC) by `angle` degrees,
//! counter-clockwise, and volumes (DHWC, FDHWC) by `angle` degrees about `axis` (x, y, z:
//! W, H, D), reproducing DALI 2.4's output size and values (see [`canvas`] for the sizes and
//! maps, `ops::warp::kernel` for the sampling). Channel-first layouts are rejected.
//! A per-frame `angle` or `axis` (`fn.per_frame`) turns each frame by its own rotation onto
//! the one canvas DALI gives the sequence ([`canvas::sequence_canvas_size`],
//! [`canvas::volume_canvas_size`]).

mod gpu;
pub mod canvas;

use crate::ops::warp::kernel::{self, Border, Interp};
use crate::ops::warp::{Geometry, Map};
use crate::tensor::channel::Channel;

use crate::error::{Error, Result};
use crate::ops::args::element_as_f64;
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backends.
pub static ROTATE: OpDef = OpDef {
    schema: OpSchema {
        name: "Rotate",
        doc: "Rotates the images by the specified angle (degrees, counter-clockwise with the top-left corner at (0,0)), or volumes about `axis`. Accepts HWC, FHWC, DHWC and FDHWC uint8, int16, int32 and float inputs.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("angle", T::Float, D::Required, "Angle, in degrees, by which the image is rotated counter-clockwise.").per_frame(),
            tensor_arg("axis", T::FloatList, D::Optional, "Axis of a 3-D rotation (x, y, z: the W, H and D directions); required for volumes (DHWC), ignored for images.").per_frame(),
            arg("fill_value", T::Float, D::Optional, "Value used to fill areas outside the source image; when not given, the border pixel is repeated."),
            arg("keep_size", T::Bool, D::Bool(false), "Keep the original canvas size instead of fitting the rotated image."),
            tensor_arg("size", T::FloatList, D::FloatList(&[]), "Output size [H, W] in pixels ([D, H, W] for volumes); non-integer sizes are rounded."),
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
    /// The constant `size` argument, rounded ([H, W] or [D, H, W]; its length is checked
    /// against the layout's when a batch comes).
    size: Option<Vec<usize>>,
    /// The constant `axis` argument.
    axis: Option<[f32; 3]>,
    dtype: Option<DType>,
    /// Per-sample plan of the current batch, kept to avoid reallocating every iteration.
    plan: Vec<Plan>,
}

#[derive(Clone, Copy)]
struct Plan {
    angle: f32,
    /// The axis of a volume's rotation (unused for images).
    axis: [f32; 3],
    /// Output extents [D, H, W] (D is 1 for images).
    out: [usize; 3],
}

impl Plan {
    /// The destination-to-source map of sample `i`, of extents `ext` ([D, H, W]).
    fn map(&self, ext: [usize; 3], geometry: Geometry) -> Map {
        if geometry.volume() {
            Map::Volume(canvas::rotation_mapping_3d(ext, self.out, self.axis, self.angle))
        } else {
            Map::Planar(canvas::rotation_mapping(ext[1], ext[2], self.out[1], self.out[2], self.angle))
        }
    }
}

/// A checked batch: the output's shapes and layout, the element types, and how samples split
/// (the per-sample plans are in `Rotate::plan`).
struct RotateBatch {
    meta: BatchMeta,
    in_type: DType,
    out_type: DType,
    geometry: Geometry,
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
                _ if s.len() == 2 || s.len() == 3 => {
                    if s.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
                        return Err(Error::arg(name, "size", format!("extents must be positive, got {s:?}")));
                    }
                    // DALI: max(roundf(s), 1).
                    Some(s.iter().map(|&v| (v as f32).round().max(1.0) as usize).collect())
                }
                _ => return Err(Error::arg(name, "size", format!("must be [H, W] for images or [D, H, W] for volumes (channels excluded), got {s:?}"))),
            }
        } else {
            None
        };
        let axis = if ctx.args.has("axis") && !ctx.arg_input_names.iter().any(|n| n == "axis") {
            let a = ctx.args.floats("axis");
            let [x, y, z] = a else {
                return Err(Error::arg(name, "axis", format!("must be a 3D vector [x, y, z], got {a:?}")));
            };
            Some(check_axis(name, [*x as f32, *y as f32, *z as f32], None)?)
        } else {
            None
        };
        let dtype = if ctx.args.has("dtype") { Some(ctx.args.dtype("dtype")) } else { None };
        if let Some(d) = dtype {
            if !supported(d) {
                return Err(Error::arg(name, "dtype", format!("must be UINT8, INT16, INT32 or FLOAT, got {d}")));
            }
        }
        Ok(Rotate { ctx: ctx.clone(), interp, border, keep_size: ctx.args.bool("keep_size"), size, axis, dtype, plan: Vec::new() })
    }

    /// The per-sample `size` argument input ([H, W] or [D, H, W]), truncated to integers as
    /// DALI does.
    fn size_input(&self, batch: &TensorList, i: usize, geometry: Geometry) -> Result<[usize; 3]> {
        let name = &self.ctx.display_name;
        let nd = geometry.spatial;
        if batch.numel(i) != nd {
            let want = if geometry.volume() { "[D, H, W]" } else { "[H, W]" };
            return Err(Error::arg(name, "size", format!("argument input must hold {want} per sample; sample {i} has shape {:?}", batch.shape(i))));
        }
        let mut out = [1usize; 3];
        for k in 0..nd {
            let v = element_as_f64(batch, i, k);
            if !(v.is_finite() && v >= 0.0) {
                return Err(Error::arg(name, "size", format!("extents must be >= 0; sample {i} has {v} at {k}")));
            }
            out[3 - nd + k] = v as usize;
        }
        Ok(out)
    }

    /// The axis of sample `i`'s rotation: the argument input's, else the constant's.
    fn axis(&self, i: usize, input: Option<&TensorList>) -> Result<[f32; 3]> {
        let name = &self.ctx.display_name;
        match (input, self.axis) {
            (Some(b), _) => {
                if b.numel(i) != 3 {
                    return Err(Error::arg(name, "axis", format!("must be a 3D vector [x, y, z]; sample {i} has shape {:?}", b.shape(i))));
                }
                check_axis(name, [0, 1, 2].map(|k| element_as_f64(b, i, k) as f32), Some(i))
            }
            (None, Some(a)) => Ok(a),
            (None, None) => Err(Error::arg(name, "axis", "is required to rotate volumes (DHWC)")),
        }
    }
}

/// Refuses an axis DALI cannot normalise (zero, or not finite).
fn check_axis(name: &str, a: [f32; 3], sample: Option<usize>) -> Result<[f32; 3]> {
    if a.iter().all(|v| v.is_finite()) && a.iter().any(|&v| v != 0.0) {
        return Ok(a);
    }
    let at = sample.map_or(", got".to_string(), |i| format!("; sample {i} has"));
    Err(Error::arg(name, "axis", format!("must be a finite, non-zero vector{at} {a:?}")))
}

impl Rotate {
    /// Checks the batch, plans every sample (angle, output size) into `self.plan` and sizes
    /// the output. Shared by both backends.
    fn plan_batch(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<RotateBatch> {
        let name = self.ctx.display_name.clone();
        let n = input.len();
        let batch_err = |m: String| Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), m);
        let layout = input.layout();
        let geometry = match (layout.as_str(), input.ndim()) {
            ("", 3) | ("HWC", 3) => Geometry { sequence: false, spatial: 2 },
            ("FHWC", 4) => Geometry { sequence: true, spatial: 2 },
            ("DHWC", 4) => Geometry { sequence: false, spatial: 3 },
            ("FDHWC", 5) => Geometry { sequence: true, spatial: 3 },
            ("", nd) => return Err(batch_err(format!("expected an HWC image (3 dimensions), or a sequence or volume with its layout set (FHWC, DHWC, FDHWC), got {nd} dimensions"))),
            (l, _) => return Err(batch_err(format!("unsupported layout '{l}': expected HWC, FHWC, DHWC or FDHWC (channels last)"))),
        };
        let in_type = input.dtype();
        let out_type = self.dtype.unwrap_or(in_type);
        if !supported(in_type) {
            return Err(batch_err(format!("unsupported input type {in_type}: expected UINT8, INT16, INT32 or FLOAT")));
        }
        if out_type != in_type && in_type != DType::F32 && out_type != DType::F32 {
            return Err(batch_err(format!("cannot convert {in_type} to {out_type}: the output type must be the input type or FLOAT (or FLOAT to an integer type)")));
        }
        let nd = geometry.spatial;
        let const_size = match &self.size {
            Some(s) if s.len() != nd => {
                let want = if geometry.volume() { "[D, H, W] for volumes (DHWC)" } else { "[H, W] for images (HWC)" };
                return Err(Error::arg(&name, "size", format!("must be {want}, channels excluded, got {s:?}")));
            }
            Some(s) => Some(std::array::from_fn::<usize, 3, _>(|k| if k + nd < 3 { 1 } else { s[k + nd - 3] })),
            None => None,
        };

        let angle = ws.per_sample(&self.ctx, "angle");
        let size_input = ws.arg_inputs.get("size").copied();
        let axis_input = ws.arg_inputs.get("axis").copied();
        self.plan.clear();
        for i in 0..n {
            let a = angle.get(&name, i)?.ok_or_else(|| Error::arg(&name, "angle", "is required"))?;
            if !a.is_finite() {
                return Err(Error::arg(&name, "angle", format!("must be finite; sample {i} has {a}")));
            }
            let (_, ext, _) = geometry.split(input.shape(i));
            if ext.contains(&0) || ext.iter().any(|&e| e > i32::MAX as usize) {
                return Err(Error::data(self.ctx.at(ws.iteration, i, input.source_info(i)), format!("cannot rotate an image of shape {:?}", input.shape(i))));
            }
            let a = a as f32;
            let axis = if geometry.volume() { self.axis(i, axis_input)? } else { [0.0; 3] };
            let out = if let Some(b) = size_input {
                self.size_input(b, i, geometry)?
            } else if let Some(s) = const_size {
                s
            } else if self.keep_size {
                ext
            } else if geometry.volume() {
                canvas::volume_canvas_size(ext, [(axis, a)])
            } else {
                let (h, w) = canvas::rotated_canvas_size(ext[1], ext[2], a);
                [1, h, w]
            };
            self.plan.push(Plan { angle: a, axis, out });
        }
        // Per-frame rotations (the executor runs the operator on the frames of each sequence):
        // the frames of a sequence share one canvas, DALI's for the sequence.
        if let Some(counts) = ws.frames.filter(|_| size_input.is_none() && const_size.is_none() && !self.keep_size) {
            let mut first = 0;
            for &f in counts {
                if f > 0 {
                    let (_, ext, _) = geometry.split(input.shape(first));
                    let frames = &mut self.plan[first..first + f];
                    let out = if geometry.volume() {
                        canvas::volume_canvas_size(ext, frames.iter().map(|p| (p.axis, p.angle)))
                    } else {
                        let (h, w) = canvas::sequence_canvas_size(ext[1], ext[2], frames.iter().map(|p| p.angle));
                        [1, h, w]
                    };
                    for p in frames {
                        p.out = out;
                    }
                }
                first += f;
            }
        }

        let shapes: Vec<Vec<usize>> = (0..n)
            .map(|i| {
                let (f, _, c) = geometry.split(input.shape(i));
                let out = self.plan[i].out;
                geometry.sequence.then_some(f).into_iter().chain(out[3 - nd..].iter().copied()).chain([c]).collect()
            })
            .collect();
        let mut meta = BatchMeta::new(out_type, input.ndim(), shapes.iter().map(|s| &s[..]));
        meta.set_layout(layout.clone());
        meta.name_guessed_layout();
        meta.inherit_source_info(input);
        Ok(RotateBatch { meta, in_type, out_type, geometry })
    }
}

impl Operator for Rotate {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let RotateBatch { meta, in_type, out_type, geometry } = self.plan_batch(ws, input.meta())?;
        // The warp kernels write every output pixel (the fill value outside the source).
        let mut out = TensorList::for_overwrite(meta);

        let (plan, interp, border, ctx) = (&self.plan, self.interp, self.border, &self.ctx);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let (frames, ext, c) = geometry.split(input.shape(i));
            let p = plan[i];
            let job = Job { dst, src: input.bytes(i), frames, ext, c, out: p.out, map: p.map(ext, geometry), interp, border };
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
    /// Input extents [D, H, W] (D is 1 for images).
    ext: [usize; 3],
    c: usize,
    out: [usize; 3],
    map: Map,
    interp: Interp,
    border: Border,
}

impl Job<'_> {
    fn run<I: Channel, O: Channel>(self) -> std::result::Result<(), String> {
        let src: &[I] = bytemuck::try_cast_slice(self.src).map_err(|e| format!("misaligned input sample: {e:?}"))?;
        let dst: &mut [O] = bytemuck::try_cast_slice_mut(self.dst).map_err(|e| format!("misaligned output sample: {e:?}"))?;
        let ([d, h, w], [od, oh, ow]) = (self.ext, self.out);
        let (in_frame, out_frame) = (d * h * w * self.c, od * oh * ow * self.c);
        if out_frame == 0 {
            return Ok(());
        }
        for f in 0..self.frames {
            let (out, src) = (&mut dst[f * out_frame..(f + 1) * out_frame], &src[f * in_frame..(f + 1) * in_frame]);
            match self.map {
                Map::Planar(m) => kernel::warp_affine(out, oh, ow, src, h, w, self.c, &m, self.interp, self.border),
                Map::Volume(m) => kernel::warp_affine_3d(out, (od, oh, ow), src, (d, h, w), self.c, &m, self.interp, self.border),
            }
        }
        Ok(())
    }
}
