//! `fn.transforms.*`: operators that make affine transform matrices (DALI's
//! `dali/operators/geometry/affine_transforms/`, cpu only, as in DALI):
//! `rotation`, `scale`, `shear`, `translation`, `crop` ([`TransformOp`], one file each) and
//! `combine` ([`combine`]). `fn.transform_translation` is DALI's deprecated name of
//! `translation` (a legacy name: it warns as DALI does).
//!
//! What is reproduced (DALI 2.4's cpu operators, checked by `tests/test_transforms.py`
//! against DALI, bit for bit, and by the spec's NumPy models):
//! - the output is one float32 `(ndim, ndim+1)` matrix per sample: the top `ndim` rows of
//!   the operator's homogeneous `(ndim+1)x(ndim+1)` matrix `M`. Its layout is DALI's
//!   `**` (dimensions with no name);
//! - with an input transform `T` (float32 `(ndim, ndim+1)`, extended with the row
//!   `[0 .. 0 1]`) the output is `M * T` (`M` applied after `T`) or, with
//!   `reverse_order=True`, `T * M`;
//! - every product is DALI's `mat::operator*`: the full square product, each element a dot
//!   product summed left to right in f32, starting with the first product, without fused
//!   multiply-adds (Rust never contracts `a * b + c`), including the products with the
//!   homogeneous row's zeros (so `0 * inf` is NaN as in DALI);
//! - arguments are constant lists (one value is used for every dimension) or per-sample
//!   argument inputs (a 0-D value, used for every dimension, or a 1-D list; the same shape in
//!   every sample); angles go through DALI's `deg2rad` (one f32 multiplication by
//!   `(float)(M_PI / 180)`) and glibc's `cosf`/`sinf`/`tanf` (what Rust's `f32::cos` etc.
//!   call on Linux);
//! - the batch is the input's, else the pipeline's (or the argument inputs') batch size.
//!
//! Sequences: a per-frame argument (`fn.per_frame`) or an input of a matrix per frame (`F`
//! layout) gives a sequence of matrices, one per frame: the executor runs the operator frame
//! by frame (`exec/frames.rs`, [`sequence_rules`]). Where DALI reads out of bounds or crashes (`scale=[]`; a per-sample
//! `center` of one value in `scale`; `combine` of ragged batches) Sluice raises an error or
//! broadcasts the value, as the module of each operator says.

pub mod combine;
pub mod crop;
pub mod rotation;
pub mod scale;
pub mod shear;
pub mod translation;

pub use combine::COMBINE;
pub use crop::CROP;
pub use rotation::ROTATION;
pub use scale::SCALE;
pub use shear::SHEAR;
pub use translation::TRANSLATION;

use std::ops::RangeInclusive;

use crate::error::{Error, Result};
use crate::ops::args::element_as_f64;
use crate::ops::{arg, ArgDefault as D, ArgSchema, ArgType as T, ArgValue, OpContext, OpDef, Operator, SequenceRules, Workspace};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

/// The most dimensions a transform has (DALI's `SupportedDims` go up to 6).
pub const MAX_NDIM: usize = 6;

/// A homogeneous matrix of up to `MAX_NDIM + 1` rows and columns; a transform of `ndim`
/// dimensions uses the top-left `(ndim+1)x(ndim+1)` block.
pub type Mat = [[f32; MAX_NDIM + 1]; MAX_NDIM + 1];

/// `reverse_order`, shared by every transform (DALI's `TransformAttr`).
pub(crate) const REVERSE_ORDER: ArgSchema = arg(
    "reverse_order",
    T::Bool,
    D::Bool(false),
    "Determines the order when combining affine transforms. If false (default), the operator's transform is applied after the input transform (out = M * T); if true, before it (out = T * M). Ignored without an input.",
);

/// The identity.
pub fn identity() -> Mat {
    let mut m = [[0.0; MAX_NDIM + 1]; MAX_NDIM + 1];
    for (i, row) in m.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    m
}

/// `a * b` over the top-left `(ndim+1)x(ndim+1)` blocks, as DALI's `mat::operator*`: every
/// element `sum_k a[i][k] * b[k][j]`, summed from `k = 0` up in f32, no fused multiply-add.
pub fn mul(a: &Mat, b: &Mat, ndim: usize) -> Mat {
    let n = ndim + 1;
    let mut r = identity();
    for i in 0..n {
        for j in 0..n {
            let mut s = a[i][0] * b[0][j];
            for k in 1..n {
                s += a[i][k] * b[k][j];
            }
            r[i][j] = s;
        }
    }
    r
}

/// DALI's `deg2rad(float)`: one f32 multiplication by `(float)(M_PI / 180)`.
pub fn deg2rad(deg: f32) -> f32 {
    deg * (std::f64::consts::PI / 180.0) as f32
}

