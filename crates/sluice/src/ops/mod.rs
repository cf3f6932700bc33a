//! Operators: the trait every backend implements, the context it is built from, and the
//! registry that lists every operator family. One folder per family; schema and backends
//! side by side.

pub mod args;
pub mod arithmetic;
pub mod bbox;
pub mod cast;
pub mod color;
pub mod conditional;
pub mod constant;
pub mod coord;
pub mod crop;
pub mod decoders;
pub mod distortion;
pub mod erase;
pub mod external_source;
pub mod filters;
pub mod flip;
pub mod full;
pub mod fused;
pub mod get_property;
pub mod gpu_params;
pub mod grid_mask;
pub mod join;
pub mod lookup_table;
pub mod morphology;
pub mod strided_copy_gpu;
pub mod multi_paste;
pub mod noise;
pub mod normalize;
pub mod one_hot;
pub mod pad;
pub mod paste;
pub mod permute;
pub mod python_function;
pub mod random;
pub mod random_resized_crop;
pub mod readers;
pub mod reductions;
pub mod remap;
pub mod reshape;
pub mod resize;
pub mod rotate;
pub mod segmentation;
pub mod schema;
pub mod sequence;
pub mod shapes;
pub mod slice;
pub mod subscript;
pub mod transfer;
pub mod transforms;
pub mod transpose;
pub mod warp;

use std::collections::HashMap;

pub use args::{ArgValue, Args, PerSample, PerSampleList, MAX_LIST};
pub use schema::{arg, deprecated_arg, removed_arg, tensor_arg, ArgDefault, ArgSchema, ArgType, Device, OpSchema};

use std::sync::Arc;

use sluice_cuda::{CudaStream, GpuDevice};

use crate::error::{Error, Location, Result};
use crate::rng::SampleRng;
use crate::tensor::{TensorList, TensorListGpu};

/// Everything an operator backend needs to be built.
#[derive(Debug, Clone)]
pub struct OpContext {
    /// Checked constant arguments.
    pub args: Args,
    /// The name users know it by (`decoders.image`), used in errors.
    pub display_name: String,
    /// The instance name (`name=` or a generated one), used for `reader_meta`.
    pub instance_name: String,
    /// Position of the operator in the graph: part of its random key.
    pub op_id: u64,
    /// The operator's seed (its `seed` argument, or derived from the pipeline seed).
    pub seed: u64,
    /// The pipeline's `batch_size`: the most samples a batch holds. The batch at hand may
    /// hold fewer: see `Workspace::batch_size`.
    pub max_batch_size: usize,
    pub num_threads: usize,
    pub device_id: Option<i32>,
    /// Names of the arguments given as argument inputs, in the order the executor passes them.
    pub arg_input_names: Vec<String>,
    /// For readers of a pipeline restored from a checkpoint: the samples read before it,
    /// which the reader moves past before its first batch (0: from the start).
    pub resume_samples: u64,
}

impl OpContext {
    /// An error location for sample `sample` of this operator.
    pub fn at(&self, iteration: u64, sample: usize, source: &str) -> Location {
        Location {
            operator: self.display_name.clone(),
            sample: Some(sample),
            iteration: Some(iteration),
            source: (!source.is_empty()).then(|| source.to_string()),
        }
    }

    /// True when argument `name` was given, as a constant or as an argument input (a schema
    /// default does not count).
    pub fn given(&self, name: &str) -> bool {
        self.args.was_given(name) || self.arg_input_names.iter().any(|a| a == name)
    }
}

