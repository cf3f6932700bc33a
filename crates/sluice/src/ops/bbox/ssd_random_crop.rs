//! `fn.ssd_random_crop` (DALI's legacy `SSDRandomCrop`, `ssd/random_crop.cc`; cpu only and
//! deprecated in favour of `fn.random_bbox_crop`, as in DALI): the random crop of the SSD
//! paper applied to an image, its boxes and their labels in one operator.
//!
//! Per sample, as DALI: one of seven options is picked uniformly, "whole image" or a minimum
//! IoU of -1 (any window), 0.1, 0.3, 0.5, 0.7 or 0.9. Then `num_attempts` attempts: a window
//! of relative width and height drawn in [0.3, 1), refused unless width / height is in
//! [0.5, 2], placed uniformly inside the image; it is taken when the IoU of every box with it
//! reaches the minimum and at least one box has its centre inside. When the attempts run
//! out, another option is picked, so the search ends only on a window or on "whole image"
//! (which comes once in seven picks). The boxes with their centre inside are kept, mapped
//! into the window and clamped to [0, 1] (`random_bbox_crop`'s `BoxN`, which also gives the
//! IoU and the centre test); their labels follow them. The image window's pixel edges are
//! `round(edge * extent)` (half away from zero, in double precision, as DALI's `llround`);
//! the crop operators' `WindowPlan` copies it. "Whole image" gives the three inputs back
//! unchanged.
//!
//! Inputs: images HWC uint8, boxes `(N, 4)` float32 ltrb, labels `(N)` or `(N, 1)` int32.
//! Outputs: the image window (the input's layout), the `(K, 4)` boxes kept and their labels.
//!
//! Differences from DALI:
//! - Random numbers: Sluice draws from `ws.rng` (seed, operator, iteration, sample), so
//!   outputs depend on the seed alone, whatever the thread count, and are never DALI's bit
//!   for bit (DALI: a per-sample mt19937 that carries over iterations).
//!   `tests/test_ssd_random_crop.py` checks the operator's invariants on both libraries and
//!   compares the frequency of "whole image" outputs.
//! - A centre on the window's right or bottom edge is outside (`BoxN`'s half-open test);
//!   DALI's test is closed. Boxes are mapped in f32 (DALI: f64, then rounded to f32).
//! - Labels `(N, 1)` give `(K, 1)` labels (DALI: `(K)` for a cropped sample and `(N, 1)` for
//!   a whole one, which cannot share a batch).
//! - Checked here, not in DALI (which reads out of bounds or fails only when it crops):
//!   images 3-D uint8 (layout HWC when set), boxes `(N, 4)` float32, one int32 label per
//!   box, `num_attempts` at least 1 (DALI takes 0 or less and then never crops).
//! - A sample with no boxes gives its whole image at once: no window can keep a box, so DALI
//!   ends there too, after failed rounds.

use rayon::prelude::*;

use super::random_crop::BoxN;
use crate::error::{Error, Result};
use crate::ops::crop::window::Span;
use crate::ops::crop::window_copy::WindowPlan;
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::rng::SampleRng;
use crate::tensor::{BatchMeta, DType, TensorList};

/// `fn.ssd_random_crop`.
pub static SSD_RANDOM_CROP: OpDef = OpDef {
    schema: OpSchema {
        name: "SSDRandomCrop",
        doc: "Performs a random crop with bounding boxes where Intersection Over Union (IoU) meets a randomly selected threshold between 0-1.\n\nWhen the IoU falls below the threshold, a new random crop is generated up to num_attempts. As an input, the operator accepts image, bounding boxes and labels. At the output cropped image, cropped and valid bounding boxes and valid labels are returned.\n\nInputs: 0: images (HWC, uint8), 1: bboxes ((N, 4) float, ltrb), 2: labels ((N) or (N, 1) int32).",
        devices: &[Device::Cpu],
        min_inputs: 3,
        max_inputs: 3,
        num_outputs: 3,
        host_inputs: &[],
        args: &[&[arg("num_attempts", T::Int, D::Int(1), "Number of attempts.")]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(SsdRandomCrop::new(ctx)?))),
    mixed: None,
    gpu: None,
};

/// The minimum IoUs SSD picks from; one more pick, past the end, is "whole image".
const MIN_IOUS: [f32; 6] = [-1.0, 0.1, 0.3, 0.5, 0.7, 0.9];

struct SsdRandomCrop {
    ctx: OpContext,
    num_attempts: i64,
}

