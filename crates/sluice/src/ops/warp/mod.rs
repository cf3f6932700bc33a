//! The warp family: `fn.warp_affine`, and the warp kernels `fn.rotate` also uses
//! ([`kernel`] on the cpu, [`gpu`] on the GPU); `fn.experimental.warp_perspective`
//! ([`perspective`], [`perspective_gpu`]), whose reference is OpenCV's arithmetic rather than
//! DALI's own warp: [`cv`] (and `cv_sampler.cuh`), which `fn.experimental.remap` samples with too.
//!
//! `fn.warp_affine` as DALI 2.4 defines it (checked bit for bit against its cpu operator,
//! `tests/test_warp_affine.py`):
//! - The map comes from the second input, else the `matrix` argument (a tensor argument or a
//!   constant list of `ndim * (ndim + 1)` values, row-major, x first). With `inverse_map=True`
//!   (the default) it maps output points to source points; otherwise it is inverted per
//!   sample in f32 as DALI does: the 2-D closed form (`det = a*d - b*c`, each entry divided by
//!   `det`), 3-D Gauss-Jordan with fused multiply-adds. A singular matrix is an error naming the
//!   sample.
//! - The output keeps the input's spatial size unless `size` is given: a constant list is
//!   rounded half away from zero (at least 1), an argument input is truncated.
//! - `fill_value` fills what maps outside the source; without it the border pixel repeats.
//!   `interp_type` is INTERP_NN or INTERP_LINEAR.
//! - Layouts `HWC`, `FHWC` (one map for every frame), `DHWC`, `FDHWC`; a 4-D input without a
//!   layout is a sequence.

pub mod cv;
pub(crate) mod gpu;
pub mod kernel;
pub mod perspective;
pub(crate) mod perspective_gpu;

use kernel::{Border, Interp};

use crate::error::{Error, Result};
use crate::ops::args::element_as_f64;
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, GpuOperator, GpuWorkspace, OpContext, OpDef, OpSchema, Operator, SequenceRules, Workspace};
use crate::ops::gpu_params::ParamUpload;
use crate::tensor::channel::{dispatch_pair, Channel, PairKernel};
use crate::tensor::{BatchMeta, DType, Layout, TensorList, TensorListGpu};

/// `fn.warp_affine`.
pub static WARP_AFFINE: OpDef = OpDef {
    schema: OpSchema {
        name: "WarpAffine",
        doc: "Applies an affine transformation to the images. The matrix maps output points to source points (inverse_map=True) or source to output points (inverse_map=False); it comes from the second input or the `matrix` argument.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 2,
        num_outputs: 1,
        host_inputs: &[1],
        args: &[&[
            tensor_arg("matrix", T::FloatList, D::Optional, "Transform matrix, row-major, ndim x (ndim + 1) values ([M11, M12, M13, M21, M22, M23] in 2-D). Ignored when the transform is given as the second input.").per_frame(),
            arg("inverse_map", T::Bool, D::Bool(true), "True: the matrix maps destination to source coordinates; False: source to destination (it is inverted)."),
            tensor_arg("size", T::FloatList, D::Optional, "Output size, in pixels/points (channels excluded); the input's size when not given."),
            arg("fill_value", T::Float, D::Optional, "Value for the points that map outside the source; the border pixel is repeated when not given."),
            arg("interp_type", T::InterpType, D::Int(1), "Interpolation: INTERP_NN or INTERP_LINEAR."),
            arg("dtype", T::DType, D::Optional, "Output data type; the input type when not given (FLOAT may convert from or to an integer type)."),
        ]],
        arg_aliases: &[("output_dtype", "dtype")],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(WarpAffine::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(WarpAffineGpu { warp: WarpAffine::new(ctx)?, params: ParamUpload::default() }))),
};

/// The warps run frame by frame on sequences, so a matrix input (input 1) may give a matrix
/// per frame (`fn.per_frame`), as in DALI.
pub fn sequence_rules(def: &OpDef) -> Option<SequenceRules> {
    (def.is(&WARP_AFFINE) || def.is(&perspective::WARP_PERSPECTIVE)).then_some(SequenceRules { unfold_inputs: true, frames_from_arguments: false, expand_channels: false })
}

