//! GPU backend of `fn.box_encoder`: the cpu twin's checks and output shapes
//! ([`BoxEncoder::plan`]), the anchors uploaded once and kept, one descriptor per sample and
//! one launch of `box_encoder.cu` per batch, a block per sample.
//!
//! Labels and `offset=False` rows equal the cpu backend's bit for bit. With `offset=True`
//! the width and height offsets go through `logf`, CUDA's within 1 ulp of the logarithm as
//! is glibc's: they may differ by 2 ulp of the logarithm, which `(ln - mean) / std` carries
//! over; the tests allow 4 ulp of it (see `offset_tolerance`).

use sluice_cuda::DeviceBuffer;

use super::box_encoder::BoxEncoder;
use crate::error::{Error, Result};
use crate::ops::gpu_params::{block_per_record, cuda_struct, launch_records_in_rows, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::TensorListGpu;

pub(super) const SRC: &str = include_str!("box_encoder.cu");

/// `BOX_ENCODER_THREADS` in box_encoder.cu (a power of two, for its reduction).
const THREADS: u32 = 256;

cuda_struct! {
    /// One sample (`struct BoxEncoderSample` in box_encoder.cu).
    pub(super) struct BoxEncoderSample {
        boxes: u64,
        labels: u64,
        anchors: u64,
        out_boxes: u64,
        out_labels: u64,
        num_boxes: i64,
        num_anchors: i64,
        means: [f32; 4],
        stds: [f32; 4],
        criteria: f32,
        scale: f32,
        offset: i32,
        pad: i32,
    }
}

/// Device addresses of one sample's buffers (the anchors are the operator's).
pub(super) struct Addresses {
    pub boxes: u64,
    pub labels: u64,
    pub anchors: u64,
    pub out_boxes: u64,
    pub out_labels: u64,
}

impl BoxEncoder {
    /// The descriptor of a sample of `boxes` boxes at `at`.
    pub(super) fn describe(&self, boxes: usize, at: Addresses) -> BoxEncoderSample {
        BoxEncoderSample {
            boxes: at.boxes,
            labels: at.labels,
            anchors: at.anchors,
            out_boxes: at.out_boxes,
            out_labels: at.out_labels,
            num_boxes: boxes as i64,
            num_anchors: self.anchors.len() as i64,
            means: self.means,
            stds: self.stds,
            criteria: self.criteria,
            scale: self.scale,
            offset: self.offset as i32,
            pad: 0,
        }
    }
}

pub(super) struct BoxEncoderGpu {
    enc: BoxEncoder,
    /// The anchors (`[l, t, r, b]` floats), uploaded at the first batch and never written again.
    anchors: Option<DeviceBuffer>,
    params: ParamUpload,
    desc: Vec<BoxEncoderSample>,
}

impl BoxEncoderGpu {
    pub(super) fn new(enc: BoxEncoder) -> BoxEncoderGpu {
        BoxEncoderGpu { enc, anchors: None, params: ParamUpload::default(), desc: Vec::new() }
    }
}

impl GpuOperator for BoxEncoderGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let (boxes, labels) = (ws.gpu_inputs[0], ws.gpu_inputs[1]);
        let (box_meta, label_meta) = self.enc.plan(ws.iteration, boxes.meta(), labels.meta())?;
        let out_boxes = TensorListGpu::alloc(box_meta, ws.device, ws.stream)?;
        let out_labels = TensorListGpu::alloc(label_meta, ws.device, ws.stream)?;
        if boxes.is_empty() || self.enc.anchors.is_empty() {
            return Ok(vec![out_boxes, out_labels]);
        }
        // The kernel keeps box indices in the labels' ints.
        if let Some(i) = (0..boxes.len()).find(|&i| boxes.numel(i) / 4 > i32::MAX as usize) {
            return Err(Error::data(
                self.enc.ctx.at(ws.iteration, i, boxes.source_info(i)),
                format!("{} boxes: the gpu backend takes at most {} boxes per sample", boxes.numel(i) / 4, i32::MAX),
            ));
        }
        if self.anchors.is_none() {
            let bytes: &[u8] = bytemuck::cast_slice(&self.enc.anchors);
            let buf = DeviceBuffer::alloc(ws.device, ws.stream, bytes.len())?;
            // SAFETY: the source lives as long as the operator and is never written again;
            // from pageable memory the driver stages the copy before returning.
            unsafe { buf.copy_from_host_async(0, bytes)? };
            self.anchors = Some(buf);
        }
        let anchors = self.anchors.as_ref().expect("uploaded above").device_ptr();
        self.desc.clear();
        for i in 0..boxes.len() {
            let at = Addresses { boxes: boxes.sample_ptr(i), labels: labels.sample_ptr(i), anchors, out_boxes: out_boxes.sample_ptr(i), out_labels: out_labels.sample_ptr(i) };
            self.desc.push(self.enc.describe(boxes.numel(i) / 4, at));
        }
        let base = self.params.upload(ws, bytemuck::cast_slice(&self.desc))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "box_encoder", SRC, "box_encoder")?;
        // SAFETY: each descriptor points into `boxes`, `labels`, `out_boxes` and `out_labels`
        // (alive, ordered on this stream; the plan checked one label per box and sized the
        // outputs to the anchors) and into the anchors, which this operator keeps.
        unsafe { launch_records_in_rows::<BoxEncoderSample>(ws.stream, &f, base, self.desc.len(), |rows| block_per_record(THREADS, rows))? };
        Ok(vec![out_boxes, out_labels])
    }
}

