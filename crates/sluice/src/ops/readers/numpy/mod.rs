//! `readers.numpy`: NumPy `.npy` files, each sample an array of the file's type and shape
//! (layout empty), optionally cut to a region of interest. Checked against DALI 2.4:
//! * Listing: `files` (joined to `file_root` when given), `file_list` (one path per line, the
//!   whole line; relative to `file_root`, else to the list's folder), or `file_root` alone:
//!   the files of `file_root` and of its direct sub-folders whose names match `file_filter`,
//!   folders and files in byte order; names (and source info) are `./name` and `sub/name`.
//! * A batch's samples share type and number of dimensions (an error naming both files
//!   otherwise); batches may differ.
//! * Fortran-order files come out in C order (the array `np.load` gives).
//! * ROI (`roi_start` / `rel_roi_start`, one of `roi_end` / `rel_roi_end` / `roi_shape` /
//!   `rel_roi_shape`, on `roi_axes`, per sample as argument inputs too): relative values times
//!   the extent in float32 (but a relative start plus a relative shape summed in double first),
//!   ends rounded half away from zero; a single value applies to every axis; a region out of
//!   the array follows `out_of_bounds_policy` ("error", "trim_to_shape", or "pad" with
//!   `fill_value` converted with rounding and saturation); an end before the start is an
//!   error whatever the policy.
//!
//! The loader thread parses each file's header, then reads the data of a batch into one
//! allocation (several threads for large batches). With neither ROI nor Fortran-order files
//! that batch is the output as it is; otherwise `run` cuts or reorders it on the workers.
//! A file that cannot be read fails its batch only, with an error naming the file.

pub(crate) mod header;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::core::{lazily, read_in_parallel, BatchSource, ReaderCore};
use crate::storage::{self, Source};
use super::file::glob_match;
use super::loader::BatchPlan;
use super::{READER_ARGS, SHUFFLE_AFTER_EPOCH_ARGS};
use crate::error::{Error, Location, Result};
use crate::ops::crop::crop::crop_nd;
use crate::ops::crop::window::{OobPolicy, Span};
use crate::ops::transpose::{transpose_bytes, MAX_NDIM};
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, ReaderMeta, Workspace, MAX_LIST};
use crate::tensor::element::store_f64;
use crate::tensor::{BatchMeta, DType, TensorList};

const OWN_ARGS: &[crate::ops::ArgSchema] = &[
    arg("file_root", T::Str, D::Optional, "Folder whose .npy files (and those of its direct sub-folders) are read; or the root `files` and `file_list` names are relative to."),
    arg("file_filter", T::Str, D::Str("*.npy"), "Glob pattern the names of files found under `file_root` must match."),
    arg("files", T::StrList, D::Optional, "Paths of the files to read (relative to `file_root` when given). Not with `file_list`."),
    arg("file_list", T::Str, D::Optional, "Text file with one path per line (relative to `file_root`, else to the list's folder)."),
    tensor_arg("roi_start", T::IntList, D::Optional, "Start of the region of interest, in elements, per axis of `roi_axes`."),
    tensor_arg("rel_roi_start", T::FloatList, D::Optional, "Start of the region of interest as a fraction of each extent."),
    tensor_arg("roi_end", T::IntList, D::Optional, "End (exclusive) of the region of interest, in elements."),
    tensor_arg("rel_roi_end", T::FloatList, D::Optional, "End of the region of interest as a fraction of each extent."),
    tensor_arg("roi_shape", T::IntList, D::Optional, "Extent of the region of interest, in elements."),
    tensor_arg("rel_roi_shape", T::FloatList, D::Optional, "Extent of the region of interest as a fraction of each extent."),
    arg("roi_axes", T::IntList, D::IntList(&[]), "Axes the ROI arguments describe, in their order (negative counts from the back); all axes when empty."),
    arg("out_of_bounds_policy", T::Str, D::Str("error"), "A region leaving the array: \"error\", \"trim_to_shape\" or \"pad\" (with `fill_value`)."),
    arg("fill_value", T::Float, D::Float(0.0), "Value of the elements outside the array with out_of_bounds_policy=\"pad\"."),
    arg("use_o_direct", T::Bool, D::Bool(false), "Accepted for DALI compatibility (needs dont_use_mmap=True); Sluice reads with plain I/O."),
    arg("cache_header_information", T::Bool, D::Bool(false), "Accepted for DALI compatibility; headers are parsed as files are read."),
    arg("register_buffers", T::Bool, D::Bool(true), "GPU reader only in DALI; no effect here."),
];

