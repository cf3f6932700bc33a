//! Operators on coordinates: `fn.coord_transform` (an affine map of points) and
//! `fn.coord_flip` (reflection of chosen coordinates). Cpu backends; DALI also has gpu ones.
//!
//! `fn.coord_transform` (DALI's `coord_transform.h`, `mt_transform_attr.cc`,
//! `TransformPointsCPU`): the last dimension of the input holds the points' `n` components,
//! the other dimensions count points. Every point `p` (each component converted to f32)
//! becomes `M * p + T`:
//!
//! ```text
//! out[i] = ConvertSat<dtype>((M[i][0]*p[0] + M[i][1]*p[1] + ... ) + T[i])   // f32, left to right, no FMA
//! ```
//!
//! `M` (`m x n`, row major; one value `v` is `v * I(n)`; absent is the identity) and `T` (`m`
//! values; one value is repeated; absent is 0) or the fused `MT` (`m x (n+1)`; one value `v`
//! is `v * I(n)` with `T = 0`) come as constants or per-sample argument inputs (2-D matrices
//! or 0-D scalars for `M`/`MT`, 1-D vectors or scalars for `T`). `dtype` is FLOAT unless set,
//! and may only be FLOAT or the input type; inputs are UINT8, INT16, UINT16, INT32 or FLOAT;
//! `n` and `m` are 1 to 6. The identity still goes through the arithmetic (`-0.0` becomes
//! `0.0`, as in DALI). When every sample is empty nothing but `dtype` is checked and the
//! outputs have 0 components (DALI's behaviour). DALI gives a 0-D `MT` argument input `n+1`
//! output components laid out with the wrong stride (a bug); Sluice reads it as documented,
//! `v * I(n)` with `T = 0`.
//!
//! `fn.coord_flip` (DALI's `coord_flip.cc`): float32 `(N, ndim)` points, ndim 0 to 3, the
//! coordinates ordered as `layout` says (`x`, `y`, `z`; empty: `x`, `xy`, `xyz`). A flipped
//! coordinate becomes `2 * center - v` in f32 (the doubling exact, one rounding); the others
//! are copied bit for bit. `flip_*` and `center_*` may come per sample.
//!
//! Both are checked against DALI 2.4's cpu operators, bit for bit, by `tests/test_coord.py`.
//! `M`, `T` and `MT` may come per frame (`fn.per_frame`, on an `F...` input): the executor then
//! transforms each frame's points with its frame's matrix (`exec/frames.rs`). Otherwise a
//! sequence input of `coord_transform` is a batch of points like any other, as in DALI.

mod gpu;

use crate::error::{Error, Result};
use crate::ops::args::element_as_f64;
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, ArgValue, Device, OpContext, OpDef, OpSchema, Operator, SequenceRules, Workspace};
use crate::tensor::element::store_f64;
use crate::tensor::{BatchMeta, DType, TensorList};

/// Point dimensionalities DALI's kernels are instantiated for.
const MAX_POINT_DIM: usize = 6;

/// Input types of `coord_transform`.
const POINT_TYPES: [DType; 5] = [DType::U8, DType::I16, DType::U16, DType::I32, DType::F32];

/// `fn.coord_transform`.
pub static COORD_TRANSFORM: OpDef = OpDef {
    schema: OpSchema {
        name: "CoordTransform",
        doc: "Applies a linear transformation to points or vectors: out = M * in + T. The last dimension of the input holds the vectors' components; all other dimensions are treated as a batch of vectors. The number of components in the output is the number of rows of M. Inputs of type UINT8, INT16, UINT16, INT32 and FLOAT are supported.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("M", T::FloatList, D::Optional, "The matrix used for transforming the input vectors. If left unspecified, identity matrix is used. The matrix M does not need to be square - if it's not, the output vectors will have a number of components equal to the number of rows in M. If a scalar value is provided, M is assumed to be a square matrix with that value on the diagonal. The size of the matrix is then assumed to match the number of components in the input vectors.").per_frame(),
            tensor_arg("T", T::FloatList, D::Optional, "The translation vector. If left unspecified, no translation is applied unless MT argument is used. The number of components of this vector must match the number of rows in matrix M. If a scalar value is provided, that value is broadcast to all components of T and the number of components is chosen to match the number of rows in M.").per_frame(),
            tensor_arg("MT", T::FloatList, D::Optional, "A block matrix [M T] which combines the arguments M and T. Providing a scalar value for this argument is equivalent to providing the same scalar for M and leaving T unspecified. The number of columns must be one more than the number of components in the input. This argument is mutually exclusive with M and T.").per_frame(),
            arg("dtype", T::DType, D::Int(DType::F32 as i64), "Data type of the output coordinates. If an integral type is used, the output values are rounded to the nearest integer and clamped to the dynamic range of this type. Must be FLOAT or the input type."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(CoordTransform::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::CoordTransformGpu::new(CoordTransform::new(ctx)?)))),
};