/// The data of one operator invocation.
pub struct Workspace<'a> {
    /// Positional inputs.
    pub inputs: Vec<&'a TensorList>,
    /// Argument inputs by argument name.
    pub arg_inputs: HashMap<&'a str, &'a TensorList>,
    /// Iteration number since the pipeline was built.
    pub iteration: u64,
    /// Samples in this batch.
    pub batch_size: usize,
    /// When the executor runs the operator frame by frame (per-frame arguments, see
    /// `exec/frames.rs`): the frames of each sequence, in order; the batch's samples are
    /// those frames. For operators whose output shape is decided per sequence (`rotate`).
    pub frames: Option<&'a [usize]>,
    /// The pipeline's CPU workers: per-sample work runs here.
    pub pool: &'a rayon::ThreadPool,
}

/// The argument inputs operator `ctx` was given, out of a fused node's (which holds its
/// parts' together): an operator may look up argument names its family shares with the
/// other part (`brightness` reads `contrast`), and must not see the other part's.
fn own_arg_inputs<'a>(arg_inputs: &HashMap<&'a str, &'a TensorList>, ctx: &OpContext) -> HashMap<&'a str, &'a TensorList> {
    arg_inputs.iter().filter(|(k, _)| ctx.arg_input_names.iter().any(|n| n == *k)).map(|(k, v)| (*k, *v)).collect()
}

impl<'a> Workspace<'a> {
    /// This invocation as `ctx`, one part of a fused node, sees it: its own argument inputs.
    pub fn for_part(&self, ctx: &OpContext) -> Workspace<'a> {
        Workspace { inputs: self.inputs.clone(), arg_inputs: own_arg_inputs(&self.arg_inputs, ctx), ..*self }
    }

    /// A numeric argument that may come per sample: the argument input when one was wired,
    /// else the constant (or `Unset`).
    pub fn per_sample(&self, ctx: &OpContext, name: &'static str) -> PerSample<'a> {
        per_sample(&self.arg_inputs, ctx, name)
    }

    /// A list argument that may come per sample: the argument input when one was wired,
    /// else the constant list (or `Unset`).
    pub fn per_sample_list<'b>(&self, ctx: &'b OpContext, name: &'static str) -> PerSampleList<'b>
    where
        'a: 'b,
    {
        per_sample_list(&self.arg_inputs, ctx, name)
    }

    /// The random stream of sample `i` for this operator and iteration.
    pub fn rng(&self, ctx: &OpContext, i: usize) -> SampleRng {
        SampleRng::new(ctx.seed, ctx.op_id, self.iteration, i as u64)
    }
}

/// The argument input wired to list argument `name`, else its constant, else `Unset`.
fn per_sample_list<'a: 'b, 'b>(arg_inputs: &HashMap<&'a str, &'a TensorList>, ctx: &'b OpContext, name: &'static str) -> PerSampleList<'b> {
    if let Some(b) = arg_inputs.get(name) {
        PerSampleList::Input { name, batch: b }
    } else if let Some(v) = ctx.args.value(name) {
        PerSampleList::Constant(v)
    } else {
        PerSampleList::Unset
    }
}

/// The argument input wired to `name`, else its constant, else `Unset`.
fn per_sample<'a>(arg_inputs: &HashMap<&'a str, &'a TensorList>, ctx: &OpContext, name: &'static str) -> PerSample<'a> {
    if let Some(b) = arg_inputs.get(name) {
        PerSample::Input { name, batch: b }
    } else if ctx.args.has(name) {
        PerSample::Constant(ctx.args.numeric(name).unwrap_or_else(|| panic!("{}: '{name}' is not numeric", ctx.display_name)))
    } else {
        PerSample::Unset
    }
}

/// Static facts about a reader, for `epoch_size()` and `reader_meta()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderMeta {
    /// Samples in the whole dataset (all shards).
    pub epoch_size: usize,
    /// Samples per epoch over all shards when each shard is padded to whole batches.
    pub epoch_size_padded: usize,
    pub number_of_shards: usize,
    pub shard_id: usize,
    pub pad_last_batch: bool,
    pub stick_to_shard: bool,
}

/// A built operator backend.
pub trait Operator: Send {
    /// Runs one batch: reads `ws.inputs`, returns `num_outputs` batches.
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>>;

