//! `fn.sequence_rearrange`: output sequence i holds input frames `new_order` in that order
//! (`out[k] = in[new_order[k]]`; frames may repeat or be dropped). `new_order` is one list
//! for the batch or a 1-D integer tensor per sample (an argument input). Checked against
//! DALI 2.4's cpu operator and its test_sequence_rearrange.py, tests/test_sequence_rearrange.py.
//!
//! As DALI: the input's layout, if any, starts with `F` and is kept; the input has at least
//! 2 dimensions; an empty `new_order` or an index outside `[0, frames)` is an error naming
//! `new_order` and the sample.

use super::{check_sequence, gpu, FrameGather};
use crate::error::{Error, Result};
use crate::ops::{tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, TensorList};

pub static SEQUENCE_REARRANGE: OpDef = OpDef {
    schema: OpSchema {
        name: "SequenceRearrange",
        doc: "Rearranges frames in a sequence. Assumes that the outermost dimension represents the frame index in the sequence; \
              a non-empty input layout must start with F (frame).",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[tensor_arg(
            "new_order",
            T::IntList,
            D::Required,
            "List that describes the new order for the elements in each sample: out[i, ...] = in[new_order[i], ...]. Elements can be \
             repeated or dropped, but empty output sequences are not allowed. Can be specified per sample as 1D tensors.",
        )]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(SequenceRearrange::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::FramesGpu::new(SequenceRearrange::new(ctx)?)))),
};

pub(super) struct SequenceRearrange {
    ctx: OpContext,
}

impl SequenceRearrange {
    fn new(ctx: &OpContext) -> Result<SequenceRearrange> {
        if ctx.args.value("new_order").is_some() && ctx.args.ints("new_order").is_empty() {
            return Err(Error::arg(&ctx.display_name, "new_order", "is empty: empty output sequences are not allowed"));
        }
        Ok(SequenceRearrange { ctx: ctx.clone() })
    }
}

impl super::gpu::FramePlan for SequenceRearrange {
    fn op(&self) -> &str {
        &self.ctx.display_name
    }

    fn plans(&self, input: &BatchMeta, ws: &Workspace<'_>) -> Result<Vec<FrameGather>> {
        let op = self.ctx.display_name.as_str();
        check_sequence(op, input)?;
        // Read directly (not through `PerSampleList`): a sequence may have more frames than
        // its MAX_LIST.
        let constant = self.ctx.args.value("new_order").map(|_| self.ctx.args.ints("new_order"));
        let per_sample = ws.arg_inputs.get("new_order").copied();
        if let Some(b) = per_sample {
            if b.ndim() > 1 || b.dtype().is_float() || b.dtype() == crate::tensor::DType::Bool {
                return Err(Error::arg(op, "new_order", format!(
                    "an argument input must be a 1-D integer list per sample, got {}-D {}",
                    b.ndim(),
                    b.dtype().dali_name()
                )));
            }
        }
        let mut g = FrameGather::with_capacity(input.len(), input.len() * constant.map_or(1, |c| c.len()));
        let mut picks = Vec::new();
        for i in 0..input.len() {
            let frames = input.shape(i)[0];
            picks.clear();
            match (constant, per_sample) {
                (Some(c), _) => picks.extend_from_slice(c),
                (None, Some(b)) => picks.extend((0..b.numel(i)).map(|k| crate::ops::args::element_as_f64(b, i, k) as i64)),
                (None, None) => {}
            }
            if picks.is_empty() {
                return Err(Error::arg(op, "new_order", format!("sample {i}: empty, but empty output sequences are not allowed")));
            }
            if let Some(k) = picks.iter().position(|&p| p < 0 || p as usize >= frames) {
                return Err(Error::arg(op, "new_order", format!(
                    "sample {i}: new_order[{k}] = {} is not a frame of a sequence of {frames} frames (0..{frames})",
                    picks[k]
                )));
            }
            g.push_sample(picks.iter().map(|&p| p as usize));
        }
        Ok(vec![g.finish(input, true, input.layout().clone())])
    }
}

impl Operator for SequenceRearrange {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        use super::gpu::FramePlan;
        let input = ws.inputs[0];
        let plans = self.plans(input.meta(), ws)?;
        Ok(vec![plans[0].run_cpu(ws, input)?])
    }
}
