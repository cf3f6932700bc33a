//! `readers.tfrecord`: `tf.train.Example` records of TFRecord files located by their index
//! files (`tfrecord2idx`: one `offset size` line per record), one output per requested
//! feature. The Python front end turns DALI's `features` dictionary
//! (`tfrecord.FixedLenFeature` / `VarLenFeature`) into the hidden `_feature_*` lists; the
//! outputs come back as a dictionary keyed by feature name.
//!
//! Outputs, as DALI 2.4: `int64` features are INT64, `float32` FLOAT, `string` the bytes of
//! the list's first value as UINT8 (strings only as a scalar fixed-length feature or a
//! variable-length one). A fixed-length feature has its shape; a variable-length one is 1-D,
//! or `[n, *partial_shape]` with `n` inferred. A feature a record does not hold gives its
//! `default_value` in the feature's shape (fixed length) or no values (variable length).
//!
//! Records are read whole (framing and both masked CRC-32C checked: DALI does not check
//! them), their Examples decoded without a protobuf library; the record's samples of every
//! feature go into one allocation per output. A record that cannot be read or decoded fails
//! its batch with an error naming the file, the record and its offset; the next batch reads on.

pub mod example;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use self::example::Values;
use super::core::{lazily, read_ahead_spans, read_in_parallel, read_spans, BatchSource, ReaderCore};
use super::{READER_ARGS, SHUFFLE_AFTER_EPOCH_ARGS};
use crate::storage::{self, Source};
use crate::error::{Error, Location, Result};
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema};
use crate::tensor::{BatchMeta, DType, TensorList};

const OWN_ARGS: &[crate::ops::ArgSchema] = &[
    arg("path", T::StrList, D::Required, "Paths of the TFRecord files."),
    arg("index_path", T::StrList, D::Required, "Paths of their index files (`python -m sluice.tools.tfrecord2idx`), one per file, in the same order."),
    arg("use_o_direct", T::Bool, D::Bool(false), "Accepted for DALI compatibility (needs dont_use_mmap=True); Sluice reads with plain I/O."),
    arg("_feature_names", T::StrList, D::Required, "Set from `features`: the names of the features to output, in order."),
    arg("_feature_kinds", T::StrList, D::Required, "Set from `features`: \"fixed\" or \"var\" per feature."),
    arg("_feature_types", T::StrList, D::Required, "Set from `features`: \"int64\", \"float32\" or \"string\" per feature."),
    arg("_feature_shapes", T::StrList, D::Required, "Set from `features`: the (partial) shape per feature, extents separated by commas."),
    arg("_feature_defaults", T::StrList, D::Required, "Set from `features`: the default value per feature (\"v:\" and the value; \"\" for none)."),
];

/// Schema and backend.
pub static TFRECORD: OpDef = OpDef {
    schema: OpSchema {
        name: "readers__TFRecord",
        doc: "Reads tf.train.Example records from TFRecord files: one output per feature of `features` (a dictionary of \
              sluice.tfrecord.FixedLenFeature / VarLenFeature), returned as a dictionary keyed by feature name.",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 0,
        // The real count is the number of features (`CheckedOp::num_outputs`).
        num_outputs: 1,
        host_inputs: &[],
        args: &[OWN_ARGS, SHUFFLE_AFTER_EPOCH_ARGS, READER_ARGS],
        arg_aliases: &[],
        legacy_names: &[("TFRecordReader", None)],
        is_reader: true,
        is_random: true,
    },
    cpu: Some(|ctx| lazily(ctx, |ctx| Ok(Box::new(tfrecord_reader(ctx)?)))),
    mixed: None,
    gpu: None,
};

/// The element type of a feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int64,
    Float32,
    String,
}

/// One requested feature.
#[derive(Debug, Clone)]
struct Feature {
    name: String,
    kind: Kind,
    /// Fixed length: the shape. Variable length: the partial shape after the first extent.
    shape: Vec<usize>,
    fixed: bool,
    /// The value of a fixed-length feature a record lacks (one per element, or one for all).
    default: Option<Default>,
}

