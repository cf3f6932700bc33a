//! `fn.segmentation.random_object_bbox` (cpu, as DALI 2.4): the bounding box of an object
//! (a connected blob of pixels of one label) drawn at random from a label map
//! (`dali/operators/segmentation/random_object_bbox.cc`).
//!
//! Per sample, with probability `foreground_prob` (else the whole input is the box):
//! - the classes are `classes` (or 1-based labels when only `class_weights` is given, or every
//!   label present but `background`), weighted by `class_weights` (default equal), classes
//!   absent from the input weighing 0; `background` is 0, or, when it is not given and
//!   `classes` holds 0, one below the smallest class (DALI's rule);
//! - a class is drawn by the weights' f32 running sums; its blobs (face-connected pixels equal
//!   to the label: neighbours along one axis, no diagonals) are found; blobs smaller than
//!   `threshold` along any axis are dropped; `k_largest` keeps the largest by volume (ties by
//!   first appearance); one blob is drawn uniformly. A class with no blob left weighs 0 and
//!   another class is drawn; when none is left, the whole input is returned, with the
//!   background as its class;
//! - `ignore_class` draws from the blobs of all foreground labels at once (blobs of different
//!   labels stay apart).
//!
//! Outputs (INT32): `anchor_shape` (anchor, shape), `start_end` (start, one past the end) or
//! `box` (start and end in one), then the class label when `output_class`. The draws are
//! Sluice's (a Philox stream per sample), so boxes equal DALI's in distribution: the tests
//! (`tests/test_segmentation.py`) port DALI's, which check that the box bounds an object of
//! the class, is maximal, meets the threshold and is among the k largest. `cache_objects` is
//! accepted and has no effect: labelling is fast enough here that a hash of every input
//! would cost about as much.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::ops::args::element_as_f64;
use crate::ops::{arg, tensor_arg, ArgDefault as D, ArgType as T, ArgValue, Args, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::rng::SampleRng;
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backend.
pub static RANDOM_OBJECT_BBOX: OpDef = OpDef {
    schema: OpSchema {
        name: "segmentation__RandomObjectBBox",
        doc: "Randomly selects an object from a mask and returns its bounding box.

This operator takes a labeled segmentation map as its input. With probability `foreground_prob` it randomly selects a label (uniformly or according to the distribution given as `class_weights`), extracts connected blobs of pixels with the selected label and randomly selects one of the blobs. The blobs may be further filtered according to `k_largest` and `threshold`. The output is a bounding box of the selected blob in one of the formats described in `format`. With probability 1-foreground_prob, the entire area of the input is returned.",
        devices: &[Device::Cpu],
        min_inputs: 1,
        max_inputs: 1,
        // "anchor_shape" without `output_class`; `num_outputs` below counts the others.
        num_outputs: 2,
        host_inputs: &[],
        args: &[&[
            tensor_arg("background", T::Int, D::Int(0), "Background label. If left unspecified, it's either 0 or any value not in `classes`."),
            arg("cache_objects", T::Bool, D::Bool(false), "Cache object bounding boxes to avoid the computational cost of finding object blobs in previously seen inputs. Accepted for compatibility; Sluice labels every input."),
            tensor_arg("class_weights", T::FloatList, D::Optional, "Relative probabilities of foreground classes. Each value corresponds to a class label in `classes`. If `classes` are not specified, consecutive 1-based labels are assigned. The weights are normalized."),
            tensor_arg("classes", T::IntList, D::Optional, "List of labels considered as foreground. If left unspecified, all labels not equal to `background` are considered foreground."),
            tensor_arg("foreground_prob", T::Float, D::Float(1.0), "Probability of selecting a foreground bounding box."),
            arg("format", T::Str, D::Str("anchor_shape"), "Format in which the data is returned: \"anchor_shape\" (two outputs: anchor and shape), \"start_end\" (two outputs: start and one-past-end coordinates) or \"box\" (one output: start and end coordinates concatenated)."),
            arg("ignore_class", T::Bool, D::Bool(false), "If True, all objects are picked with equal probability, regardless of the class they belong to. Otherwise, a class is picked first and then an object is randomly selected from this class. Incompatible with `classes`, `class_weights` or `output_class`."),
            arg("k_largest", T::Int, D::Optional, "If specified, the boxes are sorted by decreasing volume and only `k_largest` are considered. If `ignore_class` is True, `k_largest` refers to all boxes; otherwise it refers to the selected class."),
            arg("output_class", T::Bool, D::Bool(false), "If True, an additional output is produced which contains the label of the class to which the selected box belongs, or background label if the selected box is not an object bounding box."),
            tensor_arg("threshold", T::IntList, D::Optional, "Per-axis minimum size of the bounding boxes to return. If the selected class doesn't contain any bounding box that meets this condition, it is rejected and another class is picked. If no class contains a satisfactory box, the entire input area is returned."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(RandomObjectBBox::new(ctx)?))),
    mixed: None,
    gpu: None,
};

#[derive(Clone, Copy, PartialEq)]
enum Format {
    AnchorShape,
    StartEnd,
    Box,
}

fn format(args: &Args) -> Format {
    match args.str("format") {
        "start_end" => Format::StartEnd,
        "box" => Format::Box,
        _ => Format::AnchorShape,
    }
}

/// DALI's output count: 1 for "box", else 2, and one more for the class.
pub fn num_outputs(args: &Args) -> usize {
    1 + (format(args) != Format::Box) as usize + args.bool("output_class") as usize
}

const LABEL_TYPES: [DType; 7] = [DType::Bool, DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::I32];
const MAX_DIMS: usize = 6;
/// Elements of one label map: blob labelling indexes them with u32.
const MAX_ELEMENTS: usize = u32::MAX as usize;

struct RandomObjectBBox {
    ctx: OpContext,
    format: Format,
    ignore_class: bool,
    output_class: bool,
    k_largest: Option<usize>,
}

impl RandomObjectBBox {
    fn new(ctx: &OpContext) -> Result<RandomObjectBBox> {
        let op = &ctx.display_name;
        let format = match ctx.args.str("format") {
            "anchor_shape" => Format::AnchorShape,
            "start_end" => Format::StartEnd,
            "box" => Format::Box,
            other => return Err(Error::arg(op, "format", format!("Invalid output format: \"{other}\"; possible values are \"anchor_shape\", \"start_end\" and \"box\".'"))),
        };
        let ignore_class = ctx.args.bool("ignore_class");
        let output_class = ctx.args.bool("output_class");
        if ignore_class && (ctx.given("classes") || ctx.given("class_weights") || output_class) {
            return Err(Error::arg(op, "ignore_class", "Class-related arguments ``classes``, ``weights`` and ``output_class`` cannot be used when ``ignore_class`` is True"));
        }
        let k_largest = match ctx.args.opt_int("k_largest") {
            Some(k) if k < 1 => return Err(Error::arg(op, "k_largest", format!("``k_largest`` must be at least 1; got {k}"))),
            k => k.map(|k| k as usize),
        };
        Ok(RandomObjectBBox { ctx: ctx.clone(), format, ignore_class, output_class, k_largest })
    }
}

/// A blob's box: `lo` inclusive, `hi` exclusive, per dimension.
#[derive(Clone, Copy, Debug)]
struct BlobBox {
    lo: [i64; MAX_DIMS],
    hi: [i64; MAX_DIMS],
}

impl BlobBox {
    fn volume(&self, ndim: usize) -> i64 {
        (0..ndim).map(|d| self.hi[d] - self.lo[d]).product()
    }
}

/// A label map's element type (BOOL is read as UINT8).
trait Label: bytemuck::Pod + PartialEq {
    fn value(self) -> i64;
}

macro_rules! label {
    ($($t:ty),*) => {$(impl Label for $t {
        #[inline(always)]
        fn value(self) -> i64 { self as i64 }
    })*};
}
label!(u8, i8, u16, i16, u32, i32);

/// The labels present in `labels`, but `background`, sorted (runs of one label are skipped,
/// as DALI does, so a map of a few labels costs one comparison per element).
fn present<T: Label>(labels: &[T], background: i64) -> Vec<i64> {
    let mut seen = BTreeSet::new();
    let mut prev: Option<T> = None;
    for &x in labels {
        if prev != Some(x) {
            seen.insert(x.value());
            prev = Some(x);
        }
    }
    seen.remove(&background);
    seen.into_iter().collect()
}

fn find(parent: &mut [u32], mut x: u32) -> u32 {
    while parent[x as usize] != x {
        parent[x as usize] = parent[parent[x as usize] as usize];
        x = parent[x as usize];
    }
    x
}

/// The boxes of the face-connected blobs of elements for which `member` holds, neighbours
/// joining when `same(a, b)` (equal labels), in order of each blob's first element.
fn blob_boxes<T: Label>(labels: &[T], shape: &[usize], member: impl Fn(T) -> bool) -> Vec<BlobBox> {
    let n = labels.len();
    let ndim = shape.len();
    let mut strides = [0usize; MAX_DIMS];
    let mut s = 1;
    for d in (0..ndim).rev() {
        strides[d] = s;
        s *= shape[d];
    }
    // Flat indices fit in u32: larger maps are refused before labelling (MAX_ELEMENTS).
    let mut parent: Vec<u32> = (0..n as u32).collect();
    let mut coord = [0usize; MAX_DIMS];
    for k in 0..n {
        if member(labels[k]) {
            for d in 0..ndim {
                if coord[d] > 0 {
                    let j = k - strides[d];
                    if labels[j] == labels[k] {
                        let (a, b) = (find(&mut parent, j as u32), find(&mut parent, k as u32));
                        if a != b {
                            // The smaller index becomes the root: roots are first elements.
                            let (lo, hi) = if a < b { (a, b) } else { (b, a) };
                            parent[hi as usize] = lo;
                        }
                    }
                }
            }
        }
        // Advance the multi-index.
        for d in (0..ndim).rev() {
            coord[d] += 1;
            if coord[d] < shape[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    let mut blob_of = vec![usize::MAX; 0];
    blob_of.resize(n, usize::MAX);
    let mut boxes: Vec<BlobBox> = Vec::new();
    coord = [0; MAX_DIMS];
    for k in 0..n {
        if member(labels[k]) {
            let root = find(&mut parent, k as u32) as usize;
            let b = if root == k {
                blob_of[k] = boxes.len();
                let mut bx = BlobBox { lo: [0; MAX_DIMS], hi: [0; MAX_DIMS] };
                for d in 0..ndim {
                    bx.lo[d] = coord[d] as i64;
                    bx.hi[d] = coord[d] as i64 + 1;
                }
                boxes.push(bx);
                boxes.len() - 1
            } else {
                blob_of[root]
            };
            let bx = &mut boxes[b];
            for d in 0..ndim {
                let c = coord[d] as i64;
                bx.lo[d] = bx.lo[d].min(c);
                bx.hi[d] = bx.hi[d].max(c + 1);
            }
        }
        for d in (0..ndim).rev() {
            coord[d] += 1;
            if coord[d] < shape[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    boxes
}

/// DALI's PickBox: drops boxes under `threshold`, keeps the `k` largest, draws one.
fn pick_box(boxes: &[BlobBox], ndim: usize, threshold: Option<&[f64]>, k_largest: Option<usize>, rng: &mut SampleRng) -> Option<BlobBox> {
    let kept: Vec<&BlobBox> = boxes.iter().filter(|b| threshold.is_none_or(|t| (0..ndim).all(|d| (b.hi[d] - b.lo[d]) as f64 >= t[d]))).collect();
    let n = kept.len();
    if n == 0 {
        return None;
    }
    match k_largest {
        Some(k) if k < n => {
            let mut order: Vec<(i64, usize)> = kept.iter().enumerate().map(|(i, b)| (-b.volume(ndim), i)).collect();
            order.sort_unstable();
            Some(*kept[order[rng.below(k as u64) as usize].1])
        }
        _ => Some(*kept[rng.below(n as u64) as usize]),
    }
}

/// The values of list argument `name` for sample `i` (a constant, or an argument input of any
/// length), or `None` when it was not given.
fn list(ws: &Workspace<'_>, ctx: &OpContext, name: &'static str, i: usize) -> Result<Option<Vec<f64>>> {
    if let Some(batch) = ws.arg_inputs.get(name) {
        if batch.ndim() > 1 {
            return Err(Error::arg(&ctx.display_name, name, format!("argument input must be a scalar or a 1-D list per sample; sample {i} has shape {:?}", batch.shape(i))));
        }
        return Ok(Some((0..batch.numel(i)).map(|k| element_as_f64(batch, i, k)).collect()));
    }
    Ok(match ctx.args.value(name) {
        Some(ArgValue::IntList(v)) => Some(v.iter().map(|&x| x as f64).collect()),
        Some(ArgValue::FloatList(v)) => Some(v.clone()),
        Some(ArgValue::Int(x)) => Some(vec![*x as f64]),
        Some(ArgValue::Float(x)) => Some(vec![*x]),
        _ => None,
    })
}

/// A sample's arguments, read before its data is looked at.
struct Setup {
    fg: Option<f64>,
    background: i64,
    classes: Option<Vec<i64>>,
    weights: Option<Vec<f64>>,
    threshold: Option<Vec<f64>>,
}

/// One sample's result: the box (or the whole input) and the class.
struct Picked {
    lo: [i64; MAX_DIMS],
    hi: [i64; MAX_DIMS],
    class: i64,
}

impl RandomObjectBBox {
    /// A foreground object of `labels` (shape `shape`) drawn as the module docs say, or
    /// `None` (then the whole input is the box).
    fn pick_object<T: Label>(&self, labels: &[T], shape: &[usize], s: &Setup, rng: &mut SampleRng) -> Option<Picked> {
        let ndim = shape.len();
        let bg = s.background;
        if self.ignore_class {
            let boxes = blob_boxes(labels, shape, |v: T| v.value() != bg);
            return pick_box(&boxes, ndim, s.threshold.as_deref(), self.k_largest, rng).map(|b| Picked { lo: b.lo, hi: b.hi, class: bg });
        }
        let present = present(labels, bg);
        let (classes, mut weights): (Vec<i64>, Vec<f64>) = match (&s.classes, &s.weights) {
            (None, _) => (present.clone(), vec![1.0; present.len()]),
            (Some(c), w) => {
                let w = w.clone().unwrap_or_else(|| vec![1.0; c.len()]);
                (c.clone(), c.iter().zip(w).map(|(cls, w)| if present.binary_search(cls).is_ok() { w } else { 0.0 }).collect())
            }
        };
        loop {
            // DALI's CDF: running sums of the f32 weights in f64, each stored as f32.
            let mut sum = 0.0f64;
            let cdf: Vec<f32> = weights.iter().map(|&w| { sum += w as f32 as f64; sum as f32 }).collect();
            if !(sum > 0.0) {
                return None;
            }
            let pos = rng.next_f64() * *cdf.last().expect("non-empty when the sum is positive") as f64;
            let mut idx = cdf.partition_point(|&c| (c as f64) < pos);
            while idx < weights.len() && weights[idx] == 0.0 {
                idx += 1;
            }
            if idx >= weights.len() {
                return None;
            }
            let label = classes[idx];
            let boxes = blob_boxes(labels, shape, |v: T| v.value() == label);
            if let Some(b) = pick_box(&boxes, ndim, s.threshold.as_deref(), self.k_largest, rng) {
                return Some(Picked { lo: b.lo, hi: b.hi, class: label });
            }
            // No blob of this class is large enough: it is out, draw another.
            weights[idx] = 0.0;
        }
    }
}

impl Operator for RandomObjectBBox {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let ctx = &self.ctx;
        let op = ctx.display_name.as_str();
        let input = ws.inputs[0];
        let n = input.len();
        let ndim = input.ndim();
        if n > 0 && !(1..=MAX_DIMS).contains(&ndim) {
            return Err(Error::type_mismatch(op, format!("Unsuported number of dimensions {ndim}; must be 1..6")));
        }
        if let Some(i) = (0..n).find(|&i| input.numel(i) > MAX_ELEMENTS) {
            return Err(Error::data(ctx.at(ws.iteration, i, input.source_info(i)), format!("label maps of at most {MAX_ELEMENTS} elements are supported, got shape {:?}", input.shape(i))));
        }
        if n > 0 && !LABEL_TYPES.contains(&input.dtype()) {
            return Err(Error::type_mismatch(op, format!("Unsupported input type: {}", input.dtype().dali_name())));
        }
        let (prob, background) = (ws.per_sample(ctx, "foreground_prob"), ws.per_sample(ctx, "background"));
        let bg_given = ctx.given("background");
        // Per sample: the class list and weights (before looking at the data) and the rest.
        let mut setups = Vec::with_capacity(n);
        for i in 0..n {
            let mut classes = if self.ignore_class { None } else { list(ws, ctx, "classes", i)?.map(|v| v.iter().map(|&c| c as i64).collect::<Vec<i64>>()) };
            let weights = if self.ignore_class { None } else { list(ws, ctx, "class_weights", i)? };
            // One value stands for every dimension.
            let threshold = match list(ws, ctx, "threshold", i)? {
                Some(t) if t.len() == 1 => Some(vec![t[0]; ndim]),
                Some(t) if t.len() != ndim => {
                    return Err(Error::arg(op, "threshold", format!("Argument \"threshold\" expected shape {ndim} but got {} values, which can't be interpreted as the expected shape.", t.len())));
                }
                t => t,
            };
            if let (Some(c), Some(w)) = (&classes, &weights) {
                if c.len() != w.len() {
                    return Err(Error::arg(op, "class_weights", format!(
                        "If both ``classes`` and ``class_weights`` are provided, their shapes must match. Got:\n  classes.shape = {{{}}}\n  weights.shape = {{{}}}",
                        c.len(),
                        w.len()
                    )));
                }
            }
            let mut bg = background.get(op, i)?.unwrap_or(0.0) as i64;
            if let Some(c) = &classes {
                if c.contains(&bg) {
                    if bg_given {
                        return Err(Error::arg(op, "classes", format!("Class label {bg} coincides with background label - please specify a different background label or remove it from your list of foreground classes.")));
                    }
                    let min = c.iter().copied().min().unwrap_or(0);
                    bg = if min == i32::MIN as i64 {
                        let mut b = i32::MAX as i64;
                        while c.contains(&b) {
                            b -= 1;
                        }
                        b
                    } else {
                        min - 1
                    };
                }
            }
            if classes.is_none() {
                if let Some(w) = &weights {
                    // 0-based labels skipping the background ("1-based" with the default one).
                    let mut cls = 0i64;
                    let mut v = Vec::with_capacity(w.len());
                    for _ in 0..w.len() {
                        if cls == bg {
                            cls += 1;
                        }
                        v.push(cls);
                        cls += 1;
                    }
                    classes = Some(v);
                }
            }
            setups.push(Setup { fg: prob.get(op, i)?, background: bg, classes, weights, threshold });
        }
        // Samples are labelled in parallel, each on one worker.
        let pick = |i: usize| -> Picked {
            let s = &setups[i];
            let shape = input.shape(i);
            let mut rng = ws.rng(ctx, i);
            let mut whole = Picked { lo: [0; MAX_DIMS], hi: [0; MAX_DIMS], class: s.background };
            for d in 0..ndim {
                whole.hi[d] = shape[d] as i64;
            }
            if rng.next_f64() >= s.fg.unwrap_or(1.0) || input.numel(i) == 0 {
                return whole;
            }
            let bytes = input.bytes(i);
            let found = match input.dtype() {
                DType::U8 | DType::Bool => self.pick_object::<u8>(bytes, shape, s, &mut rng),
                DType::I8 => self.pick_object::<i8>(bytemuck::cast_slice(bytes), shape, s, &mut rng),
                DType::U16 => self.pick_object::<u16>(bytemuck::cast_slice(bytes), shape, s, &mut rng),
                DType::I16 => self.pick_object::<i16>(bytemuck::cast_slice(bytes), shape, s, &mut rng),
                DType::U32 => self.pick_object::<u32>(bytemuck::cast_slice(bytes), shape, s, &mut rng),
                _ => self.pick_object::<i32>(bytemuck::cast_slice(bytes), shape, s, &mut rng),
            };
            found.unwrap_or(whole)
        };
        let picks: Vec<Picked> = {
            use rayon::prelude::*;
            ws.pool.install(|| (0..n).into_par_iter().map(pick).collect())
        };
        let vec_meta = |len: usize| BatchMeta::new(DType::I32, 1, (0..n).map(|_| [len]).collect::<Vec<_>>().iter().map(|s| &s[..]));
        let box_len = if self.format == Format::Box { 2 * ndim } else { ndim };
        let mut first = TensorList::for_overwrite(vec_meta(box_len));
        let mut second = (self.format != Format::Box).then(|| TensorList::for_overwrite(vec_meta(ndim)));
        let mut class_out = self.output_class.then(|| TensorList::for_overwrite(BatchMeta::new(DType::I32, 0, (0..n).map(|_| []).collect::<Vec<[usize; 0]>>().iter().map(|s| &s[..]))));
        let put = |dst: &mut [u8], k: usize, v: i64| dst[4 * k..4 * k + 4].copy_from_slice(&(v as i32).to_le_bytes());
        for (i, p) in picks.iter().enumerate() {
            let a = first.sample_mut::<i32>(i);
            let a: &mut [u8] = bytemuck::cast_slice_mut(a);
            for d in 0..ndim {
                put(a, d, p.lo[d]);
                if self.format == Format::Box {
                    put(a, ndim + d, p.hi[d]);
                }
            }
            if let Some(second) = second.as_mut() {
                let b: &mut [u8] = bytemuck::cast_slice_mut(second.sample_mut::<i32>(i));
                for d in 0..ndim {
                    put(b, d, if self.format == Format::AnchorShape { p.hi[d] - p.lo[d] } else { p.hi[d] });
                }
            }
            if let Some(c) = class_out.as_mut() {
                let c: &mut [u8] = bytemuck::cast_slice_mut(c.sample_mut::<i32>(i));
                put(c, 0, p.class);
            }
        }
        let mut outs = vec![first];
        outs.extend(second);
        outs.extend(class_out);
        Ok(outs)
    }
}
