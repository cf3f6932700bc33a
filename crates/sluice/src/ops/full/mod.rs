//! `fn.full`, `fn.full_like`, `fn.zeros`, `fn.zeros_like`, `fn.ones`, `fn.ones_like`: new
//! data filled with one value. `full` broadcasts its `fill_value` input to `shape` the NumPy
//! way (dimensions compared from the innermost; each equal, or 1 in the fill value); the
//! `_like` forms take the shape and layout of `data_like` (and its type, but for `full_like`'s
//! value, converted to it with DALI's rounding and saturation). CPU only, as in DALI.

use crate::error::{Error, Location, Result};
use crate::ops::{arg, generate_samples, tensor_arg, ArgDefault as D, ArgSchema, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace, MAX_LIST};
use crate::tensor::element::{load, store, Num};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

const SHAPE_ARGS: &[ArgSchema] = &[
    tensor_arg("shape", T::IntList, D::Optional, "Shape of the output data (a scalar when not given)."),
    arg("layout", T::Str, D::Optional, "Output layout; if set and not empty, it must match the dimensionality of the output."),
];
const DTYPE_ARG: &[ArgSchema] = &[arg("dtype", T::DType, D::Int(DType::I32 as i64), "Output data type.")];
const DTYPE_OVERRIDE: &[ArgSchema] = &[arg("dtype", T::DType, D::Optional, "Overrides the output data type (the input's when not given).")];

/// What fills the output, and where its shape comes from.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Full,
    FullLike,
    Zeros,
    ZerosLike,
    Ones,
    OnesLike,
}

impl Kind {
    fn like(self) -> bool {
        matches!(self, Kind::FullLike | Kind::ZerosLike | Kind::OnesLike)
    }
}

macro_rules! fill_op {
    ($name:ident, $schema:literal, $kind:expr, $inputs:literal, $doc:literal, $args:expr) => {
        /// Schema and backend.
        pub static $name: OpDef = OpDef {
            schema: OpSchema {
                name: $schema,
                doc: $doc,
                devices: &[Device::Cpu],
                min_inputs: $inputs,
                max_inputs: $inputs,
                num_outputs: 1,
                host_inputs: &[],
                args: $args,
                arg_aliases: &[],
                legacy_names: &[],
                is_reader: false,
                is_random: false,
            },
            cpu: Some(|ctx| Ok(Box::new(Fill::new(ctx, $kind)?))),
            mixed: None,
            gpu: None,
        };
    };
}

fill_op!(FULL, "Full", Kind::Full, 1, "Returns new data of the given shape, filled with the fill value (its input), broadcast NumPy-style; the type is the fill value's.", &[SHAPE_ARGS]);
fill_op!(FULL_LIKE, "FullLike", Kind::FullLike, 2, "Returns new data with the shape, type and layout of `data_like` (input 0), filled with the fill value (input 1), broadcast NumPy-style.", &[]);
fill_op!(ZEROS, "Zeros", Kind::Zeros, 0, "Returns new data of the given shape and type, filled with zeros.", &[SHAPE_ARGS, DTYPE_ARG]);
fill_op!(ZEROS_LIKE, "ZerosLike", Kind::ZerosLike, 1, "Returns new data with the shape, type and layout of `data_like`, filled with zeros.", &[DTYPE_OVERRIDE]);
fill_op!(ONES, "Ones", Kind::Ones, 0, "Returns new data of the given shape and type, filled with ones.", &[SHAPE_ARGS, DTYPE_ARG]);
fill_op!(ONES_LIKE, "OnesLike", Kind::OnesLike, 1, "Returns new data with the shape, type and layout of `data_like`, filled with ones.", &[DTYPE_OVERRIDE]);

struct Fill {
    ctx: OpContext,
    kind: Kind,
    layout: Option<Layout>,
}

impl Fill {
    fn new(ctx: &OpContext, kind: Kind) -> Result<Fill> {
        let layout = match ctx.args.has("layout").then(|| ctx.args.str("layout")) {
            Some(l) => Some(Layout::new(l).map_err(|e| Error::arg(&ctx.display_name, "layout", e))?),
            None => None,
        };
        Ok(Fill { ctx: ctx.clone(), kind, layout })
    }

    /// Output shapes: `data_like`'s, or the `shape` argument's (a scalar when not given).
    fn shapes(&self, ws: &Workspace<'_>) -> Result<Vec<Vec<usize>>> {
        let op = self.ctx.display_name.as_str();
        if self.kind.like() {
            let like = ws.inputs[0];
            return Ok((0..like.len()).map(|i| like.shape(i).to_vec()).collect());
        }
        let n = if self.kind == Kind::Full { ws.inputs[0].len() } else { ws.batch_size };
        let shape = ws.per_sample_list(&self.ctx, "shape");
        let mut buf = [0.0; MAX_LIST];
        (0..n)
            .map(|i| match shape.get(op, "shape", i, &[], &mut buf)? {
                None => Ok(Vec::new()),
                Some(dims) => dims
                    .iter()
                    .map(|&d| {
                        if d >= 0.0 && d.fract() == 0.0 {
                            Ok(d as usize)
                        } else {
                            Err(Error::data(self.at(ws, i), format!("argument 'shape': extents must be non-negative integers, got {dims:?}")))
                        }
                    })
                    .collect(),
            })
            .collect()
    }

