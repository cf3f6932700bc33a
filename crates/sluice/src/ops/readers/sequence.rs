//! `readers.sequence` (legacy `SequenceReader`): sequences of frames from a folder of
//! streams, each stream a sub-folder of `file_root` holding one image per frame. As DALI 2.4:
//! * The frames are the files `file_root/*/*` (hidden names excluded; `file_root` may be an
//!   object-storage prefix, which DALI does not read) with an image extension
//!   (case-insensitive), sorted as whole path strings; a stream is a run of one folder's files.
//! * Stream by stream, a sequence starts at every `step`-th frame and takes `sequence_length`
//!   frames `stride` apart; only whole sequences count (a sequence never crosses a stream).
//! * Each output sample is the sequence decoded: UINT8, `FHWC`, in `image_type`; every frame
//!   must decode to the first one's shape. Its source info is empty.
//!
//! The loader thread reads a batch's frame files whole into one allocation; `run` decodes
//! them on the pipeline's threads, one sequence per task, into the batch's one output
//! allocation. A frame that is missing or does not decode fails its batch with an error
//! naming the file; the next batch reads on.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rayon::prelude::*;
use sluice_codecs::{read_info, DecodeParams, ImageInfo};

use super::core::{lazily, BatchSource, ReaderCore};
use super::file::read_whole_files;
use super::READER_ARGS;
use crate::storage;
use crate::error::{Error, Location, Result};
use crate::ops::decoders::common::color_space;
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, ReaderMeta, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

const OWN_ARGS: &[crate::ops::ArgSchema] = &[
    arg("file_root", T::Str, D::Required, "Folder of streams: one sub-folder per stream, one image file per frame."),
    arg("sequence_length", T::Int, D::Required, "Frames per sequence."),
    arg("step", T::Int, D::Int(1), "Frames between the first frames of consecutive sequences of a stream."),
    arg("stride", T::Int, D::Int(1), "Frames between consecutive frames of a sequence."),
    arg("image_type", T::ImageType, D::Int(0), "Color space of the decoded frames: RGB, BGR, GRAY, YCbCr or ANY_DATA."),
];

/// Schema and backend.
pub static SEQUENCE: OpDef = OpDef {
    schema: OpSchema {
        name: "readers__Sequence",
        doc: "Reads sequences of frames from a folder of streams (one sub-folder of image files per stream) and decodes them: UINT8, FHWC.",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 0,
        num_outputs: 1,
        host_inputs: &[],
        args: &[OWN_ARGS, READER_ARGS],
        arg_aliases: &[],
        legacy_names: &[("SequenceReader", None)],
        is_reader: true,
        is_random: true,
    },
    cpu: Some(|ctx| lazily(ctx, |ctx| Ok(Box::new(SequenceReader::new(ctx)?)))),
    mixed: None,
    gpu: None,
};