impl SsdRandomCrop {
    fn new(ctx: &OpContext) -> Result<SsdRandomCrop> {
        let num_attempts = ctx.args.int("num_attempts");
        if num_attempts < 1 {
            return Err(Error::arg(&ctx.display_name, "num_attempts", format!("`num_attempts` must be at least 1; got {num_attempts}")));
        }
        Ok(SsdRandomCrop { ctx: ctx.clone(), num_attempts })
    }

    /// Checks the three inputs; gives the boxes of the whole batch as one list, and where
    /// each sample's boxes start in it (plus the end).
    fn read_inputs(&self, ws: &Workspace<'_>) -> Result<(Vec<BoxN>, Vec<usize>)> {
        let op = &self.ctx.display_name;
        let (images, boxes, labels) = (ws.inputs[0], ws.inputs[1], ws.inputs[2]);
        let samples = images.len();
        if boxes.len() != samples || labels.len() != samples {
            return Err(Error::type_mismatch(op, format!("the inputs hold different numbers of samples: images {samples}, bboxes {}, labels {}", boxes.len(), labels.len())));
        }
        if images.dtype() != DType::U8 {
            return Err(Error::type_mismatch(op, format!("input 'images' must be UINT8; got {}", images.dtype().dali_name())));
        }
        let layout = images.meta().layout();
        if images.ndim() != 3 || !(layout.is_empty() || layout.as_str() == "HWC") {
            return Err(Error::type_mismatch(op, format!("input 'images' must be HWC images (3 dimensions); got {} dimensions, layout '{}'", images.ndim(), layout.as_str())));
        }
        if boxes.dtype() != DType::F32 || boxes.ndim() != 2 {
            return Err(Error::type_mismatch(op, format!("input 'bboxes' must be FLOAT boxes of shape (N, 4); got {} with {} dimensions", boxes.dtype().dali_name(), boxes.ndim())));
        }
        if labels.dtype() != DType::I32 {
            return Err(Error::type_mismatch(op, format!("input 'labels' must be INT32; got {}", labels.dtype().dali_name())));
        }
        let mut all = Vec::with_capacity((0..samples).map(|i| boxes.numel(i) / 4).sum());
        let mut starts = Vec::with_capacity(samples + 1);
        starts.push(0);
        for i in 0..samples {
            let shape = boxes.shape(i);
            if !matches!(shape, [_, 4]) {
                return Err(Error::data(self.ctx.at(ws.iteration, i, ""), format!("input 'bboxes': expected boxes of shape (N, 4); got shape {shape:?}")));
            }
            let n = shape[0];
            let label_shape = labels.shape(i);
            if !(label_shape == [n] || label_shape == [n, 1]) {
                return Err(Error::data(self.ctx.at(ws.iteration, i, ""), format!("input 'labels': expected one label per box, shape ({n}) or ({n}, 1); got shape {label_shape:?}")));
            }
            let src: &[f32] = bytemuck::cast_slice(boxes.bytes(i));
            all.extend(src.chunks_exact(4).map(|c| BoxN { lo: [c[0], c[1], 0.0], hi: [c[2], c[3], 0.0] }));
            starts.push(all.len());
        }
        Ok((all, starts))
    }

    /// SSD's search for one sample: a relative window that keeps at least one box, or `None`
    /// for the whole image.
    fn find_window(&self, boxes: &[BoxN], rng: &mut SampleRng) -> Option<BoxN> {
        if boxes.is_empty() {
            // No window can keep a box: only "whole image" would end the search.
            return None;
        }
        loop {
            let pick = rng.below(MIN_IOUS.len() as u64 + 1) as usize;
            let Some(&min_iou) = MIN_IOUS.get(pick) else {
                return None;
            };
            for _ in 0..self.num_attempts {
                let w = rng.uniform(0.3, 1.0) as f32;
                let h = rng.uniform(0.3, 1.0) as f32;
                if !(0.5..=2.0).contains(&(w / h)) {
                    continue;
                }
                let left = rng.uniform(0.0, 1.0 - w as f64) as f32;
                let top = rng.uniform(0.0, 1.0 - h as f64) as f32;
                let window = BoxN { lo: [left, top, 0.0], hi: [left + w, top + h, 0.0] };
                if boxes.iter().all(|b| window.iou(b, 2) >= min_iou) && boxes.iter().any(|b| window.contains_centroid_of(b, 2)) {
                    return Some(window);
                }
            }
        }
    }
}

/// The pixels `lo..hi` of relative edges `lo`, `hi` along an axis of `extent` pixels.
fn pixel_span(lo: f32, hi: f32, extent: usize) -> Span {
    let px = |v: f32| ((v as f64 * extent as f64).round().max(0.0) as usize).min(extent);
    let (a, b) = (px(lo), px(hi));
    Span { anchor: a as i64, len: b.saturating_sub(a) }
}

