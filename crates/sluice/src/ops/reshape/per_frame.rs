//! `fn.per_frame`: marks the input as a sequence by its layout; the bytes are untouched
//! (checked against DALI 2.4's cpu operator and its test_per_frame.py,
//! tests/test_per_frame.py). An input without layout gets `F` padded with `*` to its
//! dimensions ("F**" for 3-D); with a layout, `replace=True` puts `F` in its first place
//! and `replace=False` requires it to start with `F`. A 0-D input is an error.
//!
//! Sluice's operators do not read per-frame argument inputs yet (an argument input with an
//! `F` layout is one value per sample, not per frame); the layout this operator sets is
//! what DALI's `fn.per_frame` sets.

use super::{OnCpu, OnGpu, Relabel};
use crate::error::{Error, Result};
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Workspace};
use crate::tensor::{BatchMeta, Layout, TensorList};

/// Schema and backends.
pub static PER_FRAME: OpDef = OpDef {
    schema: OpSchema {
        name: "PerFrame",
        doc: "Marks the input tensor as a sequence. The operator modifies the layout string of the input data to indicate that the batch \
              contains sequences; only the layout is affected, while the data stays untouched. If the input has no layout, a new layout \
              is set, that starts with F and is padded with * to match dimensionality of the input. Otherwise, depending on the \
              `replace` flag, the operator either checks if the first character of the layout is equal to F or replaces it with F.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[arg(
            "replace",
            T::Bool,
            D::Bool(false),
            "Controls handling of the input with already specified layout. If set to False, the operator errors-out if the first \
             character of the layout is not F. If set to True, the first character of the layout is replaced with F.",
        )]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(OnCpu(PerFrame::new(ctx))))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(OnGpu(PerFrame::new(ctx))))),
};

struct PerFrame {
    op: String,
    replace: bool,
}

impl PerFrame {
    fn new(ctx: &OpContext) -> PerFrame {
        PerFrame { op: ctx.display_name.clone(), replace: ctx.args.bool("replace") }
    }
}

impl Relabel for PerFrame {
    fn output_meta(&self, input: &BatchMeta, _: Option<&TensorList>, _: &Workspace<'_>) -> Result<BatchMeta> {
        let layout = input.layout().as_str();
        let new = if layout.is_empty() {
            if input.ndim() == 0 {
                return Err(Error::type_mismatch(&self.op, "cannot mark a zero-dimensional input as a sequence"));
            }
            format!("F{}", "*".repeat(input.ndim() - 1))
        } else if self.replace {
            format!("F{}", &layout[1..])
        } else if !layout.starts_with('F') {
            return Err(Error::arg(&self.op, "replace", format!(
                "per-frame argument input must be a sequence: the input layout should start with 'F', got '{layout}' (replace=True puts an F in its place)"
            )));
        } else {
            layout.to_string()
        };
        let layout = Layout::new(&new).map_err(|e| Error::arg(&self.op, "replace", format!("the input layout '{layout}' with F first: {e}")))?;
        let mut meta = input.clone();
        meta.set_layout(layout);
        Ok(meta)
    }
}