/// Schema and backends.
pub static NUMPY: OpDef = OpDef {
    schema: OpSchema {
        name: "readers__Numpy",
        doc: "Reads NumPy arrays from .npy files: each sample is the file's array (its type and shape, C order), or a region of it.",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 0,
        num_outputs: 1,
        host_inputs: &[],
        args: &[OWN_ARGS, SHUFFLE_AFTER_EPOCH_ARGS, READER_ARGS],
        arg_aliases: &[],
        legacy_names: &[("NumpyReader", None)],
        is_reader: true,
        is_random: true,
    },
    cpu: Some(|ctx| lazily(ctx, |ctx| Ok(Box::new(NumpyReader::new(ctx)?)))),
    mixed: None,
    gpu: None,
};

/// The ROI arguments, in the order their values are read.
const ROI_ARGS: [&str; 6] = ["roi_start", "rel_roi_start", "roi_end", "rel_roi_end", "roi_shape", "rel_roi_shape"];

/// The listed files: names as DALI reports them and the paths they are read from.
struct Listing {
    names: Vec<Arc<str>>,
    paths: Vec<PathBuf>,
}

fn list_files(ctx: &OpContext, opts: &storage::Options) -> Result<Listing> {
    let op = ctx.display_name.as_str();
    let a = &ctx.args;
    let root = a.opt_str("file_root").map(PathBuf::from);
    let mut names = Vec::new();
    if a.has("files") && a.has("file_list") {
        return Err(Error::arg(op, "file_list", "File paths can be provided through ``files`` or ``file_list`` but not both."));
    }
    let base = if a.has("files") {
        names = a.strs("files").to_vec();
        if names.is_empty() {
            return Err(Error::arg(op, "files", "``files`` specified an empty list."));
        }
        root.clone().unwrap_or_default()
    } else if a.has("file_list") {
        let list = PathBuf::from(a.str("file_list"));
        let text = storage::read(a.str("file_list"), &opts).map_err(|e| Error::io(op, list.display(), format!("Cannot open: {e}")))?;
        let text = String::from_utf8_lossy(&text);
        names = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).filter(|l| !l.is_empty()).map(String::from).collect();
        root.clone().unwrap_or_else(|| list.parent().map(Path::to_path_buf).unwrap_or_default())
    } else {
        let Some(root) = root.clone() else {
            return Err(Error::arg(op, "file_root", "``file_root`` argument is required when not using ``files`` or ``file_list``."));
        };
        discover(op, &opts, &root, a.str("file_filter"), &mut names)?;
        root
    };
    if names.is_empty() {
        return Err(Error::io(op, base.display(), "No files found."));
    }
    let paths = names.iter().map(|n| base.join(n.strip_prefix("./").unwrap_or(n))).collect();
    Ok(Listing { names: names.into_iter().map(Arc::from).collect(), paths })
}

/// The files of `root` and of its direct sub-folders whose names match `filter`, in byte
/// order (folders too), named `./name` and `sub/name`.
fn discover(op: &str, opts: &storage::Options, root: &Path, filter: &str, names: &mut Vec<String>) -> Result<()> {
    let entries = |dir: &Path| -> Result<Vec<(String, bool)>> {
        let dir_str = dir.to_string_lossy();
        let l = storage::list(&dir_str, opts).map_err(|e| Error::io(op, &dir_str, format!("Failed to open {dir_str}: {e}")))?;
        let mut v: Vec<(String, bool)> = l.dirs.into_iter().map(|d| (d, true)).chain(l.files.into_iter().map(|(f, _)| (f, false))).collect();
        v.sort();
        Ok(v)
    };
    let top = entries(root)?;
    names.extend(top.iter().filter(|(n, d)| !d && glob_match(filter, n, true)).map(|(n, _)| format!("./{n}")));
    for (dir, _) in top.iter().filter(|(_, d)| *d) {
        for (n, is_dir) in entries(&root.join(dir))? {
            if !is_dir && glob_match(filter, &n, true) {
                names.push(format!("{dir}/{n}"));
            }
        }
    }
    Ok(())
}

