//! `fn.flip`: mirrors images, sequences and volumes along W (`horizontal`), H (`vertical`)
//! and D (`depthwise`), found by layout letter. Works on any element type (it only moves
//! element bytes) and matches DALI 2.4 exactly.

mod gpu;
pub mod kernel;

use crate::error::{Error, Result};
use crate::ops::{for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, Layout, TensorList};

/// Schema and backends.
pub static FLIP: OpDef = OpDef {
    schema: OpSchema {
        name: "Flip",
        doc: "Flips the images in selected dimensions (horizontal, vertical, and depthwise). Accepts HWC, CHW, FHWC, DHWC, CDHW and similar layouts; a 3-D input without a layout is taken as HWC, a 4-D one as FHWC.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("horizontal", T::Int, D::Int(1), "Flip the horizontal dimension (W) when non-zero."),
            tensor_arg("vertical", T::Int, D::Int(0), "Flip the vertical dimension (H) when non-zero."),
            tensor_arg("depthwise", T::Int, D::Int(0), "Flip the depthwise dimension (D) when non-zero."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Flip::new(ctx)))),
    mixed: None,
    gpu: Some(|ctx, _dev| Ok(Box::new(gpu::FlipGpu::new(ctx)))),
};

/// Planning shared by the cpu and gpu backends.
struct Flip {
    ctx: OpContext,
    /// Per-sample (horizontal, vertical, depthwise) of the current batch; reused.
    flags: Vec<(bool, bool, bool)>,
}

impl Flip {
    fn new(ctx: &OpContext) -> Flip {
        Flip { ctx: ctx.clone(), flags: Vec::new() }
    }

    /// Checks a batch of `meta` and reads every sample's switches into `self.flags`: bad
    /// layouts and bad argument inputs fail before any work, with the same messages on
    /// both backends. Returns where W, H and D are.
    fn plan(&mut self, ws: &Workspace<'_>, meta: &BatchMeta) -> Result<Axes> {
        let name = &self.ctx.display_name;
        let axes = find_axes(meta.layout(), meta.ndim())
            .map_err(|m| Error::data(self.ctx.at(ws.iteration, 0, meta.source_info(0)), m))?;
        let horizontal = ws.per_sample(&self.ctx, "horizontal");
        let vertical = ws.per_sample(&self.ctx, "vertical");
        let depthwise = ws.per_sample(&self.ctx, "depthwise");
        self.flags.clear();
        for i in 0..meta.len() {
            let f = |p: &crate::ops::PerSample<'_>| -> Result<bool> { Ok(p.get(name, i)?.unwrap_or(0.0) != 0.0) };
            self.flags.push((f(&horizontal)?, f(&vertical)?, f(&depthwise)?));
        }
        Ok(axes)
    }
}

/// Positions of W, H and D in a batch's layout (D may be absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Axes {
    pub w: usize,
    pub h: usize,
    pub d: Option<usize>,
}

impl Axes {
    /// Per-dimension flip flags for the given switches (`depthwise` is ignored without D).
    pub fn flags(&self, ndim: usize, horizontal: bool, vertical: bool, depthwise: bool) -> [bool; kernel::MAX_NDIM] {
        let mut flip = [false; kernel::MAX_NDIM];
        flip[self.w] = horizontal;
        flip[self.h] = vertical;
        if let Some(a) = self.d {
            flip[a] = depthwise;
        }
        debug_assert!(ndim <= kernel::MAX_NDIM);
        flip
    }
}

/// Where W, H and D are for a batch of `ndim` dimensions with `layout`: by letter, with an
/// empty layout taken as HWC (3-D) or FHWC (4-D) as DALI does; an error message otherwise.
pub fn find_axes(layout: &Layout, ndim: usize) -> std::result::Result<Axes, String> {
    let layout = Layout::spatial(layout, ndim)?;
    if ndim > kernel::MAX_NDIM {
        return Err(format!("inputs may have at most {} dimensions, got {ndim}", kernel::MAX_NDIM));
    }
    let at = |c| layout.find(c).expect("Layout::spatial checked H and W");
    Ok(Axes { w: at('W'), h: at('H'), d: layout.find('D') })
}

impl Operator for Flip {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let axes = self.plan(ws, input.meta())?;
        let mut meta = input.meta().clone();
        meta.name_guessed_layout();
        let mut out = TensorList::for_overwrite(meta); // every byte is written
        let elem = input.dtype().size();
        let flags = &self.flags;
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let shape = input.shape(i);
            let (h, v, d) = flags[i];
            let flip = axes.flags(shape.len(), h, v, d);
            kernel::flip_bytes(dst, input.bytes(i), shape, &flip[..shape.len()], elem);
            Ok(())
        })?;
        Ok(vec![out])
    }
}