/// How far a gpu `offset=True` width or height (`(ln(r) - mean) / std`) may be from the
/// cpu's `want`: 4 ulp of the logarithm (the two `logf`s are each within 1 ulp of it),
/// divided by `std`, plus 2 ulp of the result for the subtraction and division that follow.
#[cfg(test)]
pub(super) fn offset_tolerance(want: f32, mean: f32, std: f32) -> f32 {
    let ulp = |x: f32| {
        let x = x.abs();
        f32::from_bits(x.to_bits() + 1) - x
    };
    4.0 * ulp((want * std).abs() + mean.abs()) / std.abs() + 2.0 * ulp(want)
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use super::super::box_encoder::BOX_ENCODER;
    use super::*;
    use crate::ops::gpu_params::PerSampleKernels;
    use crate::ops::{testing, ArgValue};
    use crate::tensor::TensorList;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_struct_matches() {
        crate::ops::gpu_params::check_cuda_source("box_encoder", SRC, &[("BoxEncoderSample", &BoxEncoderSample::LAYOUT)]);
    }

    fn harness() -> &'static PerSampleKernels {
        static KERNELS: OnceLock<PerSampleKernels> = OnceLock::new();
        KERNELS.get_or_init(|| PerSampleKernels::build("box_encoder", SRC, "BoxEncoderSample", &["boxes", "labels", "anchors"], &["out_boxes", "out_labels"], &["box_encoder"]))
    }

    /// SSD300's 8732 default boxes (MLPerf's DefaultBoxes for COCO), ltrb, as
    /// tests/test_box_encoder.py builds them.
    fn ssd300_anchors() -> Vec<f64> {
        let (fig, feat, steps) = (300.0, [38usize, 19, 10, 5, 3, 1], [8.0, 16.0, 32.0, 64.0, 100.0, 300.0]);
        let scales = [21.0, 45.0, 99.0, 153.0, 207.0, 261.0, 315.0];
        let ratios: [&[f64]; 6] = [&[2.0], &[2.0, 3.0], &[2.0, 3.0], &[2.0, 3.0], &[2.0], &[2.0]];
        let mut out = Vec::new();
        for (idx, &n) in feat.iter().enumerate() {
            let (sk1, sk2) = (scales[idx] / fig, scales[idx + 1] / fig);
            let sk3 = f64::sqrt(sk1 * sk2);
            let mut sizes = vec![(sk1, sk1), (sk3, sk3)];
            for &a in ratios[idx] {
                let (w, h) = (sk1 * a.sqrt(), sk1 / a.sqrt());
                sizes.extend([(w, h), (h, w)]);
            }
            let fk = fig / steps[idx];
            for &(w, h) in &sizes {
                for i in 0..n {
                    for j in 0..n {
                        let [cx, cy, w, h] = [(j as f64 + 0.5) / fk, (i as f64 + 0.5) / fk, w, h].map(|v| v.clamp(0.0, 1.0));
                        out.extend([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h].map(|v| v as f32 as f64));
                    }
                }
            }
        }
        assert_eq!(out.len(), 8732 * 4);
        out
    }

    /// The 7 x 7 grid of overlapping anchors of tests/test_box_encoder.py.
    fn grid_anchors() -> Vec<f64> {
        (0..7).flat_map(|y| (0..7).flat_map(move |x| [x as f64 / 8.0, y as f64 / 8.0, (x + 2) as f64 / 8.0, (y + 2) as f64 / 8.0])).collect()
    }

    /// A batch of random boxes (as the Python tests draw them) with `counts` boxes per
    /// sample, and their labels.
    fn random_batch(seed: u64, counts: &[usize]) -> (TensorList, TensorList) {
        let mut state = seed | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32
        };
        let mut data = Vec::new();
        let mut labels = Vec::new();
        for &n in counts {
            let mut sample = Vec::new();
            for _ in 0..n {
                let (l, t) = (0.8 * next(), 0.8 * next());
                let (w, h) = (0.02 + 0.48 * next(), 0.02 + 0.48 * next());
                sample.extend([l, t, (l + w).min(1.0), (t + h).min(1.0)]);
            }
            data.push(sample);
            labels.push((0..n).map(|_| 1 + (next() * 80.0) as i32).collect());
        }
        batch(counts, data, labels)
    }

    fn batch(counts: &[usize], data: Vec<Vec<f32>>, labels: Vec<Vec<i32>>) -> (TensorList, TensorList) {
        let shapes: Vec<Vec<usize>> = counts.iter().map(|&n| vec![n, 4]).collect();
        let label_shapes: Vec<Vec<usize>> = counts.iter().map(|&n| vec![n]).collect();
        (TensorList::from_samples(&shapes, &data), TensorList::from_samples(&label_shapes, &labels))
    }

    /// Encodes `boxes`, `labels` with the cpu backend and with box_encoder.cu on the host,
    /// described as the gpu backend describes them, and compares: labels and rows exactly
    /// (NaN equal to NaN), `offset=True` widths and heights within [`offset_tolerance`].
    fn check(what: &str, args: Vec<(&str, ArgValue)>, boxes: &TensorList, labels: &TensorList) {
        let what = format!("{what}, {:?}", args.iter().filter(|(k, _)| *k != "anchors").collect::<Vec<_>>());
        let mut enc = BoxEncoder::new(&testing::context(&BOX_ENCODER, args, &[]).unwrap()).unwrap();
        let want = testing::run(&mut enc, &[boxes, labels], &[]).unwrap();
        let (box_meta, label_meta) = enc.plan(0, boxes.meta(), labels.meta()).unwrap();
        // One input block: boxes, labels, anchors; one output block: rows, labels.
        let mut input = boxes.buffer().as_slice()[..boxes.total_bytes()].to_vec();
        let labels_at = input.len() as u64;
        input.extend_from_slice(&labels.buffer().as_slice()[..labels.total_bytes()]);
        let anchors_at = input.len() as u64;
        input.extend_from_slice(bytemuck::cast_slice(&enc.anchors));
        let out_labels_at = box_meta.total_bytes() as u64;
        let descs: Vec<BoxEncoderSample> = (0..boxes.len())
            .map(|i| {
                let at = Addresses {
                    boxes: boxes.offset(i) as u64,
                    labels: labels_at + labels.offset(i) as u64,
                    anchors: anchors_at,
                    out_boxes: box_meta.offset(i) as u64,
                    out_labels: out_labels_at + label_meta.offset(i) as u64,
                };
                enc.describe(boxes.numel(i) / 4, at)
            })
            .collect();
        let got = harness().run_blocks("box_encoder", bytemuck::cast_slice(&descs), descs.len(), &input, box_meta.total_bytes() + label_meta.total_bytes());
        for i in 0..boxes.len() {
            let rows: &[f32] = bytemuck::cast_slice(&got[box_meta.byte_range(i)]);
            let start = out_labels_at as usize;
            let labs: &[i32] = bytemuck::cast_slice(&got[start + label_meta.offset(i)..start + label_meta.byte_range(i).end]);
            assert_eq!(labs, want[1].sample::<i32>(i), "{what}: sample {i}: labels");
            for (j, (&g, &w)) in rows.iter().zip(want[0].sample::<f32>(i)).enumerate() {
                let d = j % 4;
                let same = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
                let ok = same || (enc.offset && d >= 2 && (g - w).abs() <= offset_tolerance(w, enc.means[d], enc.stds[d]));
                assert!(ok, "{what}: sample {i}, anchor {}, column {d}: host-run kernel {g:e}, cpu {w:e}", j / 4);
            }
        }
    }

    /// The argument sets of tests/test_box_encoder.py's comparison with DALI.
    fn arg_sets() -> Vec<Vec<(&'static str, ArgValue)>> {
        let f = ArgValue::Float;
        let t = ArgValue::Bool(true);
        vec![
            vec![],
            vec![("criteria", f(0.3))],
            vec![("offset", t.clone())],
            vec![("offset", t.clone()), ("scale", f(300.0))],
            vec![("offset", t.clone()), ("means", ArgValue::FloatList(vec![0.1, -0.2, 0.0, 0.3])), ("stds", ArgValue::FloatList(vec![0.1, 0.1, 0.2, 0.2])), ("criteria", f(0.5))],
            vec![("criteria", f(0.0))],
            vec![("criteria", f(1.0)), ("offset", t)],
        ]
    }

    #[test]
    fn the_kernel_run_on_the_host_equals_the_cpu_backend_on_random_boxes() {
        for (name, anchors) in [("grid", grid_anchors()), ("ssd300", ssd300_anchors())] {
            // Few boxes, none, one, more boxes than the host's 32 threads.
            for (seed, counts) in [(7u64, &[5usize, 0, 1, 12, 3][..]), (11, &[40, 0, 2][..])] {
                let (boxes, labels) = random_batch(seed, counts);
                for mut args in arg_sets() {
                    args.push(("anchors", ArgValue::FloatList(anchors.clone())));
                    check(&format!("{name} anchors, boxes {counts:?}"), args, &boxes, &labels);
                }
            }
        }
    }

    #[test]
    fn the_kernel_run_on_the_host_keeps_the_cpus_tie_rules() {
        // Boxes equal to anchors and to each other, anchors equal to each other: the last
        // among equals wins on both sides of the matching (tests/test_box_encoder.py).
        let anchors = vec![0.0, 0.0, 0.5, 0.5, 0.5, 0.0, 1.0, 0.5, 0.0, 0.5, 0.5, 1.0, 0.0, 0.0, 0.5, 0.5];
        let data = vec![vec![0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.5, 0.5, 0.25, 0.0, 0.75, 0.5], vec![0.5, 0.0, 1.0, 0.5, 0.5, 0.0, 1.0, 0.5]];
        let (boxes, labels) = batch(&[3, 2], data, vec![vec![1, 2, 3], vec![4, 5]]);
        for mut args in arg_sets() {
            args.push(("anchors", ArgValue::FloatList(anchors.clone())));
            check("ties", args, &boxes, &labels);
        }
        // Many boxes on a 34-anchor grid: most anchors are several boxes' best.
        let (boxes, labels) = random_batch(3, &[150, 64]);
        let few: Vec<f64> = grid_anchors()[..34 * 4].to_vec();
        check("crowded", vec![("anchors", ArgValue::FloatList(few))], &boxes, &labels);
    }

    #[test]
    fn the_kernel_run_on_the_host_equals_the_cpu_backend_on_degenerate_boxes() {
        // NaN corners (first and later), inverted and empty boxes, boxes of infinite area
        // (IoU inf / inf = NaN), boxes outside [0, 1]: the NaN rules of the cpu's scans.
        let nan = f32::NAN;
        let inf = f32::INFINITY;
        let first_nan = vec![nan, 0.0, 0.5, 0.5, 0.0, 0.0, 0.3, 0.3, 0.2, 0.2, 0.6, 0.6];
        let odd = vec![0.6, 0.6, 0.2, 0.2, 0.3, 0.3, 0.3, 0.5, -inf, -inf, inf, inf, 0.1, 0.1, 0.4, 0.4, 1.2, -0.5, 2.0, 0.5, 0.1, nan, 0.4, 0.4];
        let all_inf = vec![-inf, -inf, inf, inf, 0.0, 0.0, 0.25, 0.25];
        let (boxes, labels) = batch(&[3, 6, 2], vec![first_nan, odd, all_inf], vec![vec![1, 2, 3], vec![1, 2, 3, 4, 5, 6], vec![7, 8]]);
        let mut with_inf = grid_anchors();
        with_inf.extend([-1e30, -1e30, 1e30, 1e30]);
        for (name, anchors) in [("grid", grid_anchors()), ("grid and a huge anchor", with_inf)] {
            for mut args in arg_sets() {
                args.push(("anchors", ArgValue::FloatList(anchors.clone())));
                check(&format!("degenerate boxes, {name}"), args, &boxes, &labels);
            }
        }
    }

    #[test]
    fn the_offset_tolerance_is_a_few_ulp() {
        // ln(r) = 0.5, mean 0, std 1: 4 ulp of 0.5 and 2 of the result.
        let tol = offset_tolerance(0.5, 0.0, 1.0);
        assert_eq!(tol, 6.0 * f32::EPSILON / 2.0);
        // Near the mean, the logarithm's ulp dominates the result's.
        assert!(offset_tolerance(1e-6, 2.0, 0.1) > 4.0 * 2.0 * f32::EPSILON / 0.1 * 0.99);
    }
}