    /// Reader facts; `None` for operators that are not readers.
    fn reader_meta(&self) -> Option<ReaderMeta> {
        None
    }

    /// The queue data is fed into from outside; `None` but for external sources.
    fn feed(&self) -> Option<Arc<external_source::Feed>> {
        None
    }

    /// For a reader whose batches are not all `batch_size` samples: the plan of their sizes,
    /// which sizes each iteration. `None` for every other operator.
    fn batch_plan(&self) -> Option<Arc<std::sync::Mutex<readers::loader::BatchPlan>>> {
        None
    }

    /// For a reader: the samples `on_error="skip"` excluded, and its batches by iteration
    /// (see [`readers::skip`]). `None` for every other operator.
    fn skipped(&self) -> Option<Arc<readers::skip::Skipped>> {
        None
    }
}

/// The data of one mixed or GPU operator invocation. Mixed operators read `cpu_inputs`
/// and write GPU batches; GPU operators read `gpu_inputs`. Work is queued on `stream`;
/// nothing here waits for the GPU unless it must.
pub struct GpuWorkspace<'a> {
    pub cpu_inputs: Vec<&'a TensorList>,
    pub gpu_inputs: Vec<&'a TensorListGpu>,
    /// Argument inputs (always on the host) by argument name.
    pub arg_inputs: HashMap<&'a str, &'a TensorList>,
    pub iteration: u64,
    pub batch_size: usize,
    /// See [`Workspace::frames`].
    pub frames: Option<&'a [usize]>,
    /// The pipeline's CPU workers, for host-side parts (parsing, CPU fallback decoding).
    pub pool: &'a rayon::ThreadPool,
    pub device: &'a Arc<GpuDevice>,
    /// The pipeline's GPU stream: every kernel and copy of the iteration goes here.
    pub stream: &'a Arc<CudaStream>,
}

impl<'a> GpuWorkspace<'a> {
    /// See [`Workspace::per_sample`].
    pub fn per_sample(&self, ctx: &OpContext, name: &'static str) -> PerSample<'a> {
        per_sample(&self.arg_inputs, ctx, name)
    }

    /// See [`Workspace::per_sample_list`].
    pub fn per_sample_list<'b>(&self, ctx: &'b OpContext, name: &'static str) -> PerSampleList<'b>
    where
        'a: 'b,
    {
        per_sample_list(&self.arg_inputs, ctx, name)
    }

    /// The random stream of sample `i` for this operator and iteration.
    pub fn rng(&self, ctx: &OpContext, i: usize) -> SampleRng {
        SampleRng::new(ctx.seed, ctx.op_id, self.iteration, i as u64)
    }

    /// This invocation as `ctx`, one part of a fused node, sees it: its own argument inputs
    /// (see [`Workspace::for_part`]) and `gpu_inputs`.
    pub fn for_part<'b>(&self, ctx: &OpContext, gpu_inputs: Vec<&'b TensorListGpu>) -> GpuWorkspace<'b>
    where
        'a: 'b,
    {
        GpuWorkspace { cpu_inputs: self.cpu_inputs.clone(), gpu_inputs, arg_inputs: own_arg_inputs(&self.arg_inputs, ctx), ..*self }
    }

    /// A host workspace with this invocation's argument inputs and CPU inputs, for the
    /// planning code GPU backends share with their cpu twins.
    pub fn host_view(&self) -> Workspace<'a> {
        Workspace {
            inputs: self.cpu_inputs.clone(),
            arg_inputs: self.arg_inputs.clone(),
            iteration: self.iteration,
            batch_size: self.batch_size,
            frames: self.frames,
            pool: self.pool,
        }
    }
}

/// A built mixed or GPU backend.
pub trait GpuOperator: Send {
    /// Queues one batch's work on `ws.stream`; returns `num_outputs` GPU batches.
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>>;

