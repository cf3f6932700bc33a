//! `fn.random_bbox_crop` (DALI's `bbox_crop.cc`, `RandomBBoxCropImpl`; cpu only, as DALI): picks
//! a random crop window that keeps the boxes consistent, and gives the window (`anchor`,
//! `shape`), the boxes kept (mapped into the window), their labels and indices.
//!
//! Reproduced from DALI, step for step and in f32: the options (`thresholds`, plus "no crop"
//! when `allow_no_crop`), one picked per round of `num_attempts` attempts, rounds until a
//! crop succeeds or `total_num_attempts` attempts were made (then the best window so far);
//! random window shapes from `scaling` checked against `aspect_ratio` (pairs xy, xz, yz for
//! 3-D, one range cycling as DALI's index does; computed on `shape * input_shape` when
//! `input_shape` is given; a range with min == max fixes that ratio, dimensions fixed in a
//! random order and rescaled to the largest extent), or fixed `crop_shape` windows placed at
//! whole-pixel anchors of `input_shape` (absolute `anchor` and `shape` outputs); the
//! window's metric (`threshold_type` "iou" or "overlap", over all boxes when
//! `all_boxes_above_threshold` else the best box; a window that neither meets the threshold
//! nor beats the best metric is skipped); boxes kept by centroid inside the window, or by
//! `bbox_prune_threshold` (fraction of the box's area inside), then remapped (DALI's
//! `RemapBox`, clamped to [0, 1]); attempts go on after a success within a round, as in
//! DALI. Boxes come in `bbox_layout` (any permutation of xyXY / xyWH, or xyzXYZ / xyzWHD for
//! 6 coordinates; `ltrb` when no layout) and go out in it; `crop_shape` / `input_shape` in
//! `shape_layout` (a permutation of WH / WHD).
//!
//! Not reproduced: DALI's random numbers (a per-sample mt19937_64 stream that carries over
//! iterations, and `std::random_device` for the order of fixed aspect ratios): Sluice draws
//! from `ws.rng` (seed, operator, iteration, sample), so outputs depend on `seed` alone, not
//! on thread count, and are never DALI's bit for bit. `tests/test_random_bbox_crop.py`
//! checks DALI's invariants (its operator_2/test_random_bbox_crop.py ported: shapes, boxes
//! inside the window, thresholds met, aspect ratios and scaling honoured, labels and
//! indices consistent) on Sluice and DALI alike, and seed determinism.
//!
//! Checks as DALI's (boxes `(N, 4)` or `(N, 6)`, the same count of coordinates for every
//! sample, boxes inside [0, 1], argument ranges and incompatible combinations); Sluice also
//! refuses labels with fewer rows than boxes. Inverted boxes (an end before its start) are
//! taken as DALI takes them (DALI's own test feeds such boxes), as boxes of negative size.
//! Labels of any type are copied as they are (DALI wants INT32).

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::ops::{arg, tensor_arg, ArgDefault as D, ArgType as T, Args, Device, OpContext, OpDef, OpSchema, Operator, Workspace, MAX_LIST};
use crate::rng::SampleRng;
use crate::tensor::{BatchMeta, DType, TensorList};

