//! `fn.decoders.inflate` (cpu and gpu): LZ4 blocks decompressed into tensors of `shape` and
//! `dtype`, as DALI 2.4's operator (`dali/operators/decoder/inflate/`, gpu only there, on
//! nvCOMP). Sluice decodes LZ4 itself: `lz4.rs` on the cpu, the chunks of a batch spread over
//! the workers, and `inflate.cu` on the gpu, a warp per chunk (gpu.rs). The cpu backend is
//! Sluice's own: DALI has none.
//!
//! As DALI:
//! - each input sample is a 1-D uint8 tensor, not empty, holding one raw LZ4 block (no frame
//!   header: `lz4.block.compress(data, store_size=False)`), or several concatenated ones when
//!   `chunk_offsets` and/or `chunk_sizes` are given (constants or per-sample argument
//!   inputs). With only one of them the chunks are densely packed: a chunk runs to the next
//!   offset (the last to the sample's end), or the chunks start at 0 one after the other.
//!   The chunk count is then the output's outermost extent (0 is a count too), and
//!   `sequence_axis_name` goes before `layout`;
//! - `shape` (a constant or per sample; a scalar or a list, as long for every sample) and
//!   `dtype` (any type) describe one inflated chunk;
//! - the argument checks, in DALI's order and words (inflate_params.h, inflate.h): offsets
//!   inside the sample, sizes positive and inside it, as many sizes as offsets, offsets alone
//!   strictly increasing, sizes alone not past the sample's end, extents not negative, the
//!   layout as long as the shape, a one-letter `sequence_axis_name`, `algorithm` "LZ4" in any
//!   case;
//! - a chunk decoding to fewer bytes than its output: the rest of the output is zeros (DALI's
//!   `FillTheTails`, test_inflate.py's oversized shapes).
//!
//! Beyond DALI:
//! - a chunk that expands past its output is always an error, in the words of DALI's
//!   `check_output_size=True` check ("Output buffer for inflated chunk ... is too small");
//!   DALI without that check leaves the output to nvCOMP. `check_output_size` is accepted and
//!   changes nothing;
//! - a corrupt block (cut short, an offset of 0 or before the start of the output, lengths
//!   running past the block) is an error naming the sample, the chunk, its bytes and the fault
//!   (lz4.rs); DALI ignores nvCOMP's per-chunk statuses and returns whatever nvCOMP left. On
//!   the gpu the kernel writes a status per chunk, read back after the launch: the host waits
//!   for the stream once per batch (as DALI's `check_output_size=True` does);
//! - `layout` is a Sluice layout, its letters unique (DALI accepts "WW");
//! - DALI's deprecated alias `fn.experimental.inflate` is not registered.
//!
//! Checked by the tests below and in lz4.rs (the decoder against blocks written by liblz4
//! 1.9.4 and by a test compressor, overlapping matches of offsets 1 to 40, every fault), by
//! gpu.rs's host-run twin tests (the kernel equal to the cpu decoder, outputs and statuses),
//! and by tests/test_inflate.py (DALI's test_inflate.py ported, round trips through python-lz4,
//! the gpu against the cpu and against DALI's gpu operator where DALI has a GPU).

mod gpu;
pub(crate) mod lz4;

use std::borrow::Cow;

use rayon::prelude::*;

