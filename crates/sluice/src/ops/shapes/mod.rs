//! `fn.shapes` (and `DataNode.shape()`): every sample's shape as a 1-D tensor of `ndim`
//! values of `dtype` (INT64 unless set; INT32, UINT32, INT64, UINT64, FLOAT or FLOAT64, as
//! DALI 2.4's `Shapes` allows). Only the batch's metadata is read, so any input type and
//! any number of dimensions works: a 0-D sample gives an empty tensor. The output has no
//! layout and keeps the input's source info, as DALI's does (checked against DALI 2.4's cpu
//! operator: values, types, layout, source info, the error for other types, the `type`
//! alias and its warning).
//!
//! DALI 2.4 also deprecates `fn.shapes` itself in favour of `DataNode.shape()` (a warning
//! on every use); `DataNode.shape()` records this same operator without that warning.

mod gpu;

use crate::error::{Error, Result};
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::element::{store, Num};
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backends.
pub static SHAPES: OpDef = OpDef {
    schema: OpSchema {
        name: "Shapes",
        doc: "Returns the shapes of tensors in the input batch: for every sample a 1-D tensor of its extents.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[arg(
            "dtype",
            T::DType,
            D::Int(DType::I64 as i64),
            "Data type to which the sizes are converted: INT32, UINT32, INT64, UINT64, FLOAT or FLOAT64.",
        )]],
        // DALI renamed `type` to `dtype` and still takes the old name, with a warning.
        arg_aliases: &[("type", "dtype")],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Shapes::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _dev| Ok(Box::new(gpu::ShapesGpu::new(ctx)?))),
};

/// The types DALI's `Shapes` can write.
const OUTPUT_TYPES: &[DType] = &[DType::I32, DType::U32, DType::I64, DType::U64, DType::F32, DType::F64];

/// Shared by the cpu and gpu backends.
struct Shapes {
    dtype: DType,
}

impl Shapes {
    fn new(ctx: &OpContext) -> Result<Shapes> {
        let dtype = ctx.args.dtype("dtype");
        check_output_type(ctx, dtype)?;
        Ok(Shapes { dtype })
    }

    /// One `[ndim]` tensor per input sample.
    fn output_meta(&self, input: &BatchMeta) -> BatchMeta {
        let extent = [input.ndim()];
        let mut meta = BatchMeta::new(self.dtype, 1, std::iter::repeat_n(&extent[..], input.len()));
        meta.inherit_source_info(input);
        meta
    }

    /// Fills a batch laid out as [`output_meta`](Self::output_meta) says, samples back to
    /// back in `out` (the host batch, or the gpu backend's staging block).
    fn write(&self, input: &BatchMeta, out: &mut [u8]) {
        let stride = input.ndim() * self.dtype.size();
        debug_assert_eq!(out.len(), stride * input.len());
        for i in 0..input.len() {
            write_shape(input.shape(i), self.dtype, &mut out[i * stride..(i + 1) * stride]);
        }
    }
}

/// Refuses an output type DALI's shape operators cannot write (`shapes`, `peek_image_shape`).
pub(crate) fn check_output_type(ctx: &OpContext, dtype: DType) -> Result<()> {
    if OUTPUT_TYPES.contains(&dtype) {
        return Ok(());
    }
    // DALI's wording (and its C++ type names), so code matching DALI's message keeps working.
    Err(Error::arg(
        &ctx.display_name,
        "dtype",
        format!("the output can be one of the following: int32, uint32, int64, uint64, float or double; requested: {}", dtype.cpp_name()),
    ))
}

/// `shape` as `dtype` values: extents convert as DALI's plain assignment does for every
/// extent that fits the type (all of them, in practice).
pub(crate) fn write_shape(shape: &[usize], dtype: DType, out: &mut [u8]) {
    for (k, &extent) in shape.iter().enumerate() {
        store(dtype, out, k, Num::Int(extent as i128));
    }
}