impl Operator for SsdRandomCrop {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let (images, boxes, labels) = (ws.inputs[0], ws.inputs[1], ws.inputs[2]);
        let (all, starts) = self.read_inputs(ws)?;
        let samples = images.len();
        let sample_boxes = |i: usize| &all[starts[i]..starts[i + 1]];
        let windows: Vec<Option<BoxN>> = ws.pool.install(|| (0..samples).into_par_iter().map(|i| self.find_window(sample_boxes(i), &mut ws.rng(&self.ctx, i))).collect());
        let kept = |i: usize| -> usize {
            match &windows[i] {
                Some(w) => sample_boxes(i).iter().filter(|b| w.contains_centroid_of(b, 2)).count(),
                None => sample_boxes(i).len(),
            }
        };
        let counts: Vec<usize> = (0..samples).map(kept).collect();

        let mut plan = WindowPlan::new(3, DType::U8, DType::U8, Some(2));
        for (i, window) in windows.iter().enumerate() {
            let &[h, w, c] = images.shape(i) else { unreachable!("checked 3-D") };
            plan.push_sample(match window {
                Some(win) => [pixel_span(win.lo[1], win.hi[1], h), pixel_span(win.lo[0], win.hi[0], w), Span::full(c)],
                None => [Span::full(h), Span::full(w), Span::full(c)],
            });
        }
        let out_images = plan.run_cpu(ws.pool, images)?;

        let box_shapes: Vec<[usize; 2]> = counts.iter().map(|&k| [k, 4]).collect();
        let mut box_meta = BatchMeta::new(DType::F32, 2, box_shapes.iter().map(|s| &s[..]));
        box_meta.inherit_source_info(boxes.meta());
        let mut out_boxes = TensorList::for_overwrite(box_meta);
        // Labels keep their trailing dimension (if any): a batch has one number of dimensions.
        let label_shapes: Vec<[usize; 2]> = counts.iter().map(|&k| [k, 1]).collect();
        let label_ndim = labels.ndim();
        let mut label_meta = BatchMeta::new(DType::I32, label_ndim, label_shapes.iter().map(|s| &s[..label_ndim]));
        label_meta.inherit_source_info(labels.meta());
        let mut out_labels = TensorList::for_overwrite(label_meta);

        for (i, (dst_boxes, dst_labels)) in out_boxes.samples_mut().into_iter().zip(out_labels.samples_mut()).enumerate() {
            let Some(window) = &windows[i] else {
                dst_boxes.copy_from_slice(boxes.bytes(i));
                dst_labels.copy_from_slice(labels.bytes(i));
                continue;
            };
            let dst_boxes: &mut [f32] = bytemuck::cast_slice_mut(dst_boxes);
            let dst_labels: &mut [i32] = bytemuck::cast_slice_mut(dst_labels);
            let src_labels: &[i32] = bytemuck::cast_slice(labels.bytes(i));
            let inside = sample_boxes(i).iter().zip(src_labels).filter(|(b, _)| window.contains_centroid_of(b, 2));
            for ((o, l), (b, &label)) in dst_boxes.chunks_exact_mut(4).zip(dst_labels.iter_mut()).zip(inside) {
                let m = b.remap(window, 2);
                o.copy_from_slice(&[m.lo[0], m.lo[1], m.hi[0], m.hi[1]]);
                *l = label;
            }
        }
        Ok(vec![out_images, out_boxes, out_labels])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{context, run};
    use crate::ops::ArgValue;

    fn op(given: Vec<(&str, ArgValue)>) -> Box<dyn Operator> {
        (SSD_RANDOM_CROP.cpu.unwrap())(&context(&SSD_RANDOM_CROP, given, &[]).unwrap()).unwrap()
    }

    /// An image whose pixels say where they are: (row, column, row + column), for h, w < 256.
    fn image(h: usize, w: usize) -> Vec<u8> {
        (0..h * w).flat_map(|k| [(k / w) as u8, (k % w) as u8, (k / w + k % w) as u8]).collect()
    }

    fn batch(samples: usize, h: usize, w: usize, boxes: &[[f32; 4]], label_shape: &[usize]) -> (TensorList, TensorList, TensorList) {
        let images = TensorList::from_samples(&vec![vec![h, w, 3]; samples], &vec![image(h, w); samples]).with_layout("HWC");
        let flat: Vec<f32> = boxes.iter().flatten().copied().collect();
        let b = TensorList::from_samples(&vec![vec![boxes.len(), 4]; samples], &vec![flat; samples]);
        let l = TensorList::from_samples(&vec![label_shape.to_vec(); samples], &vec![(0..boxes.len() as i32).map(|k| 10 + k).collect::<Vec<_>>(); samples]);
        (images, b, l)
    }