use self::lz4::Fault;
use crate::error::{Error, Result};
use crate::ops::{arg, tensor_arg, ArgDefault as D, ArgSchema, ArgType as T, ArgValue, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::element::{load, Num};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

pub static INFLATE: OpDef = OpDef {
    schema: schema("decoders__Inflate", false),
    cpu: Some(|ctx| Ok(Box::new(Inflate::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::InflateGpu::new(Inflate::new(ctx)?)))),
};

/// `fn.experimental.inflate`: DALI keeps it as a deprecated alias of `fn.decoders.inflate`.
pub static EXPERIMENTAL_INFLATE: OpDef = OpDef {
    schema: schema("experimental__Inflate", true),
    cpu: Some(|ctx| Ok(Box::new(Inflate::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::InflateGpu::new(Inflate::new(ctx)?)))),
};

/// The operator's arguments.
const ARGS: &[ArgSchema] = &[
    tensor_arg("shape", T::IntList, D::Required, "The shape of the output (inflated) chunk."),
    arg("dtype", T::DType, D::Int(DType::U8 as i64), "The output (inflated) data type."),
    tensor_arg(
        "chunk_offsets",
        T::IntList,
        D::Optional,
        "A list of offsets within the input sample describing where the consecutive chunks begin. If the `chunk_sizes` is not specified, it is assumed that the chunks are densely packed in the input tensor and the last chunk ends with the sample's end.",
    ),
    tensor_arg(
        "chunk_sizes",
        T::IntList,
        D::Optional,
        "A list of sizes of corresponding input chunks. If the `chunk_offsets` is not specified, it is assumed that the chunks are densely packed in the input tensor and the first chunk starts at the beginning of the sample.",
    ),
    arg("algorithm", T::Str, D::Str("LZ4"), "Algorithm to be used to decode the data. Currently only ``LZ4`` is supported."),
    arg(
        "layout",
        T::Str,
        D::Str(""),
        "Layout of the output (inflated) chunk. If the samples consist of multiple chunks, additionally, the `sequence_axis_name` extent will be added to the beginning of the specified layout.",
    ),
    arg(
        "sequence_axis_name",
        T::Str,
        D::Str("F"),
        "The name for the sequence axis. If the samples consist of multiple chunks, an extra outer dimension will be added to the output tensor. By default, it is assumed to be video frames, hence the default label 'F'. The value is ignored if the `layout` is not specified or the input is not a sequence (neither `chunk_offsets` nor `chunk_sizes` is specified).",
    ),
    arg(
        "check_output_size",
        T::Bool,
        D::Bool(false),
        "Accepted for DALI compatibility: Sluice always checks that each chunk's output holds the data it decompresses to.",
    ),
];

/// The operator's schema under `name` (the alias's doc says what it is an alias of).
const fn schema(name: &'static str, deprecated_alias: bool) -> OpSchema {
    OpSchema {
        name,
        doc: if deprecated_alias {
            "Deprecated alias of fn.decoders.inflate."
        } else {
            "Decompresses the input using specified decompression algorithm.

The input must be a 1D tensor of bytes (uint8). Passing the `shape` and `dtype` of the decompressed samples is required.

Each input sample can either be a single compressed chunk or consist of multiple compressed chunks that have the same shape and type when inflated, so that they can be be merged into a single tensor where the outermost extent of the tensor corresponds to the number of the chunks.

If the sample is comprised of multiple chunks, the `chunk_offsets` or `chunk_sizes` must be specified. In that case, the `shape` must describe the shape of a single inflated (output) chunk. The number of the chunks will automatically be added as the outermost extent to the output tensors.

Sluice decodes LZ4 on the cpu too, and always checks the blocks: a corrupt block, or one that expands past its output, is an error naming the sample and the chunk."
        },
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[ARGS],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    }
}

/// The operator with its constant arguments checked; both backends plan batches with it.
struct Inflate {
    ctx: OpContext,
    dtype: DType,
    /// `layout`: empty for none.
    layout: String,
    sequence_axis: char,
}

/// One compressed chunk of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chunk {
    sample: usize,
    /// Its place in the sample: the output's outermost index when samples hold chunks.
    index: usize,
    /// Its bytes in the input sample: `from..from + len`.
    from: usize,
    len: usize,
}

/// One batch's plan, the same for both backends.
struct Plan {
    meta: BatchMeta,
    /// Every chunk, sample by sample, each sample's in order.
    chunks: Vec<Chunk>,
    /// Per sample: the bytes of one inflated chunk.
    chunk_bytes: Vec<usize>,
    /// Per sample: how many chunks it holds.
    counts: Vec<usize>,
}