    /// True for an operator that can begin a batch before the previous batch's later
    /// operators are queued (the mixed decoders: the hardware JPEG engine then takes batch
    /// n+1 the moment it finishes batch n). Its inputs may only come from CPU operators.
    fn starts_early(&self) -> bool {
        false
    }

    /// Begins the batch of `ws.iteration`; `run` for the same iteration finishes it. The
    /// executor calls it one iteration ahead in asynchronous pipelines, right before
    /// `run` otherwise. A started batch that is never run is dropped by the next `start`.
    fn start(&mut self, _ws: &GpuWorkspace<'_>) -> Result<()> {
        Ok(())
    }

    /// See [`Operator::feed`].
    fn feed(&self) -> Option<Arc<external_source::Feed>> {
        None
    }
}

/// Builds a CPU backend from its context.
pub type Factory = fn(&OpContext) -> Result<Box<dyn Operator>>;

/// Builds a mixed or GPU backend for a device.
pub type GpuFactory = fn(&OpContext, &Arc<GpuDevice>) -> Result<Box<dyn GpuOperator>>;

/// One registry entry: the schema and a factory per device.
pub struct OpDef {
    pub schema: OpSchema,
    pub cpu: Option<Factory>,
    pub mixed: Option<GpuFactory>,
    pub gpu: Option<GpuFactory>,
}

impl OpDef {
    /// True when `self` is `other`: graph rewrites name the operators they match by their
    /// registry entry, not by a string, so renaming a schema cannot silently turn them off.
    pub fn is(&self, other: &OpDef) -> bool {
        std::ptr::eq(self, other)
    }

    /// True when the operator has a backend for `device`.
    pub fn has_backend(&self, device: Device) -> bool {
        match device {
            Device::Cpu => self.cpu.is_some(),
            Device::Mixed => self.mixed.is_some(),
            Device::Gpu => self.gpu.is_some(),
        }
    }
}

/// Every operator the engine knows. Adding an operator family means adding its folder and
/// one line here; Python picks it up with no edit.
pub fn registry() -> &'static [&'static OpDef] {
    REGISTRY
}