/// Moves the transform's fixed point to `center` (rotation, shear): the last column becomes
/// `L * (-center) + center`, `L` the linear block, each row's dot product summed left to
/// right from the first product, then `center` added (DALI's `sub<n, n>(mat) * -center +
/// center`).
pub fn set_center(m: &mut Mat, ndim: usize, center: &[f32]) {
    for i in 0..ndim {
        let mut s = m[i][0] * -center[0];
        for k in 1..ndim {
            s += m[i][k] * -center[k];
        }
        m[i][ndim] = s + center[i];
    }
    m[ndim][ndim] = 1.0;
}

/// A float-list argument for one batch, as DALI's `ArgValue<float, 1>` acquires it.
pub enum List<'a> {
    /// Not given.
    Unset,
    /// A constant list (one value stands for every dimension).
    Constant(Vec<f32>),
    /// An argument input: `shape` is every sample's shape (checked to be the same), `len`
    /// its number of values.
    Input { batch: &'a TensorList, shape: &'a [usize], len: usize },
}

impl<'a> List<'a> {
    /// The argument `name` for a batch of `n` samples: a constant or an argument input whose
    /// samples are scalars or 1-D lists, all of the same shape.
    pub fn read(ctx: &OpContext, ws: &Workspace<'a>, name: &'static str, n: usize) -> Result<List<'a>> {
        let list = List::read_any(ctx, ws, name, n)?;
        if let List::Input { shape, .. } = &list {
            if shape.len() > 1 {
                return Err(Error::arg(&ctx.display_name, name, format!("argument input must be a scalar or a 1-D list per sample; got samples of shape {shape:?}")));
            }
        }
        Ok(list)
    }

    /// Like [`List::read`], for an argument whose per-sample tensors may have any number of
    /// dimensions (`shear`'s `(D, D-1)` matrices); their values are read flat.
    pub fn read_any(ctx: &OpContext, ws: &Workspace<'a>, name: &'static str, n: usize) -> Result<List<'a>> {
        let op = &ctx.display_name;
        if let Some(&batch) = ws.arg_inputs.get(name) {
            if batch.len() != n {
                return Err(Error::arg(op, name, format!("argument input has {} samples, the batch has {n}", batch.len())));
            }
            let shape = batch.shape(0);
            if let Some(i) = (1..n).find(|&i| batch.shape(i) != shape) {
                return Err(Error::arg(op, name, format!("argument input must have the same shape in every sample; sample 0 has shape {shape:?}, sample {i} has shape {:?}", batch.shape(i))));
            }
            return Ok(List::Input { batch, shape, len: shape.iter().product() });
        }
        Ok(match ctx.args.value(name) {
            None => List::Unset,
            Some(ArgValue::FloatList(v)) => List::Constant(v.iter().map(|&x| x as f32).collect()),
            Some(ArgValue::IntList(v)) => List::Constant(v.iter().map(|&x| x as f32).collect()),
            Some(ArgValue::Float(x)) => List::Constant(vec![*x as f32]),
            Some(ArgValue::Int(x)) => List::Constant(vec![*x as f32]),
            Some(v) => return Err(Error::type_mismatch(op, format!("argument '{name}' must be a list of float, got {v:?}"))),
        })
    }

    /// A scalar float argument (`angle`): a constant, or an argument input of 0-D samples
    /// (DALI refuses other shapes, `(1,)` included).
    pub fn read_scalar(ctx: &OpContext, ws: &Workspace<'a>, name: &'static str, n: usize) -> Result<List<'a>> {
        let list = List::read_any(ctx, ws, name, n)?;
        if let List::Input { shape, .. } = &list {
            if !shape.is_empty() {
                return Err(Error::arg(&ctx.display_name, name, format!("argument input must be a scalar (0-D) per sample; got samples of shape {shape:?}")));
            }
        }
        Ok(list)
    }

    /// True when the argument was given.
    pub fn is_set(&self) -> bool {
        !matches!(self, List::Unset)
    }

    /// True when the values come from an argument input (one matrix per sample).
    pub fn is_input(&self) -> bool {
        matches!(self, List::Input { .. })
    }

    /// Values per sample (0 when not given).
    pub fn len(&self) -> usize {
        match self {
            List::Unset => 0,
            List::Constant(v) => v.len(),
            List::Input { len, .. } => *len,
        }
    }

    /// Value `d` of sample `i`; a single value stands for every `d` (DALI's `as_vec`). Callers
    /// check the length first; past the end (never reached) reads 0.
    pub fn get(&self, i: usize, d: usize) -> f32 {
        let d = if self.len() == 1 { 0 } else { d };
        if d >= self.len() {
            return 0.0;
        }
        match self {
            List::Unset => 0.0,
            List::Constant(v) => v[d],
            List::Input { batch, .. } => element_as_f64(batch, i, d) as f32,
        }
    }

    /// The first `ndim` values of sample `i` (broadcast as [`List::get`]).
    pub fn vec(&self, i: usize, ndim: usize) -> [f32; MAX_NDIM] {
        let mut v = [0.0; MAX_NDIM];
        for (d, x) in v.iter_mut().enumerate().take(ndim) {
            *x = self.get(i, d);
        }
        v
    }

    /// Checks an argument of a fixed length (`center`, `axis`): a constant of `want` values or
    /// one; an argument input of `want` values per sample or a scalar. Unset passes.
    pub fn expect_len(&self, op: &str, name: &str, want: usize) -> Result<()> {
        match self {
            List::Unset => Ok(()),
            List::Constant(v) if v.len() == want || v.len() == 1 => Ok(()),
            List::Constant(v) => Err(Error::arg(op, name, format!("expected {want} values (or one, used for every dimension), got {}", v.len()))),
            List::Input { shape, .. } if shape.is_empty() || shape[..] == [want] => Ok(()),
            List::Input { shape, .. } => Err(Error::arg(op, name, format!("argument input must hold {want} values per sample (shape [{want}]) or one scalar; got samples of shape {shape:?}"))),
        }
    }
}