/// File names DALI takes for frames.
const IMAGE_EXTENSIONS: &[&str] = &[".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".pnm", ".ppm", ".pgm", ".pbm", ".jp2", ".webp"];

/// Every sequence of the dataset: frame `j` of sequence `k` is `frames[starts[k] + j * stride]`.
struct Sequences {
    frames: Vec<PathBuf>,
    starts: Vec<usize>,
    length: usize,
    stride: usize,
}

impl Sequences {
    fn frame(&self, k: usize, j: usize) -> &Path {
        &self.frames[self.starts[k] + j * self.stride]
    }
}

fn positive(op: &str, ctx: &OpContext, name: &str, what: &str) -> Result<usize> {
    let v = ctx.args.int(name);
    if v <= 0 {
        return Err(Error::arg(op, name, format!("{what} must be positive, got {v}")));
    }
    Ok(v as usize)
}

fn list_sequences(ctx: &OpContext, opts: &storage::Options) -> Result<Sequences> {
    let op = ctx.display_name.as_str();
    let length = positive(op, ctx, "sequence_length", "Sequence length")?;
    let step = positive(op, ctx, "step", "Step")?;
    let stride = positive(op, ctx, "stride", "Stride")?;
    let root = ctx.args.str("file_root");
    let list = |dir: &str| storage::list(dir, &opts).map_err(|e| Error::io(op, dir, format!("cannot list the streams: {e}")));
    // (the path string, as DALI sorts it; its stream folder)
    let mut frames: Vec<(String, usize)> = Vec::new();
    let mut streams = 0;
    for stream in list(root)?.dirs {
        if stream.starts_with('.') {
            continue;
        }
        for (frame, _) in list(&format!("{root}/{stream}"))?.files {
            let name = frame.to_lowercase();
            if !frame.starts_with('.') && IMAGE_EXTENSIONS.iter().any(|ext| name.ends_with(ext)) {
                frames.push((format!("{root}/{stream}/{frame}"), streams));
            }
        }
        streams += 1;
    }
    if frames.is_empty() {
        return Err(Error::io(op, root, format!("no frames found: \"{root}/*/*\" matches no image files; check file_root")));
    }
    // Sorted as strings, each stream's frames are one run (they share the prefix "root/stream/").
    frames.sort_unstable();
    let mut starts = Vec::new();
    let mut run = 0;
    while run < frames.len() {
        let n = frames[run..].iter().take_while(|f| f.1 == frames[run].1).count();
        let mut i = 0;
        while i + (length - 1) * stride < n {
            starts.push(run + i);
            i += step;
        }
        run += n;
    }
    if starts.is_empty() {
        return Err(Error::arg(op, "sequence_length", format!(
            "no stream of {root} has enough frames for a sequence of {length} frames {stride} apart"
        )));
    }
    Ok(Sequences { frames: frames.into_iter().map(|f| PathBuf::from(f.0)).collect(), starts, length, stride })
}

/// The loader thread's side: a batch's frame files, read whole (sequence after sequence).
struct FrameFiles {
    op: String,
    opts: storage::Options,
    seqs: Arc<Sequences>,
    read_threads: usize,
    sizes: Vec<usize>,
}

impl BatchSource for FrameFiles {
    type Batch = TensorList;

    /// `random_shuffle` shuffles the whole list first, as DALI's sequence reader does (its sequences).
    fn shuffles_whole_list(&self) -> bool {
        true
    }

    fn read_ahead(&mut self, idx: &[usize]) {
        let (len, seqs) = (self.seqs.length, &*self.seqs);
        super::file::read_ahead_files(idx.iter().flat_map(|&k| (0..len).map(move |j| seqs.frame(k, j))), &self.opts);
    }

    fn read(&mut self, idx: &[usize], batch_no: u64, stop: &AtomicBool) -> Result<TensorList> {
        let (len, seqs) = (self.seqs.length, &*self.seqs);
        let paths: Vec<&Path> = idx.iter().flat_map(|&k| (0..len).map(move |j| seqs.frame(k, j))).collect();
        let failed = |f: usize, m: String| {
            let location = Location { operator: self.op.clone(), sample: Some(f / len), iteration: Some(batch_no), source: Some(paths[f].display().to_string()) };
            Error::data(location, m)
        };
        let mut files = read_whole_files(&paths, &self.opts, &mut self.sizes, self.read_threads, stop, failed)?;
        files.set_source_info(paths.iter().map(|p| Arc::from(p.to_string_lossy().as_ref())).collect());
        Ok(files)
    }
}

struct SequenceReader {
    ctx: OpContext,
    core: ReaderCore<TensorList>,
    length: usize,
    params: DecodeParams,
}

impl SequenceReader {
    fn new(ctx: &OpContext) -> Result<SequenceReader> {
        let op = ctx.display_name.as_str();
        let color = color_space(op, ctx.args.int("image_type")).map_err(|_| Error::arg(op, "image_type", format!("unknown image type {}", ctx.args.int("image_type"))))?;
        // DALI decodes frames with its host decoders as stored: no EXIF orientation.
        let params = DecodeParams { color, adjust_orientation: false, ..DecodeParams::default() };
        let opts = super::file::storage_options(ctx)?;
        let seqs = Arc::new(list_sequences(ctx, &opts)?);
        let (n, length) = (seqs.starts.len(), seqs.length);
        let source = FrameFiles { opts, op: op.to_string(), seqs, read_threads: ctx.num_threads, sizes: Vec::new() };
        Ok(SequenceReader { ctx: ctx.clone(), core: ReaderCore::start(ctx, n, source)?, length, params })
    }
}

impl Operator for SequenceReader {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let files = self.core.next(ws.iteration)?;
        let (len, params) = (self.length, &self.params);
        let failed = |f: usize, m: String| Error::data(self.ctx.at(ws.iteration, f / len, files.source_info(f)), m);
        let infos: Vec<ImageInfo> = ws.pool.install(|| {
            (0..files.len()).into_par_iter().map(|f| read_info(files.bytes(f)).map_err(|e| failed(f, e.to_string()))).collect::<Result<_>>()
        })?;
        // Every frame of a sequence decodes to the first one's shape.
        let mut shapes = Vec::with_capacity(infos.len() / len.max(1));
        for (s, seq) in infos.chunks(len).enumerate() {
            let first = seq[0].output_shape(params);
            if let Some(j) = seq.iter().position(|info| info.output_shape(params) != first) {
                let (h, w, c) = seq[j].output_shape(params);
                return Err(failed(s * len + j, format!(
                    "Expected all frames to have same shape. ({h}, {w}, {c}) != ({}, {}, {}) (frame {j} of the sequence against its first)",
                    first.0, first.1, first.2
                )));
            }
            shapes.push([len, first.0, first.1, first.2]);
        }
        let mut out = TensorList::for_overwrite(BatchMeta::new(DType::U8, 4, shapes.iter().map(|s| &s[..])));
        out.set_layout("FHWC".into());
        crate::ops::for_each_sample(ws.pool, &mut out, |s, dst| {
            let frame_bytes = dst.len() / len;
            for (j, frame) in dst.chunks_exact_mut(frame_bytes).enumerate() {
                let f = s * len + j;
                sluice_codecs::decode_into(files.bytes(f), &infos[f], params, frame).map_err(|e| failed(f, e.to_string()))?;
            }
            Ok(())
        })?;
        Ok(vec![out])
    }

    fn reader_meta(&self) -> Option<ReaderMeta> {
        Some(self.core.meta())
    }

    fn skipped(&self) -> Option<std::sync::Arc<super::skip::Skipped>> {
        Some(self.core.skipped())
    }

    fn batch_plan(&self) -> Option<Arc<std::sync::Mutex<super::loader::BatchPlan>>> {
        self.core.plan()
    }
}
