//! `readers.coco` (legacy `COCOReader`): images and their annotations from a COCO data set,
//! as DALI 2.4 reads them (see [`annotations`] for what is kept and in which order).
//!
//! Outputs: `images` (the files' bytes, UINT8; source info the JSON's `file_name`), `bboxes`
//! (FLOAT `(N, 4)`), `labels` (INT32 `(N,)`), then `polygons` (INT32 `(P, 3)`) and `vertices`
//! (FLOAT `(V, 2)`) with `polygon_masks` (or the deprecated `masks`, whose polygons count
//! coordinates), or `pixelwise_masks` (INT32 `(H, W, 1)`, `HWC`, drawn as [`masks`] says),
//! then `image_ids` (INT32 `(1,)`).
//!
//! The annotations are parsed once, when the pipeline is built (or at first use with
//! `lazy_init`), or loaded from DALI's preprocessed-annotation files; the loader thread reads
//! each batch's image files; `run` assembles the annotation outputs and draws the masks on
//! the pipeline's threads. A missing image fails its batch only.

pub(crate) mod annotations;
pub(crate) mod masks;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use annotations::{Annotations, Options, Wanted};

use super::core::{lazily, BatchSource, ReaderCore};
use super::file::read_whole_files;
use super::{READER_ARGS, SHUFFLE_AFTER_EPOCH_ARGS};
use crate::error::{Error, Location, Result};
use crate::ops::decoders::common::{gib, over_batch_limit};
use crate::ops::{arg, deprecated_arg, Args, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, ReaderMeta, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

const OWN_ARGS: &[crate::ops::ArgSchema] = &[
    arg("file_root", T::Str, D::Optional, "Folder the images' `file_name`s are relative to (required)."),
    arg("annotations_file", T::Str, D::Optional, "The COCO annotations (JSON) file."),
    arg("preprocessed_annotations", T::Str, D::Optional, "Folder of annotations preprocessed and saved earlier (`save_preprocessed_annotations`), read instead of `annotations_file`."),
    arg("ltrb", T::Bool, D::Optional, "Boxes as [left, top, right, bottom] instead of [x, y, width, height] (default False)."),
    arg("ratio", T::Bool, D::Optional, "Boxes and vertices relative to the image's size (default False)."),
    arg("size_threshold", T::Float, D::Optional, "Drop boxes narrower or lower than this, in pixels (default 0.1)."),
    arg("skip_empty", T::Bool, D::Optional, "Leave out images without annotations (default False)."),
    arg("include_iscrowd", T::Bool, D::Bool(true), "Keep annotations marked `iscrowd`."),
    arg("avoid_class_remapping", T::Bool, D::Bool(false), "Labels are the raw category ids, not their 1-based positions in `categories`."),
    arg("polygon_masks", T::Bool, D::Bool(false), "Add the `polygons` ([mask, first vertex, end vertex)) and `vertices` outputs."),
    deprecated_arg(
        "masks",
        T::Bool,
        D::Bool(false),
        "Deprecated: as `polygon_masks`, with polygons counting coordinates (2 per vertex).",
        "Use `polygon_masks` instead. Note that the polygon format has changed ``mask_id, start_coord, end_coord`` to \
         ``mask_id, start_vertex, end_vertex`` where start_coord and end_coord are total number of coordinates, effectly \
         ``start_coord = 2 * start_vertex`` and ``end_coord = 2 * end_vertex``.",
    ),
    arg("pixelwise_masks", T::Bool, D::Bool(false), "Add the `pixelwise_masks` output: the labels drawn, (H, W, 1) INT32."),
    arg("image_ids", T::Bool, D::Bool(false), "Add the `image_ids` output: the JSON's image id."),
    arg("images", T::StrList, D::Optional, "Read only these file names, in this order (names not in the annotations are skipped)."),
    arg("save_preprocessed_annotations", T::Bool, D::Optional, "Save the annotations as kept, preprocessed, into `save_preprocessed_annotations_dir`."),
    arg("save_preprocessed_annotations_dir", T::Str, D::Optional, "Existing folder to save the preprocessed annotations into."),
];

/// Schema and backend.
pub static COCO: OpDef = OpDef {
    schema: OpSchema {
        name: "readers__COCO",
        doc: "Reads a COCO data set: the image files (encoded) with their boxes, labels and, optionally, polygons or pixel-wise masks and image ids.",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 0,
        num_outputs: 3,
        host_inputs: &[],
        args: &[OWN_ARGS, SHUFFLE_AFTER_EPOCH_ARGS, READER_ARGS],
        arg_aliases: &[
            ("save_img_ids", "image_ids"),
            ("dump_meta_files", "save_preprocessed_annotations"),
            ("dump_meta_files_path", "save_preprocessed_annotations_dir"),
            ("meta_files_path", "preprocessed_annotations"),
        ],
        legacy_names: &[("COCOReader", None)],
        is_reader: true,
        is_random: true,
    },
    cpu: Some(|ctx| lazily(ctx, |ctx| Ok(Box::new(CocoReader::new(ctx)?)))),
    mixed: None,
    gpu: None,
};

/// Outputs of an instance: images, bboxes, labels, then the optional ones.
pub fn num_outputs(args: &Args) -> usize {
    let polygons = args.bool("polygon_masks") || args.bool("masks");
    3 + 2 * polygons as usize + args.bool("pixelwise_masks") as usize + args.bool("image_ids") as usize
}

/// Arguments that have no meaning with preprocessed annotations (DALI refuses them given).
const NOT_WITH_PREPROCESSED: &[&str] = &["annotations_file", "skip_empty", "ratio", "ltrb", "images", "size_threshold"];

fn load_annotations(ctx: &OpContext, storage: &crate::storage::Options, wanted: Wanted) -> Result<Annotations> {
    let op = ctx.display_name.as_str();
    let a = &ctx.args;
    if let Some(dir) = a.opt_str("preprocessed_annotations") {
        if let Some(bad) = NOT_WITH_PREPROCESSED.iter().find(|n| a.has(n)) {
            return Err(Error::arg(op, bad, format!("When reading data from preprocessed annotation files, \"{bad}\" is not supported.")));
        }
        return annotations::load(Path::new(dir), wanted).map_err(|m| Error::io(op, dir, m));
    }
    let Some(path) = a.opt_str("annotations_file") else {
        return Err(Error::arg(op, "annotations_file", "Either ``annotations_file`` or ``preprocessed_annotations`` must be provided"));
    };
    let images = a.has("images").then(|| a.strs("images").to_vec()).filter(|l| !l.is_empty());
    let opts = Options {
        ltrb: a.has("ltrb") && a.bool("ltrb"),
        ratio: a.has("ratio") && a.bool("ratio"),
        skip_empty: a.has("skip_empty") && a.bool("skip_empty"),
        size_threshold: a.opt_float("size_threshold").unwrap_or(0.1) as f32,
        include_iscrowd: a.bool("include_iscrowd"),
        avoid_class_remapping: a.bool("avoid_class_remapping"),
        images,
        wanted,
    };
    let ann = annotations::parse(Path::new(path), storage, &opts).map_err(|e| {
        if e.value_error {
            Error::type_mismatch(op, format!("{path}: {}", e.message))
        } else {
            Error::io(op, path, e.message)
        }
    })?;
    if a.has("save_preprocessed_annotations") && a.bool("save_preprocessed_annotations") {
        let dir = a.str("save_preprocessed_annotations_dir");
        annotations::save(&ann, Path::new(dir)).map_err(|m| Error::io(op, dir, m))?;
    }
    Ok(ann)
}

/// What the outputs are.
#[derive(Clone, Copy)]
struct Outputs {
    polygons: bool,
    /// `masks`: polygon ends count coordinates.
    coordinates: bool,
    pixelwise: bool,
    image_ids: bool,
    ratio: bool,
}

struct CocoReader {
    ctx: OpContext,
    core: ReaderCore<(TensorList, Vec<usize>)>,
    ann: Arc<Annotations>,
    out: Outputs,
}

impl CocoReader {
    fn new(ctx: &OpContext) -> Result<CocoReader> {
        let op = ctx.display_name.as_str();
        let a = &ctx.args;
        let Some(root) = a.opt_str("file_root") else {
            return Err(Error::arg(op, "file_root", "``file_root`` argument is required when not using ``files`` or ``file_list``."));
        };
        let out = Outputs {
            polygons: a.bool("polygon_masks") || a.bool("masks"),
            coordinates: a.bool("masks"),
            pixelwise: a.bool("pixelwise_masks"),
            image_ids: a.bool("image_ids"),
            ratio: a.has("ratio") && a.bool("ratio"),
        };
        if out.polygons && out.pixelwise {
            return Err(Error::arg(op, "pixelwise_masks", "``pixelwise_masks`` and ``polygon_masks`` are mutually exclusive"));
        }
        if a.has("save_preprocessed_annotations") != a.has("save_preprocessed_annotations_dir") {
            return Err(Error::arg(op, "save_preprocessed_annotations", "``save_preprocessed_annotations`` and ``save_preprocessed_annotations_dir`` should be provided together"));
        }
        if a.bool("skip_cached_images") {
            return Err(Error::arg(op, "skip_cached_images", "COCOReader doesn't support `skip_cached_images` option"));
        }
        if a.bool("shuffle_after_epoch") && a.bool("random_shuffle") {
            return Err(Error::arg(op, "shuffle_after_epoch", "shuffle_after_epoch and random_shuffle cannot be both true"));
        }
        if a.bool("shuffle_after_epoch") && a.bool("stick_to_shard") {
            return Err(Error::arg(op, "shuffle_after_epoch", "shuffle_after_epoch and stick_to_shard cannot be both true"));
        }
        if a.int("shard_id") >= a.int("num_shards") {
            return Err(Error::arg(op, "shard_id", "num_shards needs to be greater than shard_id"));
        }
        let wanted = Wanted { polygons: out.polygons, pixelwise: out.pixelwise, image_ids: out.image_ids };
        let storage = super::file::storage_options(ctx)?;
        let ann = Arc::new(load_annotations(ctx, &storage, wanted)?);
        if ann.len() == 0 {
            return Err(Error::io(op, root, "No files found."));
        }
        let source = ImageFiles { opts: storage, op: op.to_string(), root: PathBuf::from(root), ann: ann.clone(), read_threads: ctx.num_threads, sizes: Vec::new() };
        let core = ReaderCore::start(ctx, ann.len(), source)?;
        Ok(CocoReader { ctx: ctx.clone(), core, ann, out })
    }
}

/// The loader thread's side: the batch's image files, read whole.
struct ImageFiles {
    opts: crate::storage::Options,
    op: String,
    root: PathBuf,
    ann: Arc<Annotations>,
    read_threads: usize,
    sizes: Vec<usize>,
}

impl BatchSource for ImageFiles {
    type Batch = (TensorList, Vec<usize>);

    /// `random_shuffle` shuffles the whole list first, as DALI's COCO reader does.
    fn shuffles_whole_list(&self) -> bool {
        true
    }

    fn read_ahead(&mut self, idx: &[usize]) {
        // Joined only for a root in object storage (a local root's files need no read-ahead).
        if crate::storage::is_object_uri(&self.root.to_string_lossy()) {
            let paths: Vec<PathBuf> = idx.iter().map(|&k| self.root.join(&self.ann.file_names[k])).collect();
            super::file::read_ahead_files(paths.iter().map(PathBuf::as_path), &self.opts);
        }
    }

    fn read(&mut self, idx: &[usize], batch_no: u64, stop: &AtomicBool) -> Result<(TensorList, Vec<usize>)> {
        // An absolute file_name replaces the root (as DALI joins them).
        let paths: Vec<PathBuf> = idx.iter().map(|&k| self.root.join(&self.ann.file_names[k])).collect();
        let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        let failed = |i: usize, m: String| {
            Error::data(Location { operator: self.op.clone(), sample: Some(i), iteration: Some(batch_no), source: Some(paths[i].display().to_string()) }, m)
        };
        let mut images = read_whole_files(&refs, &self.opts, &mut self.sizes, self.read_threads, stop, failed)?;
        images.set_source_info(idx.iter().map(|&k| Arc::from(self.ann.file_names[k].as_str())).collect());
        Ok((images, idx.to_vec()))
    }
}

/// Pixelwise masks are as large as the images the annotations declare, which a hostile file
/// may make anything: each is held to the decoders' limits (sides of at most
/// `sluice_codecs::MAX_DIMENSION`, `MAX_OUTPUT_BYTES` a mask) and the batch to theirs
/// ([`over_batch_limit`]), before anything is allocated. `fail(i, m)` makes sample `i`'s error.
fn check_mask_sizes(shapes: &[[usize; 3]], fail: impl Fn(usize, String) -> Error) -> Result<()> {
    let max_side = sluice_codecs::MAX_DIMENSION;
    let bytes: Vec<u64> = shapes.iter().map(|s| (s[0] as u64) * (s[1] as u64) * 4).collect();
    for (i, s) in shapes.iter().enumerate() {
        if s[0] > max_side || s[1] > max_side || bytes[i] > sluice_codecs::MAX_OUTPUT_BYTES as u64 {
            return Err(fail(i, format!(
                "the annotations declare the image {} x {} pixels: its mask is past the limits ({max_side} pixels a side, {} GiB a mask)",
                s[1], s[0], sluice_codecs::MAX_OUTPUT_BYTES >> 30
            )));
        }
    }
    match over_batch_limit(&bytes) {
        Some((largest, total, limit)) => Err(fail(largest, format!(
            "the batch's masks would take {:.1} GiB, more than the {:.1} GiB a batch may take (SLUICE_MAX_BATCH_DECODED_BYTES); this image is the largest",
            gib(total), gib(limit)
        ))),
        None => Ok(()),
    }
}

/// A batch of per-sample `(rows, cols)` arrays, one `T` (`cols` values) per row.
fn rows<T: bytemuck::Pod>(dtype: DType, cols: usize, per_sample: &[&[T]]) -> TensorList {
    let shapes: Vec<[usize; 2]> = per_sample.iter().map(|s| [s.len(), cols]).collect();
    let mut t = TensorList::for_overwrite(BatchMeta::new(dtype, 2, shapes.iter().map(|s| &s[..])));
    for (dst, src) in t.samples_mut().into_iter().zip(per_sample) {
        dst.copy_from_slice(bytemuck::cast_slice(src));
    }
    t
}

impl CocoReader {
    /// Sample `k`'s mask, drawn into `out` (`h * w` labels).
    fn draw_mask(&self, k: usize, out: &mut [i32]) -> std::result::Result<(), String> {
        let a = &*self.ann;
        let (h, w) = (a.heights[k] as usize, a.widths[k] as usize);
        let anns = a.annotations_of(k);
        let labels = &a.labels[anns];
        let (fw, fh) = (w as f32, h as f32);
        // Per label: its last RLE, replaced by the union of its polygons if it has any.
        let mut by_label: std::collections::BTreeMap<i32, (Option<Vec<u32>>, Vec<Vec<u32>>)> = labels.iter().map(|&l| (l, (None, Vec::new()))).collect();
        for r in &a.rles[a.rles_of(k)] {
            let label = *labels.get(r.mask_idx as usize).ok_or("a mask belongs to no annotation")?;
            let total: u64 = r.runs.iter().map(|&c| u64::from(c)).sum();
            if total != (h * w) as u64 {
                return Err(format!("an RLE mask covers {total} pixels, its image {h}x{w} has {}", h * w));
            }
            by_label.get_mut(&label).expect("every label listed").0 = Some(r.runs.clone());
        }
        let vertices = &a.vertices[a.vertices_of(k)];
        let mut xy = Vec::new();
        for p in &a.polygons[a.polygons_of(k)] {
            let label = *labels.get(p[0] as usize).ok_or("a polygon belongs to no annotation")?;
            xy.clear();
            for v in &vertices[p[1] as usize..p[2] as usize] {
                let (x, y) = if self.out.ratio { (v[0] * fw, v[1] * fh) } else { (v[0], v[1]) };
                xy.extend([f64::from(x), f64::from(y)]);
            }
            let runs = masks::rle_from_polygon(&xy, h, w)?;
            by_label.get_mut(&label).expect("every label listed").1.push(runs);
        }
        let merged: Vec<(i32, Vec<u32>)> = by_label
            .into_iter()
            .filter_map(|(label, (rle, polys))| {
                let runs = if polys.is_empty() { rle? } else { masks::rle_union(&polys) };
                (!runs.is_empty()).then_some((label, runs))
            })
            .collect();
        let label_masks: Vec<masks::LabelMask> = merged.iter().map(|(label, runs)| masks::LabelMask { label: *label, runs }).collect();
        masks::draw_labels(&label_masks, h, w, out);
        Ok(())
    }
}

impl Operator for CocoReader {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let (images, idx) = self.core.next(ws.iteration)?;
        let a = &*self.ann;
        let boxes: Vec<&[[f32; 4]]> = idx.iter().map(|&k| &a.boxes[a.annotations_of(k)]).collect();
        let labels: Vec<&[i32]> = idx.iter().map(|&k| &a.labels[a.annotations_of(k)]).collect();
        let mut outs = vec![images, rows(DType::F32, 4, &boxes)];
        let label_shapes: Vec<usize> = labels.iter().map(|l| l.len()).collect();
        let mut label_out = TensorList::for_overwrite(BatchMeta::new(DType::I32, 1, label_shapes.chunks(1)));
        for (dst, src) in label_out.samples_mut().into_iter().zip(&labels) {
            dst.copy_from_slice(bytemuck::cast_slice(src));
        }
        outs.push(label_out);
        if self.out.polygons {
            let polys: Vec<&[[i32; 3]]> = idx.iter().map(|&k| &a.polygons[a.polygons_of(k)]).collect();
            let mut polys = rows(DType::I32, 3, &polys);
            if self.out.coordinates {
                // `masks`: the polygons' ends count coordinates, two per vertex.
                for sample in polys.samples_mut() {
                    for p in bytemuck::cast_slice_mut::<u8, [i32; 3]>(sample) {
                        p[1] *= 2;
                        p[2] *= 2;
                    }
                }
            }
            outs.push(polys);
            let verts: Vec<&[[f32; 2]]> = idx.iter().map(|&k| &a.vertices[a.vertices_of(k)]).collect();
            outs.push(rows(DType::F32, 2, &verts));
        }
        if self.out.pixelwise {
            let shapes: Vec<[usize; 3]> = idx.iter().map(|&k| [a.heights[k].max(0) as usize, a.widths[k].max(0) as usize, 1]).collect();
            let source = |i: usize| a.file_names[idx[i]].clone();
            check_mask_sizes(&shapes, |i, m| Error::data(self.ctx.at(ws.iteration, i, &source(i)), m))?;
            let mut masks_out = TensorList::for_overwrite(BatchMeta::new(DType::I32, 3, shapes.iter().map(|s| &s[..])));
            masks_out.set_layout("HWC".into());
            crate::ops::for_each_sample(ws.pool, &mut masks_out, |i, dst| {
                self.draw_mask(idx[i], bytemuck::cast_slice_mut(dst)).map_err(|m| Error::data(self.ctx.at(ws.iteration, i, &source(i)), m))
            })?;
            outs.push(masks_out);
        }
        if self.out.image_ids {
            let mut ids = TensorList::uniform(DType::I32, &[1], idx.len());
            for (i, &k) in idx.iter().enumerate() {
                ids.sample_mut::<i32>(i)[0] = a.ids[k];
            }
            outs.push(ids);
        }
        Ok(outs)
    }

    fn reader_meta(&self) -> Option<ReaderMeta> {
        Some(self.core.meta())
    }

    fn skipped(&self) -> Option<Arc<super::skip::Skipped>> {
        Some(self.core.skipped())
    }

    fn batch_plan(&self) -> Option<Arc<std::sync::Mutex<super::loader::BatchPlan>>> {
        self.core.plan()
    }
}
