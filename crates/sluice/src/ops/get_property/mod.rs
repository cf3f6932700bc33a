//! `fn.get_property`: a property of every input sample as a 1-D UINT8 byte string
//! (checked against DALI 2.4's cpu operator and its test_get_property.py,
//! tests/test_get_property.py). `key="source_info"`: where the sample came from (the file
//! path of `readers.file`, "<path> at index <offset>" of `readers.tfrecord`, ...; empty when
//! unknown); `key="layout"`: the batch's layout, the same for every sample. Any other key
//! is an error naming `key`. The gpu backend reads the GPU batch's metadata and uploads the
//! bytes (no kernel); the data itself is never read.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, GpuOperator, GpuWorkspace, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList, TensorListGpu};

pub static GET_PROPERTY: OpDef = OpDef {
    schema: OpSchema {
        name: "GetProperty",
        doc: "Returns a property of the tensor passed as an input. Supported keys: \"source_info\" (a byte array with the origin of \
              the sample, e.g. the file path of readers.file) and \"layout\" (the data layout, as a byte array).",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[arg("key", T::Str, D::Required, "Specifies which property is requested: \"source_info\" or \"layout\".")]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(GetProperty::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(GetProperty::new(ctx)?))),
};

#[derive(Clone, Copy)]
enum Key {
    SourceInfo,
    Layout,
}

struct GetProperty {
    key: Key,
}

impl GetProperty {
    fn new(ctx: &OpContext) -> Result<GetProperty> {
        let key = match ctx.args.str("key") {
            "source_info" => Key::SourceInfo,
            "layout" => Key::Layout,
            k => return Err(Error::arg(&ctx.display_name, "key", format!("unsupported property key \"{k}\": use \"source_info\" or \"layout\""))),
        };
        Ok(GetProperty { key })
    }

    /// The property of every sample of `input`, on the host.
    fn property(&self, input: &BatchMeta) -> TensorList {
        let bytes = |i: usize| -> &[u8] {
            match self.key {
                Key::SourceInfo => input.source_info(i).as_bytes(),
                Key::Layout => input.layout().as_str().as_bytes(),
            }
        };
        let lens: Vec<[usize; 1]> = (0..input.len()).map(|i| [bytes(i).len()]).collect();
        let mut out = TensorList::new(DType::U8, 1, lens.iter().map(|l| &l[..]));
        for (i, dst) in out.samples_mut().into_iter().enumerate() {
            dst.copy_from_slice(bytes(i));
        }
        let mut meta = out.meta().clone();
        if !input.source_infos().is_empty() {
            meta.set_source_info(input.source_infos().iter().map(Arc::clone).collect());
        }
        out.reinterpreted(meta)
    }
}

impl Operator for GetProperty {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        Ok(vec![self.property(ws.inputs[0].meta())])
    }
}

impl GpuOperator for GetProperty {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let host = self.property(ws.gpu_inputs[0].meta());
        let out = TensorListGpu::alloc(host.meta().clone(), ws.device, ws.stream)?;
        if host.total_bytes() > 0 {
            // SAFETY: from pageable memory the driver stages the copy before returning, so
            // `host` may go away afterwards.
            unsafe { out.buffer().copy_from_host_async(0, &host.buffer().as_slice()[..host.total_bytes()])? };
        }
        Ok(vec![out])
    }
}
