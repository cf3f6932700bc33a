//! `fn.one_hot`: a new axis of `num_classes` elements, `on_value` at the input's class and
//! `off_value` elsewhere (checked against DALI 2.4's cpu operator and its test_one_hot.py,
//! tests/test_one_hot.py).
//!
//! As DALI: the class of an element is the input value converted to an integer as C++'s
//! `(int)` does (floats truncated: 2.7 is class 2, -0.5 class 0); a class outside
//! `[0, num_classes)` (negative, too large, NaN) marks nothing, without an error. `axis`
//! (-1: last) places the new axis; when `axis` is not given and every sample holds one
//! element (DALI's legacy scalars, whatever their dimensions), the output is 1-D of
//! `num_classes`. `on_value` and `off_value` are f32 cast to `dtype` as C++'s
//! `static_cast` (`tensor::element::store_static_cast`). `axis_name` names the new axis in
//! the output layout (inserted in the input's, which must then have one); without it the
//! layout is empty. Input and output types: the integer types, FLOAT and FLOAT64 (DALI's
//! ONE_HOT_TYPES); others are errors naming the type.
//!
//! DALI's cpu converts a 64-bit class to `int` (wrapping 2^32 + 1 to class 1); Sluice,
//! like DALI's gpu kernel, treats such values as outside every class.

mod gpu;

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::element::store_static_cast;
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

pub static ONE_HOT: OpDef = OpDef {
    schema: OpSchema {
        name: "OneHot",
        doc: "Produces a one-hot encoding of the input. Adds a new axis or converts scalar input into an axis of `num_classes` elements: \
              output[x0, ..., xk-1, i, xk, ..., xn] = on_value if i == input[x0, ..., xn] else off_value. For backward compatibility, \
              any input in which all tensors have only one element is considered scalar unless `axis` is given.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("num_classes", T::Int, D::Int(0), "Number of all classes in the data."),
            arg("axis", T::Int, D::Optional, "Dimension to place the one-hot encoding axis of `num_classes` size; by default (-1) appended as the last dimension for non-scalar inputs, the only dimension for scalar inputs."),
            arg("dtype", T::DType, D::Int(DType::F32 as i64), "Output data type."),
            arg("on_value", T::Float, D::Float(1.0), "Value that will be used to fill the output to indicate given class in the corresponding input coordinate; cast to `dtype`."),
            arg("off_value", T::Float, D::Float(0.0), "Value that will be used to fill the output to indicate the lack of given class; cast to `dtype`."),
            arg("axis_name", T::Str, D::Optional, "Single character naming the new dimension in the output layout; without it the output layout is empty."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(OneHot::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::OneHotGpu::new(OneHot::new(ctx)?)))),
};

/// DALI's ONE_HOT_TYPES: the input and output types it has.
fn supported(t: DType) -> bool {
    !matches!(t, DType::F16 | DType::Bool)
}

struct OneHot {
    op: String,
    classes: usize,
    axis: Option<i64>,
    dtype: DType,
    /// `on_value` and `off_value` as elements of `dtype` (the first `dtype.size()` bytes).
    on: [u8; 8],
    off: [u8; 8],
    axis_name: Option<char>,
}

/// One batch's plan: the output metadata and, per sample, the extents around the new axis.
struct Plan {
    meta: BatchMeta,
    /// (outer, inner) element counts of each sample: the input is outer x inner, the output
    /// outer x classes x inner.
    split: Vec<(usize, usize)>,
}

impl OneHot {
    fn new(ctx: &OpContext) -> Result<OneHot> {
        let op = ctx.display_name.as_str();
        let classes = ctx.args.int("num_classes");
        if classes < 0 {
            return Err(Error::arg(op, "num_classes", format!("must not be negative, got {classes}")));
        }
        let dtype = ctx.args.dtype("dtype");
        if !supported(dtype) {
            return Err(Error::arg(op, "dtype", format!("unsupported output type {}: one_hot writes the integer types, FLOAT and FLOAT64", dtype.dali_name())));
        }
        let axis_name = match ctx.args.opt_str("axis_name") {
            None => None,
            Some(s) if s.chars().count() == 1 => s.chars().next(),
            Some(s) => return Err(Error::arg(op, "axis_name", format!("must be a single character, got \"{s}\""))),
        };
        Ok(OneHot {
            op: op.to_string(),
            classes: classes as usize,
            axis: ctx.args.opt_int("axis"),
            dtype,
            on: store_static_cast(dtype, ctx.args.float("on_value") as f32),
            off: store_static_cast(dtype, ctx.args.float("off_value") as f32),
            axis_name,
        })
    }