    fn at(&self, ws: &Workspace<'_>, i: usize) -> Location {
        Location { operator: self.ctx.display_name.clone(), sample: Some(i), iteration: Some(ws.iteration), source: None }
    }
}

impl Operator for Fill {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let shapes = self.shapes(ws)?;
        let fill = match self.kind {
            Kind::Full => Some(ws.inputs[0]),
            Kind::FullLike => Some(ws.inputs[1]),
            _ => None,
        };
        if let Some(f) = fill {
            if f.len() != shapes.len() {
                return Err(Error::data(self.at(ws, 0), format!("the fill value has {} samples but the batch has {}", f.len(), shapes.len())));
            }
        }
        let dtype = match self.kind {
            // full: the fill value's type; full_like: data_like's (the fill value converts to it)
            Kind::Full | Kind::FullLike => ws.inputs[0].dtype(),
            _ if self.ctx.args.has("dtype") => self.ctx.args.dtype("dtype"),
            _ => ws.inputs[0].dtype(),
        };
        let ndim = shapes.first().map_or(0, |s| s.len());
        if let Some(i) = shapes.iter().position(|s| s.len() != ndim) {
            return Err(Error::data(self.at(ws, i), format!("argument 'shape': every sample must have {ndim} dimensions, as sample 0")));
        }
        let mut out = TensorList::for_overwrite(BatchMeta::new(dtype, ndim, shapes.iter().map(|s| &s[..])));
        let layout = if self.kind.like() { ws.inputs[0].layout().clone() } else { self.layout.clone().unwrap_or_else(Layout::empty) };
        if !layout.is_empty() && layout.ndim() != ndim {
            return Err(Error::arg(&self.ctx.display_name, "layout", format!("'{layout}' cannot describe {ndim}-dimensional output")));
        }
        out.set_layout(layout);
        let constant = match self.kind {
            Kind::Zeros | Kind::ZerosLike => Some(Num::Int(0)),
            Kind::Ones | Kind::OnesLike => Some(Num::Int(1)),
            _ => None,
        };
        let this = &*self;
        generate_samples(ws.pool, &mut out, |i, bytes| {
            let n = bytes.len() / dtype.size();
            if let Some(v) = constant {
                (0..n).for_each(|k| store(dtype, bytes, k, v));
                return Ok(());
            }
            let f = fill.expect("full and full_like have a fill value");
            let (fshape, fbytes, fdtype) = (f.shape(i), f.bytes(i), f.dtype());
            if fshape.iter().product::<usize>() == 0 {
                return Err(Error::data(this.at(ws, i), "the fill value is empty"));
            }
            let index = broadcast_index(&shapes[i], fshape).map_err(|m| Error::data(this.at(ws, i), m))?;
            for (k, src) in index.take(n).enumerate() {
                store(dtype, bytes, k, load(fdtype, fbytes, src));
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// For each element of an `out`-shaped array (row-major), the index of the fill value's
/// element that goes there: dimensions compared from the innermost, a fill dimension of 1
/// repeats; fill dimensions beyond the output's stay at 0. Errors when they do not match.
fn broadcast_index<'a>(out: &'a [usize], fill: &'a [usize]) -> std::result::Result<impl Iterator<Item = usize> + 'a, String> {
    let (no, nf) = (out.len(), fill.len());
    // The fill value's stride for each output dimension (0 where it broadcasts).
    let mut strides = vec![0usize; no];
    let mut stride = 1;
    for d in 0..nf {
        let fd = fill[nf - 1 - d];
        if d < no {
            let od = out[no - 1 - d];
            if fd != od && fd != 1 {
                return Err(format!("the fill value of shape {fill:?} cannot be broadcast to the output shape {out:?}"));
            }
            strides[no - 1 - d] = if fd == 1 { 0 } else { stride };
        }
        stride *= fd;
    }
    let total: usize = out.iter().product();
    let mut coord = vec![0usize; no];
    Ok((0..total).map(move |k| {
        if k > 0 {
            for d in (0..no).rev() {
                coord[d] += 1;
                if coord[d] < out[d] {
                    break;
                }
                coord[d] = 0;
            }
        }
        coord.iter().zip(&strides).map(|(c, s)| c * s).sum()
    }))
}

#[cfg(test)]
mod tests {
    use super::broadcast_index;

    #[test]
    fn broadcasting_follows_numpy_from_the_innermost_dimension() {
        let idx: Vec<usize> = broadcast_index(&[2, 3], &[3]).unwrap().collect();
        assert_eq!(idx, [0, 1, 2, 0, 1, 2]);
        let idx: Vec<usize> = broadcast_index(&[2, 3], &[2, 1]).unwrap().collect();
        assert_eq!(idx, [0, 0, 0, 1, 1, 1]);
        let idx: Vec<usize> = broadcast_index(&[], &[3]).unwrap().collect();
        assert_eq!(idx, [0], "DALI takes the first element for a scalar output");
        assert!(broadcast_index(&[2, 3], &[2]).is_err());
    }
}