/// Checks the dimensions a transform's arguments imply against the input transform's (DALI's
/// message) and against the operator's supported range; `arg` names the argument that
/// decided `ndim`.
pub fn check_ndim(op: &str, arg: &str, ndim: usize, input_ndim: Option<usize>, supported: RangeInclusive<usize>) -> Result<()> {
    if let Some(k) = input_ndim {
        if k != ndim {
            return Err(Error::arg(op, arg, format!("The input describes a {k}D transform but other arguments suggest a {ndim}D transform")));
        }
    }
    if !supported.contains(&ndim) {
        return Err(Error::arg(op, arg, format!(
            "Unsupported number of dimensions {ndim}; this transform supports {} to {}",
            supported.start(),
            supported.end()
        )));
    }
    Ok(())
}

/// The transforms of one batch: `ndim`, and one matrix for every sample, or a single one
/// when no argument comes per sample (DALI's `IsConstantTransform`).
pub struct Matrices {
    pub ndim: usize,
    pub mats: Vec<Mat>,
}

/// An operator's own part: its matrices for a batch of `n` samples (`n > 0`), given the
/// input transform's number of dimensions when there is an input. It reads its arguments,
/// decides `ndim` and calls [`check_ndim`] before building any matrix.
pub type Build = fn(ctx: &OpContext, ws: &Workspace<'_>, n: usize, input_ndim: Option<usize>) -> Result<Matrices>;

/// `rotation`, `scale`, `shear`, `translation`, `crop`: the machinery DALI's
/// `TransformBaseOp` shares (input checks, composition, output), around a [`Build`].
pub struct TransformOp {
    ctx: OpContext,
    build: Build,
}

impl TransformOp {
    pub fn new(ctx: &OpContext, build: Build) -> TransformOp {
        TransformOp { ctx: ctx.clone(), build }
    }
}

/// Checks an input batch of transforms (`what` names it in errors) and gives its `ndim`:
/// float32, 2-D `(ndim, ndim+1)`, the same shape in every sample. (A sequence of matrices
/// never gets here: the executor runs these operators frame by frame, see
/// [`sequence_rules`].)
pub fn check_input(op: &str, what: &str, input: &TensorList) -> Result<usize> {
    if input.dtype() != DType::F32 {
        return Err(Error::type_mismatch(op, format!("{what} must hold FLOAT (float32) affine transform matrices, got {}", input.dtype().dali_name())));
    }
    let s0 = input.shape(0);
    if input.ndim() != 2 || s0[1] != s0[0] + 1 {
        return Err(Error::type_mismatch(op, format!(
            "{what} is expected to be a 2D tensor with dimensions (ndim, ndim+1) representing an affine transform; sample 0 has shape {s0:?}"
        )));
    }
    if let Some(i) = (1..input.len()).find(|&i| input.shape(i) != s0) {
        return Err(Error::type_mismatch(op, format!("{what}: all matrices must have the same shape; sample 0 has shape {s0:?}, sample {i} has shape {:?}", input.shape(i))));
    }
    Ok(s0[0])
}

/// The affine-transform operators run frame by frame on any sequence input (a matrix per
/// frame), and a per-frame argument gives a sequence of matrices even from a matrix per
/// sample, as DALI's do.
pub fn sequence_rules(def: &OpDef) -> Option<SequenceRules> {
    [&ROTATION, &SCALE, &SHEAR, &TRANSLATION, &CROP, &COMBINE]
        .iter()
        .any(|d| d.is(def))
        .then_some(SequenceRules { unfold_inputs: true, frames_from_arguments: true, expand_channels: false })
}

/// Sample `i` of a batch of `(ndim, ndim+1)` float32 matrices, extended with the row
/// `[0 .. 0 1]`.
pub fn read_mat(input: &TensorList, i: usize, ndim: usize) -> Mat {
    let mut m = identity();
    for (k, &v) in input.sample::<f32>(i).iter().enumerate() {
        m[k / (ndim + 1)][k % (ndim + 1)] = v;
    }
    m
}

/// A batch of `n` empty float32 `(ndim, ndim+1)` matrices to fill with [`write_mat`].
pub fn output(n: usize, ndim: usize) -> TensorList {
    let shape = [ndim, ndim + 1];
    let mut meta = BatchMeta::new(DType::F32, 2, std::iter::repeat_n(&shape[..], n));
    meta.set_layout(Layout::from("**"));
    TensorList::for_overwrite(meta)
}

/// Writes the top `ndim` rows of `m` as sample `i` of `out` (values copied as they are).
pub fn write_mat(out: &mut TensorList, i: usize, m: &Mat, ndim: usize) {
    let dst = out.sample_mut::<f32>(i);
    for (k, d) in dst.iter_mut().enumerate() {
        *d = m[k / (ndim + 1)][k % (ndim + 1)];
    }
}

impl Operator for TransformOp {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let op = &self.ctx.display_name;
        let input = ws.inputs.first().copied();
        let n = input.map_or(ws.batch_size, |t| t.len());
        if n == 0 {
            // An empty batch (an empty branch of a conditional) has nothing to describe.
            return Ok(vec![output(0, 2)]);
        }
        let input_ndim = input.map(|t| check_input(op, "input 0", t)).transpose()?;
        let Matrices { ndim, mats } = (self.build)(&self.ctx, ws, n, input_ndim)?;
        let reverse = self.ctx.args.bool("reverse_order");
        let mut out = output(n, ndim);
        for i in 0..n {
            let m = &mats[if mats.len() == 1 { 0 } else { i }];
            let r = match input {
                Some(t) => {
                    let t = read_mat(t, i, ndim);
                    if reverse { mul(&t, m, ndim) } else { mul(m, &t, ndim) }
                }
                None => *m,
            };
            write_mat(&mut out, i, &r, ndim);
        }
        if let Some(t) = input {
            out.inherit_source_info(t.meta());
        }
        Ok(vec![out])
    }
}