/// A default value: one value for every element, or one per element.
#[derive(Debug, Clone)]
enum Default {
    Ints(Vec<i64>),
    Floats(Vec<f32>),
    Bytes(Vec<u8>),
}

impl Feature {
    fn dtype(&self) -> DType {
        match self.kind {
            Kind::Int64 => DType::I64,
            Kind::Float32 => DType::F32,
            Kind::String => DType::U8,
        }
    }
}

fn parse_features(ctx: &OpContext) -> Result<Vec<Feature>> {
    let op = ctx.display_name.as_str();
    let a = &ctx.args;
    let names = a.strs("_feature_names");
    let lists = [a.strs("_feature_kinds"), a.strs("_feature_types"), a.strs("_feature_shapes"), a.strs("_feature_defaults")];
    if names.is_empty() {
        return Err(Error::arg(op, "features", "No features provided"));
    }
    if lists.iter().any(|l| l.len() != names.len()) {
        return Err(Error::arg(op, "features", "Number of features needs to match number of feature names."));
    }
    let mut out = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let bad = |m: String| Error::arg(op, "features", format!("feature '{name}': {m}"));
        let kind = match lists[1][i].as_str() {
            "int64" => Kind::Int64,
            "float32" => Kind::Float32,
            "string" => Kind::String,
            t => return Err(bad(format!("unknown type '{t}'"))),
        };
        let fixed = match lists[0][i].as_str() {
            "fixed" => true,
            "var" => false,
            k => return Err(bad(format!("unknown kind '{k}'"))),
        };
        let shape = lists[2][i]
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.trim().parse::<usize>().map_err(|_| bad(format!("bad extent '{s}'"))))
            .collect::<Result<Vec<_>>>()?;
        if kind == Kind::String && (!fixed || shape.iter().product::<usize>() != 1) {
            return Err(bad("Tensors of strings are not supported.".into()));
        }
        // "" for none, else "v:" and the value (so an empty string default is one).
        let default = lists[3][i].strip_prefix("v:");
        let default = if let Some(d) = default {
            let volume: usize = shape.iter().product();
            let d = match kind {
                Kind::Int64 => Default::Ints(d.split(',').map(|v| v.trim().parse().map_err(|_| bad(format!("default value '{v}' is not an integer")))).collect::<Result<_>>()?),
                Kind::Float32 => Default::Floats(d.split(',').map(|v| v.trim().parse().map_err(|_| bad(format!("default value '{v}' is not a number")))).collect::<Result<_>>()?),
                Kind::String => Default::Bytes(d.as_bytes().to_vec()),
            };
            let count = match &d {
                Default::Ints(v) => v.len(),
                Default::Floats(v) => v.len(),
                Default::Bytes(_) => 1,
            };
            if fixed && count != 1 && count != volume {
                return Err(bad(format!("{count} default values for the shape {shape:?}: give one, or one per element")));
            }
            Some(d)
        } else {
            None
        };
        out.push(Feature { name: name.clone(), kind, shape, fixed, default });
    }
    Ok(out)
}

/// Where each record lies: its file and its byte range there.
struct Index {
    paths: Vec<PathBuf>,
    records: Vec<(u32, u64, u64)>,
}

