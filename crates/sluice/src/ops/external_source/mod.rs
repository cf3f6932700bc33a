//! `fn.external_source` (`ops.ExternalSource`): batches that come from outside the
//! pipeline, fed from Python (`Pipeline.feed_input`, `run(**inputs)`, or the `source`
//! callback the Python front end calls each iteration). The engine side is a queue per
//! operator ([`Feed`]), staged by the executor one batch per iteration, and the checks DALI
//! makes on each batch: its type, number of dimensions and layout, against the arguments
//! and against the batches before it.
//!
//! The batch a cpu operator outputs *is* the batch fed (no copy here: the Python binding
//! copied it once out of the caller's arrays, or shares a Sluice batch outright); a gpu
//! operator uploads host batches with one copy, and hands batches fed on the GPU on as they
//! are, ordered after the copy that made them.

mod feed;

use std::sync::Arc;

pub use self::feed::Feed;
use crate::error::{Error, Result};
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, GpuOperator, GpuWorkspace, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{Batch, BatchMeta, DType, Layout, TensorList, TensorListGpu};

/// Schema and backends.
pub static EXTERNAL_SOURCE: OpDef = OpDef {
    schema: OpSchema {
        name: "ExternalSource",
        doc: "Outputs the batches fed from Python: by `Pipeline.feed_input` or `run(**inputs)`, or by the `source` the front end calls every iteration. \
              Each iteration consumes one batch; its size is the iteration's batch size (at most the pipeline's batch_size).",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 0,
        max_inputs: 0,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("dtype", T::DType, D::Optional, "The type every batch must have; any type, kept from the first batch on, when not given."),
            arg("ndim", T::Int, D::Optional, "The number of dimensions every sample must have (from `layout` when not given)."),
            arg("layout", T::Str, D::Optional, "The layout of the data; a batch fed without a layout gets this one, one with another layout is an error."),
            arg("blocking", T::Bool, D::Bool(false), "Wait for data to be fed instead of failing when an iteration has none."),
            arg("no_copy", T::Bool, D::Bool(false), "Accepted for DALI compatibility: Sluice copies a fed NumPy batch once and shares a fed Sluice batch without copying."),
            arg("repeat_last", T::Bool, D::Bool(false), "Output the last batch fed again when nothing new was fed (feed_input only)."),
            arg("_any_batch_size", T::Bool, D::Bool(false), "Set by debug mode: batches of any size, not checked against the iteration's (an operator's inputs of different sizes)."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(ExternalSourceCpu(Source::new(ctx)?)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(ExternalSourceGpu(Source::new(ctx)?)))),
};

/// What both backends share: the queue and the checks.
struct Source {
    ctx: OpContext,
    feed: Arc<Feed>,
    dtype: Option<DType>,
    ndim: Option<usize>,
    layout: Option<Layout>,
    /// What the batches so far had: a later batch must match.
    seen: Option<(DType, usize, Layout)>,
}

impl Source {
    fn new(ctx: &OpContext) -> Result<Source> {
        let op = &ctx.display_name;
        let a = &ctx.args;
        let dtype = a.has("dtype").then(|| a.dtype("dtype"));
        let ndim = match a.opt_int("ndim") {
            Some(n) if n < 0 => return Err(Error::arg(op, "ndim", format!("incorrect number of dimensions ({n}): use positive values for tensors or 0 for scalars"))),
            n => n.map(|n| n as usize),
        };
        let layout = match a.has("layout").then(|| a.str("layout")) {
            Some(l) => Some(Layout::new(l).map_err(|e| Error::arg(op, "layout", e))?),
            None => None,
        };
        if let (Some(n), Some(l)) = (ndim, &layout) {
            if !l.is_empty() && l.ndim() != n {
                return Err(Error::arg(
                    op,
                    "layout",
                    format!("the number of dimensions in the layout does not match the ndim argument: ndim = {n}, layout \"{l}\""),
                ));
            }
        }
        let ndim = ndim.or(layout.as_ref().filter(|l| !l.is_empty()).map(|l| l.ndim()));
        let feed = Arc::new(Feed::new(&ctx.instance_name, op, ctx.max_batch_size, a.bool("blocking"), a.bool("repeat_last"), a.bool("_any_batch_size")));
        Ok(Source { ctx: ctx.clone(), feed, dtype, ndim, layout, seen: None })
    }

    /// Checks a batch as DALI does (type, then dimensions, then layout; each against the
    /// arguments, else against the batches before) and returns the layout it carries out.
    fn check(&mut self, meta: &BatchMeta, iteration: u64) -> Result<Layout> {
        let at = || crate::error::Location { operator: format!("{} '{}'", self.ctx.display_name, self.ctx.instance_name), iteration: Some(iteration), ..Default::default() };
        let fail = |message: String| Err(Error::data(at(), message));
        let (dtype, ndim) = (meta.dtype(), meta.ndim());
        let given = meta.layout().clone();
        match (self.dtype, &self.seen) {
            (Some(want), _) if want != dtype => return fail(format!("expected data of type {want} and got: {dtype}")),
            (None, Some((was, _, _))) if *was != dtype => {
                return fail(format!("the type of the data changed from the previous iteration: it was {was} and now is {dtype}"))
            }
            _ => {}
        }
        match (self.ndim, &self.seen) {
            (Some(want), _) if want != ndim => return fail(format!("expected data with {want} dimensions and got {ndim} dimensions")),
            (None, Some((_, was, _))) if *was != ndim => {
                return fail(format!("the number of dimensions of the data changed from the previous iteration: it was {was} and now is {ndim}"))
            }
            _ => {}
        }
        let layout = match (&self.layout, &self.seen) {
            (Some(want), _) if given.is_empty() => want.clone(),
            (Some(want), _) if *want != given => return fail(format!("expected data with layout \"{want}\" and got \"{given}\"")),
            (None, Some((_, _, was))) if !was.is_empty() && !given.is_empty() && *was != given => {
                return fail(format!("the layout of the data changed from the previous iteration: it was \"{was}\" and now is \"{given}\""))
            }
            (None, Some((_, _, was))) if given.is_empty() => was.clone(),
            _ => given,
        };
        if !layout.is_empty() && layout.ndim() != ndim {
            return fail(format!("the layout \"{layout}\" cannot describe {ndim}-dimensional data"));
        }
        self.seen = Some((dtype, ndim, layout.clone()));
        Ok(layout)
    }
}

struct ExternalSourceCpu(Source);

impl Operator for ExternalSourceCpu {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let Batch::Cpu(mut batch) = self.0.feed.take(ws.iteration) else {
            return Err(Error::Unsupported(format!("{}: a GPU batch was fed to a cpu external source", self.0.ctx.display_name)));
        };
        let layout = self.0.check(batch.meta(), ws.iteration)?;
        batch.set_layout(layout);
        Ok(vec![batch])
    }

    fn feed(&self) -> Option<Arc<Feed>> {
        Some(self.0.feed.clone())
    }
}

struct ExternalSourceGpu(Source);

impl GpuOperator for ExternalSourceGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let batch = self.0.feed.take(ws.iteration);
        let layout = self.0.check(batch.meta(), ws.iteration)?;
        let mut out = match batch {
            Batch::Cpu(host) => {
                let out = TensorListGpu::alloc(host.meta().clone(), ws.device, ws.stream)?;
                let bytes = &host.buffer().as_slice()[..host.total_bytes()];
                // SAFETY: from pageable memory the driver stages the copy before returning,
                // so the host batch may go away afterwards.
                unsafe { out.buffer().copy_from_host_async(0, bytes)? };
                out
            }
            Batch::Gpu(dev) => {
                // Fed on another stream: the pipeline's stream waits for the copy that made it.
                if let Some(ready) = dev.ready() {
                    ready.make_wait(ws.stream)?;
                }
                dev
            }
        };
        out.set_layout(layout);
        Ok(vec![out])
    }

    fn feed(&self) -> Option<Arc<Feed>> {
        Some(self.0.feed.clone())
    }
}
