//! `readers.caffe` and `readers.caffe2` (legacy `CaffeReader`, `Caffe2Reader`): records of
//! LMDB databases, Caffe's `Datum` or Caffe2's `TensorProtos` messages, as DALI 2.4 reads
//! them.
//!
//! What the two share lives here: the databases (`path`: LMDB directories, read in the order
//! given, each in key order), the sample numbering over them, the source info (`<path> at key
//! <key>`, on the first output only) and turning each sample's parsed pieces into the batch's
//! outputs. Each format only parses one record into its pieces ([`datum`], [`tensor_protos`]).
//!
//! The databases are opened when the pipeline is built (with `lazy_init` too, as DALI): a
//! missing or foreign database fails `build()`. A record that does not parse fails its batch,
//! naming the database and the key; the next batch reads on.

pub(super) mod datum;
pub(super) mod tensor_protos;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::core::{read_in_parallel, BatchSource, ReaderCore};
use super::lmdb::Lmdb;
use super::READER_ARGS;
use crate::error::{Error, Location, Result};
use crate::ops::{arg, Args, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema};
use crate::tensor::{BatchMeta, DType, TensorList};

pub use tensor_protos::num_outputs as caffe2_num_outputs;

/// Both readers' databases.
const PATH: crate::ops::ArgSchema = arg("path", T::StrList, D::Required, "LMDB directories (each holding data.mdb), read in this order.");

/// Schema and backend of `readers.caffe`.
pub static CAFFE: OpDef = OpDef {
    schema: OpSchema {
        name: "readers__Caffe",
        doc: "Reads (image, label) pairs from a Caffe LMDB: the image's encoded bytes (or raw HWC pixels) as UINT8 and the label as INT32.",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 0,
        num_outputs: 2,
        host_inputs: &[],
        args: &[
            &[
                PATH,
                arg("image_available", T::Bool, D::Bool(true), "Whether the records hold images (the first output)."),
                arg("label_available", T::Bool, D::Bool(true), "Whether the records hold labels (an output after the image)."),
            ],
            READER_ARGS,
        ],
        arg_aliases: &[],
        legacy_names: &[("CaffeReader", None)],
        is_reader: true,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(lmdb_reader(ctx, Format::Caffe(datum::Outputs::from_args(&ctx.args)))?))),
    mixed: None,
    gpu: None,
};

/// Schema and backend of `readers.caffe2`.
pub static CAFFE2: OpDef = OpDef {
    schema: OpSchema {
        name: "readers__Caffe2",
        doc: "Reads sample data from a Caffe2 LMDB: the image, the labels (by `label_type`), `additional_inputs` tensors and a bounding box, in that order.",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 0,
        num_outputs: 2,
        host_inputs: &[],
        args: &[
            &[
                PATH,
                arg("image_available", T::Bool, D::Bool(true), "Whether the records hold an image (their first tensor)."),
                arg("label_type", T::Int, D::Int(0), "0: one label; 1: sparse label indices, output one-hot; 2: a dense label vector; 3: sparse indices with weights; 4: no label."),
                arg("num_labels", T::Int, D::Int(1), "Number of classes (the length of sparse labels' outputs)."),
                arg("additional_inputs", T::Int, D::Int(0), "Tensors that follow the labels in every record, each its own output."),
                arg("bbox", T::Bool, D::Bool(false), "Whether the records end with a bounding box (4 INT32)."),
            ],
            READER_ARGS,
        ],
        arg_aliases: &[],
        legacy_names: &[("Caffe2Reader", None)],
        is_reader: true,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(lmdb_reader(ctx, Format::Caffe2(tensor_protos::Layout::from_args(&ctx.args)))?))),
    mixed: None,
    gpu: None,
};

/// Outputs of a `readers.caffe` instance.
pub fn caffe_num_outputs(args: &Args) -> usize {
    datum::Outputs::from_args(args).count()
}

/// Where a piece of an output sample comes from: the record itself, or bytes made from it.
pub(crate) enum Bytes<'a> {
    Record(&'a [u8]),
    Made(Vec<u8>),
}

/// One output sample of one record.
pub(crate) struct Piece<'a> {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Bytes<'a>,
}

impl<'a> Piece<'a> {
    pub fn record(bytes: &'a [u8], shape: Vec<usize>) -> Piece<'a> {
        Piece { dtype: DType::U8, shape, bytes: Bytes::Record(bytes) }
    }

    pub fn values<V: bytemuck::Pod>(dtype: DType, values: &[V]) -> Piece<'a> {
        Piece { dtype, shape: vec![values.len()], bytes: Bytes::Made(bytemuck::cast_slice(values).to_vec()) }
    }

    fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Record(b) => b,
            Bytes::Made(v) => v,
        }
    }
}

#[derive(Clone, Copy)]
enum Format {
    Caffe(datum::Outputs),
    Caffe2(tensor_protos::Layout),
}

impl Format {
    fn count(&self) -> usize {
        match self {
            Format::Caffe(o) => o.count(),
            Format::Caffe2(l) => l.count(),
        }
    }

    /// Whether the first output is the image (the one output with source info).
    fn has_image(&self) -> bool {
        match self {
            Format::Caffe(o) => o.image,
            Format::Caffe2(l) => l.image,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Format::Caffe(_) => "Caffe",
            Format::Caffe2(_) => "Caffe2",
        }
    }