static REGISTRY: &[&OpDef] = &[
    &decoders::IMAGE,
    &decoders::IMAGE_CROP,
    &decoders::IMAGE_RANDOM_CROP,
    &decoders::IMAGE_SLICE,
    &decoders::PEEK_IMAGE_SHAPE,
    &decoders::EXPERIMENTAL_PEEK_IMAGE_SHAPE,
    &decoders::NUMPY,
    &decoders::inflate::INFLATE,
    &decoders::inflate::EXPERIMENTAL_INFLATE,
    &random::UNIFORM,
    &random::COIN_FLIP,
    &readers::FILE,
    &readers::NUMPY,
    &readers::TFRECORD,
    &readers::WEBDATASET,
    &readers::MXNET,
    &readers::SEQUENCE,
    &readers::COCO,
    &readers::CAFFE,
    &readers::CAFFE2,
    &flip::FLIP,
    &rotate::ROTATE,
    &crop::CROP,
    &crop::CROP_MIRROR_NORMALIZE,
    &resize::RESIZE,
    &resize::RESIZE_CROP_MIRROR,
    &resize::FAST_RESIZE_CROP_MIRROR,
    &transfer::MAKE_CONTIGUOUS,
    &transpose::TRANSPOSE,
    &cast::CAST,
    &cast::CAST_LIKE,
    &normalize::NORMALIZE,
    &pad::PAD,
    &random::NORMAL,
    &random::CHOICE,
    &random::BETA,
    &random::ROI_RANDOM_CROP,
    &random::RANDOM_CROP_GENERATOR,
    &noise::GAUSSIAN,
    &noise::SALT_AND_PEPPER,
    &noise::SHOT,
    &arithmetic::ARITHMETIC_GENERIC,
    &subscript::TENSOR_SUBSCRIPT,
    &random_resized_crop::RANDOM_RESIZED_CROP,
    &slice::SLICE,
    &constant::CONSTANT,
    &reshape::RESHAPE,
    &reshape::REINTERPRET,
    &reshape::EXPAND_DIMS,
    &reshape::SQUEEZE,
    &reshape::PER_FRAME,
    &sequence::ELEMENT_EXTRACT,
    &sequence::SEQUENCE_REARRANGE,
    &one_hot::ONE_HOT,
    &lookup_table::LOOKUP_TABLE,
    &get_property::GET_PROPERTY,
    &shapes::SHAPES,
    &external_source::EXTERNAL_SOURCE,
    &python_function::PYTHON_FUNCTION,
    &full::FULL,
    &full::FULL_LIKE,
    &full::ZEROS,
    &full::ZEROS_LIKE,
    &full::ONES,
    &full::ONES_LIKE,
    &conditional::SPLIT,
    &conditional::MERGE,
    &conditional::NOT,
    &conditional::VALIDATE_LOGICAL,
    &permute::PERMUTE_BATCH,
    &permute::BATCH_PERMUTATION,
    &join::CAT,
    &join::STACK,
    &transfer::COPY,
    &color::BRIGHTNESS,
    &color::CONTRAST,
    &color::BRIGHTNESS_CONTRAST,
    &color::HSV,
    &color::HUE,
    &color::SATURATION,
    &color::COLOR_TWIST,
    &color::COLOR_SPACE_CONVERSION,
    &color::EQUALIZE,
    &color::EXPERIMENTAL_EQUALIZE,
    &warp::WARP_AFFINE,
    &warp::perspective::WARP_PERSPECTIVE,
    &remap::REMAP,
    &distortion::WATER,
    &distortion::SPHERE,
    &distortion::JPEG_COMPRESSION_DISTORTION,
    &distortion::JITTER,
    &filters::GAUSSIAN_BLUR,
    &filters::LAPLACIAN,
    &filters::FILTER,
    &filters::EXPERIMENTAL_FILTER,
    &transforms::ROTATION,
    &transforms::SCALE,
    &transforms::SHEAR,
    &transforms::TRANSLATION,
    &transforms::CROP,
    &transforms::COMBINE,
    &coord::COORD_TRANSFORM,
    &coord::COORD_FLIP,
    &bbox::BB_FLIP,
    &bbox::BBOX_PASTE,
    &bbox::RANDOM_BBOX_CROP,
    &bbox::SSD_RANDOM_CROP,
    &bbox::BBOX_ROTATE,
    &bbox::BOX_ENCODER,
    &erase::ERASE,
    &grid_mask::GRID_MASK,
    &multi_paste::MULTI_PASTE,
    &paste::PASTE,
    &morphology::DILATE,
    &morphology::ERODE,
    &morphology::MEDIAN_BLUR,
    &reductions::MIN,
    &reductions::MAX,
    &reductions::SUM,
    &reductions::MEAN,
    &reductions::MEAN_SQUARE,
    &reductions::RMS,
    &reductions::STD_DEV,
    &reductions::VARIANCE,
    &segmentation::SELECT_MASKS,
    &segmentation::RANDOM_MASK_PIXEL,
    &segmentation::RANDOM_OBJECT_BBOX,
];

/// How many outputs an operator has when its arguments (or how many positional inputs it
/// was given) decide the count (`None`: the schema's `num_outputs`): one line per operator
/// family that has such operators.
pub fn num_outputs(schema: &str, args: &Args, num_inputs: usize) -> Option<usize> {
    readers::num_outputs(schema, args)
        .or_else(|| segmentation::num_outputs(schema, args))
        .or_else(|| bbox::num_outputs(schema, args, num_inputs))
}