/// Where the second input (the matrices) is: read on the host, or left on the GPU for the
/// kernel to read (the gpu backend given a gpu operator's output).
#[derive(Clone, Copy)]
enum Matrices<'a> {
    Host(&'a TensorList),
    Device(&'a BatchMeta),
}

impl Matrices<'_> {
    fn meta(&self) -> &BatchMeta {
        match self {
            Matrices::Host(t) => t.meta(),
            Matrices::Device(m) => m,
        }
    }
}

/// Inputs the gpu backend takes on either device (a subset of the schema's `host_inputs`):
/// `fn.warp_affine`'s matrices, as in DALI.
pub fn gpu_or_host_inputs(def: &OpDef) -> &'static [usize] {
    if def.is(&WARP_AFFINE) {
        &[1]
    } else {
        &[]
    }
}

/// A sample's map: 2-D (2x3) or 3-D (3x4), destination to source, x first.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Map {
    Planar([[f32; 3]; 2]),
    Volume([[f32; 4]; 3]),
}

impl Map {
    /// The map as the GPU warp takes it.
    pub(crate) fn gpu(&self) -> gpu::GpuMap<'_> {
        match self {
            Map::Planar(m) => gpu::GpuMap::Planar(m),
            Map::Volume(m) => gpu::GpuMap::Volume(m),
        }
    }
}

/// One sample's plan.
#[derive(Debug, Clone, Copy)]
struct Plan {
    map: Map,
    /// Output spatial extents ([H, W] or [D, H, W]; the unused first one is 1 in 2-D).
    out: [usize; 3],
}

struct WarpAffine {
    ctx: OpContext,
    inverse_map: bool,
    interp: Interp,
    border: Border,
    dtype: Option<DType>,
    plans: Vec<Plan>,
}

/// How a layout splits a sample: frames, spatial dimensions (2 or 3). Shared with `fn.rotate`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    pub(crate) sequence: bool,
    pub(crate) spatial: usize,
}

impl Geometry {
    /// (frames, [D, H, W], channels) of a sample.
    pub(crate) fn split(self, shape: &[usize]) -> (usize, [usize; 3], usize) {
        let (frames, rest) = if self.sequence { (shape[0], &shape[1..]) } else { (1, shape) };
        let c = rest[rest.len() - 1];
        let ext = if self.spatial == 2 { [1, rest[0], rest[1]] } else { [rest[0], rest[1], rest[2]] };
        (frames, ext, c)
    }

    /// True for volumes (3 spatial dimensions).
    pub(crate) fn volume(self) -> bool {
        self.spatial == 3
    }
}

impl WarpAffine {
    fn new(ctx: &OpContext) -> Result<WarpAffine> {
        let name = &ctx.display_name;
        let interp = match ctx.args.int("interp_type") {
            0 => Interp::Nearest,
            1 => Interp::Linear,
            v => return Err(Error::arg(name, "interp_type", format!("only INTERP_NN (0) and INTERP_LINEAR (1) are supported, got {v}"))),
        };
        let border = ctx.args.opt_float("fill_value").map_or(Border::Clamp, |v| Border::Fill(v as f32));
        let dtype = ctx.args.has("dtype").then(|| ctx.args.dtype("dtype"));
        Ok(WarpAffine { ctx: ctx.clone(), inverse_map: ctx.args.bool("inverse_map"), interp, border, dtype, plans: Vec::new() })
    }