fn read_indexes(ctx: &OpContext, opts: &storage::Options) -> Result<Index> {
    let op = ctx.display_name.as_str();
    let paths: Vec<PathBuf> = ctx.args.strs("path").iter().map(PathBuf::from).collect();
    let indexes = ctx.args.strs("index_path");
    if paths.is_empty() {
        return Err(Error::arg(op, "path", "no TFRecord files given"));
    }
    if indexes.len() != paths.len() {
        return Err(Error::arg(op, "index_path", format!("{} index files for {} TFRecord files: give one per file", indexes.len(), paths.len())));
    }
    let mut records = Vec::new();
    for (f, (path, index)) in paths.iter().zip(indexes).enumerate() {
        let len = storage::size(&path.to_string_lossy(), &opts).map_err(|e| Error::io(op, path.display(), e))?;
        let text = storage::read(index, &opts).map_err(|e| Error::io(op, index, e))?;
        let text = String::from_utf8_lossy(&text);
        // Whitespace-separated `offset size` pairs (one a line as tfrecord2idx writes them;
        // DALI reads the numbers as a stream, so any spacing works).
        let mut numbers = text.split_whitespace();
        while let Some(off) = numbers.next() {
            let parse = |s: &str| s.parse::<u64>().map_err(|_| Error::io(op, index, format!("record {}: {s:?} is not a byte count", records.len() + 1)));
            let off = parse(off)?;
            let size = parse(numbers.next().ok_or_else(|| Error::io(op, index, format!("record {}: an offset without a size", records.len() + 1)))?)?;
            if off.checked_add(size).is_none_or(|end| end > len) {
                return Err(Error::io(op, index, format!(
                    "record at {off} of {size} bytes ends past the end of {} ({len} bytes): the index does not match the file",
                    path.display()
                )));
            }
            records.push((f as u32, off, size));
        }
    }
    if records.is_empty() {
        return Err(Error::io(op, indexes.join(", "), "the index files list no records"));
    }
    Ok(Index { paths, records })
}

/// One feature's values over a batch, flat, with each sample's count.
#[derive(Default)]
struct Gathered {
    ints: Vec<i64>,
    floats: Vec<f32>,
    /// Strings: where each sample's bytes lie in the batch's records (no copy until the output).
    spans: Vec<(usize, usize)>,
    /// Per sample: the values it holds (elements; bytes for strings), or `None` when missing.
    counts: Vec<Option<usize>>,
}

struct TfSource {
    op: String,
    index: Index,
    files: Vec<Source>,
    features: Vec<Feature>,
    read_threads: usize,
    /// The batch's records, back to back (kept between batches).
    scratch: Vec<u8>,
    gathered: Vec<Gathered>,
}

impl TfSource {
    fn loc(&self, batch_no: u64, i: usize, k: usize) -> Location {
        let (f, off, _) = self.index.records[k];
        Location {
            operator: self.op.clone(),
            sample: Some(i),
            iteration: Some(batch_no),
            source: Some(format!("{} (record at byte {off})", self.index.paths[f as usize].display())),
        }
    }

    /// Decodes record `payload` (a slice of `records`) into the gathered values.
    fn gather(&mut self, records: &[u8], payload: &[u8]) -> std::result::Result<(), String> {
        for g in &mut self.gathered {
            g.counts.push(None);
        }
        let (features, gathered) = (&self.features, &mut self.gathered);
        let mut failure = None;
        example::for_each_feature(payload, |name, values| {
            let Some(j) = features.iter().position(|f| f.name.as_bytes() == name) else { return };
            let (f, g) = (&features[j], &mut gathered[j]);
            let r = match (f.kind, values) {
                (Kind::Int64, Values::Ints(l)) => {
                    let before = g.ints.len();
                    example::ints(l, &mut g.ints).map(|_| g.ints.len() - before)
                }
                (Kind::Float32, Values::Floats(l)) => {
                    let before = g.floats.len();
                    example::floats(l, &mut g.floats).map(|_| g.floats.len() - before)
                }
                (Kind::String, Values::Bytes(l)) => match example::bytes_items(l).next() {
                    Some(Ok(b)) => {
                        g.spans.push((b.as_ptr() as usize - records.as_ptr() as usize, b.len()));
                        Ok(b.len())
                    }
                    Some(Err(e)) => Err(e),
                    None => {
                        g.spans.push((0, 0));
                        Ok(0)
                    }
                },
                // A list of another type than asked for holds no values of that type.
                (Kind::String, _) => {
                    g.spans.push((0, 0));
                    Ok(0)
                }
                _ => Ok(0),
            };
            match r {
                Ok(n) => *g.counts.last_mut().expect("pushed above") = Some(n),
                Err(e) => failure = failure.take().or(Some(e)),
            }
        })?;
        failure.map_or(Ok(()), Err)
    }