    fn plan(&self, input: &BatchMeta) -> Result<Plan> {
        let op = self.op.as_str();
        if !supported(input.dtype()) {
            return Err(Error::type_mismatch(op, format!("unsupported input type {}: one_hot reads the integer types, FLOAT and FLOAT64", input.dtype().dali_name())));
        }
        let ndim = input.ndim();
        let axis = self.axis.unwrap_or(-1);
        if axis < -1 || axis > ndim as i64 {
            return Err(Error::arg(op, "axis", format!("{axis} is outside the allowed range [-1, {ndim}] for a {ndim}-D input")));
        }
        // DALI's legacy scalars: without `axis`, a batch of one-element samples.
        let scalars = self.axis.is_none() && (0..input.len()).all(|i| input.numel(i) == 1);
        let out_ndim = if scalars { 1 } else { ndim + 1 };
        let place = if axis < 0 { out_ndim - 1 } else { axis as usize };
        let mut shapes = Vec::with_capacity(input.len() * out_ndim);
        let mut split = Vec::with_capacity(input.len());
        for i in 0..input.len() {
            if scalars {
                shapes.push(self.classes);
                split.push((1, 1));
                continue;
            }
            let s = input.shape(i);
            shapes.extend_from_slice(&s[..place]);
            shapes.push(self.classes);
            shapes.extend_from_slice(&s[place..]);
            split.push((s[..place].iter().product(), s[place..].iter().product()));
        }
        let mut meta = BatchMeta::new(self.dtype, out_ndim, (0..input.len()).map(|i| &shapes[i * out_ndim..(i + 1) * out_ndim]));
        if let Some(c) = self.axis_name {
            let in_layout = input.layout().as_str();
            let layout = if out_ndim == 1 {
                c.to_string()
            } else if in_layout.len() + 1 == out_ndim {
                format!("{}{c}{}", &in_layout[..place], &in_layout[place..])
            } else {
                return Err(Error::arg(op, "axis_name", format!(
                    "naming the new axis needs an input layout of {} dimension(s), got \"{in_layout}\"",
                    out_ndim - 1
                )));
            };
            meta.set_layout(Layout::new(&layout).map_err(|e| Error::arg(op, "axis_name", format!("with the input layout \"{in_layout}\": {e}")))?);
        }
        meta.inherit_source_info(input);
        Ok(Plan { meta, split })
    }
}

/// The class of element `k` of `b` (type `t`), if it is one of `0..classes`: the value as
/// C++'s `(int)` converts it (truncated toward zero), NaN and out-of-range values none.
/// The kernel's `one_hot_class` does the same.
#[inline(always)]
fn class_of(t: DType, b: &[u8], k: usize, classes: usize) -> Option<usize> {
    use crate::tensor::element::{load, Num};
    match load(t, b, k) {
        Num::Int(v) => (v >= 0 && v < classes as i128).then_some(v as usize),
        Num::Float(v) => (v > -1.0 && v < classes as f64).then_some(v as usize),
    }
}

impl Operator for OneHot {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let plan = self.plan(input.meta())?;
        let mut out = TensorList::for_overwrite(plan.meta);
        let (t, size, classes) = (input.dtype(), self.dtype.size(), self.classes);
        let (on, off) = (&self.on[..size], &self.off[..size]);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            for e in dst.chunks_exact_mut(size) {
                e.copy_from_slice(off);
            }
            let src = input.bytes(i);
            let (outer, inner) = plan.split[i];
            for o in 0..outer {
                for j in 0..inner {
                    if let Some(c) = class_of(t, src, o * inner + j, classes) {
                        let at = (o * classes + c) * inner + j;
                        dst[at * size..(at + 1) * size].copy_from_slice(on);
                    }
                }
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{testing, ArgValue};

    pub(super) fn op(args: Vec<(&str, ArgValue)>) -> Result<OneHot> {
        OneHot::new(&testing::context(&ONE_HOT, args, &[])?)
    }

    pub(super) fn run(o: &mut OneHot, x: &TensorList) -> Result<TensorList> {
        Ok(testing::run(o, &[x], &[])?.remove(0))
    }

    #[test]
    fn classes_are_truncated_and_out_of_range_ones_mark_nothing() {
        let x = TensorList::from_samples(&[vec![6]], &[vec![0.0f32, 2.7, -0.5, -1.0, 3.0, f32::NAN]]);
        let mut o = op(vec![("num_classes", ArgValue::Int(3))]).unwrap();
        let y = run(&mut o, &x).unwrap();
        assert_eq!(y.shape(0), &[6, 3]);
        let want: [f32; 18] = [1., 0., 0., 0., 0., 1., 1., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0.];
        assert_eq!(y.sample::<f32>(0), &want);
    }

    #[test]
    fn the_axis_goes_where_asked_and_scalars_make_one_dimension() {
        let x = TensorList::from_samples(&[vec![2, 2]], &[vec![0i32, 1, 1, 0]]);
        let mut o = op(vec![("num_classes", ArgValue::Int(2)), ("axis", ArgValue::Int(0)), ("dtype", ArgValue::Int(DType::U8 as i64))]).unwrap();
        let y = run(&mut o, &x).unwrap();
        assert_eq!(y.shape(0), &[2, 2, 2]);
        assert_eq!(y.sample::<u8>(0), &[1, 0, 0, 1, 0, 1, 1, 0]);
        let s = TensorList::from_samples(&[vec![1, 1], vec![1, 1]], &[vec![2i64], vec![-4]]);
        let mut o = op(vec![("num_classes", ArgValue::Int(4))]).unwrap();
        let y = run(&mut o, &s).unwrap();
        assert_eq!((y.shape(0), y.sample::<f32>(0), y.sample::<f32>(1)), (&[4usize][..], &[0f32, 0., 1., 0.][..], &[0f32; 4][..]));
    }
}