/// When the executor runs an operator frame by frame besides for per-frame arguments (see
/// `exec/frames.rs`), as DALI's sequence operators do.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SequenceRules {
    /// Any positional input with frames (`F...`) is unfolded, per-frame arguments or not: the
    /// transforms' matrices, warp_affine's matrices (input 1) given per frame.
    pub unfold_inputs: bool,
    /// With no input that has frames, a per-frame argument sets them and the inputs are
    /// repeated for each frame (coord_transform's points, the transforms' matrices).
    pub frames_from_arguments: bool,
    /// Channel-first sequences (`CF...`) unfold into single-channel frames for per-frame
    /// arguments (the blurs); a per-frame argument for channels without frames (`CHW`) is an
    /// error, as in DALI.
    pub expand_channels: bool,
}

/// The [`SequenceRules`] of operator `def`. One line per family.
pub fn sequence_rules(def: &OpDef) -> SequenceRules {
    transforms::sequence_rules(def)
        .or(coord::sequence_rules(def))
        .or(warp::sequence_rules(def))
        .or(filters::sequence_rules(def))
        .unwrap_or_default()
}

/// The inputs of operator `def` that its gpu backend takes on either device: read on the
/// host when a cpu operator gives them, left on the GPU when a gpu operator does (a subset
/// of the schema's `host_inputs`). One line per family.
pub fn gpu_or_host_inputs(def: &OpDef) -> &'static [usize] {
    warp::gpu_or_host_inputs(def)
}

/// Runs `f(sample_index, sample_bytes)` for every sample of `out` on the worker pool. When
/// several samples fail, the error of the lowest index is returned, so the message does not
/// depend on thread timing.
pub fn for_each_sample<F>(pool: &rayon::ThreadPool, out: &mut TensorList, f: F) -> Result<()>
where
    F: Fn(usize, &mut [u8]) -> Result<()> + Sync + Send,
{
    use rayon::prelude::*;
    let slices = out.samples_mut();
    let results: Vec<Result<()>> = pool.install(|| slices.into_par_iter().enumerate().map(|(i, s)| f(i, s)).collect());
    results.into_iter().collect()
}

/// Below this many output bytes, a generator's batch (values drawn from the samples' seeds
/// alone: the random operators) is filled on the calling thread: waking the workers costs
/// more (a coin flip per sample of a batch of 64 took 12-20 us on the pool, under 1 us
/// here), and a GPU pipeline pays it on its producer thread every iteration.
const INLINE_GENERATE_BYTES: usize = 2 << 10;

/// [`for_each_sample`] for work proportional to the output's size: on the calling thread
/// when the batch is small ([`INLINE_GENERATE_BYTES`]), the lowest failing index's error.
pub fn generate_samples<F>(pool: &rayon::ThreadPool, out: &mut TensorList, f: F) -> Result<()>
where
    F: Fn(usize, &mut [u8]) -> Result<()> + Sync + Send,
{
    if out.total_bytes() >= INLINE_GENERATE_BYTES {
        return for_each_sample(pool, out, f);
    }
    out.samples_mut().into_iter().enumerate().try_for_each(|(i, s)| f(i, s))
}

/// A new batch of samples `picks` of `input`, in that order (repeats allowed): the split
/// halves of conditionals, permute_batch.
pub fn gather_samples(pool: &rayon::ThreadPool, input: &TensorList, picks: &[usize]) -> Result<TensorList> {
    let mut out = TensorList::for_overwrite(input.meta().picked(picks));
    copy_samples(pool, &mut out, |k| input.bytes(picks[k]));
    Ok(out)
}

/// Below this many bytes a batch is copied on the calling thread: waking the workers costs
/// more than the copy (conditionals split and merge indices, magnitudes and other per-sample
/// scalars at every branch: auto_aug's RandAugment does ~100 such splits per batch).
const INLINE_COPY_BYTES: usize = 256 << 10;