    /// The output of feature `j` for the gathered samples.
    fn output(&self, j: usize, idx: &[usize], batch_no: u64, records: &[u8]) -> Result<TensorList> {
        let (f, g) = (&self.features[j], &self.gathered[j]);
        let elem_shape: usize = f.shape.iter().product();
        let ndim = if f.fixed { if f.kind == Kind::String { 1 } else { f.shape.len() } } else { 1 + f.shape.len() };
        let mut shapes = Vec::with_capacity(idx.len() * ndim);
        for (i, count) in g.counts.iter().enumerate() {
            let err = |m: String| Error::data(self.loc(batch_no, i, idx[i]), format!("feature '{}': {m}", f.name));
            match (f.fixed, f.kind, count) {
                (true, Kind::String, Some(n)) => shapes.push(*n),
                (true, Kind::String, None) => match &f.default {
                    Some(Default::Bytes(b)) => shapes.push(b.len()),
                    _ => return Err(err("the record does not hold this feature, which has no default value".into())),
                },
                (true, _, Some(n)) if *n == elem_shape => shapes.extend_from_slice(&f.shape),
                (true, _, Some(n)) => return Err(err(format!("{n} values for a fixed-length feature of shape {:?} ({elem_shape} values)", f.shape))),
                (true, _, None) if f.default.is_some() => shapes.extend_from_slice(&f.shape),
                (true, _, None) => return Err(err("the record does not hold this feature, which has no default value".into())),
                (false, _, n) => {
                    let n = n.unwrap_or(0);
                    if elem_shape == 0 || n % elem_shape != 0 {
                        return Err(err(format!("Feature size not matching partial shape: {n} values for a partial shape {:?}", f.shape)));
                    }
                    shapes.push(n / elem_shape);
                    shapes.extend_from_slice(&f.shape);
                }
            }
        }
        let mut out = TensorList::for_overwrite(BatchMeta::new(f.dtype(), ndim, (0..idx.len()).map(|i| &shapes[i * ndim..(i + 1) * ndim])));
        let (mut vi, mut vf, mut vb) = (0usize, 0usize, 0usize); // next int, float, string span
        let mut strings = Vec::new();
        for (dst, count) in out.samples_mut().into_iter().zip(&g.counts) {
            match (count, f.kind) {
                (Some(n), Kind::Int64) => {
                    copy_le(dst, &g.ints[vi..vi + n], i64::to_le_bytes);
                    vi += n;
                }
                (Some(n), Kind::Float32) => {
                    copy_le(dst, &g.floats[vf..vf + n], f32::to_le_bytes);
                    vf += n;
                }
                (Some(_), Kind::String) => {
                    // Copied below, on several threads for large batches.
                    let (at, n) = g.spans[vb];
                    strings.push((dst, at..at + n));
                    vb += 1;
                }
                (None, _) if !f.fixed => {} // a variable-length feature: no values
                (None, _) => match &f.default {
                    Some(Default::Ints(v)) if v.len() == 1 => fill_le(dst, &v[0].to_le_bytes()),
                    Some(Default::Ints(v)) => copy_le(dst, v, i64::to_le_bytes),
                    Some(Default::Floats(v)) if v.len() == 1 => fill_le(dst, &v[0].to_le_bytes()),
                    Some(Default::Floats(v)) => copy_le(dst, v, f32::to_le_bytes),
                    Some(Default::Bytes(b)) => dst.copy_from_slice(b),
                    None => unreachable!("checked when the shapes were made"),
                },
            }
        }
        let total = strings.iter().map(|(d, _)| d.len()).sum();
        read_in_parallel(&mut strings, self.read_threads, total, |(d, _)| d.len(), |(dst, range)| {
            dst.copy_from_slice(&records[range.clone()]);
            Ok(())
        })?;
        out.set_source_info(idx.iter().map(|&k| Arc::from(self.source_info(k).as_str())).collect());
        Ok(out)
    }