    const BOXES: [[f32; 4]; 3] = [[0.1, 0.1, 0.4, 0.5], [0.5, 0.45, 0.9, 0.8], [0.3, 0.6, 0.35, 0.7]];

    /// Where the output image sits in the input (its first pixel says), checked to be an
    /// exact window.
    fn find_window(img: &[u8], out: &[u8], out_shape: &[usize], w: usize) -> (usize, usize) {
        let (oh, ow) = (out_shape[0], out_shape[1]);
        let (y, x) = (out[0] as usize, out[1] as usize);
        for r in 0..oh {
            assert_eq!(out[r * ow * 3..(r + 1) * ow * 3], img[((y + r) * w + x) * 3..((y + r) * w + x + ow) * 3], "row {r} of the window at ({y}, {x})");
        }
        (y, x)
    }

    #[test]
    fn ssd_random_crop_outputs_a_window_and_the_boxes_centred_in_it() {
        let (h, w) = (60, 80);
        let (images, boxes, labels) = batch(32, h, w, &BOXES, &[3]);
        let out = run(op(vec![("num_attempts", ArgValue::Int(5))]).as_mut(), &[&images, &boxes, &labels], &[]).unwrap();
        assert_eq!(out[0].meta().layout().as_str(), "HWC");
        let (mut whole, mut cropped) = (0, 0);
        for i in 0..32 {
            let shape = out[0].shape(i).to_vec();
            let ob: &[f32] = out[1].sample(i);
            let ol: &[i32] = out[2].sample(i);
            assert_eq!(out[1].shape(i), [ol.len(), 4]);
            if shape == [h, w, 3] {
                whole += 1;
                assert_eq!(out[0].bytes(i), images.bytes(i));
                continue;
            }
            cropped += 1;
            let (y, x) = find_window(images.bytes(i), out[0].bytes(i), &shape, w);
            let (l, t, r, b) = (x as f32 / w as f32, y as f32 / h as f32, (x + shape[1]) as f32 / w as f32, (y + shape[0]) as f32 / h as f32);
            assert!(!ol.is_empty());
            assert!(ob.iter().all(|v| (0.0..=1.0).contains(v)));
            // The boxes kept are those centred in the (pixel-rounded) window, mapped into it.
            let expected: Vec<(usize, [f32; 4])> = BOXES
                .iter()
                .enumerate()
                .filter_map(|(k, bx)| {
                    let (cx, cy) = ((bx[0] + bx[2]) / 2.0, (bx[1] + bx[3]) / 2.0);
                    let inside = cx >= l - 0.02 && cx <= r + 0.02 && cy >= t - 0.02 && cy <= b + 0.02;
                    let map = |v: f32, lo: f32, hi: f32| ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
                    inside.then(|| (k, [map(bx[0], l, r), map(bx[1], t, b), map(bx[2], l, r), map(bx[3], t, b)]))
                })
                .collect();
            for (o, lab) in ob.chunks_exact(4).zip(ol) {
                let k = (*lab - 10) as usize;
                let (_, e) = expected.iter().find(|(j, _)| *j == k).expect("a kept box is centred near the window");
                for d in 0..4 {
                    assert!((o[d] - e[d]).abs() < 0.03, "sample {i} box {k}: {o:?} vs {e:?}");
                }
            }
            let mut ks: Vec<i32> = ol.to_vec();
            ks.dedup();
            assert_eq!(ks.len(), ol.len(), "labels keep the boxes' order, each once");
        }
        assert!(whole > 0 && cropped > 0, "{whole} whole, {cropped} cropped");
    }

    #[test]
    fn ssd_random_crop_windows_meet_the_picked_iou_and_aspect_rules() {
        let c = SsdRandomCrop { ctx: context(&SSD_RANDOM_CROP, vec![], &[]).unwrap(), num_attempts: 3 };
        let boxes: Vec<BoxN> = BOXES.iter().map(|b| BoxN { lo: [b[0], b[1], 0.0], hi: [b[2], b[3], 0.0] }).collect();
        let mut whole = 0;
        for s in 0..700u64 {
            let mut rng = SampleRng::new(5, 1, s, 0);
            match c.find_window(&boxes, &mut rng) {
                None => whole += 1,
                Some(w) => {
                    let (ww, wh) = (w.hi[0] - w.lo[0], w.hi[1] - w.lo[1]);
                    assert!((0.3 - 1e-6..=1.0).contains(&ww) && (0.3 - 1e-6..=1.0).contains(&wh));
                    assert!((0.5 - 1e-6..=2.0 + 1e-6).contains(&(ww / wh)));
                    assert!(w.lo[0] >= 0.0 && w.lo[1] >= 0.0 && w.hi[0] <= 1.0 + 1e-6 && w.hi[1] <= 1.0 + 1e-6);
                    assert!(boxes.iter().any(|b| w.contains_centroid_of(b, 2)));
                }
            }
        }
        // "Whole image" comes once in seven picks, and a pick with a window fails more often
        // than not with these boxes, so somewhat more often than 1/7 (100 in 700).
        assert!((100..400).contains(&whole), "{whole}");
    }