/// Fills every sample of `out` with the bytes `src(i)` gives (of the sample's size), on the
/// pool unless the batch is small.
pub fn copy_samples<'a>(pool: &rayon::ThreadPool, out: &mut TensorList, src: impl Fn(usize) -> &'a [u8] + Sync + Send) {
    if out.total_bytes() < INLINE_COPY_BYTES {
        for (i, dst) in out.samples_mut().into_iter().enumerate() {
            dst.copy_from_slice(src(i));
        }
        return;
    }
    let copied = for_each_sample(pool, out, |i, dst| {
        dst.copy_from_slice(src(i));
        Ok(())
    });
    debug_assert!(copied.is_ok(), "copies cannot fail");
}

/// Looks an operator up by schema name or legacy class name; returns the entry and, for a
/// legacy name that implies one, the device.
pub fn lookup(name: &str) -> Option<(&'static OpDef, Option<Device>)> {
    registry().iter().find_map(|d| {
        if d.schema.name == name {
            return Some((*d, None));
        }
        d.schema.legacy_names.iter().find(|(n, _)| *n == name).map(|(_, dev)| (*d, *dev))
    })
}

/// Error for a schema name nobody registered.
pub fn unknown_operator(name: &str) -> Error {
    Error::Graph(format!("unknown operator '{name}'"))
}

/// What operator unit tests need: a context from constant arguments, and a cpu run.
#[cfg(test)]
pub(crate) mod testing {
    use std::collections::HashMap;

    use super::*;

    /// The context of the operator `def` with constant arguments `given` and argument inputs
    /// named `arg_inputs`, checked as the graph checks a call.
    pub(crate) fn context(def: &OpDef, given: Vec<(&str, ArgValue)>, arg_inputs: &[&str]) -> Result<OpContext> {
        let arg_input_names: Vec<String> = arg_inputs.iter().map(|s| s.to_string()).collect();
        // The name users see, as the engine gives it (`bb_flip`, `segmentation.select_masks`).
        let name = def.schema.fn_name();
        Ok(OpContext {
            args: Args::check(&def.schema, &name, given.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), &arg_input_names)?,
            display_name: name.clone(),
            instance_name: name,
            op_id: 1,
            seed: 1,
            max_batch_size: 8,
            num_threads: 2,
            device_id: None,
            arg_input_names,
            resume_samples: 0,
        })
    }

    /// Runs `op` once on the cpu (two workers) with `inputs` and the argument inputs `args`.
    pub(crate) fn run(op: &mut dyn Operator, inputs: &[&TensorList], args: &[(&'static str, &TensorList)]) -> Result<Vec<TensorList>> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let arg_inputs: HashMap<&str, &TensorList> = args.iter().copied().collect();
        let batch_size = inputs.first().map_or(0, |x| x.len());
        let ws = Workspace { inputs: inputs.to_vec(), arg_inputs, iteration: 0, batch_size, frames: None, pool: &pool };
        op.run(&ws)
    }

    /// A workspace of argument inputs only, for the planning a gpu backend shares (`f` gets it).
    pub(crate) fn with_args<R>(args: &[(&'static str, &TensorList)], batch_size: usize, f: impl FnOnce(&Workspace<'_>) -> R) -> R {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let arg_inputs: HashMap<&str, &TensorList> = args.iter().copied().collect();
        f(&Workspace { inputs: vec![], arg_inputs, iteration: 0, batch_size, frames: None, pool: &pool })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_lists_exactly_the_devices_it_has_backends_for() {
        for def in registry() {
            for d in [Device::Cpu, Device::Mixed, Device::Gpu] {
                assert_eq!(
                    def.schema.devices.contains(&d),
                    def.has_backend(d),
                    "{}: schema devices and factories disagree on {}",
                    def.schema.name,
                    d.name()
                );
            }
        }
    }

    #[test]
    fn names_and_legacy_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for def in registry() {
            assert!(seen.insert(def.schema.name), "{}", def.schema.name);
            for (legacy, _) in def.schema.legacy_names {
                assert!(seen.insert(legacy), "{legacy}");
            }
        }
    }
}