    /// Checks the batch, works out every sample's map and output size into `self.plans`, and
    /// describes the output. `matrices`: the second input, when given; on the GPU, its
    /// matrices are checked but not read (each plan's map is then left as zeros). Shared by
    /// both backends.
    fn plan_batch(&mut self, ws: &Workspace<'_>, input: &BatchMeta, matrices: Option<Matrices<'_>>) -> Result<(BatchMeta, Geometry, DType, DType)> {
        let name = self.ctx.display_name.clone();
        let n = input.len();
        let layout = match (input.layout().as_str(), input.ndim()) {
            ("", 3) => Layout::from("HWC"),
            ("", 4) => Layout::from("FHWC"),
            ("", 5) => Layout::from("FDHWC"),
            ("HWC", 3) | ("FHWC", 4) | ("DHWC", 4) | ("FDHWC", 5) => input.layout().clone(),
            (l, nd) => {
                let got = if l.is_empty() { format!("{nd} dimensions without a layout") } else { format!("layout \"{l}\"") };
                return Err(Error::type_mismatch(&name, format!("input 0: {got} does not match any of the allowed layouts: HWC, FHWC, DHWC, FDHWC")));
            }
        };
        let geometry = Geometry { sequence: layout.as_str().starts_with('F'), spatial: if layout.as_str().contains('D') { 3 } else { 2 } };
        let (in_type, out_type) = (input.dtype(), self.dtype.unwrap_or(input.dtype()));
        if !gpu::supports(in_type, out_type) && n > 0 {
            return Err(Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), format!("unsupported input/output types {in_type} -> {out_type}: the types are UINT8, INT16, INT32, FLOAT, and the output is the input type or FLOAT, or FLOAT to any of them")));
        }
        let nd = geometry.spatial;
        let entries = nd * (nd + 1);
        let size_input = ws.arg_inputs.get("size").copied();
        let const_size = if size_input.is_none() && self.ctx.args.has("size") {
            let s = self.ctx.args.floats("size");
            if s.len() != nd {
                return Err(Error::arg(&name, "size", format!("must give {nd} extents (the spatial dimensions, channels excluded), got {s:?}")));
            }
            let mut out = [1usize; 3];
            for (k, &v) in s.iter().enumerate() {
                if !(v > 0.0) || !v.is_finite() {
                    return Err(Error::arg(&name, "size", format!("extents must be positive, got {s:?}")));
                }
                out[3 - nd + k] = (v as f32).round().max(1.0) as usize;
            }
            Some(out)
        } else {
            None
        };
        let matrix_input = ws.arg_inputs.get("matrix").copied();
        let const_matrix = if matrices.is_none() && matrix_input.is_none() {
            if !self.ctx.args.has("matrix") || self.ctx.args.floats("matrix").is_empty() {
                return Err(Error::arg(&name, "matrix", "must be given when the transform is not the second input"));
            }
            let m = self.ctx.args.floats("matrix");
            if m.len() != entries {
                return Err(Error::arg(&name, "matrix", format!("must have {entries} elements for a {nd}-D warp, got {}", m.len())));
            }
            Some(m.iter().map(|&v| v as f32).collect::<Vec<f32>>())
        } else {
            None
        };

        self.plans.clear();
        let mut shapes = Vec::with_capacity(n);
        let mut values = [0.0f32; 12];
        for i in 0..n {
            let (frames, ext, c) = geometry.split(input.shape(i));
            let source = matrices.or(matrix_input.map(Matrices::Host));
            if let (None, Some(batch)) = (&const_matrix, source) {
                let arg = if matrices.is_some() { "input 1" } else { "matrix" };
                let meta = batch.meta();
                if meta.dtype() != DType::F32 {
                    return Err(Error::type_mismatch(&name, format!("{arg}: the transforms must be FLOAT, got {}", meta.dtype())));
                }
                if meta.shape(i) != [nd, nd + 1] {
                    return Err(Error::arg(&name, "matrix", format!("{arg}: sample {i}: a {nd}-D transform is a {nd} x {} matrix, got shape {:?}", nd + 1, meta.shape(i))));
                }
            }
            let values = match (&const_matrix, source) {
                (Some(m), _) => &m[..],
                (None, Some(Matrices::Host(batch))) => {
                    for (k, v) in values[..entries].iter_mut().enumerate() {
                        *v = element_as_f64(batch, i, k) as f32;
                    }
                    &values[..entries]
                }
                (None, Some(Matrices::Device(_))) => &[0.0; 12][..entries],
                (None, None) => unreachable!("checked above"),
            };
            let mut map = to_map(values, nd);
            if !self.inverse_map && !matches!(source, Some(Matrices::Device(_))) {
                map = invert(map).ok_or_else(|| Error::arg(&name, "matrix", format!("sample {i}: cannot invert a singular matrix ({values:?}); with inverse_map=False the matrix must be invertible")))?;
            }
            let out = if let Some(b) = size_input {
                if b.numel(i) != nd {
                    return Err(Error::arg(&name, "size", format!("argument input must hold {nd} extents per sample; sample {i} has shape {:?}", b.shape(i))));
                }
                let mut out = [1usize; 3];
                for k in 0..nd {
                    let v = element_as_f64(b, i, k);
                    if !(v >= 0.0) || !v.is_finite() {
                        return Err(Error::arg(&name, "size", format!("extents must be >= 0; sample {i} has {v}")));
                    }
                    out[3 - nd + k] = v as usize; // truncated, as DALI does for argument inputs
                }
                out
            } else {
                const_size.unwrap_or(ext)
            };
            let empty_out = out.iter().product::<usize>() == 0 || frames == 0 || c == 0;
            if !empty_out && ext.iter().product::<usize>() == 0 && self.border == Border::Clamp {
                return Err(Error::data(self.ctx.at(ws.iteration, i, input.source_info(i)), format!("cannot warp an empty image (shape {:?}) into a non-empty output without fill_value", input.shape(i))));
            }
            self.plans.push(Plan { map, out });
            let mut shape = Vec::with_capacity(5);
            if geometry.sequence {
                shape.push(frames);
            }
            shape.extend_from_slice(&out[3 - nd..]);
            shape.push(c);
            shapes.push(shape);
        }
        let mut meta = BatchMeta::new(out_type, input.ndim(), shapes.iter().map(|s| &s[..]));
        meta.set_layout(layout);
        meta.inherit_source_info(input);
        Ok((meta, geometry, in_type, out_type))
    }
}

