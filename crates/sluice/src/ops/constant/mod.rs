//! `fn.constant` (`types.Constant`): every sample of every batch is the same tensor, given
//! as flat data (`fdata` or `idata`) and a `shape`. The Python front end also records a
//! Python or NumPy value used as an operator's positional input as one of these, as DALI
//! does (`fn.random.choice(5)`, `fn.flip(np_array)`).
//!
//! The batch is built once; each iteration hands out a shared view of it (no bytes move),
//! or on the GPU one upload of it.

use crate::error::{Error, Result};
use crate::tensor::element::{store, Num};
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, GpuOperator, GpuWorkspace, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{DType, Layout, TensorList, TensorListGpu};

/// Schema and backends.
pub static CONSTANT: OpDef = OpDef {
    schema: OpSchema {
        name: "Constant",
        doc: "Produces a batch of constant tensors: every sample is the tensor given by the flat data `fdata` (floats) or `idata` (integers) and `shape`.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 0,
        max_inputs: 0,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("fdata", T::FloatList, D::Optional, "Contents of the constant, flattened, as floats (default type FLOAT)."),
            arg("idata", T::IntList, D::Optional, "Contents of the constant, flattened, as integers (default type INT32)."),
            arg("shape", T::IntList, D::Optional, "Shape of the constant; a 1-D tensor of the data's length when not given."),
            arg("dtype", T::DType, D::Optional, "Output type; FLOAT for `fdata`, INT32 for `idata` when not given."),
            arg("layout", T::Str, D::Str(""), "Layout of the output."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Constant::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(ConstantGpu { op: Constant::new(ctx)?, uploaded: None }))),
};

/// The constant as one host batch of `max_batch_size` samples.
struct Constant {
    batch: TensorList,
}

impl Constant {
    fn new(ctx: &OpContext) -> Result<Constant> {
        let op = &ctx.display_name;
        let values: Vec<Num> = match (ctx.args.value("fdata"), ctx.args.value("idata")) {
            (Some(_), Some(_)) => return Err(Error::arg(op, "fdata", "give either `fdata` or `idata`, not both")),
            (Some(_), None) => ctx.args.floats("fdata").iter().map(|&f| Num::Float(f)).collect(),
            (None, Some(_)) => ctx.args.ints("idata").iter().map(|&i| Num::Int(i as i128)).collect(),
            (None, None) => return Err(Error::arg(op, "fdata", "the constant needs its data: `fdata` or `idata`")),
        };
        let floats = ctx.args.has("fdata");
        let dtype = if ctx.args.has("dtype") {
            ctx.args.dtype("dtype")
        } else if floats {
            DType::F32
        } else {
            DType::I32
        };
        let shape: Vec<usize> = if ctx.args.has("shape") {
            ctx.args
                .ints("shape")
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| Error::arg(op, "shape", format!("extents must be >= 0, got {d}"))))
                .collect::<Result<_>>()?
        } else {
            vec![values.len()]
        };
        let numel: usize = shape.iter().product();
        // A single value fills any shape (DALI broadcasts a one-element constant).
        if numel != values.len() && values.len() != 1 {
            return Err(Error::arg(op, "shape", format!("{shape:?} holds {numel} elements, but {} values were given", values.len())));
        }
        let layout = ctx.args.str("layout");
        let layout = Layout::new(layout).map_err(|e| Error::arg(op, "layout", e))?;
        if !layout.is_empty() && layout.ndim() != shape.len() {
            return Err(Error::arg(op, "layout", format!("'{layout}' has {} dimensions, the shape {}", layout.ndim(), shape.len())));
        }
        let mut batch = TensorList::uniform(dtype, &shape, ctx.max_batch_size);
        batch.set_layout(layout);
        for bytes in batch.samples_mut() {
            for k in 0..numel {
                store(dtype, bytes, k, values[if values.len() == 1 { 0 } else { k }]);
            }
        }
        Ok(Constant { batch })
    }

    /// The constant for a batch of `n` samples: the prepared batch, or a smaller one.
    fn batch(&self, n: usize) -> TensorList {
        if n == self.batch.len() {
            self.batch.clone()
        } else {
            let shape = self.batch.shape(0).to_vec();
            let mut b = TensorList::uniform(self.batch.dtype(), &shape, n);
            b.set_layout(self.batch.layout().clone());
            for bytes in b.samples_mut() {
                bytes.copy_from_slice(self.batch.bytes(0));
            }
            b
        }
    }
}

impl Operator for Constant {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        Ok(vec![self.batch(ws.batch_size)])
    }
}

/// The constant on the GPU: uploaded once per batch size, then copied on the device each
/// iteration (an output is the consumer's to write: PyTorch gets it writable).
struct ConstantGpu {
    op: Constant,
    uploaded: Option<TensorListGpu>,
}

impl GpuOperator for ConstantGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        if self.uploaded.as_ref().is_none_or(|u| u.len() != ws.batch_size) {
            let host = self.op.batch(ws.batch_size);
            let up = TensorListGpu::alloc(host.meta().clone(), ws.device, ws.stream)?;
            // SAFETY: from pageable memory the driver stages the copy before returning.
            unsafe { up.buffer().copy_from_host_async(0, &host.buffer().as_slice()[..host.total_bytes()])? };
            self.uploaded = Some(up);
        }
        let up = self.uploaded.as_ref().expect("uploaded above");
        let out = TensorListGpu::alloc(up.meta().clone(), ws.device, ws.stream)?;
        // SAFETY: `up` is this operator's own packed batch, written on this stream before;
        // `out` has its size.
        unsafe { out.buffer().copy_from_device_async(0, up.sample_ptr(0), up.total_bytes())? };
        Ok(vec![out])
    }
}