    fn source_info(&self, k: usize) -> String {
        let (f, off, _) = self.index.records[k];
        format!("{} at index {off}", self.index.paths[f as usize].display())
    }
}

fn copy_le<T: Copy, const N: usize>(dst: &mut [u8], src: &[T], bytes: fn(T) -> [u8; N]) {
    for (d, &v) in dst.chunks_exact_mut(N).zip(src) {
        d.copy_from_slice(&bytes(v));
    }
}

fn fill_le(dst: &mut [u8], v: &[u8]) {
    for d in dst.chunks_exact_mut(v.len()) {
        d.copy_from_slice(v);
    }
}

impl BatchSource for TfSource {
    type Batch = Vec<TensorList>;

    /// `shuffle_after_epoch` moves whole files, as DALI 2.4's does.
    fn shuffle_groups(&self) -> Option<Vec<usize>> {
        let mut sizes = vec![0usize; self.index.paths.len()];
        for &(f, _, _) in &self.index.records {
            sizes[f as usize] += 1;
        }
        Some(sizes)
    }

    fn read_ahead(&mut self, idx: &[usize]) {
        read_ahead_spans(&self.files, idx, |k| self.index.records[k]);
    }

    fn read(&mut self, idx: &[usize], batch_no: u64, stop: &AtomicBool) -> Result<Vec<TensorList>> {
        let mut scratch = std::mem::take(&mut self.scratch);
        // Each record's framing and CRCs checked on its read thread; decoded below, in order.
        let read = read_spans(
            &self.files,
            idx,
            |k| self.index.records[k],
            &mut scratch,
            self.read_threads,
            stop,
            |i, k, m| Error::data(self.loc(batch_no, i, k), m),
            |record| {
                let data = example::record_payload(record)?;
                let start = data.as_ptr() as usize - record.as_ptr() as usize;
                Ok(start..start + data.len())
            },
        );
        let payloads: Vec<std::ops::Range<usize>> = match read {
            Ok(found) => found.into_iter().map(|(at, r)| at + r.start..at + r.end).collect(),
            Err(e) => {
                self.scratch = scratch;
                return Err(e);
            }
        };
        for g in &mut self.gathered {
            g.ints.clear();
            g.floats.clear();
            g.spans.clear();
            g.counts.clear();
        }
        let result = (|| {
            for (i, (&k, payload)) in idx.iter().zip(&payloads).enumerate() {
                self.gather(&scratch, &scratch[payload.clone()]).map_err(|m| Error::data(self.loc(batch_no, i, k), m))?;
            }
            (0..self.features.len()).map(|j| self.output(j, idx, batch_no, &scratch)).collect()
        })();
        self.scratch = scratch;
        result
    }
}

/// The operator: the reader core over the listed samples.
fn tfrecord_reader(ctx: &OpContext) -> Result<ReaderCore<Vec<TensorList>>> {
    let op = ctx.display_name.as_str();
    if ctx.args.bool("use_o_direct") && !ctx.args.bool("dont_use_mmap") {
        return Err(Error::arg(op, "use_o_direct", "use_o_direct requires dont_use_mmap=True"));
    }
    if ctx.args.bool("skip_cached_images") {
        return Err(Error::arg(op, "skip_cached_images", "TFRecordReader doesn't support `skip_cached_images` option"));
    }
    let features = parse_features(ctx)?;
    let opts = super::file::storage_options(ctx)?;
    let index = read_indexes(ctx, &opts)?;
    let files = index.paths.iter().map(|p| Source::open(&p.to_string_lossy(), &opts).map_err(|e| Error::io(op, p.display(), e))).collect::<Result<Vec<_>>>()?;
    let n = index.records.len();
    let gathered = features.iter().map(|_| Gathered::default()).collect();
    let source = TfSource { op: op.to_string(), index, files, features, read_threads: ctx.num_threads, scratch: Vec::new(), gathered };
    ReaderCore::start(ctx, n, source)
}