fn to_map(v: &[f32], nd: usize) -> Map {
    if nd == 2 {
        Map::Planar([[v[0], v[1], v[2]], [v[3], v[4], v[5]]])
    } else {
        Map::Volume([[v[0], v[1], v[2], v[3]], [v[4], v[5], v[6], v[7]], [v[8], v[9], v[10], v[11]]])
    }
}

/// DALI's `affine_mat_inv` in f32: `None` for a singular matrix.
fn invert(map: Map) -> Option<Map> {
    match map {
        Map::Planar([[a, b, tx], [c, d, ty]]) => {
            let det = a * d - b * c;
            if det == 0.0 {
                return None;
            }
            let (i00, i01, i10, i11) = (d / det, -b / det, -c / det, a / det);
            Some(Map::Planar([[i00, i01, -i00 * tx + -i01 * ty], [i10, i11, -i10 * tx + -i11 * ty]]))
        }
        Map::Volume(m) => {
            let b = gauss_jordan_inverse3([[m[0][0], m[0][1], m[0][2]], [m[1][0], m[1][1], m[1][2]], [m[2][0], m[2][1], m[2][2]]])?;
            let t = [m[0][3], m[1][3], m[2][3]];
            let row = |i: usize| [b[i][0], b[i][1], b[i][2], -b[i][0] * t[0] + -b[i][1] * t[1] + -b[i][2] * t[2]];
            Some(Map::Volume([row(0), row(1), row(2)]))
        }
    }
}

