//! Random number generators (`random.uniform`, `random.coin_flip`, ...) and `roi_random_crop`
//! (a random window start). Every value comes from the counter-based stream of (seed,
//! operator, iteration, sample), so results do not depend on the thread count.

mod beta;
mod choice;
mod coin_flip;
mod crop_generator;
mod normal;
mod roi_random_crop;
mod uniform;

pub use beta::BETA;
pub use choice::CHOICE;
pub use coin_flip::COIN_FLIP;
pub use crop_generator::RANDOM_CROP_GENERATOR;
pub use normal::NORMAL;
pub use roi_random_crop::ROI_RANDOM_CROP;
pub use uniform::UNIFORM;

use crate::error::{Error, Result};
use crate::ops::{Args, GpuOperator, GpuWorkspace, OpContext, Operator, Workspace, MAX_LIST};
use crate::tensor::{BatchMeta, DType, TensorList, TensorListGpu};

/// The output batch of a generator, for its values to be written: each sample's shape is
/// `shape` (a constant, or one list per sample: every sample with as many extents), or the
/// shape of the `shape_like` input's sample (not both, as DALI), else a scalar. The batch
/// has the input's samples, else `ws.batch_size`.
pub(crate) fn output_batch(ctx: &OpContext, ws: &Workspace<'_>, like: Option<&BatchMeta>, dtype: DType) -> Result<TensorList> {
    let op = ctx.display_name.as_str();
    let shape = ws.per_sample_list(ctx, "shape");
    let mut meta = match like {
        Some(_) if shape.is_set() => {
            return Err(Error::arg(op, "shape", "Providing argument \"shape\" is incompatible with providing a shape-like input"));
        }
        Some(l) => {
            let mut m = BatchMeta::new(dtype, l.ndim(), (0..l.len()).map(|i| l.shape(i)));
            m.inherit_source_info(l);
            m
        }
        None if shape.is_set() => {
            let mut buf = [0f64; MAX_LIST];
            let (mut dims, mut ndim) = (Vec::new(), None);
            for i in 0..ws.batch_size {
                let v = shape.get(op, "shape", i, &[], &mut buf)?.unwrap_or_default();
                if *ndim.get_or_insert(v.len()) != v.len() {
                    return Err(Error::arg(op, "shape", format!("sample {i} has {} extents, earlier samples {}; every sample needs the same number", v.len(), ndim.unwrap())));
                }
                for &d in v {
                    if !(d >= 0.0 && d.fract() == 0.0 && d < (1u64 << 53) as f64) {
                        return Err(Error::arg(op, "shape", format!("extents must be integers >= 0; sample {i} has {v:?}")));
                    }
                    dims.push(d as usize);
                }
            }
            // An empty batch keeps the constant's dimensionality.
            let ndim = ndim.unwrap_or_else(|| if ctx.args.has("shape") { ctx.args.ints("shape").len() } else { 0 });
            BatchMeta::new(dtype, ndim, (0..ws.batch_size).map(|i| &dims[i * ndim..(i + 1) * ndim]))
        }
        None => BatchMeta::new(dtype, 0, (0..ws.batch_size).map(|_| &[][..])),
    };
    meta.set_layout(crate::tensor::Layout::empty());
    Ok(TensorList::for_overwrite(meta))
}

/// A random generator: a batch of values from the counter-based streams. Its cpu backend
/// ([`OnCpu`]) fills the batch on the workers; its gpu backend ([`OnGpu`]) does the same on
/// the host and uploads it, so both give the same numbers bit for bit whatever the device.
pub(crate) trait Generate: Send + 'static {
    /// The batch; `like`: the shape-like input's metadata, when given.
    fn generate(&mut self, ws: &Workspace<'_>, like: Option<&BatchMeta>) -> Result<TensorList>;
}

pub(crate) struct OnCpu<G>(pub G);

impl<G: Generate> Operator for OnCpu<G> {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        Ok(vec![self.0.generate(ws, ws.inputs.first().map(|t| t.meta()))?])
    }
}

pub(crate) struct OnGpu<G>(pub G);

impl<G: Generate> GpuOperator for OnGpu<G> {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let host = ws.host_view();
        let like = ws.gpu_inputs.first().map(|t| t.meta()).or_else(|| host.inputs.first().map(|t| t.meta()));
        let batch = self.0.generate(&host, like)?;
        let out = TensorListGpu::alloc(batch.meta().clone(), ws.device, ws.stream)?;
        if batch.total_bytes() > 0 {
            // SAFETY: from pageable memory the driver stages the copy before returning.
            unsafe { out.buffer().copy_from_host_async(0, &batch.buffer().as_slice()[..batch.total_bytes()])? };
        }
        Ok(vec![out])
    }
}

/// The output shape of one sample: the `shape` argument, or a scalar.
pub(crate) fn sample_shape(ctx: &OpContext) -> Result<Vec<usize>> {
    if !ctx.args.has("shape") {
        return Ok(Vec::new());
    }
    ctx.args
        .ints("shape")
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| Error::arg(&ctx.display_name, "shape", format!("extents must be >= 0, got {d}"))))
        .collect()
}

/// The `dtype` argument, or `default` when not given.
pub(crate) fn dtype_or(args: &Args, default: DType) -> DType {
    if args.has("dtype") { args.dtype("dtype") } else { default }
}