    /// One record's output samples, in output order (every output filled).
    fn parse<'a>(&self, value: &'a [u8]) -> std::result::Result<Vec<Piece<'a>>, String> {
        match self {
            Format::Caffe(o) => datum::parse(value, *o),
            Format::Caffe2(l) => tensor_protos::parse(value, l),
        }
    }
}

/// The databases of `path` and the samples over them (database, entry), in reading order.
struct Databases {
    paths: Vec<String>,
    dbs: Vec<Lmdb>,
    samples: Vec<(u32, u32)>,
}

impl Databases {
    fn open(ctx: &OpContext) -> Result<Databases> {
        let op = ctx.display_name.as_str();
        let paths = ctx.args.strs("path").to_vec();
        let mut dbs = Vec::with_capacity(paths.len());
        let mut samples = Vec::new();
        for (d, p) in paths.iter().enumerate() {
            let db = Lmdb::open(Path::new(p)).map_err(|m| Error::io(op, p, format!("LMDB Error: {m}")))?;
            let n = u32::try_from(db.len()).map_err(|_| Error::io(op, p, "more than 2^32 records"))?;
            samples.extend((0..n).map(|k| (d as u32, k)));
            dbs.push(db);
        }
        if samples.is_empty() {
            return Err(Error::io(op, paths.join(", "), "no records: the LMDB databases are empty"));
        }
        Ok(Databases { paths, dbs, samples })
    }

    fn value(&self, k: usize) -> &[u8] {
        let (d, e) = self.samples[k];
        self.dbs[d as usize].value(e as usize)
    }

    fn source(&self, k: usize) -> String {
        let (d, e) = self.samples[k];
        format!("{} at key {}", self.paths[d as usize], String::from_utf8_lossy(self.dbs[d as usize].key(e as usize)))
    }
}

struct RecordSource {
    op: String,
    dbs: Arc<Databases>,
    format: Format,
    read_threads: usize,
}

impl BatchSource for RecordSource {
    type Batch = Vec<TensorList>;

    fn read(&mut self, idx: &[usize], batch_no: u64, _stop: &AtomicBool) -> Result<Vec<TensorList>> {
        let dbs = &*self.dbs;
        let failed = |i: usize, k: usize, m: String| {
            Error::data(Location { operator: self.op.clone(), sample: Some(i), iteration: Some(batch_no), source: Some(dbs.source(k)) }, m)
        };
        let n_out = self.format.count();
        // Each record parsed into its output samples (pointing into the database's map).
        let mut per_output: Vec<Vec<Piece>> = (0..n_out).map(|_| Vec::with_capacity(idx.len())).collect();
        for (i, &k) in idx.iter().enumerate() {
            let value = dbs.value(k);
            let pieces = self.format.parse(value).map_err(|m| {
                let m = match m.strip_prefix("parse: ") {
                    Some(why) => format!("Error while parsing {} file: {} (raw data length: {} bytes): {why}", self.format.name(), dbs.source(k), value.len()),
                    None => m,
                };
                failed(i, k, m)
            })?;
            debug_assert_eq!(pieces.len(), n_out);
            for (o, p) in pieces.into_iter().enumerate() {
                per_output[o].push(p);
            }
        }
        let mut outs = Vec::with_capacity(n_out);
        for (o, pieces) in per_output.iter().enumerate() {
            let Some(first) = pieces.first() else {
                outs.push(TensorList::for_overwrite(BatchMeta::new(DType::U8, 1, std::iter::empty::<&[usize]>())));
                continue;
            };
            if let Some(i) = pieces.iter().position(|p| p.dtype != first.dtype || p.shape.len() != first.shape.len()) {
                return Err(failed(i, idx[i], format!(
                    "output {o} of this record is {}-D {}, of the batch's first record {}-D {}: the samples of a batch must agree",
                    pieces[i].shape.len(), pieces[i].dtype, first.shape.len(), first.dtype
                )));
            }
            let mut t = TensorList::for_overwrite(BatchMeta::new(first.dtype, first.shape.len(), pieces.iter().map(|p| &p.shape[..])));
            let total: usize = pieces.iter().map(|p| p.bytes().len()).sum();
            let mut copies: Vec<(&mut [u8], &Piece)> = t.samples_mut().into_iter().zip(pieces).collect();
            // Record bytes live in the map: large batches fault their pages in on several threads.
            read_in_parallel(&mut copies, self.read_threads, total, |c| c.0.len(), |(dst, p)| {
                dst.copy_from_slice(p.bytes());
                Ok(())
            })?;
            if o == 0 && self.format.has_image() {
                t.set_source_info(idx.iter().map(|&k| Arc::from(dbs.source(k).as_str())).collect());
            }
            outs.push(t);
        }
        Ok(outs)
    }
}

fn lmdb_reader(ctx: &OpContext, format: Format) -> Result<ReaderCore<Vec<TensorList>>> {
    let dbs = Arc::new(Databases::open(ctx)?);
    let n = dbs.samples.len();
    let source = RecordSource { op: ctx.display_name.clone(), dbs, format, read_threads: ctx.num_threads };
    ReaderCore::start(ctx, n, source)
}