/// coord_transform with a per-frame `M`, `T` or `MT` and points without frames: the points
/// are repeated for every frame and the output is a sequence, as in DALI.
pub fn sequence_rules(def: &OpDef) -> Option<SequenceRules> {
    def.is(&COORD_TRANSFORM).then_some(SequenceRules { unfold_inputs: false, frames_from_arguments: true, expand_channels: false })
}

/// `fn.coord_flip`.
pub static COORD_FLIP: OpDef = OpDef {
    schema: OpSchema {
        name: "CoordFlip",
        doc: "Transforms vectors or points by flipping (reflecting) their coordinates with respect to a given center. The input is a float32 tensor of shape (N, ndim) with ndim of 1, 2 or 3.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("layout", T::Str, D::Str(""), "Determines the order of coordinates in the input: \"x\" (horizontal coordinate), \"y\" (vertical coordinate), \"z\" (depthwise coordinate). If left empty, depending on the number of dimensions, \"x\", \"xy\" or \"xyz\" is assumed."),
            tensor_arg("flip_x", T::Int, D::Int(1), "Flip the horizontal (x) coordinate."),
            tensor_arg("flip_y", T::Int, D::Int(0), "Flip the vertical (y) coordinate."),
            tensor_arg("flip_z", T::Int, D::Int(0), "Flip the depthwise (z) coordinate."),
            tensor_arg("center_x", T::Float, D::Float(0.5), "Flip center in the horizontal axis."),
            tensor_arg("center_y", T::Float, D::Float(0.5), "Flip center in the vertical axis."),
            tensor_arg("center_z", T::Float, D::Float(0.5), "Flip center in the depthwise axis."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(CoordFlip { ctx: ctx.clone() }))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::CoordFlipGpu::new(CoordFlip { ctx: ctx.clone() })))),
};

// ---------------------------------------------------------------- coord_transform

struct CoordTransform {
    ctx: OpContext,
    dtype: DType,
}

/// One batch's `M` and `T`: `m x n` matrices and `m`-vectors, one for the batch or one per
/// sample each.
struct Affine {
    n: usize,
    m: usize,
    mats: Vec<f32>,
    per_sample_mats: bool,
    trans: Vec<f32>,
    per_sample_trans: bool,
}

impl Affine {
    fn sample(&self, i: usize) -> (&[f32], &[f32]) {
        let (a, b) = (self.per_sample_mats as usize * i, self.per_sample_trans as usize * i);
        let mn = self.m * self.n;
        (&self.mats[a * mn..(a + 1) * mn], &self.trans[b * self.m..(b + 1) * self.m])
    }
}

/// `v * I` as an `m x n` matrix (zeros off the diagonal).
fn diagonal(m: usize, n: usize, v: f32) -> impl Iterator<Item = f32> {
    (0..m * n).map(move |k| if k / n == k % n { v } else { 0.0 })
}

/// A constant float-list argument's values as f32 (DALI stores them as float).
fn constant(ctx: &OpContext, name: &str) -> Option<Vec<f32>> {
    Some(match ctx.args.value(name)? {
        ArgValue::FloatList(v) => v.iter().map(|&x| x as f32).collect(),
        ArgValue::IntList(v) => v.iter().map(|&x| x as f32).collect(),
        ArgValue::Float(x) => vec![*x as f32],
        ArgValue::Int(x) => vec![*x as f32],
        _ => return None,
    })
}