    #[test]
    fn ssd_random_crop_is_reproducible_and_keeps_label_columns() {
        let (images, boxes, labels) = batch(6, 20, 30, &BOXES, &[3, 1]);
        let a = run(op(vec![]).as_mut(), &[&images, &boxes, &labels], &[]).unwrap();
        let b = run(op(vec![]).as_mut(), &[&images, &boxes, &labels], &[]).unwrap();
        for (x, y) in a.iter().zip(&b) {
            for i in 0..6 {
                assert_eq!(x.shape(i), y.shape(i));
                assert_eq!(x.bytes(i), y.bytes(i));
            }
        }
        assert_eq!(a[2].ndim(), 2);
        assert!((0..6).all(|i| a[2].shape(i)[1] == 1 && a[2].shape(i)[0] == a[1].shape(i)[0]));
    }

    #[test]
    fn ssd_random_crop_gives_a_sample_without_boxes_back_whole() {
        let (images, boxes, labels) = batch(3, 10, 12, &[], &[0]);
        let out = run(op(vec![]).as_mut(), &[&images, &boxes, &labels], &[]).unwrap();
        for i in 0..3 {
            assert_eq!(out[0].bytes(i), images.bytes(i));
            assert_eq!(out[1].shape(i), [0, 4]);
            assert_eq!(out[2].shape(i), [0]);
        }
    }

    #[test]
    fn ssd_random_crop_pixel_spans_round_half_away_from_zero_and_stay_inside() {
        assert_eq!(pixel_span(0.25, 0.75, 10), Span { anchor: 3, len: 5 });
        assert_eq!(pixel_span(0.0, 1.0000001, 7), Span { anchor: 0, len: 7 });
        assert_eq!(pixel_span(0.5, 0.8, 1), Span { anchor: 1, len: 0 });
    }

    #[test]
    fn ssd_random_crop_bad_inputs_name_the_operator_input_and_sample() {
        let good = batch(2, 8, 8, &BOXES, &[3]);
        let message = |imgs: &TensorList, b: &TensorList, l: &TensorList| run(op(vec![]).as_mut(), &[imgs, b, l], &[]).unwrap_err().to_string();

        let wide = TensorList::from_samples(&[vec![3, 4], vec![1, 5]], &[vec![0.0f32; 12], vec![0.0f32; 5]]);
        let e = message(&good.0, &wide, &good.2);
        assert!(e.contains("ssd_random_crop") && e.contains("sample 1") && e.contains("bboxes") && e.contains("[1, 5]"), "{e}");

        let few = TensorList::from_samples(&[vec![3], vec![2]], &[vec![1i32; 3], vec![1i32; 2]]);
        let e = message(&good.0, &good.1, &few);
        assert!(e.contains("ssd_random_crop") && e.contains("sample 1") && e.contains("labels"), "{e}");

        let chw = good.0.clone().with_layout("CHW");
        let e = message(&chw, &good.1, &good.2);
        assert!(e.contains("ssd_random_crop") && e.contains("HWC") && e.contains("CHW"), "{e}");

        let flat = TensorList::from_samples(&[vec![8, 8], vec![8, 8]], &[vec![0u8; 64], vec![0u8; 64]]);
        let e = message(&flat, &good.1, &good.2);
        assert!(e.contains("ssd_random_crop") && e.contains("HWC") && e.contains("2 dimensions"), "{e}");

        let wide_labels = TensorList::from_samples(&[vec![3], vec![3]], &[vec![1i64; 3], vec![1i64; 3]]);
        let e = message(&good.0, &good.1, &wide_labels);
        assert!(e.contains("ssd_random_crop") && e.contains("INT32"), "{e}");

        let e = (SSD_RANDOM_CROP.cpu.unwrap())(&context(&SSD_RANDOM_CROP, vec![("num_attempts", ArgValue::Int(0))], &[]).unwrap()).err().unwrap().to_string();
        assert!(e.contains("ssd_random_crop") && e.contains("num_attempts"), "{e}");
    }
}