/// A batch as the loader read it: the arrays as stored (Fortran-order ones with their
/// extents reversed), and which are in Fortran order.
struct StoredBatch {
    data: TensorList,
    fortran: Vec<bool>,
}

struct NpySource {
    op: String,
    files: Listing,
    /// The files are objects in storage.
    remote: bool,
    opts: storage::Options,
    read_threads: usize,
}

impl NpySource {
    fn loc(&self, batch_no: u64, i: usize, k: usize) -> Location {
        Location { operator: self.op.clone(), sample: Some(i), iteration: Some(batch_no), source: Some(self.files.paths[k].display().to_string()) }
    }

    /// Parses the header of file `k` (`f`: the file, or the object fetched); checks the file
    /// holds the data it announces.
    fn open(&self, k: usize, f: Source) -> std::result::Result<(Source, header::Header), String> {
        let path = &self.files.paths[k];
        let len = f.len();
        let mut pre = [0u8; header::PREAMBLE];
        let got = f.read_at_most(&mut pre, 0)?;
        let (start, hlen) = header::header_extent(&pre[..got]).map_err(|m| format!("{m} File: {}", self.files.names[k]))?;
        if (start + hlen) as u64 > len {
            return Err(format!("Error extracting header length: the header needs {} bytes, the file has {len}. File: {}", start + hlen, self.files.names[k]));
        }
        let mut text = vec![0u8; hlen];
        f.read_exact_at(&mut text, start as u64, "the header")?;
        let h = header::parse(&text, start).map_err(|m| format!("{m} File: {}", self.files.names[k]))?;
        let have = len.saturating_sub(h.data_offset as u64);
        if have < h.data_len as u64 {
            return Err(format!("Failed to read file: {}, read: {have} while it should be {}", path.display(), h.data_len));
        }
        Ok((f, h))
    }
}

impl BatchSource for NpySource {
    type Batch = StoredBatch;

    /// `random_shuffle` shuffles the whole list first, as DALI's numpy reader (its file loader) does.
    fn shuffles_whole_list(&self) -> bool {
        true
    }

    fn read_ahead(&mut self, idx: &[usize]) {
        if self.remote {
            super::file::read_ahead_files(idx.iter().map(|&k| self.files.paths[k].as_path()), &self.opts);
        }
    }

