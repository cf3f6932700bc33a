//! `fn.element_extract`: one output per entry of `element_map`, output k holding frame
//! `element_map[k]` of every input sequence (checked against DALI 2.4's cpu operator and its
//! test_element_extract.py, tests/test_element_extract.py).
//!
//! The outputs have one dimension less than the input and its layout without the leading
//! `F` (`FHWC` gives `HWC`). As DALI: the input's layout, if any, starts with `F`; it has at
//! least 2 dimensions; `element_map` is not empty and has no negative index; an index not
//! below a sample's frame count is an error naming `element_map` and the sample.

use super::{check_sequence, gpu, FrameGather};
use crate::error::{Error, Result};
use crate::ops::{arg, copy_samples, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, Layout, TensorList};

pub static ELEMENT_EXTRACT: OpDef = OpDef {
    schema: OpSchema {
        name: "ElementExtract",
        doc: "Extracts one or more elements from input sequence. The outputs are slices in the first (outermost) dimension of the input; \
              there are as many outputs as the elements provided in the `element_map`. The input layout, if provided, must begin with F; \
              for FHWC inputs the outputs are HWC elements.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        // One per entry of `element_map` (graph::CheckedOp::num_outputs).
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[arg("element_map", T::IntList, D::Required, "Indices of the elements to extract.")]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(ElementExtract::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::FramesGpu::new(ElementExtract::new(ctx)?)))),
};

pub(super) struct ElementExtract {
    op: String,
    map: Vec<usize>,
}

impl ElementExtract {
    fn new(ctx: &OpContext) -> Result<ElementExtract> {
        let op = ctx.display_name.as_str();
        let map = ctx.args.ints("element_map");
        if map.is_empty() {
            return Err(Error::arg(op, "element_map", "is empty: give at least one frame index"));
        }
        if let Some(e) = map.iter().find(|&&e| e < 0) {
            return Err(Error::arg(op, "element_map", format!("negative indices are not allowed, found {e}")));
        }
        Ok(ElementExtract { op: op.to_string(), map: map.iter().map(|&e| e as usize).collect() })
    }
}

impl super::gpu::FramePlan for ElementExtract {
    fn op(&self) -> &str {
        &self.op
    }

    /// One plan per output: frame `element_map[k]` of every sample.
    fn plans(&self, input: &BatchMeta, _: &Workspace<'_>) -> Result<Vec<FrameGather>> {
        check_sequence(&self.op, input)?;
        for i in 0..input.len() {
            let frames = input.shape(i)[0];
            if let Some(k) = self.map.iter().position(|&e| e >= frames) {
                return Err(Error::arg(&self.op, "element_map", format!(
                    "sample {i}: element_map[{k}] = {} is out of bounds for a sequence of {frames} frames",
                    self.map[k]
                )));
            }
        }
        let layout = Layout::new(input.layout().as_str().get(1..).unwrap_or("")).expect("the tail of a valid layout");
        Ok(self
            .map
            .iter()
            .map(|&e| {
                let mut g = FrameGather::with_capacity(input.len(), input.len());
                for _ in 0..input.len() {
                    g.push_sample([e]);
                }
                g.finish(input, false, layout.clone())
            })
            .collect())
    }
}

impl Operator for ElementExtract {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        use super::gpu::FramePlan;
        let input = ws.inputs[0];
        let plans = self.plans(input.meta(), ws)?;
        Ok(plans
            .into_iter()
            .map(|g| {
                // One frame per sample: a plain sample copy.
                let mut out = TensorList::for_overwrite(g.meta.clone());
                copy_samples(ws.pool, &mut out, |i| {
                    let fb = super::frame_bytes(input.meta(), i);
                    let f = g.frames(i)[0];
                    &input.bytes(i)[f * fb..(f + 1) * fb]
                });
                out
            })
            .collect())
    }
}
