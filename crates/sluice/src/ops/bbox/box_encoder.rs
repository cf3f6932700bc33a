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
//!
//! The gpu backend (`box_encoder_gpu.rs`, `box_encoder.cu`) shares this module's argument
//! checks and [`BoxEncoder::plan`], and repeats [`BoxEncoder::encode`]'s f32 operations.

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backend.
pub static BOX_ENCODER: OpDef = OpDef {
    schema: OpSchema {
        name: "BoxEncoder",
        doc: "Encodes the input bounding boxes and labels using a set of default boxes (anchors) passed as an argument.

This operator follows the algorithm described in \"SSD: Single Shot MultiBox Detector\" and implemented in https://github.com/mlperf/training/tree/master/single_stage_detector/ssd. Inputs must be supplied as the following Tensors: ``BBoxes`` that contain bounding boxes that are represented as ``[l,t,r,b]``; ``Labels`` that contain the corresponding label for each bounding box. The results are two tensors: ``EncodedBBoxes`` that contain M-encoded bounding boxes, where M is number of anchors; ``EncodedLabels`` that contain the corresponding label for each encoded box.",
        devices: &[Device::Cpu, Device::Gpu],
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
    gpu: Some(|ctx, _| Ok(Box::new(super::box_encoder_gpu::BoxEncoderGpu::new(BoxEncoder::new(ctx)?)))),
};

/// A box as DALI's `Box<2, float>`: corners `lo` and `hi` (in memory `[l, t, r, b]`, as the
/// gpu backend uploads the anchors).
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub(super) struct Corners {
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

pub(super) struct BoxEncoder {
    pub(super) ctx: OpContext,
    pub(super) anchors: Vec<Corners>,
    pub(super) criteria: f32,
    pub(super) offset: bool,
    pub(super) scale: f32,
    pub(super) means: [f32; 4],
    pub(super) stds: [f32; 4],
}

impl BoxEncoder {
    pub(super) fn new(ctx: &OpContext) -> Result<BoxEncoder> {
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
        if boxes.is_empty() || self.anchors.is_empty() {
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

    /// The planning both backends share: checks the inputs' types, that every sample of
    /// `boxes` holds whole boxes and that `labels` has one label per box; returns the
    /// outputs' metadata (`[anchors, 4]` FLOAT rows, `[anchors]` INT32 labels per sample).
    pub(super) fn plan(&self, iteration: u64, boxes: &BatchMeta, labels: &BatchMeta) -> Result<(BatchMeta, BatchMeta)> {
        let ctx = &self.ctx;
        let op = ctx.display_name.as_str();
        if boxes.dtype() != DType::F32 {
            return Err(Error::type_mismatch(op, format!("input 0 (bboxes): expected FLOAT boxes, got {}", boxes.dtype().dali_name())));
        }
        if labels.dtype() != DType::I32 {
            return Err(Error::type_mismatch(op, format!("input 1 (labels): expected INT32 labels, got {}", labels.dtype().dali_name())));
        }
        super::check_box_shapes(ctx, iteration, "bboxes", boxes, 4)?;
        let n = boxes.len();
        for i in 0..n {
            if labels.numel(i) != boxes.numel(i) / 4 {
                return Err(Error::data(ctx.at(iteration, i, boxes.source_info(i)), format!(
                    "{} labels for {} boxes: one label per box is expected (labels of shape {:?})",
                    labels.numel(i),
                    boxes.numel(i) / 4,
                    labels.shape(i)
                )));
            }
        }
        let m = self.anchors.len();
        let out_boxes = BatchMeta::new(DType::F32, 2, std::iter::repeat_n(&[m, 4][..], n));
        let mut out_labels = BatchMeta::new(DType::I32, 1, std::iter::repeat_n(&[m][..], n));
        out_labels.inherit_source_info(labels);
        Ok((out_boxes, out_labels))
    }
}

impl Operator for BoxEncoder {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let (boxes, labels) = (ws.inputs[0], ws.inputs[1]);
        let (box_meta, label_meta) = self.plan(ws.iteration, boxes.meta(), labels.meta())?;
        let mut out_boxes = TensorList::for_overwrite(box_meta);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{testing, ArgValue};

    fn encoder(anchors: Vec<f64>) -> BoxEncoder {
        BoxEncoder::new(&testing::context(&BOX_ENCODER, vec![("anchors", ArgValue::FloatList(anchors))], &[]).unwrap()).unwrap()
    }

    #[test]
    fn the_shared_plan_refuses_bad_inputs_naming_the_operator_and_the_sample() {
        let enc = encoder(vec![0.0, 0.0, 0.5, 0.5]);
        let boxes = BatchMeta::new(DType::F32, 2, [&[1usize, 4][..], &[2, 5][..]]);
        let labels = BatchMeta::new(DType::I32, 1, [&[1usize][..], &[2][..]]);
        let e = enc.plan(3, &boxes, &labels).unwrap_err().to_string();
        assert!(e.contains("box_encoder") && e.contains("sample 1") && e.contains("[2, 5]"), "{e}");
        let boxes = BatchMeta::new(DType::F32, 2, [&[1usize, 4][..], &[2, 4][..]]);
        let e = enc.plan(3, &boxes, &labels).unwrap();
        assert_eq!((e.0.shape(1), e.1.shape(1)), (&[1, 4][..], &[1][..]));
        let labels = BatchMeta::new(DType::I32, 1, [&[1usize][..], &[3][..]]);
        let e = enc.plan(3, &boxes, &labels).unwrap_err().to_string();
        assert!(e.contains("box_encoder") && e.contains("sample 1") && e.contains("3 labels for 2 boxes"), "{e}");
        let labels = BatchMeta::new(DType::F32, 1, [&[1usize][..], &[2][..]]);
        let e = enc.plan(3, &boxes, &labels).unwrap_err().to_string();
        assert!(e.contains("box_encoder") && e.contains("INT32 labels"), "{e}");
    }

    #[test]
    fn no_anchors_give_empty_rows_not_a_panic() {
        let mut enc = encoder(vec![]);
        let boxes = TensorList::from_samples(&[vec![1, 4]], &[vec![0.0f32, 0.0, 0.5, 0.5]]);
        let labels = TensorList::from_samples(&[vec![1]], &[vec![3i32]]);
        let out = testing::run(&mut enc, &[&boxes, &labels], &[]).unwrap();
        assert_eq!((out[0].shape(0), out[1].shape(0)), (&[0, 4][..], &[0][..]));
    }
}