/// The argument input wired to `name`, checked to have `n` samples of one shape.
fn uniform_input<'a>(op: &str, ws: &Workspace<'a>, name: &str, n: usize, what: &str) -> Result<Option<&'a TensorList>> {
    let Some(&batch) = ws.arg_inputs.get(name) else { return Ok(None) };
    if batch.len() != n {
        return Err(Error::arg(op, name, format!("argument input has {} samples, the batch has {n}", batch.len())));
    }
    if let Some(i) = (1..n).find(|&i| batch.shape(i) != batch.shape(0)) {
        return Err(Error::arg(op, name, format!(
            "{what} for all samples in the batch must have the same shape; sample 0 has shape {:?}, sample {i} has shape {:?}",
            batch.shape(0),
            batch.shape(i)
        )));
    }
    Ok(Some(batch))
}

impl CoordTransform {
    fn new(ctx: &OpContext) -> Result<CoordTransform> {
        if ctx.given("MT") && (ctx.given("M") || ctx.given("T")) {
            return Err(Error::arg(&ctx.display_name, "MT", "The combined ``MT`` argument cannot be used together with separate ``M``, ``T`` arguments."));
        }
        Ok(CoordTransform { ctx: ctx.clone(), dtype: ctx.args.dtype("dtype") })
    }

    /// `M` and `T` for points of `n` components in a batch of `samples` (DALI's
    /// `ProcessTransformArgs`: the matrix first, which decides `m`, then the translation).
    fn affine(&self, ws: &Workspace<'_>, n: usize, samples: usize) -> Result<Affine> {
        let op = &self.ctx.display_name;
        let fused = ws.arg_inputs.contains_key("MT") || self.ctx.args.has("MT");
        let name = if fused { "MT" } else { "M" };
        let cols = n + fused as usize;
        let mut a = Affine { n, m: n, mats: Vec::new(), per_sample_mats: false, trans: Vec::new(), per_sample_trans: false };
        let mut fused_t = Vec::new();
        if let Some(batch) = uniform_input(op, ws, name, samples, "Matrices")? {
            a.per_sample_mats = true;
            a.per_sample_trans = fused;
            match *batch.shape(0) {
                [] => {
                    // A scalar per sample: `v * I(n)` (and T = 0 for MT, see the module docs).
                    for i in 0..samples {
                        a.mats.extend(diagonal(n, n, element_as_f64(batch, i, 0) as f32));
                    }
                    fused_t.resize(n * samples, 0.0);
                }
                [rows, c] => {
                    if rows == 0 {
                        return Err(Error::arg(op, name, format!("The matrix argument ``{name}`` with 0 rows is illegal.")));
                    }
                    if c != cols {
                        return Err(Error::arg(op, name, format!(
                            "The shape of the argument ``{name}`` does not match the input shape. Got {rows} x {c} matrices and the input requires matrices with {cols} columns"
                        )));
                    }
                    a.m = rows;
                    for i in 0..samples {
                        for r in 0..rows {
                            a.mats.extend((0..n).map(|j| element_as_f64(batch, i, r * cols + j) as f32));
                            if fused {
                                fused_t.push(element_as_f64(batch, i, r * cols + n) as f32);
                            }
                        }
                    }
                }
                _ => {
                    return Err(Error::arg(op, name, format!("The parameter {name} must be a list of 2D matrices of same size or a list of scalars. Got samples of shape {:?}", batch.shape(0))));
                }
            }
        } else if let Some(v) = constant(&self.ctx, name) {
            if v.len() == 1 {
                a.mats.extend(diagonal(n, n, v[0]));
                fused_t.resize(n, 0.0);
            } else {
                if v.is_empty() {
                    return Err(Error::arg(op, name, format!("The matrix argument ``{name}`` must not be an empty list.")));
                }
                if v.len() % cols != 0 {
                    return Err(Error::arg(op, name, format!("Cannot form a matrix with {} elements and {cols} columns", v.len())));
                }
                a.m = v.len() / cols;
                for row in v.chunks_exact(cols) {
                    a.mats.extend_from_slice(&row[..n]);
                    if fused {
                        fused_t.push(row[n]);
                    }
                }
            }
        } else {
            a.mats.extend(diagonal(n, n, 1.0));
        }
        let m = a.m;
        a.trans = if fused {
            fused_t
        } else if let Some(batch) = uniform_input(op, ws, "T", samples, "Translation vectors")? {
            a.per_sample_trans = true;
            match *batch.shape(0) {
                [] => (0..samples).flat_map(|i| std::iter::repeat_n(element_as_f64(batch, i, 0) as f32, m)).collect(),
                [len] if len == m => (0..samples).flat_map(|i| (0..m).map(move |j| element_as_f64(batch, i, j) as f32)).collect(),
                [len] => return Err(Error::arg(op, "T", format!("Expected {m}-D translation vectors, got {len}-D"))),
                _ => return Err(Error::arg(op, "T", "The translation argument input must be a list of 1D tensors or a list of scalars.")),
            }
        } else if let Some(v) = constant(&self.ctx, "T") {
            match v.len() {
                1 => vec![v[0]; m],
                len if len == m => v,
                len => return Err(Error::arg(op, "T", format!("Argument \"T\" expects either a single value or a list of {m} elements. {len} given."))),
            }
        } else {
            vec![0.0; m]
        };
        Ok(a)
    }
}