/// A list argument that may come per sample (`shape`, `chunk_offsets`, `chunk_sizes`): the
/// constant, or the argument input. Any length, unlike `PerSampleList`'s 64 values: a
/// sequence may have thousands of chunks.
#[derive(Clone, Copy)]
enum ListArg<'a> {
    Unset,
    Constant(&'a [i64]),
    Input(&'a TensorList),
}

impl<'a> ListArg<'a> {
    fn new(ws: &Workspace<'a>, ctx: &'a OpContext, name: &str) -> ListArg<'a> {
        if let Some(b) = ws.arg_inputs.get(name) {
            return ListArg::Input(b);
        }
        match ctx.args.value(name) {
            Some(ArgValue::IntList(l)) => ListArg::Constant(l),
            Some(v) => unreachable!("{}: '{name}' is {v:?}, checked as a list of int", ctx.display_name),
            None => ListArg::Unset,
        }
    }

    fn is_set(&self) -> bool {
        !matches!(self, ListArg::Unset)
    }

    /// The values for sample `i`: the constant, or the argument input's sample (a scalar is
    /// a list of one); `None` when the argument was not given.
    fn get(&self, op: &str, name: &str, i: usize) -> Result<Option<Cow<'a, [i64]>>> {
        let b = match *self {
            ListArg::Unset => return Ok(None),
            ListArg::Constant(l) => return Ok(Some(Cow::Borrowed(l))),
            ListArg::Input(b) => b,
        };
        if b.ndim() > 1 {
            return Err(Error::arg(op, name, format!("argument input must be a 1-D list per sample; sample {i} has shape {:?}", b.shape(i))));
        }
        let (t, bytes) = (b.dtype(), b.bytes(i));
        (0..b.numel(i))
            .map(|k| match load(t, bytes, k) {
                Num::Int(v) => Ok(v.clamp(i64::MIN as i128, i64::MAX as i128) as i64),
                Num::Float(_) => Err(Error::arg(op, name, format!("argument input must hold integers, got {}", t.dali_name()))),
            })
            .collect::<Result<Vec<i64>>>()
            .map(|v| Some(Cow::Owned(v)))
    }
}

impl Inflate {
    fn new(ctx: &OpContext) -> Result<Inflate> {
        let op = ctx.display_name.as_str();
        // DALI lowercases the name before comparing (and quoting) it.
        let algorithm = ctx.args.str("algorithm").to_lowercase();
        if algorithm != "lz4" {
            return Err(Error::arg(op, "algorithm", format!("Unknown inflate algorithm \"{algorithm}\".")));
        }
        let axis = ctx.args.str("sequence_axis_name");
        let mut letters = axis.chars();
        let sequence_axis = match (letters.next(), letters.next()) {
            (Some(c), None) if c.is_ascii() => c,
            _ => return Err(Error::arg(op, "sequence_axis_name", format!("The `sequence_axis_name` must be a single character, got \"{axis}\"."))),
        };
        let layout = ctx.args.str("layout").to_string();
        Layout::new(&layout).map_err(|e| Error::arg(op, "layout", e))?;
        Ok(Inflate { ctx: ctx.clone(), dtype: ctx.args.dtype("dtype"), layout, sequence_axis })
    }

    fn op(&self) -> &str {
        &self.ctx.display_name
    }

