//! `fn.box_encoder` (cpu, DALI 2.4's `BoxEncoder` of `dali/operators/ssd/box_encoder.cc`):
//! encodes a sample's ground-truth boxes (`ltrb`, float32) and labels (INT32) against the
//! `anchors` (SSD's default boxes), one output row per anchor.
//!
//! Matching, in DALI's f32 arithmetic and tie rules:
//! - the IoU of a box and an anchor is `inter / (vol(a) + vol(b) - inter)`, 0 for boxes that
//!   do not overlap;
//! - every box claims the anchor it overlaps most (the last one among equals), as if their IoU
//!   were 2;
//! - every anchor takes the box it overlaps most (the last one among equals) when that IoU is
//!   above `criteria`.
//!
//! Output rows are `[cx, cy, w, h]`: the matched box's centre and size, else the anchor's
//! (label 0); with `offset=True`, SSD's normalised offsets
//! `((c_box - c_anchor) / w_anchor - mean) / std` and `(ln(w_box / w_anchor) - mean) / std`
//! after both are multiplied by `scale`, and zeros (label 0) for unmatched anchors. Equal to
//! DALI 2.4's cpu operator bit for bit (`tests/test_box_encoder.py`), with libm's `logf`.
//! The IoU matrix is never stored: the boxes' best anchors are found first, then each anchor
//! scans the boxes (no per-sample allocation beyond the boxes' list).

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backend.
pub static BOX_ENCODER: OpDef = OpDef {
    schema: OpSchema {
        name: "BoxEncoder",
        doc: "Encodes the input bounding boxes and labels using a set of default boxes (anchors) passed as an argument.

This operator follows the algorithm described in \"SSD: Single Shot MultiBox Detector\" and implemented in https://github.com/mlperf/training/tree/master/single_stage_detector/ssd. Inputs must be supplied as the following Tensors: ``BBoxes`` that contain bounding boxes that are represented as ``[l,t,r,b]``; ``Labels`` that contain the corresponding label for each bounding box. The results are two tensors: ``EncodedBBoxes`` that contain M-encoded bounding boxes, where M is number of anchors; ``EncodedLabels`` that contain the corresponding label for each encoded box.",
        devices: &[Device::Cpu],
        min_inputs: 2,
        max_inputs: 2,
        num_outputs: 2,
        host_inputs: &[],
        args: &[&[
            arg("anchors", T::FloatList, D::Required, "Anchors to be used for encoding, as the list of floats is in the ``ltrb`` format."),
            arg("criteria", T::Float, D::Float(0.5), "Threshold IoU for matching bounding boxes with anchors. The value needs to be between 0 and 1."),
            arg("offset", T::Bool, D::Bool(false), "Returns normalized offsets ``((encoded_bboxes*scale - anchors*scale) - mean) / stds`` in EncodedBBoxes that use ``std`` and the ``mean`` and `scale` arguments."),
            arg("scale", T::Float, D::Float(1.0), "Rescales the box and anchor values before the offset is calculated (for example, to return to the absolute values)."),
            arg("means", T::FloatList, D::FloatList(&[0.0, 0.0, 0.0, 0.0]), "[x y w h] mean values for normalization."),
            arg("stds", T::FloatList, D::FloatList(&[1.0, 1.0, 1.0, 1.0]), "[x y w h] standard deviations for offset normalization."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(BoxEncoder::new(ctx)?))),
    mixed: None,
    gpu: None,
};

/// A box as DALI's `Box<2, float>`: corners `lo` and `hi`.
#[derive(Clone, Copy, Debug)]
struct Corners {
    lo: [f32; 2],
    hi: [f32; 2],
}

impl Corners {
    fn ltrb(v: &[f32]) -> Corners {
        Corners { lo: [v[0], v[1]], hi: [v[2], v[3]] }
    }

    fn volume(&self) -> f32 {
        (self.hi[0] - self.lo[0]) * (self.hi[1] - self.lo[1])
    }

    fn centroid(&self) -> [f32; 2] {
        [0.5 * (self.hi[0] + self.lo[0]), 0.5 * (self.hi[1] + self.lo[1])]
    }

    fn extent(&self) -> [f32; 2] {
        [self.hi[0] - self.lo[0], self.hi[1] - self.lo[1]]
    }

    /// DALI's `intersection_over_union`.
    fn iou(&self, other: &Corners) -> f32 {
        let lo = [self.lo[0].max(other.lo[0]), self.lo[1].max(other.lo[1])];
        let hi = [self.hi[0].min(other.hi[0]), self.hi[1].min(other.hi[1])];
        if !(hi[0] > lo[0] && hi[1] > lo[1]) {
            return 0.0;
        }
        let inter = (hi[0] - lo[0]) * (hi[1] - lo[1]);
        if inter == 0.0 {
            return 0.0;
        }
        inter / (self.volume() + other.volume() - inter)
    }
}

struct BoxEncoder {
    ctx: OpContext,
    anchors: Vec<Corners>,
    criteria: f32,
    offset: bool,
    scale: f32,
    means: [f32; 4],
    stds: [f32; 4],
}

impl BoxEncoder {
    fn new(ctx: &OpContext) -> Result<BoxEncoder> {
        let op = &ctx.display_name;
        let criteria = ctx.args.float("criteria") as f32;
        if criteria < 0.0 {
            return Err(Error::arg(op, "criteria", format!("Expected criteria >= 0, actual value = {criteria}")));
        }
        if criteria > 1.0 {
            return Err(Error::arg(op, "criteria", format!("Expected criteria <= 1, actual value = {criteria}")));
        }
        let raw = ctx.args.floats("anchors");
        if raw.len() % 4 != 0 {
            return Err(Error::arg(op, "anchors", format!("Anchors size must be divisible by 4, actual value = {}", raw.len())));
        }
        let anchors_f32: Vec<f32> = raw.iter().map(|&v| v as f32).collect();
        let anchors = anchors_f32.chunks_exact(4).map(Corners::ltrb).collect();
        let four = |name: &str| -> Result<[f32; 4]> {
            let v = ctx.args.floats(name);
            if v.len() != 4 {
                return Err(Error::arg(op, name, format!("{name} size must be a list of 4 values.")));
            }
            Ok([v[0] as f32, v[1] as f32, v[2] as f32, v[3] as f32])
        };
        let (means, stds) = (four("means")?, four("stds")?);
        if stds.contains(&0.0) {
            return Err(Error::arg(op, "stds", "stds values must be != 0."));
        }
        Ok(BoxEncoder { ctx: ctx.clone(), anchors, criteria, offset: ctx.args.bool("offset"), scale: ctx.args.float("scale") as f32, means, stds })
    }

    /// One sample: `boxes` (ltrb) and `labels` into `out_boxes` (4 floats per anchor) and
    /// `out_labels`.
    fn encode(&self, boxes: &[Corners], labels: &[i32], out_boxes: &mut [f32], out_labels: &mut [i32]) {
        // Unmatched anchors: zeros with offsets, else the anchor itself.
        for (k, a) in self.anchors.iter().enumerate() {
            let row = &mut out_boxes[4 * k..4 * k + 4];
            if self.offset {
                row.fill(0.0);
            } else {
                let (c, e) = (a.centroid(), a.extent());
                row.copy_from_slice(&[c[0], c[1], e[0], e[1]]);
            }
            out_labels[k] = 0;
        }
        if boxes.is_empty() {
            return;
        }
        // Each box's best anchor (the last among equals), which it keeps with an IoU of 2.
        let best_anchor: Vec<usize> = boxes
            .iter()
            .map(|b| {
                let mut best = (0usize, b.iou(&self.anchors[0]));
                for (k, a) in self.anchors.iter().enumerate().skip(1) {
                    let v = b.iou(a);
                    if v >= best.1 {
                        best = (k, v);
                    }
                }
                best.0
            })
            .collect();
        let iou = |b: usize, k: usize| if best_anchor[b] == k { 2.0 } else { boxes[b].iou(&self.anchors[k]) };
        for (k, a) in self.anchors.iter().enumerate() {
            let mut best = (0usize, iou(0, k));
            for b in 1..boxes.len() {
                let v = iou(b, k);
                if v >= best.1 {
                    best = (b, v);
                }
            }
            if best.1 <= self.criteria {
                continue;
            }
            let bx = &boxes[best.0];
            let row = &mut out_boxes[4 * k..4 * k + 4];
            let (c, e) = (bx.centroid(), bx.extent());
            if self.offset {
                let s = self.scale;
                let (bc, be) = ([c[0] * s, c[1] * s], [e[0] * s, e[1] * s]);
                let (ac, ae) = (a.centroid(), a.extent());
                let (ac, ae) = ([ac[0] * s, ac[1] * s], [ae[0] * s, ae[1] * s]);
                let (m, sd) = (self.means, self.stds);
                row[0] = ((bc[0] - ac[0]) / ae[0] - m[0]) / sd[0];
                row[1] = ((bc[1] - ac[1]) / ae[1] - m[1]) / sd[1];
                row[2] = ((be[0] / ae[0]).ln() - m[2]) / sd[2];
                row[3] = ((be[1] / ae[1]).ln() - m[3]) / sd[3];
            } else {
                row.copy_from_slice(&[c[0], c[1], e[0], e[1]]);
            }
            out_labels[k] = labels[best.0];
        }
    }
}

impl Operator for BoxEncoder {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let ctx = &self.ctx;
        let op = ctx.display_name.as_str();
        let (boxes, labels) = (ws.inputs[0], ws.inputs[1]);
        if boxes.dtype() != DType::F32 {
            return Err(Error::type_mismatch(op, format!("input 0 (bboxes): expected FLOAT boxes, got {}", boxes.dtype().dali_name())));
        }
        if labels.dtype() != DType::I32 {
            return Err(Error::type_mismatch(op, format!("input 1 (labels): expected INT32 labels, got {}", labels.dtype().dali_name())));
        }
        super::check_box_shapes(ctx, ws.iteration, "bboxes", boxes.meta(), 4)?;
        let n = boxes.len();
        for i in 0..n {
            if labels.numel(i) != boxes.numel(i) / 4 {
                return Err(Error::data(ctx.at(ws.iteration, i, boxes.source_info(i)), format!(
                    "{} labels for {} boxes: one label per box is expected (labels of shape {:?})",
                    labels.numel(i),
                    boxes.numel(i) / 4,
                    labels.shape(i)
                )));
            }
        }
        let m = self.anchors.len();
        let mut out_boxes = TensorList::for_overwrite(BatchMeta::new(DType::F32, 2, (0..n).map(|_| [m, 4]).collect::<Vec<_>>().iter().map(|s| &s[..])));
        let mut label_meta = BatchMeta::new(DType::I32, 1, (0..n).map(|_| [m]).collect::<Vec<_>>().iter().map(|s| &s[..]));
        label_meta.inherit_source_info(labels.meta());
        let mut out_labels = TensorList::for_overwrite(label_meta);
        // Labels first (cheap), then boxes with the labels' rows written alongside.
        let label_rows: Vec<&mut [u8]> = out_labels.samples_mut();
        let label_rows: Vec<std::sync::Mutex<&mut [u8]>> = label_rows.into_iter().map(std::sync::Mutex::new).collect();
        for_each_sample(ws.pool, &mut out_boxes, |i, dst| {
            let gt: Vec<Corners> = boxes.sample::<f32>(i).chunks_exact(4).map(Corners::ltrb).collect();
            let mut lab = label_rows[i].lock().expect("one writer per sample");
            self.encode(&gt, labels.sample::<i32>(i), bytemuck::cast_slice_mut(dst), bytemuck::cast_slice_mut(&mut lab));
            Ok(())
        })?;
        drop(label_rows);
        Ok(vec![out_boxes, out_labels])
    }
}