/// One batch of `coord_transform` planned by the host: the output metadata and, when some
/// sample has points, their components `n` and the affine map.
struct TransformPlan {
    meta: BatchMeta,
    affine: Option<Affine>,
}

impl CoordTransform {
    /// Checks `input` and the arguments and plans the batch (both backends).
    fn plan(&self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<TransformPlan> {
        let op = &self.ctx.display_name;
        let (in_type, out_type) = (input.dtype(), self.dtype);
        if out_type != in_type && out_type != DType::F32 {
            return Err(Error::arg(op, "dtype", format!(
                "CoordTransform output type must be the same as input type, which is {}, or FLOAT. Got: {}",
                in_type.dali_name(),
                out_type.dali_name()
            )));
        }
        if input.ndim() < 2 {
            return Err(Error::type_mismatch(op, format!("CoordTransform expects an input with at least 2 dimensions (points along the last one); got {}-D samples", input.ndim())));
        }
        // The points' dimensionality, from the non-empty samples (empty ones may have any).
        let samples = input.len();
        let mut n = 0;
        let mut first = 0;
        for i in (0..samples).filter(|&i| input.numel(i) > 0) {
            let pt_dim = *input.shape(i).last().unwrap_or(&0);
            if n == 0 {
                (n, first) = (pt_dim, i);
            } else if pt_dim != n {
                return Err(Error::type_mismatch(op, format!(
                    "The point dimensions must be the same for all input samples; sample {first} has shape {:?}, sample {i} has shape {:?}",
                    input.shape(first),
                    input.shape(i)
                )));
            }
        }
        let ndim = input.ndim();
        let out_meta = |m: usize| {
            let mut shapes: Vec<usize> = Vec::with_capacity(samples * ndim);
            for i in 0..samples {
                shapes.extend_from_slice(&input.shape(i)[..ndim - 1]);
                shapes.push(m);
            }
            let mut meta = BatchMeta::new(out_type, ndim, shapes.chunks(ndim));
            meta.set_layout(input.layout().clone());
            meta.inherit_source_info(input);
            meta
        };
        if n == 0 {
            // Nothing to transform: DALI checks nothing more and gives 0 components.
            return Ok(TransformPlan { meta: out_meta(0), affine: None });
        }
        let affine = self.affine(ws, n, samples)?;
        let m = affine.m;
        if n > MAX_POINT_DIM {
            return Err(Error::type_mismatch(op, format!("Unsupported input point dimensionality: {n} (the input's last dimension; 1 to {MAX_POINT_DIM} supported)")));
        }
        if m > MAX_POINT_DIM {
            let name = if ws.arg_inputs.contains_key("MT") || self.ctx.args.has("MT") { "MT" } else { "M" };
            return Err(Error::arg(op, name, format!("Unsupported output point dimensionality: {m} (the rows of the matrix; 1 to {MAX_POINT_DIM} supported)")));
        }
        if !POINT_TYPES.contains(&in_type) {
            let names: Vec<&str> = POINT_TYPES.iter().map(|d| d.dali_name()).collect();
            return Err(Error::type_mismatch(op, format!("Unsupported input type: {}; supported: {}", in_type.dali_name(), names.join(", "))));
        }
        Ok(TransformPlan { meta: out_meta(m), affine: Some(affine) })
    }
}

impl Operator for CoordTransform {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let plan = self.plan(ws, input.meta())?;
        let out_type = plan.meta.dtype();
        let mut out = TensorList::for_overwrite(plan.meta);
        let Some(affine) = plan.affine else { return Ok(vec![out]) };
        let (n, m, in_type) = (affine.n, affine.m, input.dtype());
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let (mat, t) = affine.sample(i);
            let src = input.bytes(i);
            // The common shapes with their sizes known to the compiler (unrolled loops).
            match (n, m) {
                (2, 2) => transform_sample::<2, 2>(in_type, src, out_type, dst, mat, t),
                (3, 3) => transform_sample::<3, 3>(in_type, src, out_type, dst, mat, t),
                (2, 3) => transform_sample::<2, 3>(in_type, src, out_type, dst, mat, t),
                (3, 2) => transform_sample::<3, 2>(in_type, src, out_type, dst, mat, t),
                _ => transform_dyn(in_type, src, out_type, dst, mat, t, n, m),
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// `M * p + T` for every point of a sample, the arithmetic DALI's cpu does: left to right,
/// no FMA, then the output type's conversion.
#[inline(always)]
fn transform_point(p: &[f32], mat: &[f32], t: &[f32], o: &mut [f32]) {
    let n = p.len();
    for (r, o) in o.iter_mut().enumerate() {
        let row = &mat[r * n..(r + 1) * n];
        let mut s = row[0] * p[0];
        for j in 1..n {
            s += row[j] * p[j];
        }
        *o = s + t[r];
    }
}

fn store_point(out_type: DType, dst: &mut [u8], k: usize, o: &[f32]) {
    let m = o.len();
    if out_type == DType::F32 {
        let d: &mut [f32] = bytemuck::cast_slice_mut(&mut dst[k * m * 4..(k + 1) * m * 4]);
        d.copy_from_slice(o);
    } else {
        // DALI's ConvertSat: round half away from zero, saturate.
        for (r, &v) in o.iter().enumerate() {
            store_f64(out_type, dst, k * m + r, v as f64);
        }
    }
}

fn transform_sample<const N: usize, const M: usize>(in_type: DType, src: &[u8], out_type: DType, dst: &mut [u8], mat: &[f32], t: &[f32]) {
    let mut o = [0.0f32; M];
    if in_type == DType::F32 && out_type == DType::F32 {
        let src: &[f32] = bytemuck::cast_slice(src);
        let dst: &mut [f32] = bytemuck::cast_slice_mut(dst);
        for (p, d) in src.chunks_exact(N).zip(dst.chunks_exact_mut(M)) {
            transform_point(p, mat, t, d);
        }
        return;
    }
    let mut p = [0.0f32; N];
    for (k, point) in src.chunks_exact(N * in_type.size()).enumerate() {
        point_f32(in_type, point, &mut p);
        transform_point(&p, mat, t, &mut o);
        store_point(out_type, dst, k, &o);
    }
}

#[allow(clippy::too_many_arguments)]
fn transform_dyn(in_type: DType, src: &[u8], out_type: DType, dst: &mut [u8], mat: &[f32], t: &[f32], n: usize, m: usize) {
    let mut p = [0.0f32; MAX_POINT_DIM];
    let mut o = [0.0f32; MAX_POINT_DIM];
    for (k, point) in src.chunks_exact(n * in_type.size()).enumerate() {
        point_f32(in_type, point, &mut p[..n]);
        transform_point(&p[..n], mat, t, &mut o[..m]);
        store_point(out_type, dst, k, &o[..m]);
    }
}

/// A point's components (`dst.len()` elements of `dtype` in `b`) as f32, as DALI's `(float)v`
/// converts them.
#[inline(always)]
fn point_f32(dtype: DType, b: &[u8], dst: &mut [f32]) {
    match dtype {
        DType::U8 => dst.iter_mut().zip(b).for_each(|(d, &v)| *d = v as f32),
        DType::I16 => dst.iter_mut().zip(b.chunks_exact(2)).for_each(|(d, c)| *d = i16::from_le_bytes([c[0], c[1]]) as f32),
        DType::U16 => dst.iter_mut().zip(b.chunks_exact(2)).for_each(|(d, c)| *d = u16::from_le_bytes([c[0], c[1]]) as f32),
        DType::I32 => dst.iter_mut().zip(b.chunks_exact(4)).for_each(|(d, c)| *d = i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32),
        _ => dst.iter_mut().zip(b.chunks_exact(4)).for_each(|(d, c)| *d = f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    }
}

// ---------------------------------------------------------------- coord_flip

struct CoordFlip {
    ctx: OpContext,
}

const FLIP_ARGS: [(&'static str, &'static str); 3] = [("flip_x", "center_x"), ("flip_y", "center_y"), ("flip_z", "center_z")];

/// One batch of `coord_flip` planned by the host: per sample, which of the point's
/// coordinates flip and the mirror `2 * center` of each.
struct FlipPlan {
    ndim: usize,
    samples: Vec<FlipSample>,
}

#[derive(Clone, Copy)]
struct FlipSample {
    flip: [bool; 3],
    mirror: [f32; 3],
}

impl CoordFlip {
    /// Checks `input` and the arguments and plans the batch (both backends).
    fn plan(&self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<FlipPlan> {
        let op = &self.ctx.display_name;
        if input.dtype() != DType::F32 {
            return Err(Error::type_mismatch(op, format!("Input is expected to be float (FLOAT), got {}", input.dtype().dali_name())));
        }
        if input.ndim() != 2 {
            return Err(Error::type_mismatch(op, format!("expects 2-D input: points or vectors of shape (N, ndim); got {}-D samples", input.ndim())));
        }
        let samples = input.len();
        if samples == 0 {
            return Ok(FlipPlan { ndim: 0, samples: Vec::new() });
        }
        let ndim = input.shape(0)[1];
        if let Some(i) = (1..samples).find(|&i| input.shape(i)[1] != ndim) {
            return Err(Error::type_mismatch(op, format!(
                "All samples are expected to have coordinates with same number of dimensions; sample 0 has shape {:?}, sample {i} has shape {:?}",
                input.shape(0),
                input.shape(i)
            )));
        }
        if ndim > 3 {
            return Err(Error::type_mismatch(op, format!("Unexpected number of dimensions {ndim}; coordinates of up to 3 dimensions are supported")));
        }
        let given = self.ctx.args.str("layout");
        let layout = if given.is_empty() { ["", "x", "xy", "xyz"][ndim] } else { given };
        // DALI's lookup: a letter is searched for only when the coordinates have that many
        // dimensions; otherwise its slot is the default (0, 1, 2), never reached.
        let mut dims = [0usize, 1, 2];
        for (k, (dim, letter)) in dims.iter_mut().zip(['x', 'y', 'z']).enumerate() {
            if ndim > k {
                *dim = layout.find(letter).ok_or_else(|| Error::arg(op, "layout", format!("Dimension \"{letter}\" not found in the layout \"{layout}\"")))?;
            }
        }
        for name in FLIP_ARGS.iter().flat_map(|(f, c)| [*f, *c]) {
            if let Some(b) = ws.arg_inputs.get(name).filter(|b| b.len() != samples) {
                return Err(Error::arg(op, name, format!("argument input has {} samples, the batch has {samples}", b.len())));
            }
        }
        // Slots are set in DALI's order x, y, z (a later letter wins a shared slot).
        let mut plans = Vec::with_capacity(samples);
        for i in 0..samples {
            let mut s = FlipSample { flip: [false; 3], mirror: [1.0; 3] };
            for (&d, (flip_arg, center_arg)) in dims.iter().zip(FLIP_ARGS) {
                let f = ws.per_sample(&self.ctx, flip_arg).get(op, i)?.unwrap_or(0.0);
                let c = ws.per_sample(&self.ctx, center_arg).get(op, i)?.unwrap_or(0.5) as f32;
                if d < 3 {
                    s.flip[d] = f != 0.0;
                    s.mirror[d] = 2.0 * c;
                }
            }
            plans.push(s);
        }
        Ok(FlipPlan { ndim, samples: plans })
    }
}

impl Operator for CoordFlip {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let plan = self.plan(ws, input.meta())?;
        let mut out = TensorList::for_overwrite(input.meta().clone());
        let ndim = plan.ndim;
        if ndim == 0 {
            return Ok(vec![out]);
        }
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let FlipSample { flip, mirror } = plan.samples[i];
            let src: &[f32] = bytemuck::cast_slice(input.bytes(i));
            let dst: &mut [f32] = bytemuck::cast_slice_mut(dst);
            dst.copy_from_slice(src);
            // Each flipped coordinate is a strided column: `mirror - v` down it.
            for d in (0..ndim).filter(|&d| flip[d]) {
                for v in dst.iter_mut().skip(d).step_by(ndim) {
                    *v = mirror[d] - *v;
                }
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}