/// `fn.random_bbox_crop`.
pub static RANDOM_BBOX_CROP: OpDef = OpDef {
    schema: OpSchema {
        name: "RandomBBoxCrop",
        doc: "Applies a prospective random crop to an image coordinate space while keeping the bounding boxes, and optionally labels, consistent.\n\nInputs: 0: bboxes, (1: labels). Outputs: 0: anchor, 1: shape, 2: bboxes (, 3: labels, 4: bboxes_indices). `anchor` and `shape` are relative unless `crop_shape` is given (then absolute, in `input_shape` units); they can be fed to `fn.slice`.",
        devices: &[Device::Cpu],
        min_inputs: 1,
        max_inputs: 2,
        num_outputs: 3,
        host_inputs: &[],
        args: &[&[
            arg("thresholds", T::FloatList, D::FloatList(&[0.0]), "Minimum IoU or a different metric, if specified by `threshold_type`, of the bounding boxes with respect to the cropping window. Each sample randomly selects one of the `thresholds`."),
            arg("threshold_type", T::Str, D::Str("iou"), "Determines the meaning of `thresholds`: \"iou\" (intersection over union) or \"overlap\" (fraction of the box's area inside the window)."),
            arg("aspect_ratio", T::FloatList, D::Optional, "Valid range of aspect ratio of the cropping windows: [min, max] (x/y), or for 3D boxes [min_xy, max_xy, min_xz, max_xz, min_yz, max_yz]. Default [1.0, 1.0]."),
            arg("scaling", T::FloatList, D::Optional, "Range [min, max] for the crop size with respect to the original image dimensions. Default [1.0, 1.0]."),
            arg("ltrb", T::Bool, D::Optional, "Deprecated: use `bbox_layout`. True (default): boxes are [left, top, right, bottom]; False: [left, top, width, height]."),
            arg("num_attempts", T::Int, D::Int(1), "Number of attempts to get a crop window that matches the `aspect_ratio` and a selected value from `thresholds`."),
            arg("total_num_attempts", T::Int, D::Int(-1), "If provided, the total maximum number of attempts; after them the best candidate is selected. Unset: search until a valid crop is found."),
            arg("all_boxes_above_threshold", T::Bool, D::Bool(true), "If True, all bounding boxes must overlap the window as `thresholds` says; if False, one is enough."),
            arg("allow_no_crop", T::Bool, D::Optional, "If True (default), not cropping is one of the possible outcomes, as one more `thresholds` value."),
            tensor_arg("crop_shape", T::IntList, D::Optional, "If provided, the crop window dimensions are fixed to this shape (in `shape_layout` order); needs `input_shape`."),
            tensor_arg("input_shape", T::IntList, D::Optional, "The shape of the original input image (in `shape_layout` order)."),
            arg("bbox_layout", T::Str, D::Optional, "Meaning of the box coordinates: a permutation of \"xyXY\" or \"xyWH\" (\"xyzXYZ\" or \"xyzWHD\" for 3D). Default \"xyXY\" / \"xyzXYZ\"."),
            arg("shape_layout", T::Str, D::Optional, "Meaning of the dimensions of `crop_shape` and `input_shape`: a permutation of \"WH\" or \"WHD\"."),
            arg("output_bbox_indices", T::Bool, D::Bool(false), "If True, an extra output gives the original indices of the boxes kept."),
            arg("bbox_prune_threshold", T::Float, D::Optional, "If set, boxes are kept when the fraction of their area within the window is at least this value (0 to 1); otherwise boxes are kept when their centroid is inside the window."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(RandomBBoxCrop::new(ctx)?))),
    mixed: None,
    gpu: None,
};

/// Outputs of an instance: anchor, shape, boxes, labels when a labels input is given,
/// indices when `output_bbox_indices`.
pub fn num_outputs(args: &Args, num_inputs: usize) -> usize {
    3 + (num_inputs > 1) as usize + (args.has("output_bbox_indices") && args.bool("output_bbox_indices")) as usize
}

#[derive(Debug, Clone, Copy)]
struct Range {
    min: f32,
    max: f32,
}

impl Range {
    fn contains(&self, k: f32) -> bool {
        k >= self.min && k <= self.max
    }
}

/// One pick: "no crop", or a threshold.
#[derive(Debug, Clone, Copy)]
struct SampleOption {
    no_crop: bool,
    threshold: f32,
}

struct RandomBBoxCrop {
    ctx: OpContext,
    options: Vec<SampleOption>,
    scaling: Range,
    aspect: Vec<Range>,
    overlap: bool,
    prune: Option<f32>,
    num_attempts: i64,
    total_num_attempts: i64,
    all_boxes: bool,
    has_crop_shape: bool,
    has_input_shape: bool,
    bbox_layout: Option<String>,
    ltrb: bool,
    /// Where `crop_shape` / `input_shape` element d of WH(D) order is in the user's order.
    shape_layout: Option<String>,
    output_indices: bool,
}

pub(super) const MAX_DIM: usize = 3;

/// A box in DALI's `Box<ndim, float>`: `lo` and `hi` corners (the first `ndim` used).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct BoxN {
    pub(super) lo: [f32; MAX_DIM],
    pub(super) hi: [f32; MAX_DIM],
}

impl BoxN {
    fn volume(&self, n: usize) -> f32 {
        let mut v = self.hi[0] - self.lo[0];
        for d in 1..n {
            v *= self.hi[d] - self.lo[d];
        }
        v
    }

    /// DALI's `intersection`: the overlap, or the empty default box.
    fn intersection(&self, o: &BoxN, n: usize) -> BoxN {
        let mut t = BoxN::default();
        for d in 0..n {
            t.lo[d] = max(self.lo[d], o.lo[d]);
            t.hi[d] = min(self.hi[d], o.hi[d]);
        }
        if (0..n).all(|d| t.hi[d] > t.lo[d]) {
            t
        } else {
            BoxN::default()
        }
    }

    pub(super) fn iou(&self, o: &BoxN, n: usize) -> f32 {
        let inter = self.intersection(o, n).volume(n);
        if inter == 0.0 {
            return 0.0;
        }
        inter / (self.volume(n) + o.volume(n) - inter)
    }

    /// DALI's `contains(centroid)`: lo <= c < hi.
    pub(super) fn contains_centroid_of(&self, b: &BoxN, n: usize) -> bool {
        (0..n).all(|d| {
            let c = 0.5 * (b.hi[d] + b.lo[d]);
            c >= self.lo[d] && c < self.hi[d]
        })
    }

    /// DALI's `RemapBox`: `self` in the coordinates of window `crop`, clamped to [0, 1].
    pub(super) fn remap(&self, crop: &BoxN, n: usize) -> BoxN {
        let mut m = *self;
        for d in 0..n {
            let ext = crop.hi[d] - crop.lo[d];
            let start = (max(crop.lo[d], self.lo[d]) - crop.lo[d]) / ext;
            let end = (min(crop.hi[d], self.hi[d]) - crop.lo[d]) / ext;
            m.lo[d] = clamp01(start);
            m.hi[d] = clamp01(end);
        }
        m
    }
}

/// `std::max` / `std::min` as DALI's vector helpers use them (NaN order kept).
fn max(a: f32, b: f32) -> f32 {
    if a < b { b } else { a }
}
fn min(a: f32, b: f32) -> f32 {
    if b < a { b } else { a }
}
fn clamp01(v: f32) -> f32 {
    if v < 0.0 { 0.0 } else if v > 1.0 { 1.0 } else { v }
}

/// Where each of `ordered`'s letters is in `layout` (DALI's `GetDimIndices`).
fn perm(layout: &str, ordered: &str) -> Option<Vec<usize>> {
    if layout.len() != ordered.len() {
        return None;
    }
    let mut seen = [false; 8];
    let p: Option<Vec<usize>> = ordered.chars().map(|c| layout.find(c)).collect();
    let p = p?;
    for &i in &p {
        if std::mem::replace(&mut seen[i], true) {
            return None;
        }
    }
    Some(p)
}

/// The crop search's result for one sample.
#[derive(Default)]
struct Prospective {
    success: bool,
    crop: BoxN,
    boxes: Vec<BoxN>,
    indices: Vec<i32>,
}

impl RandomBBoxCrop {
    fn new(ctx: &OpContext) -> Result<RandomBBoxCrop> {
        let op = &ctx.display_name;
        let a = &ctx.args;
        let err = |name: &str, m: String| Error::arg(op, name, m);
        let pair = |name: &str| -> Vec<f32> { a.value(name).map(|_| a.floats(name).iter().map(|&v| v as f32).collect()).unwrap_or_else(|| vec![1.0, 1.0]) };
        let s = pair("scaling");
        if s.len() != 2 {
            return Err(err("scaling", format!("`scaling` must be a range `[min, max]`. Got {} values", s.len())));
        }
        let scaling = Range { min: s[0], max: s[1] };
        if !(scaling.min >= 0.0 && scaling.min <= scaling.max) {
            return Err(err("scaling", format!("`scaling` range must be positive and min <= max. Got: {}, {}", s[0], s[1])));
        }
        let prune = a.opt_float("bbox_prune_threshold").map(|v| v as f32);
        if let Some(p) = prune {
            if !(0.0..=1.0).contains(&p) {
                return Err(err("bbox_prune_threshold", format!("`bbox_prune_threshold` must be in range `[0.0,1.0]`. Got: {p}")));
            }
        }
        let ar = pair("aspect_ratio");
        if ar.len() != 2 && ar.len() != 6 {
            return Err(err("aspect_ratio", format!("`aspect_ratio` range argument should have 2 elements, or 6 elements in case of 3D bounding boxes. Got {} elements", ar.len())));
        }
        let aspect: Vec<Range> = ar.chunks(2).map(|c| Range { min: c[0], max: c[1] }).collect();
        if let Some(r) = aspect.iter().find(|r| !(r.min >= 0.0 && r.min <= r.max)) {
            return Err(err("aspect_ratio", format!("`aspect_ratio` range must be positive and min <= max. Got: {}, {}", r.min, r.max)));
        }
        let has_crop_shape = ctx.given("crop_shape");
        let has_input_shape = ctx.given("input_shape");
        if has_crop_shape && !has_input_shape {
            return Err(err("crop_shape", "``input_shape`` must be provided when providing ``crop_shape``".into()));
        }
        if a.has("ltrb") && a.has("bbox_layout") {
            return Err(err("ltrb", "`ltrb` and `bbox_layout` can't be provided at the same time. `ltrb` was deprecated in favor of `bbox_layout`.".into()));
        }
        let mut allow_no_crop = !a.has("allow_no_crop") || a.bool("allow_no_crop");
        if has_crop_shape {
            // Left unset with a crop shape: no crop is silently not an option (DALI's rule).
            if !a.has("allow_no_crop") {
                allow_no_crop = false;
            }
            if allow_no_crop {
                return Err(err("allow_no_crop", "`allow_no_crop` is incompatible with providing the crop shape explicitly".into()));
            }
            if a.has("aspect_ratio") {
                return Err(err("aspect_ratio", "`aspect_ratio` is incompatible with providing the crop shape explicitly".into()));
            }
            if a.has("scaling") {
                return Err(err("scaling", "`scaling` is incompatible with providing the crop shape explicitly".into()));
            }
        }
        let thresholds = a.floats("thresholds");
        if thresholds.is_empty() {
            return Err(err("thresholds", "At least one threshold value must be provided".into()));
        }
        let num_attempts = a.int("num_attempts");
        if num_attempts <= 0 {
            return Err(err("num_attempts", "Minimum number of attempts must be greater than zero".into()));
        }
        let mut options = Vec::new();
        for &t in thresholds {
            if !(0.0..=1.0).contains(&t) {
                return Err(err("thresholds", format!("Threshold value must be within the range [0.0, 1.0]. Received: {t}")));
            }
            options.push(SampleOption { no_crop: false, threshold: t as f32 });
        }
        let overlap = match a.str("threshold_type") {
            "iou" => false,
            "overlap" => true,
            t => return Err(err("threshold_type", format!("Not supported ``threshold_type`` value: \"{t}\". Supported values are: \"iou\", \"overlap\"."))),
        };
        if allow_no_crop {
            options.push(SampleOption { no_crop: true, threshold: 0.0 });
        }
        let total_num_attempts = a.int("total_num_attempts");
        if total_num_attempts != -1 && total_num_attempts <= 0 {
            return Err(err("total_num_attempts", "Minimum total number of attempts must be greater than zero".into()));
        }
        Ok(RandomBBoxCrop {
            ctx: ctx.clone(),
            options,
            scaling,
            aspect,
            overlap,
            prune,
            num_attempts,
            total_num_attempts,
            all_boxes: a.bool("all_boxes_above_threshold"),
            has_crop_shape,
            has_input_shape,
            bbox_layout: a.opt_str("bbox_layout").map(str::to_string),
            ltrb: !a.has("ltrb") || a.bool("ltrb"),
            shape_layout: a.opt_str("shape_layout").map(str::to_string),
            output_indices: a.bool("output_bbox_indices"),
        })
    }

    /// The box layout for `n`-D boxes, with its canonical order and whether it gives extents.
    fn layout(&self, n: usize) -> Result<(String, Vec<usize>, bool)> {
        let (se, ss) = if n == 3 { ("xyzXYZ", "xyzWHD") } else { ("xyXY", "xyWH") };
        let layout = match &self.bbox_layout {
            Some(l) => l.clone(),
            None => (if self.ltrb { se } else { ss }).to_string(),
        };
        if let Some(p) = perm(&layout, se) {
            return Ok((layout, p, false));
        }
        if let Some(p) = perm(&layout, ss) {
            return Ok((layout, p, true));
        }
        Err(Error::arg(&self.ctx.display_name, "bbox_layout", format!("`bbox_layout` should be a permutation of `{se}` or `{ss}`. Got: `{layout}`")))
    }

    /// `crop_shape` or `input_shape` of sample `i` in W, H(, D) order.
    fn shape_arg(&self, ws: &Workspace<'_>, name: &'static str, i: usize, n: usize) -> Result<[i64; MAX_DIM]> {
        let op = &self.ctx.display_name;
        let canon = if n == 3 { "WHD" } else { "WH" };
        let p = match &self.shape_layout {
            Some(l) => perm(l, canon).ok_or_else(|| Error::arg(op, "shape_layout", format!("`shape_layout` should be a permutation of `{canon}` for the provided inputs; got `{l}`")))?,
            None => (0..n).collect(),
        };
        let mut buf = [0.0; MAX_LIST];
        let v = ws.per_sample_list(&self.ctx, name).get(op, name, i, &[n], &mut buf)?.expect("checked as given");
        let mut out = [0i64; MAX_DIM];
        for d in 0..n {
            let x = v[p[d]];
            if !(x >= 0.0) || x.fract() != 0.0 {
                return Err(Error::arg(op, name, format!("sample {i}: ``{name}`` argument should contain non negative whole values. Got: {:?}", &v[..n])));
            }
            out[d] = x as i64;
        }
        Ok(out)
    }

    /// DALI's `FixAspectRatios`: ratios with min == max fix dimensions, in a random order.
    fn fix_aspect_ratios(&self, shape: &mut [f32; MAX_DIM], n: usize, rng: &mut SampleRng) -> bool {
        let mut fixed = [0.0f32; MAX_DIM * MAX_DIM];
        let mut k = 0;
        let mut need_fix = false;
        for d0 in 0..n {
            for d1 in d0 + 1..n {
                let r = self.aspect[k];
                if r.min == r.max {
                    fixed[d0 * n + d1] = r.min;
                    fixed[d1 * n + d0] = (1.0 / r.min as f64) as f32;
                    need_fix = true;
                }
                k = (k + 1) % self.aspect.len();
            }
        }
        if !need_fix {
            return false;
        }
        // A random order of the dimensions (DALI shuffles with std::random_device).
        let mut order = [0usize, 1, 2];
        for i in (1..n).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        let max_extent = shape[..n].iter().fold(0.0f32, |m, &v| m.max(v));
        for i0 in 0..n {
            for i1 in i0 + 1..n {
                let (d0, d1) = (order[i0], order[i1]);
                let ar = fixed[d1 * n + d0];
                if ar > 0.0 {
                    shape[d1] = shape[d0] * ar;
                }
            }
        }
        let new_max = shape[..n].iter().fold(0.0f32, |m, &v| m.max(v));
        for e in &mut shape[..n] {
            *e = max_extent * *e / new_max;
        }
        true
    }

    fn valid_aspect_ratio(&self, shape: &[f32; MAX_DIM], n: usize) -> bool {
        let mut k = 0;
        for i in 0..n {
            for j in i + 1..n {
                if !self.aspect[k].contains(shape[i] / shape[j]) {
                    return false;
                }
                k = (k + 1) % self.aspect.len();
            }
        }
        true
    }

    /// (worst, best) metric of window `crop` over `boxes` (DALI's `OverlapMetricRange`).
    fn metric_range(&self, crop: &BoxN, boxes: &[BoxN], n: usize) -> (f32, f32) {
        let metric = |b: &BoxN| if self.overlap { crop.intersection(b, n).volume(n) / b.volume(n) } else { crop.iou(b, n) };
        let first = metric(&boxes[0]);
        let (mut worst, mut best) = (first, first);
        for b in &boxes[1..] {
            let m = metric(b);
            best = max(m, best);
            worst = min(m, worst);
        }
        (worst, best)
    }

    /// DALI's `FindProspectiveCrop` for one sample.
    fn find_crop(&self, boxes: &[BoxN], n: usize, crop_shape: [i64; MAX_DIM], input_shape: [i64; MAX_DIM], rng: &mut SampleRng) -> Prospective {
        let mut p = Prospective::default();
        let mut count: i64 = 0;
        let mut best_metric = -1.0f32;
        let in_f = |d: usize| input_shape[d] as f32;
        while !p.success && (self.total_num_attempts < 0 || count < self.total_num_attempts) {
            let option = self.options[rng.below(self.options.len() as u64) as usize];
            if option.no_crop {
                let mut c = BoxN::default();
                for d in 0..n {
                    c.hi[d] = if self.has_crop_shape { in_f(d) } else { 1.0 };
                }
                p.success = true;
                p.crop = c;
                p.boxes = boxes.to_vec();
                p.indices = (0..boxes.len() as i32).collect();
                break;
            }
            for _ in 0..self.num_attempts {
                count += 1;
                let mut rel = BoxN::default();
                let mut out = BoxN::default();
                if self.has_crop_shape {
                    for d in 0..n {
                        let s = crop_shape[d] as f32;
                        out.hi[d] = s;
                        rel.hi[d] = s / in_f(d);
                    }
                    for d in 0..n {
                        let diff = input_shape[d] - crop_shape[d];
                        let anchor = if diff > 0 {
                            rng.below(diff as u64 + 1) as f32
                        } else if diff < 0 {
                            (diff + rng.below((-diff) as u64 + 1) as i64) as f32
                        } else {
                            0.0
                        };
                        out.lo[d] = anchor;
                        rel.lo[d] = anchor / in_f(d);
                    }
                    for d in 0..n {
                        out.hi[d] += out.lo[d];
                        rel.hi[d] += rel.lo[d];
                    }
                } else {
                    let mut shape = [0.0f32; MAX_DIM];
                    for s in &mut shape[..n] {
                        *s = rng.uniform(self.scaling.min as f64, self.scaling.max as f64) as f32;
                    }
                    let mut tmp = shape;
                    if self.has_input_shape {
                        for d in 0..n {
                            tmp[d] = shape[d] * in_f(d);
                        }
                    }
                    let fixed = self.fix_aspect_ratios(&mut tmp, n, rng);
                    if !self.valid_aspect_ratio(&tmp, n) {
                        continue;
                    }
                    if fixed {
                        for d in 0..n {
                            shape[d] = if self.has_input_shape { tmp[d] / in_f(d) } else { tmp[d] };
                        }
                    }
                    for d in 0..n {
                        let anchor = rng.uniform(0.0, (1.0 - shape[d]) as f64) as f32;
                        rel.lo[d] = anchor;
                        rel.hi[d] = anchor + shape[d];
                    }
                    out = rel;
                }
                if boxes.is_empty() {
                    // No boxes to weigh: the window proposed last is taken.
                    p.crop = out;
                    p.success = true;
                    continue;
                }
                let (worst, best) = self.metric_range(&rel, boxes, n);
                let metric = if self.all_boxes { worst } else { best };
                let valid = metric >= option.threshold;
                if metric <= best_metric && !valid {
                    continue;
                }
                best_metric = metric;
                p.crop = out;
                p.boxes.clear();
                p.indices.clear();
                for (k, b) in boxes.iter().enumerate() {
                    let keep = match self.prune {
                        None => rel.contains_centroid_of(b, n),
                        Some(t) => {
                            let inter = rel.intersection(b, n).volume(n);
                            inter != 0.0 && inter / b.volume(n) >= t
                        }
                    };
                    if keep {
                        p.boxes.push(b.remap(&rel, n));
                        p.indices.push(k as i32);
                    }
                }
                p.success = valid && !p.boxes.is_empty();
            }
        }
        // No valid window within `total_num_attempts`: the best one so far (DALI warns).
        p.success = true;
        p
    }
}

impl Operator for RandomBBoxCrop {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let op = &self.ctx.display_name;
        let input = ws.inputs[0];
        let samples = input.len();
        if input.dtype() != DType::F32 {
            return Err(Error::type_mismatch(op, format!("bounding boxes must be FLOAT; got {}", input.dtype().dali_name())));
        }
        if input.ndim() != 2 {
            return Err(Error::type_mismatch(op, format!("Unexpected number of dimensions for bounding boxes input: {} (expected boxes of shape (N, 4) or (N, 6))", input.ndim())));
        }
        let ncoords = if samples > 0 { input.shape(0)[1] } else { 4 };
        if let Some(i) = (0..samples).find(|&i| input.shape(i)[1] != ncoords) {
            return Err(Error::data(self.ctx.at(ws.iteration, i, ""), format!("input 'bboxes': Unexpected number of coordinates for sample {i}. Expected {ncoords}, got {}", input.shape(i)[1])));
        }
        if ncoords != 4 && ncoords != 6 {
            return Err(Error::data(self.ctx.at(ws.iteration, 0, ""), format!("input 'bboxes': Unexpected number of coordinates for bounding boxes: {ncoords} (4 for 2D boxes or 6 for 3D boxes)")));
        }
        let n = ncoords / 2;
        let (layout, p, extents) = self.layout(n)?;
        let labels = ws.inputs.get(1).copied();
        if let Some(l) = labels {
            if l.len() != samples {
                return Err(Error::type_mismatch(op, format!("input 'labels' has {} samples, the boxes {samples}", l.len())));
            }
            if l.ndim() < 1 {
                return Err(Error::type_mismatch(op, "input 'labels' must have at least one dimension (one label per box)".to_string()));
            }
        }
        // Per-sample arguments and boxes, read and checked in order (errors name the sample).
        let mut shapes = Vec::with_capacity(samples);
        let mut all_boxes: Vec<Vec<BoxN>> = Vec::with_capacity(samples);
        for i in 0..samples {
            let crop = if self.has_crop_shape { self.shape_arg(ws, "crop_shape", i, n)? } else { [0; MAX_DIM] };
            let ins = if self.has_input_shape { self.shape_arg(ws, "input_shape", i, n)? } else { [0; MAX_DIM] };
            shapes.push((crop, ins));
            let src: &[f32] = bytemuck::cast_slice(input.bytes(i));
            let mut boxes = Vec::with_capacity(src.len() / ncoords);
            for (k, c) in src.chunks_exact(ncoords).enumerate() {
                let mut b = BoxN::default();
                for d in 0..n {
                    b.lo[d] = c[p[d]];
                    b.hi[d] = c[p[n + d]];
                    if extents {
                        b.hi[d] += b.lo[d];
                    }
                }
                let inside = (0..n).all(|d| b.lo[d] >= 0.0 && b.hi[d] <= 1.0);
                if !inside {
                    return Err(Error::data(self.ctx.at(ws.iteration, i, ""), format!("input 'bboxes': box {k} {:?} (layout {layout}) is out of bounds [0, 1]", c)));
                }
                boxes.push(b);
            }
            if let Some(l) = labels {
                let rows = l.shape(i).first().copied().unwrap_or(0);
                if rows < boxes.len() {
                    return Err(Error::data(self.ctx.at(ws.iteration, i, ""), format!("input 'labels': {rows} labels for {} boxes", boxes.len())));
                }
            }
            all_boxes.push(boxes);
        }
        if self.has_input_shape {
            if let Some(i) = (0..samples).find(|&i| (0..n).any(|d| shapes[i].1[d] == 0)) {
                return Err(Error::arg(op, "input_shape", format!("sample {i}: the input shape must not have zero extents; got {:?}", &shapes[i].1[..n])));
            }
        }
        let crops: Vec<Prospective> = ws.pool.install(|| {
            (0..samples).into_par_iter().map(|i| self.find_crop(&all_boxes[i], n, shapes[i].0, shapes[i].1, &mut ws.rng(&self.ctx, i))).collect()
        });
        let vec_meta = |dtype: DType, rows: &dyn Fn(usize) -> Vec<usize>| {
            let sh: Vec<Vec<usize>> = (0..samples).map(rows).collect();
            let nd = sh.first().map_or(1, |s| s.len());
            BatchMeta::new(dtype, nd, sh.iter().map(|s| &s[..]))
        };
        let mut anchor = TensorList::for_overwrite(vec_meta(DType::F32, &|_| vec![n]));
        let mut shape = TensorList::for_overwrite(vec_meta(DType::F32, &|_| vec![n]));
        let mut out_boxes = TensorList::for_overwrite(vec_meta(DType::F32, &|i| vec![crops[i].boxes.len(), ncoords]));
        for ((a, s), c) in anchor.samples_mut().into_iter().zip(shape.samples_mut()).zip(&crops) {
            let (a, s): (&mut [f32], &mut [f32]) = (bytemuck::cast_slice_mut(a), bytemuck::cast_slice_mut(s));
            for d in 0..n {
                a[d] = c.crop.lo[d];
                s[d] = c.crop.hi[d] - c.crop.lo[d];
            }
        }
        for (dst, c) in out_boxes.samples_mut().into_iter().zip(&crops) {
            let dst: &mut [f32] = bytemuck::cast_slice_mut(dst);
            for (o, b) in dst.chunks_exact_mut(ncoords).zip(&c.boxes) {
                for d in 0..n {
                    o[p[d]] = b.lo[d];
                    o[p[n + d]] = if extents { b.hi[d] - b.lo[d] } else { b.hi[d] };
                }
            }
        }
        let mut outs = vec![anchor, shape, out_boxes];
        if let Some(l) = labels {
            let meta = vec_meta(l.dtype(), &|i| {
                let mut s = l.shape(i).to_vec();
                s[0] = crops[i].indices.len();
                s
            });
            let mut out = TensorList::for_overwrite(meta);
            for (i, dst) in out.samples_mut().into_iter().enumerate() {
                let sh = l.shape(i);
                let row = sh[1..].iter().product::<usize>() * l.dtype().size();
                let src = l.bytes(i);
                for (o, &k) in dst.chunks_exact_mut(row.max(1)).zip(&crops[i].indices) {
                    let k = k as usize;
                    o.copy_from_slice(&src[k * row..(k + 1) * row]);
                }
            }
            outs.push(out);
        }
        if self.output_indices {
            let mut out = TensorList::for_overwrite(vec_meta(DType::I32, &|i| vec![crops[i].indices.len()]));
            for (dst, c) in out.samples_mut().into_iter().zip(&crops) {
                let dst: &mut [i32] = bytemuck::cast_slice_mut(dst);
                dst.copy_from_slice(&c.indices);
            }
            outs.push(out);
        }
        Ok(outs)
    }
}