/// DALI's `inverse` of a 3x3 f32 matrix: Gauss-Jordan elimination with partial pivoting,
/// each elimination step a fused multiply-add; `None` when a pivot is 0 (singular). Shared
/// by the 3-D warp and `fn.color_twist` (YIQ -> RGB).
pub(crate) fn gauss_jordan_inverse3(mut a: [[f32; 3]; 3]) -> Option<[[f32; 3]; 3]> {
    let mut b = [[1.0f32, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    for v in 0..3 {
        let mut pivot = v;
        for r in v + 1..3 {
            if a[r][v].abs() > a[pivot][v].abs() {
                pivot = r;
            }
        }
        if a[pivot][v] == 0.0 {
            return None;
        }
        a.swap(v, pivot);
        b.swap(v, pivot);
        let x = 1.0 / a[v][v];
        a[v][v] = 1.0;
        for j in v + 1..3 {
            a[v][j] *= x;
        }
        for j in 0..3 {
            b[v][j] *= x;
        }
        for i in 0..3 {
            if i == v {
                continue;
            }
            let c = -a[i][v];
            a[i][v] = 0.0;
            for j in v + 1..3 {
                a[i][j] = c.mul_add(a[v][j], a[i][j]);
            }
            for j in 0..3 {
                b[i][j] = c.mul_add(b[v][j], b[i][j]);
            }
        }
    }
    Some(b)
}

impl Operator for WarpAffine {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let (meta, geometry, in_type, out_type) = self.plan_batch(ws, input.meta(), ws.inputs.get(1).map(|m| Matrices::Host(m)))?;
        let mut out = TensorList::for_overwrite(meta);
        let (plans, interp, border) = (&self.plans, self.interp, self.border);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let (frames, ext, c) = geometry.split(input.shape(i));
            let job = Job { dst, src: input.bytes(i), frames, ext, c, plan: plans[i], interp, border };
            dispatch_pair(in_type, out_type, job).expect("types checked by plan_batch");
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// One sample's warp, typed by [`dispatch_pair`].
struct Job<'a> {
    dst: &'a mut [u8],
    src: &'a [u8],
    frames: usize,
    ext: [usize; 3],
    c: usize,
    plan: Plan,
    interp: Interp,
    border: Border,
}

impl PairKernel for Job<'_> {
    type Output = ();

    fn run<I: Channel, O: Channel>(self) {
        let src: &[I] = bytemuck::cast_slice(self.src);
        let dst: &mut [O] = bytemuck::cast_slice_mut(self.dst);
        let [d, h, w] = self.ext;
        let [od, oh, ow] = self.plan.out;
        let (in_frame, out_frame) = (d * h * w * self.c, od * oh * ow * self.c);
        if out_frame == 0 {
            return;
        }
        if in_frame == 0 {
            // Nothing to sample: every point is outside (the plan refused this without a fill).
            let Border::Fill(v) = self.border else { unreachable!("refused by plan_batch") };
            dst.fill(O::sat_f32(v));
            return;
        }
        for (f, out) in dst.chunks_exact_mut(out_frame).enumerate().take(self.frames) {
            let src = &src[f * in_frame..(f + 1) * in_frame];
            match self.plan.map {
                Map::Planar(m) => kernel::warp_affine(out, oh, ow, src, h, w, self.c, &m, self.interp, self.border),
                Map::Volume(m) => kernel::warp_affine_3d(out, (od, oh, ow), src, (d, h, w), self.c, &m, self.interp, self.border),
            }
        }
    }
}

/// GPU backend: the cpu twin's plan, then one launch of the warp kernel for the batch (2-D or
/// 3-D). Matrices given on the GPU stay there: the kernel reads (and inverts) them.
struct WarpAffineGpu {
    warp: WarpAffine,
    params: ParamUpload,
}

impl GpuOperator for WarpAffineGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let host = ws.host_view();
        let device_matrices = ws.gpu_inputs.get(1).copied();
        let matrices = match device_matrices {
            Some(m) => Some(Matrices::Device(m.meta())),
            None => host.inputs.first().map(|m| Matrices::Host(m)),
        };
        let (meta, geometry, in_type, out_type) = self.warp.plan_batch(&host, input.meta(), matrices)?;
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let mut desc = Vec::with_capacity(input.len());
        for (i, p) in self.warp.plans.iter().enumerate() {
            let (frames, ext, c) = geometry.split(input.shape(i));
            if frames * p.out.iter().product::<usize>() * c == 0 {
                continue; // nothing to write (and maybe nothing to read)
            }
            let map = match device_matrices {
                Some(m) => gpu::GpuMap::Device { ptr: m.sample_ptr(i), invert: !self.warp.inverse_map },
                None => p.map.gpu(),
            };
            desc.push(gpu::WarpSample::new(input.sample_ptr(i), out.sample_ptr(i), map, frames, ext, c, p.out, self.warp.interp, self.warp.border));
        }
        gpu::launch(ws, &mut self.params, &self.warp.ctx.display_name, &desc, geometry.volume(), in_type, out_type)?;
        Ok(vec![out])
    }
}
