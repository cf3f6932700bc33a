//! `fn.reinterpret` (cpu and gpu, no copy): `fn.reshape` that may also change the element
//! type (DALI 2.4's `Reinterpret`). With a new `dtype`: `rel_shape` and `src_dims` apply in
//! the input's elements, then the innermost extent is rescaled to the new type's (its bytes
//! must divide); an explicit `shape` counts elements of the new type, and only the sample's
//! total bytes must divide. Checked against DALI 2.4 by `tests/test_reinterpret.py`.

use super::{OnCpu, OnGpu, Relabel, Reshape};
use crate::error::{Error, Result};
use crate::ops::{arg, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backends.
pub static REINTERPRET: OpDef = OpDef {
    schema: OpSchema {
        name: "Reinterpret",
        doc: "Treats content of the input as if it had a different type, shape, and/or layout. The buffer contents are not copied.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 2,
        num_outputs: 1,
        host_inputs: &[1],
        args: &[&[
            arg("dtype", T::DType, D::Optional, "Output data type. The total size, in bytes, of the output must match the input. If no shape is provided, the innermost dimension is adjusted accordingly. If the byte size of the innermost dimension is not divisible by the size of the target type, an error occurs."),
            tensor_arg("shape", T::IntList, D::Optional, "The desired shape of the output. There can be one negative extent that receives the size that is required to match the input volume."),
            tensor_arg("rel_shape", T::FloatList, D::Optional, "The relative shape of the output: out_shape[i] = in_shape[i] * rel_shape[i] (or in_shape[src_dims[i]]); one negative extent receives the rest."),
            tensor_arg("src_dims", T::IntList, D::Optional, "Indices of dimensions to keep; -1 inserts a dimension of extent 1."),
            arg("layout", T::Str, D::Optional, "New layout for the data. If not specified, the input's when the number of dimensions matches, else empty."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(OnCpu(Reinterpret::new(ctx)?)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(OnGpu(Reinterpret::new(ctx)?)))),
};

struct Reinterpret {
    reshape: Reshape,
    op: String,
    dtype: Option<DType>,
    /// `shape` was given (as an argument, an argument input or the second input is checked
    /// per batch).
    shape_given: bool,
}

impl Reinterpret {
    fn new(ctx: &OpContext) -> Result<Reinterpret> {
        Ok(Reinterpret {
            reshape: Reshape::new(ctx)?,
            op: ctx.display_name.clone(),
            dtype: ctx.args.has("dtype").then(|| ctx.args.dtype("dtype")),
            shape_given: ctx.given("shape"),
        })
    }
}

impl Relabel for Reinterpret {
    fn output_meta(&self, input: &BatchMeta, second: Option<&TensorList>, ws: &Workspace<'_>) -> Result<BatchMeta> {
        let op = self.op.as_str();
        let Some(out) = self.dtype.filter(|&d| d != input.dtype()) else {
            return self.reshape.shaped(input, second, ws);
        };
        let (isz, osz) = (input.dtype().size(), out.size());
        if !(self.shape_given || second.is_some()) {
            // DALI: `rel_shape` / `src_dims` apply in the input's elements, then the innermost
            // extent is rescaled to the new type's.
            let shaped = self.reshape.shaped(input, second, ws)?;
            let ndim = shaped.ndim();
            let mut shapes: Vec<usize> = Vec::with_capacity(shaped.len() * ndim);
            for i in 0..shaped.len() {
                let sh = shaped.shape(i);
                let last = sh.last().copied().unwrap_or(1) * isz;
                if ndim == 0 || last % osz != 0 {
                    return Err(Error::arg(op, "dtype", format!(
                        "sample {i}: the innermost dimension of shape {sh:?} ({last} bytes of {}) is not divisible by the size of {} ({osz} bytes)",
                        input.dtype().dali_name(),
                        out.dali_name()
                    )));
                }
                shapes.extend_from_slice(&sh[..ndim - 1]);
                shapes.push(last / osz);
            }
            let mut meta = BatchMeta::new(out, ndim, (0..shaped.len()).map(|i| &shapes[i * ndim..(i + 1) * ndim]));
            meta.set_layout(shaped.layout().clone());
            meta.inherit_source_info(input);
            return Ok(meta);
        }
        // An explicit shape counts elements of the new type: the input is first seen in that
        // type, innermost extent rescaled, or (when that does not divide) as one dimension of
        // all its bytes.
        let ndim = input.ndim();
        let rescales = ndim > 0 && (0..input.len()).all(|i| (input.shape(i)[ndim - 1] * isz) % osz == 0);
        let mut shapes: Vec<usize> = Vec::with_capacity(input.len() * ndim.max(1));
        let seen_ndim = if rescales {
            for i in 0..input.len() {
                let sh = input.shape(i);
                shapes.extend_from_slice(&sh[..ndim - 1]);
                shapes.push(sh[ndim - 1] * isz / osz);
            }
            ndim
        } else {
            for i in 0..input.len() {
                let bytes = input.numel(i) * isz;
                if bytes % osz != 0 {
                    return Err(Error::arg(op, "dtype", format!("sample {i}: {bytes} bytes do not make whole {} elements of {osz} bytes", out.dali_name())));
                }
                shapes.push(bytes / osz);
            }
            1
        };
        let mut seen = BatchMeta::new(out, seen_ndim, (0..input.len()).map(|i| &shapes[i * seen_ndim..(i + 1) * seen_ndim]));
        if seen_ndim == ndim {
            seen.set_layout(input.layout().clone());
        }
        seen.inherit_source_info(input);
        self.reshape.shaped(&seen, second, ws)
    }
}