    /// Checks the batch `input` and the arguments, and plans the output and the chunks.
    fn plan(&self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<Plan> {
        let op = self.op();
        if input.dtype() != DType::U8 {
            return Err(Error::type_mismatch(op, format!(
                "Input must be a buffer with compressed data/data chunks represented as a 1D tensor of bytes (uint8). Got tensor of type `{}` instead.",
                input.dtype().cpp_name()
            )));
        }
        if input.ndim() != 1 {
            return Err(Error::type_mismatch(op, format!(
                "Input must be a buffer with compressed data/data chunks represented as a 1D tensor of uint8. Got input with {} dimensions instead.",
                input.ndim()
            )));
        }
        let n = input.len();
        if let Some(i) = (0..n).find(|&i| input.numel(i) == 0) {
            return Err(Error::data(
                self.ctx.at(ws.iteration, i, input.source_info(i)),
                format!("Input sample cannot be empty, but the sample at index {i} has volume 0."),
            ));
        }
        let (chunks, counts, has_chunks) = self.chunk_table(ws, input)?;
        let (ndim, shapes) = self.chunk_shapes(ws, n)?;
        let out_ndim = ndim + has_chunks as usize;
        let mut out_shapes = Vec::with_capacity(n * out_ndim);
        let mut chunk_bytes = Vec::with_capacity(n);
        for i in 0..n {
            let shape = &shapes[i * ndim..(i + 1) * ndim];
            let bytes = shape.iter().try_fold(self.dtype.size(), |b, &e| b.checked_mul(e)).filter(|b| b.checked_mul(counts[i]).is_some_and(|t| t <= isize::MAX as usize));
            let Some(bytes) = bytes else {
                return Err(Error::arg(op, "shape", format!("the output of sample {i} ({} chunk(s) of {shape:?} {}) is too large", counts[i], self.dtype.dali_name())));
            };
            chunk_bytes.push(bytes);
            if has_chunks {
                out_shapes.push(counts[i]);
            }
            out_shapes.extend_from_slice(shape);
        }
        let mut meta = BatchMeta::new(self.dtype, out_ndim, (0..n).map(|i| &out_shapes[i * out_ndim..(i + 1) * out_ndim]));
        if !self.layout.is_empty() {
            if self.layout.len() != ndim {
                return Err(Error::arg(op, "layout", format!(
                    "The layout \"{}\" has a different number of dimensions ({}) than the requested output shape ({ndim}).",
                    self.layout,
                    self.layout.len()
                )));
            }
            let layout = if has_chunks { format!("{}{}", self.sequence_axis, self.layout) } else { self.layout.clone() };
            let layout = Layout::new(&layout).map_err(|e| Error::arg(op, "sequence_axis_name", format!("with `layout` \"{}\": {e}", self.layout)))?;
            meta.set_layout(layout);
        }
        meta.inherit_source_info(input);
        Ok(Plan { meta, chunks, chunk_bytes, counts })
    }

    /// Every chunk of the batch, the chunk count per sample, and whether the samples hold
    /// chunks (`chunk_offsets` or `chunk_sizes` given). Checks as DALI's
    /// `AcquireInferOffsetsSizes`, in its order: every sample's offsets, every sample's sizes,
    /// then the two together (or the sizes or offsets inferred from the other).
    fn chunk_table(&self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<(Vec<Chunk>, Vec<usize>, bool)> {
        let op = self.op();
        let n = input.len();
        let offsets = ListArg::new(ws, &self.ctx, "chunk_offsets");
        let sizes = ListArg::new(ws, &self.ctx, "chunk_sizes");
        if !offsets.is_set() && !sizes.is_set() {
            let chunks = (0..n).map(|i| Chunk { sample: i, index: 0, from: 0, len: input.numel(i) }).collect();
            return Ok((chunks, vec![1; n], false));
        }
        let bytes = |i: usize| input.numel(i) as i64;
        let mut all_offsets = Vec::with_capacity(n);
        for i in 0..n {
            let o = offsets.get(op, "chunk_offsets", i)?;
            for &x in o.iter().flat_map(|o| o.iter()) {
                if x < 0 {
                    return Err(Error::arg(op, "chunk_offsets", format!("Input chunks offsets must be non-negative. Got {x} offset for sample of idx {i}.")));
                }
                if x >= bytes(i) {
                    return Err(Error::arg(op, "chunk_offsets", format!(
                        "Input chunks offsets cannot point past the last byte. Got chunk offset {x} while the sample size is {} for sample of idx {i}.",
                        bytes(i)
                    )));
                }
            }
            all_offsets.push(o);
        }
        let mut all_sizes = Vec::with_capacity(n);
        for i in 0..n {
            let s = sizes.get(op, "chunk_sizes", i)?;
            for &x in s.iter().flat_map(|s| s.iter()) {
                if x <= 0 {
                    return Err(Error::arg(op, "chunk_sizes", format!("Input chunk size must be positive. Got chunk size {x} for sample of idx {i}.")));
                }
                if x > bytes(i) {
                    return Err(Error::arg(op, "chunk_sizes", format!(
                        "Input chunk size cannot exceed the sample size. Got chunk of size {x} while the sample size is {} for sample of idx {i}.",
                        bytes(i)
                    )));
                }
            }
            all_sizes.push(s);
        }
        if offsets.is_set() && sizes.is_set() {
            for (i, (o, s)) in all_offsets.iter().zip(&all_sizes).enumerate() {
                let (o, s) = (o.as_deref().unwrap_or_default(), s.as_deref().unwrap_or_default());
                if o.len() != s.len() {
                    return Err(Error::arg(op, "chunk_sizes", format!(
                        "The number of elements passed as `chunk_offsets` and `chunk_sizes` must match for corresponding samples. However for sample of idx {i} there are {} offsets and {} sizes.",
                        o.len(),
                        s.len()
                    )));
                }
            }
        }
        let mut chunks = Vec::new();
        let mut counts = Vec::with_capacity(n);
        for i in 0..n {
            let (o, s) = (all_offsets[i].as_deref(), all_sizes[i].as_deref());
            let first = chunks.len();
            match (o, s) {
                (Some(o), Some(s)) => {
                    for (k, (&from, &len)) in o.iter().zip(s).enumerate() {
                        if from + len > bytes(i) {
                            return Err(Error::arg(op, "chunk_sizes", format!(
                                "Input chunk cannot exceed the sample size. However, for a sample of idx {i}, got a chunk that starts at the position {from} and has size {len} while the sample contains only {} bytes.",
                                bytes(i)
                            )));
                        }
                        chunks.push(Chunk { sample: i, index: k, from: from as usize, len: len as usize });
                    }
                }
                (Some(o), None) => {
                    for (k, &from) in o.iter().enumerate() {
                        let end = o.get(k + 1).copied().unwrap_or(bytes(i));
                        if end <= from {
                            return Err(Error::arg(op, "chunk_offsets", format!(
                                "If the `chunk_offsets` argument is specified and the `chunk_sizes` is not, the offsets must be strictly increasing. The inferred size of a chunk would be non-positive for sample of idx {i}."
                            )));
                        }
                        chunks.push(Chunk { sample: i, index: k, from: from as usize, len: (end - from) as usize });
                    }
                }
                (None, Some(s)) => {
                    let mut from = 0i64;
                    for (k, &len) in s.iter().enumerate() {
                        chunks.push(Chunk { sample: i, index: k, from: from as usize, len: len as usize });
                        from += len;
                    }
                    if from > bytes(i) {
                        return Err(Error::arg(op, "chunk_sizes", format!("The sum of chunk sizes for sample of idx {i} exceeds the total size of the sample.")));
                    }
                }
                (None, None) => unreachable!("one of them is set"),
            }
            counts.push(chunks.len() - first);
        }
        Ok((chunks, counts, true))
    }

    /// The shape of one inflated chunk per sample (`n` samples): the number of extents, every
    /// sample's extents one after the other.
    fn chunk_shapes(&self, ws: &Workspace<'_>, n: usize) -> Result<(usize, Vec<usize>)> {
        let op = self.op();
        let shape = ListArg::new(ws, &self.ctx, "shape");
        if let ListArg::Input(b) = shape {
            if b.ndim() > 1 {
                return Err(Error::arg(op, "shape", format!("The shape argument must be a scalar or a 1D tensor, got tensor with {} extents.", b.ndim())));
            }
        }
        let mut ndim = match shape {
            ListArg::Constant(l) => Some(l.len()),
            _ => None,
        };
        let mut flat = Vec::new();
        for i in 0..n {
            let s = shape.get(op, "shape", i)?.expect("`shape` is required");
            let d = *ndim.get_or_insert(s.len());
            if s.len() != d {
                return Err(Error::arg(op, "shape", format!(
                    "The output shapes must have the same number of extents for every sample, but the shape for sample of idx 0 has {d} extents while the one for sample of idx {i} has {}.",
                    s.len()
                )));
            }
            if s.iter().any(|&e| e < 0) {
                return Err(Error::arg(op, "shape", format!(
                    "Extents of the output shape must be non-negative integers. Please verify the sample of idx {i} passed as the argument `shape`."
                )));
            }
            flat.extend(s.iter().map(|&e| e as usize));
        }
        Ok((ndim.unwrap_or(0), flat))
    }

    /// Chunk `c` of `input`, given an output of `cap` bytes, decoded as `outcome` (the cpu
    /// decoder's, or the kernel's status): the error to raise, if any.
    fn check_chunk(&self, iteration: u64, input: &BatchMeta, c: &Chunk, cap: usize, outcome: std::result::Result<u64, Fault>) -> Result<()> {
        let at = || self.ctx.at(iteration, c.sample, input.source_info(c.sample));
        match outcome {
            Ok(size) if size > cap as u64 => Err(Error::data(at(), format!(
                "Output buffer for inflated chunk {} in sample {} is too small: it has {cap} bytes, but the compressed input expands to {size} bytes. Check the `shape` and `dtype` arguments.",
                c.index, c.sample
            ))),
            Ok(_) => Ok(()),
            Err(f) => Err(Error::data(at(), format!(
                "chunk {} (bytes {}..{} of the sample) is not a valid LZ4 block: {f}",
                c.index,
                c.from,
                c.from + c.len
            ))),
        }
    }
}

impl Operator for Inflate {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let Plan { meta, chunks, chunk_bytes, counts } = self.plan(ws, input.meta())?;
        let mut out = TensorList::for_overwrite(meta);
        // Every chunk's output, in the order of `chunks`.
        let mut outs: Vec<&mut [u8]> = Vec::with_capacity(chunks.len());
        for (i, sample) in out.samples_mut().into_iter().enumerate() {
            match chunk_bytes[i] {
                0 => outs.extend((0..counts[i]).map(|_| <&mut [u8]>::default())),
                b => outs.extend(sample.chunks_exact_mut(b)),
            }
        }
        let this = &*self;
        let results: Vec<Result<()>> = ws.pool.install(|| {
            outs.into_par_iter()
                .zip(chunks.par_iter())
                .map(|(dst, c)| {
                    let outcome = lz4::decode(&input.bytes(c.sample)[c.from..c.from + c.len], dst);
                    if let Ok(size) = outcome {
                        if let Some(tail) = dst.get_mut(size as usize..) {
                            tail.fill(0);
                        }
                    }
                    this.check_chunk(ws.iteration, input.meta(), c, dst.len(), outcome)
                })
                .collect()
        });
        // The first failing chunk of the lowest sample, whatever the threads' timing.
        results.into_iter().collect::<Result<()>>()?;
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::lz4::encode::{compress, sequence};
    use super::*;
    use crate::ops::testing;

    pub(super) fn op(args: Vec<(&str, ArgValue)>, arg_inputs: &[&str]) -> Result<Inflate> {
        Inflate::new(&testing::context(&INFLATE, args, arg_inputs)?)
    }

    pub(super) fn run(o: &mut Inflate, x: &TensorList, args: &[(&'static str, &TensorList)]) -> Result<TensorList> {
        Ok(testing::run(o, &[x], args)?.remove(0))
    }

    pub(super) fn bytes(samples: &[Vec<u8>]) -> TensorList {
        let shapes: Vec<Vec<usize>> = samples.iter().map(|s| vec![s.len()]).collect();
        TensorList::from_samples(&shapes, samples)
    }

    pub(super) fn ints(lists: &[Vec<i32>]) -> TensorList {
        let shapes: Vec<Vec<usize>> = lists.iter().map(|s| vec![s.len()]).collect();
        TensorList::from_samples(&shapes, lists)
    }

    fn shape(s: &[i64]) -> (&'static str, ArgValue) {
        ("shape", ArgValue::IntList(s.to_vec()))
    }

    fn list(name: &'static str, v: &[i64]) -> (&'static str, ArgValue) {
        (name, ArgValue::IntList(v.to_vec()))
    }

    fn err(args: Vec<(&str, ArgValue)>, x: &TensorList) -> String {
        let mut o = op(args, &[]).unwrap();
        run(&mut o, x, &[]).expect_err("an error").to_string()
    }

    #[test]
    fn a_block_inflates_to_its_shape_and_type() {
        let values: Vec<i32> = (0..60).map(|v| v * v - 7).collect();
        let raw: Vec<u8> = bytemuck::cast_slice(&values).to_vec();
        let x = bytes(&[compress(&raw), compress(&raw[..40])]);
        let mut o = op(vec![shape(&[3, 4]), ("dtype", ArgValue::Int(DType::I32 as i64)), ("layout", ArgValue::Str("HW".into()))], &[]).unwrap();
        let err = run(&mut o, &x, &[]).unwrap_err().to_string();
        assert!(err.contains("Output buffer for inflated chunk 0 in sample 0 is too small: it has 48 bytes, but the compressed input expands to 240 bytes"), "{err}");
        let mut o = op(vec![shape(&[15, 4]), ("dtype", ArgValue::Int(DType::I32 as i64)), ("layout", ArgValue::Str("HW".into()))], &[]).unwrap();
        let y = run(&mut o, &x, &[]).unwrap();
        assert_eq!((y.dtype(), y.layout().as_str(), y.shape(0), y.shape(1)), (DType::I32, "HW", &[15usize, 4][..], &[15usize, 4][..]));
        assert_eq!(y.sample::<i32>(0), &values[..]);
        // Sample 1 holds 10 values: the rest is zeros.
        assert_eq!(&y.sample::<i32>(1)[..10], &values[..10]);
        assert!(y.sample::<i32>(1)[10..].iter().all(|&v| v == 0));
    }

    #[test]
    fn chunks_from_offsets_sizes_or_both() {
        let frames: Vec<Vec<u8>> = (0..4u8).map(|f| (0..24).map(|k| f * 50 + k % 5).collect()).collect();
        let blocks: Vec<Vec<u8>> = frames.iter().map(|f| compress(f)).collect();
        let sizes: Vec<i64> = blocks.iter().map(|b| b.len() as i64).collect();
        let offsets: Vec<i64> = sizes.iter().scan(0, |at, s| Some(std::mem::replace(at, *at + s))).collect();
        let x = bytes(&[blocks.concat()]);
        let want: Vec<u8> = frames.concat();
        let base = vec![shape(&[2, 4, 3]), ("layout", ArgValue::Str("HWC".into()))];
        for given in [vec![list("chunk_offsets", &offsets)], vec![list("chunk_sizes", &sizes)], vec![list("chunk_offsets", &offsets), list("chunk_sizes", &sizes)]] {
            let mut o = op(base.iter().cloned().chain(given).collect(), &[]).unwrap();
            let y = run(&mut o, &x, &[]).unwrap();
            assert_eq!((y.shape(0), y.layout().as_str()), (&[4usize, 2, 4, 3][..], "FHWC"));
            assert_eq!(y.bytes(0), &want[..]);
        }
        // Chunks in any order, some left out, as per-sample argument inputs; a sample of none.
        let picked = ints(&[vec![offsets[2] as i32, offsets[0] as i32], vec![]]);
        let picked_sizes = ints(&[vec![sizes[2] as i32, sizes[0] as i32], vec![]]);
        let x2 = bytes(&[blocks.concat(), blocks.concat()]);
        let mut o = op(vec![shape(&[24]), ("sequence_axis_name", ArgValue::Str("Q".into())), ("layout", ArgValue::Str("X".into()))], &["chunk_offsets", "chunk_sizes"]).unwrap();
        let y = run(&mut o, &x2, &[("chunk_offsets", &picked), ("chunk_sizes", &picked_sizes)]).unwrap();
        assert_eq!((y.shape(0), y.shape(1), y.layout().as_str()), (&[2usize, 24][..], &[0usize, 24][..], "QX"));
        assert_eq!(y.bytes(0), &[frames[2].clone(), frames[0].clone()].concat()[..]);
        // Empty lists: no chunks.
        let mut o = op(vec![shape(&[24]), list("chunk_sizes", &[])], &[]).unwrap();
        assert_eq!(run(&mut o, &x, &[]).unwrap().shape(0), &[0usize, 24]);
    }

    #[test]
    fn per_sample_shapes_scalars_and_lists() {
        let x = bytes(&[compress(&[1, 2, 3, 4, 5, 6]), compress(&[9; 12])]);
        let mut o = op(vec![], &["shape"]).unwrap();
        let scalars = TensorList::from_samples(&[vec![], vec![]], &[vec![6i32], vec![12]]);
        let y = run(&mut o, &x, &[("shape", &scalars)]).unwrap();
        assert_eq!((y.shape(0), y.shape(1)), (&[6usize][..], &[12usize][..]));
        let lists = ints(&[vec![2, 3], vec![3, 4]]);
        let y = run(&mut o, &x, &[("shape", &lists)]).unwrap();
        assert_eq!((y.shape(0), y.shape(1), y.bytes(1)), (&[2usize, 3][..], &[3usize, 4][..], &[9u8; 12][..]));
        let ragged = ints(&[vec![6], vec![3, 4]]);
        let e = run(&mut o, &x, &[("shape", &ragged)]).unwrap_err().to_string();
        assert!(e.contains("decoders.inflate: argument 'shape'") && e.contains("sample of idx 1 has 2"), "{e}");
        let negative = ints(&[vec![6], vec![-12]]);
        let e = run(&mut o, &x, &[("shape", &negative)]).unwrap_err().to_string();
        assert!(e.contains("Please verify the sample of idx 1 passed as the argument `shape`."), "{e}");
        // An empty shape: one element.
        let mut o = op(vec![shape(&[])], &[]).unwrap();
        let y = run(&mut o, &bytes(&[compress(&[7])]), &[]).unwrap();
        assert_eq!((y.ndim(), y.bytes(0)), (0, &[7u8][..]));
    }

    #[test]
    fn argument_errors_are_dalis() {
        let x = bytes(&[vec![1, 2, 3, 4, 5]]);
        let cases: Vec<(Vec<(&str, ArgValue)>, &str)> = vec![
            (vec![list("chunk_sizes", &[6])], "Input chunk size cannot exceed the sample size"),
            (vec![list("chunk_sizes", &[3, 3])], "The sum of chunk sizes for sample of idx 0 exceeds the total size of the sample."),
            (vec![list("chunk_sizes", &[0])], "Got chunk size 0 for sample of idx 0"),
            (vec![list("chunk_sizes", &[3, -1])], "Got chunk size -1 for sample of idx 0"),
            (vec![list("chunk_offsets", &[0, 5])], "Got chunk offset 5 while the sample size is 5 for sample of idx 0"),
            (vec![list("chunk_offsets", &[1, 1])], "The inferred size of a chunk would be non-positive for sample of idx 0"),
            (vec![list("chunk_offsets", &[1, 1]), list("chunk_sizes", &[1, 1, 1])], "for sample of idx 0 there are 2 offsets and 3 sizes"),
            (vec![list("chunk_offsets", &[-5, 0]), list("chunk_sizes", &[5, 5])], "Input chunks offsets must be non-negative"),
            (vec![list("chunk_offsets", &[2]), list("chunk_sizes", &[4])], "Input chunk cannot exceed the sample size"),
            (vec![("layout", ArgValue::Str("AB".into()))], "The layout \"AB\" has a different number of dimensions (2) than the requested output shape (1)."),
        ];
        for (args, want) in cases {
            let e = err(args.into_iter().chain([shape(&[42])]).collect(), &x);
            assert!(e.starts_with("decoders.inflate: argument '") && e.contains(want), "{e}\nwanted: {want}");
        }
        let e = op(vec![shape(&[5]), ("algorithm", ArgValue::Str("".into()))], &[]).err().unwrap().to_string();
        assert!(e.contains("Unknown inflate algorithm \"\"."), "{e}");
        assert!(op(vec![shape(&[5]), ("algorithm", ArgValue::Str("lZ4".into()))], &[]).is_ok());
        for name in ["", "AB"] {
            let e = op(vec![shape(&[5]), ("sequence_axis_name", ArgValue::Str(name.into()))], &[]).err().unwrap().to_string();
            assert!(e.contains(&format!("The `sequence_axis_name` must be a single character, got \"{name}\".")), "{e}");
        }
        let floats = TensorList::from_samples(&[vec![4]], &[vec![1f32, 2., 3., 4.]]);
        assert!(err(vec![shape(&[42])], &floats).contains("Got tensor of type `float` instead."));
        let scalar = TensorList::from_samples(&[vec![]], &[vec![1u8]]);
        assert!(err(vec![shape(&[42])], &scalar).contains("Got input with 0 dimensions instead."));
        let empty = bytes(&[vec![1], vec![]]);
        let e = err(vec![shape(&[1])], &empty);
        assert!(e.contains("sample 1") && e.contains("Input sample cannot be empty, but the sample at index 1 has volume 0."), "{e}");
    }

    #[test]
    fn corrupt_chunks_name_the_sample_and_the_chunk() {
        let good = compress(&[3; 40]);
        let mut bad = Vec::new();
        sequence(&mut bad, &[1, 2], Some((3, 10)));
        sequence(&mut bad, &[], None);
        let x = bytes(&[good.clone(), [good.clone(), bad.clone()].concat()]);
        let sizes = ints(&[vec![good.len() as i32], vec![good.len() as i32, bad.len() as i32]]);
        let mut o = op(vec![shape(&[40])], &["chunk_sizes"]).unwrap();
        let e = run(&mut o, &x, &[("chunk_sizes", &sizes)]).unwrap_err().to_string();
        let want = format!(
            "Error in operator decoders.inflate, sample 1 of iteration 0: chunk 1 (bytes {}..{} of the sample) is not a valid LZ4 block: match offset 3 at byte 3 reaches before the start of the output (2 bytes decoded so far)",
            good.len(),
            good.len() + bad.len()
        );
        assert_eq!(e, want);
        // A block cut short inside its literals.
        let x = bytes(&[good[..good.len() - 2].to_vec()]);
        let e = err(vec![shape(&[40])], &x);
        assert!(e.contains("sample 0") && e.contains("chunk 0") && e.contains("literals at byte"), "{e}");
    }

    #[test]
    fn zero_sized_chunks_and_outputs() {
        // A block of no data, and chunks whose shape holds nothing.
        let x = bytes(&[vec![0x00, 0x00], compress(&[])]);
        let mut o = op(vec![shape(&[0, 3]), list("chunk_sizes", &[1])], &[]).unwrap();
        let y = run(&mut o, &x, &[]).unwrap();
        assert_eq!((y.shape(0), y.shape(1)), (&[1usize, 0, 3][..], &[1usize, 0, 3][..]));
        let e = err(vec![shape(&[0])], &bytes(&[compress(&[1])]));
        assert!(e.contains("it has 0 bytes, but the compressed input expands to 1 bytes"), "{e}");
    }
}