    fn read(&mut self, idx: &[usize], batch_no: u64, stop: &AtomicBool) -> Result<StoredBatch> {
        // Objects in storage are fetched whole, all of the batch's at once; files are opened.
        let mut fetched: Vec<Option<Source>> = (0..idx.len()).map(|_| None).collect();
        if self.remote {
            let uris: Vec<String> = idx.iter().map(|&k| self.files.paths[k].to_string_lossy().into_owned()).collect();
            let refs: Vec<&str> = uris.iter().map(String::as_str).collect();
            storage::fetch(&refs, &self.opts, |i, b| fetched[i] = Some(Source::Fetched(b))).map_err(|(i, m)| Error::data(self.loc(batch_no, i, idx[i]), m))?;
        }
        let mut opened = Vec::with_capacity(idx.len());
        for (i, &k) in idx.iter().enumerate() {
            let blob = match fetched[i].take() {
                Some(b) => b,
                None => {
                    let path = &self.files.paths[k];
                    Source::open(&path.to_string_lossy(), &self.opts).map_err(|e| Error::data(self.loc(batch_no, i, k), format!("Could not open file {}: {e}", path.display())))?
                }
            };
            let (f, h) = self.open(k, blob).map_err(|m| Error::data(self.loc(batch_no, i, k), m))?;
            if let Some((_, first)) = opened.first() {
                let first: &header::Header = first;
                let (p0, pi) = (self.files.paths[idx[0]].display(), self.files.paths[k].display());
                if h.dtype != first.dtype {
                    return Err(Error::data(self.loc(batch_no, i, k), format!(
                        "Inconsistent data: All samples in the batch must have the same data type. Got \"{p0}\" with data type {} and \"{pi}\" with data type {}",
                        first.dtype.dali_name(), h.dtype.dali_name())));
                }
                if h.shape.len() != first.shape.len() {
                    return Err(Error::data(self.loc(batch_no, i, k), format!(
                        "Inconsistent data: All samples in the batch must have the same number of dimensions. Got \"{p0}\" with {} dimensions and \"{pi}\" with {} dimensions",
                        first.shape.len(), h.shape.len())));
                }
            }
            opened.push((f, h));
        }
        let (dtype, ndim) = opened.first().map_or((DType::U8, 0), |(_, h)| (h.dtype, h.shape.len()));
        // Stored extents: a Fortran-order array is its reversed shape in C order.
        let stored: Vec<Vec<usize>> =
            opened.iter().map(|(_, h)| if h.fortran_order { h.shape.iter().rev().copied().collect() } else { h.shape.clone() }).collect();
        let mut data = TensorList::for_overwrite(BatchMeta::new(dtype, ndim, stored.iter().map(Vec::as_slice)));
        let total = data.total_bytes();
        {
            let mut slots: Vec<(usize, &mut [u8])> = data.samples_mut().into_iter().enumerate().collect();
            read_in_parallel(&mut slots, self.read_threads, total, |s| s.1.len(), |(i, dst)| {
                if stop.load(Ordering::Relaxed) {
                    return Err(Error::Unsupported(format!("{}: stopped", self.op)));
                }
                let (f, h) = &opened[*i];
                f.read_exact_at(dst, h.data_offset as u64, "the array").map_err(|m| Error::data(self.loc(batch_no, *i, idx[*i]), m))
            })?;
        }
        data.set_source_info(idx.iter().map(|&k| self.files.names[k].clone()).collect());
        Ok(StoredBatch { data, fortran: opened.iter().map(|(_, h)| h.fortran_order).collect() })
    }
}


/// The operator: the loader thread's batches, cut to the ROI and put in C order.
struct NumpyReader {
    ctx: OpContext,
    core: ReaderCore<StoredBatch>,
    policy: OobPolicy,
    /// Some ROI argument was given (a constant, or an argument input).
    has_roi: bool,
}

impl NumpyReader {
    fn new(ctx: &OpContext) -> Result<NumpyReader> {
        let op = ctx.display_name.as_str();
        let a = &ctx.args;
        let policy = OobPolicy::parse(op, a.str("out_of_bounds_policy")).map_err(|_| {
            Error::arg(op, "out_of_bounds_policy", format!("Not supported out_of_bounds_policy: {}", a.str("out_of_bounds_policy")))
        })?;
        if a.bool("use_o_direct") && !a.bool("dont_use_mmap") {
            return Err(Error::arg(op, "use_o_direct", "use_o_direct requires dont_use_mmap=True"));
        }
        if ctx.given("roi_start") && ctx.given("rel_roi_start") {
            return Err(Error::arg(op, "rel_roi_start", "\"roi_start\" and \"rel_roi_start\" arguments are mutually exclusive"));
        }
        if ROI_ARGS[2..].iter().filter(|n| ctx.given(n)).count() > 1 {
            return Err(Error::arg(op, "roi_end", "\"roi_end\", \"rel_roi_end\", \"roi_shape\", and \"rel_roi_shape\" arguments are mutually exclusive"));
        }
        let has_roi = ROI_ARGS.iter().any(|n| ctx.given(n));
        let opts = super::file::storage_options(ctx)?;
        let files = list_files(ctx, &opts)?;
        let n = files.names.len();
        let remote = files.paths.iter().any(|p| storage::is_object_uri(&p.to_string_lossy()));
        let source = NpySource { op: op.to_string(), files, remote, opts, read_threads: ctx.num_threads };
        Ok(NumpyReader { ctx: ctx.clone(), core: ReaderCore::start(ctx, n, source)?, policy, has_roi })
    }