impl Operator for Shapes {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0].meta();
        let mut out = TensorList::for_overwrite(self.output_meta(input)); // every element is written
        // A few bytes per sample: spreading them over the workers would cost more than it saves.
        for (i, bytes) in out.samples_mut().into_iter().enumerate() {
            write_shape(input.shape(i), self.dtype, bytes);
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{ArgValue, Args};

    fn shapes(given: &[(&str, DType)]) -> Result<Shapes> {
        let given = given.iter().map(|(k, d)| (k.to_string(), ArgValue::Int(*d as i64))).collect();
        let ctx = OpContext {
            args: Args::check(&SHAPES.schema, "shapes", given, &[]).unwrap(),
            display_name: "shapes".into(),
            instance_name: "s".into(),
            op_id: 1,
            seed: 1,
            max_batch_size: 4,
            num_threads: 1,
            device_id: None,
            arg_input_names: vec![],
            resume_samples: 0,
        };
        Shapes::new(&ctx)
    }

    fn run(op: &mut Shapes, input: &TensorList) -> TensorList {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let ws = Workspace { inputs: vec![input], arg_inputs: Default::default(), iteration: 0, batch_size: input.len(), frames: None, pool: &pool };
        op.run(&ws).unwrap().remove(0)
    }

    #[test]
    fn every_sample_gives_its_extents_in_the_requested_type() {
        let fhwc: [&[usize]; 3] = [&[2, 5, 7, 3], &[1, 4, 0, 3], &[3, 1, 1, 1]];
        let input = TensorList::new(DType::U8, 4, fhwc).with_layout("FHWC");
        let out = run(&mut shapes(&[]).unwrap(), &input);
        assert_eq!(out.dtype(), DType::I64, "INT64 unless set");
        assert!(out.layout().is_empty());
        for (i, s) in fhwc.iter().enumerate() {
            assert_eq!(out.shape(i), &[4]);
            assert_eq!(out.sample::<i64>(i), s.iter().map(|&e| e as i64).collect::<Vec<_>>().as_slice());
        }
        let out = run(&mut shapes(&[("dtype", DType::F32)]).unwrap(), &input);
        assert_eq!(out.sample::<f32>(1), &[1.0, 4.0, 0.0, 3.0]);
        let out = run(&mut shapes(&[("dtype", DType::U32)]).unwrap(), &input);
        assert_eq!(out.sample::<u32>(0), &[2, 5, 7, 3]);
        // The old argument name reaches the same argument.
        let out = run(&mut shapes(&[("type", DType::F64)]).unwrap(), &input);
        assert_eq!(out.sample::<f64>(2), &[3.0, 1.0, 1.0, 1.0]);
    }

    #[test]
    fn scalars_give_empty_tensors_and_the_input_type_does_not_matter() {
        let scalar: &[usize] = &[];
        let scalars = TensorList::new(DType::F16, 0, [scalar, scalar]);
        let out = run(&mut shapes(&[("dtype", DType::I32)]).unwrap(), &scalars);
        assert_eq!(out.len(), 2);
        assert_eq!(out.shape(0), &[0]);
        assert_eq!(out.total_bytes(), 0);
        let empty = TensorList::new(DType::Bool, 2, std::iter::empty());
        assert_eq!(run(&mut shapes(&[]).unwrap(), &empty).len(), 0);
    }

    #[test]
    fn the_host_block_the_gpu_uploads_equals_the_cpu_output() {
        let samples: [&[usize]; 2] = [&[3, 9], &[1, 2]];
        let input = TensorList::new(DType::F32, 2, samples);
        let mut op = shapes(&[("dtype", DType::U64)]).unwrap();
        let out = run(&mut op, &input);
        let mut block = vec![0u8; op.output_meta(input.meta()).total_bytes()];
        op.write(input.meta(), &mut block);
        assert_eq!(block, [out.bytes(0), out.bytes(1)].concat());
    }

    #[test]
    fn other_types_are_refused_naming_the_argument() {
        for d in [DType::U8, DType::I8, DType::U16, DType::I16, DType::F16, DType::Bool] {
            let Err(e) = shapes(&[("dtype", d)]) else { panic!("{d} was accepted") };
            let e = e.to_string();
            assert!(e.starts_with("shapes: argument 'dtype': "), "{e}");
            assert!(e.ends_with(&format!("int32, uint32, int64, uint64, float or double; requested: {}", d.cpp_name())), "{e}");
        }
    }
}