/// The schema every `TransformBaseOp` operator has: an optional input transform, cpu only.
pub(crate) const fn schema(name: &'static str, doc: &'static str, args: &'static [&'static [ArgSchema]], legacy_names: &'static [(&'static str, Option<crate::ops::Device>)]) -> crate::ops::OpSchema {
    crate::ops::OpSchema {
        name,
        doc,
        devices: &[crate::ops::Device::Cpu],
        min_inputs: 0,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args,
        arg_aliases: &[],
        legacy_names,
        is_reader: false,
        is_random: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_product_sums_left_to_right_and_keeps_nan_from_zero_times_inf() {
        // [[inf, 0, 0], [0, 1, 0]] translated by (1, 1): DALI gives [[inf, 0, 1], [nan, 1, 1]].
        let mut t = identity();
        t[0][0] = f32::INFINITY;
        let mut m = identity();
        m[0][2] = 1.0;
        m[1][2] = 1.0;
        let r = mul(&m, &t, 2);
        assert_eq!(r[0][0], f32::INFINITY);
        assert_eq!(r[0][2], 1.0);
        assert!(r[1][0].is_nan());
        assert_eq!(&r[1][1..3], &[1.0, 1.0]);
    }

    #[test]
    fn deg2rad_is_one_f32_multiplication() {
        assert_eq!((std::f64::consts::PI / 180.0) as f32, 0.017453292f32);
        assert_eq!(deg2rad(90.0), 90.0f32 * 0.017453292f32);
    }

    #[test]
    fn the_center_moves_the_fixed_point() {
        // rotation(angle=90, center=2.0): DALI gives [[-4.3711388e-08, -1, 4], [1, -4.3711388e-08, 1.1920929e-07]].
        let a = deg2rad(90.0);
        let (c, s) = (a.cos(), a.sin());
        let mut m = identity();
        m[0][0] = c;
        m[0][1] = -s;
        m[1][0] = s;
        m[1][1] = c;
        set_center(&mut m, 2, &[2.0, 2.0]);
        assert_eq!([m[0][0], m[0][1], m[0][2]], [-4.3711388e-08, -1.0, 4.0]);
        assert_eq!([m[1][0], m[1][1], m[1][2]], [1.0, -4.3711388e-08, 1.1920929e-07]);
    }
}