    /// The window of sample `i` (C-order `shape`), one span per dimension.
    fn window(&self, ws: &Workspace<'_>, i: usize, shape: &[usize], source: &str, spans: &mut Vec<Span>) -> Result<()> {
        let op = self.ctx.display_name.as_str();
        let nd = shape.len();
        spans.clear();
        spans.extend(shape.iter().map(|&e| Span::full(e)));
        if nd == 0 {
            return Ok(()); // a scalar has nothing to cut
        }
        let err = |m: String| Error::data(self.ctx.at(ws.iteration, i, source), m);
        let mut axes = Vec::with_capacity(nd);
        let given_axes = self.ctx.args.ints("roi_axes");
        if given_axes.is_empty() {
            axes.extend(0..nd);
        } else {
            for &a in given_axes {
                let r = if a < 0 { a + nd as i64 } else { a };
                if r < 0 || r >= nd as i64 {
                    return Err(err(format!("Axis {a} out of range. Expected range is [{}, {}] for a {nd}D input", -(nd as i64), nd as i64 - 1)));
                }
                if axes.contains(&(r as usize)) {
                    return Err(err(format!("Axis index {r} occurs more than once in ``axes``")));
                }
                axes.push(r as usize);
            }
        }
        // Each argument's values for this sample: one per axis, or one for all (empty: not given).
        let mut bufs = [[0f64; MAX_LIST]; 6];
        let mut vals: [Option<Vec<f64>>; 6] = Default::default();
        for (k, name) in ROI_ARGS.iter().enumerate() {
            let arg = ws.per_sample_list(&self.ctx, name);
            if let Some(v) = arg.get(op, name, i, &[], &mut bufs[k])? {
                if v.is_empty() {
                    continue;
                }
                if v.len() != 1 && v.len() != axes.len() {
                    return Err(err(format!("Argument \"{name}\" expected shape {} but got {} values", axes.len(), v.len())));
                }
                vals[k] = Some(if v.len() == 1 { vec![v[0]; axes.len()] } else { v.to_vec() });
            }
        }
        let [start, rel_start, end, rel_end, roi_shape, rel_shape] = &vals;
        let (mut anchors, mut shapes) = (Vec::with_capacity(nd), Vec::with_capacity(nd));
        for (j, &ax) in axes.iter().enumerate() {
            let ext = shape[ax];
            // DALI multiplies a relative value by the extent in float32.
            let rel = |v: &Option<Vec<f64>>| v.as_ref().map(|v| (v[j] as f32 * ext as f32) as f64);
            let anchor = start.as_ref().map(|v| v[j]).or(rel(rel_start)).unwrap_or(0.0);
            let end = if let Some(e) = end {
                e[j]
            } else if let Some(e) = rel(rel_end) {
                e
            } else if let Some(s) = roi_shape {
                if s[j] < 0.0 {
                    return Err(err("shape value out of range".into()));
                }
                anchor + s[j]
            } else if let (Some(rs), Some(rsh)) = (rel_start, rel_shape) {
                (rs[j] as f32 as f64 + rsh[j] as f32 as f64) * ext as f64
            } else if let Some(s) = rel(rel_shape) {
                anchor + s
            } else {
                ext as f64
            };
            if end < anchor {
                return Err(err("end coordinates can't be before start coordinates".into()));
            }
            let a = anchor.round() as i64;
            spans[ax] = Span { anchor: a, len: (end.round() as i64 - a) as usize };
            anchors.push(a);
            shapes.push(spans[ax].len);
        }
        match self.policy {
            OobPolicy::Error if spans.iter().zip(shape).any(|(s, &e)| !s.inside(e)) => {
                let dims = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(" x ");
                return Err(err(format!(
                    "Slice can't be placed out of bounds with current policy. Got: input_shape={{{}}}, slice_anchor={{{}}}, slice_shape={{{}}}",
                    dims(&mut shape.iter().map(|e| e.to_string())),
                    dims(&mut spans.iter().map(|s| s.anchor.to_string())),
                    dims(&mut spans.iter().map(|s| s.len.to_string()))
                )));
            }
            OobPolicy::TrimToShape => {
                for (s, &e) in spans.iter_mut().zip(shape) {
                    let lo = s.anchor.clamp(0, e as i64);
                    let hi = (s.anchor + s.len as i64).clamp(0, e as i64);
                    *s = Span { anchor: lo, len: (hi - lo) as usize };
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl Operator for NumpyReader {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let StoredBatch { data, fortran } = self.core.next(ws.iteration)?;
        if !self.has_roi && !fortran.contains(&true) {
            return Ok(vec![data]);
        }
        let (n, nd, dtype) = (data.len(), data.ndim(), data.dtype());
        if fortran.contains(&true) && nd > MAX_NDIM {
            return Err(Error::data(self.ctx.at(ws.iteration, 0, data.source_info(0)), format!("Fortran-order arrays of more than {MAX_NDIM} dimensions are not supported")));
        }
        // Each sample's C-order shape and window.
        let mut c_shapes = Vec::with_capacity(n * nd);
        let mut windows = Vec::with_capacity(n * nd);
        let mut spans = Vec::with_capacity(nd);
        for i in 0..n {
            let s = data.shape(i);
            let c: Vec<usize> = if fortran[i] { s.iter().rev().copied().collect() } else { s.to_vec() };
            if self.has_roi {
                self.window(ws, i, &c, data.source_info(i), &mut spans)?;
            } else {
                spans.clear();
                spans.extend(c.iter().map(|&e| Span::full(e)));
            }
            c_shapes.extend_from_slice(&c);
            windows.extend_from_slice(&spans);
        }
        let out_shapes: Vec<usize> = windows.iter().map(|s| s.len).collect();
        let mut meta = BatchMeta::new(dtype, nd, (0..n).map(|i| &out_shapes[i * nd..(i + 1) * nd]));
        meta.inherit_source_info(data.meta());
        let mut out = TensorList::for_overwrite(meta);
        let mut fill = vec![0u8; dtype.size()];
        store_f64(dtype, &mut fill, 0, self.ctx.args.float("fill_value"));
        let fill = [fill];
        let reversed: Vec<usize> = (0..nd).rev().collect();
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let shape = &c_shapes[i * nd..(i + 1) * nd];
            let spans = &windows[i * nd..(i + 1) * nd];
            let whole = spans.iter().zip(shape).all(|(s, &e)| s.anchor == 0 && s.len == e);
            let src = data.bytes(i);
            match (fortran[i], whole) {
                (false, true) => dst.copy_from_slice(src),
                (true, true) => transpose_bytes(dst, src, data.shape(i), &reversed, dtype.size()),
                (false, false) => crop_nd(dst, src, shape, spans, dtype, dtype, &fill, None),
                (true, false) => {
                    let mut c_order = vec![0u8; src.len()];
                    transpose_bytes(&mut c_order, src, data.shape(i), &reversed, dtype.size());
                    crop_nd(dst, &c_order, shape, spans, dtype, dtype, &fill, None);
                }
            }
            Ok(())
        })?;
        Ok(vec![out])
    }

    fn reader_meta(&self) -> Option<ReaderMeta> {
        Some(self.core.meta())
    }

    fn skipped(&self) -> Option<std::sync::Arc<crate::ops::readers::skip::Skipped>> {
        Some(self.core.skipped())
    }

    fn batch_plan(&self) -> Option<Arc<std::sync::Mutex<BatchPlan>>> {
        self.core.plan()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_lists_the_root_then_one_level_of_folders_in_byte_order() {
        let dir = std::env::temp_dir().join(format!("sluice-npy-discover-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for p in ["b.npy", "A.npy", "x.txt", "sub/c.npy", "sub/deeper/d.npy", "Sub2/e.npy"] {
            let path = dir.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"").unwrap();
        }
        let mut names = Vec::new();
        discover("readers.numpy", &storage::Options::default(), &dir, "*.npy", &mut names).unwrap();
        assert_eq!(names, ["./A.npy", "./b.npy", "Sub2/e.npy", "sub/c.npy"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
