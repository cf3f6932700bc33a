//! The window copy behind `fn.crop`, `fn.slice`, `fn.pad` and `fn.paste`: every output
//! sample is a window of its input sample (one [`Span`] per dimension, whose anchor may be
//! negative and whose end may pass the input), elements outside the input taking the fill
//! value of their channel, the rest converted to the output type. Each operator decides its
//! windows; [`WindowPlan`] holds them, and both backends execute the same plan: the cpu with
//! [`crop_nd`], the gpu with one launch of `window.cu` ([`WindowCopyGpu`]).

use sluice_cuda::PushKernelArg;

use super::crop::crop_nd;
use super::window::{fill_per_channel, Span};
use crate::error::{Error, Result};
use crate::ops::cast::gpu::type_code;
use crate::ops::for_each_sample;
use crate::ops::gpu_params::{cuda_struct, per_sample_launches, ParamUpload};
use crate::ops::GpuWorkspace;
use crate::tensor::element::store_f64;
use crate::tensor::{BatchMeta, DType, Layout, TensorList, TensorListGpu};

/// One batch's windows, fill values and types.
#[derive(Debug, Clone)]
pub struct WindowPlan {
    ndim: usize,
    /// `ndim` spans per sample, outermost dimension first.
    spans: Vec<Span>,
    /// Samples pushed (0-dimensional ones have no spans).
    samples: usize,
    /// The fill value of each channel, as output element bytes; channel `c` takes
    /// `fill[min(c, len - 1)]`.
    fill: Vec<Vec<u8>>,
    /// When not empty: one fill value per sample (output element bytes), which replaces
    /// `fill` (`fn.pad`'s per-sample `fill_value`).
    sample_fill: Vec<Vec<u8>>,
    /// The channel dimension (`C` of the layout), if any.
    c_axis: Option<usize>,
    in_type: DType,
    out_type: DType,
    /// The output's layout where it is not the input's ([`WindowPlan::name_layout`]).
    layout: Option<Layout>,
}

impl WindowPlan {
    pub fn new(ndim: usize, in_type: DType, out_type: DType, c_axis: Option<usize>) -> WindowPlan {
        WindowPlan { ndim, spans: Vec::new(), samples: 0, fill: vec![vec![0; out_type.size()]], sample_fill: Vec::new(), c_axis, in_type, out_type, layout: None }
    }

    /// Appends the next sample's windows (`ndim` of them).
    pub fn push_sample(&mut self, spans: impl IntoIterator<Item = Span>) {
        let before = self.spans.len();
        self.spans.extend(spans);
        self.samples += 1;
        debug_assert_eq!(self.spans.len() - before, self.ndim, "one span per dimension");
    }

    /// Sets the fill values: one for every channel, or one per channel of `channels`
    /// (DALI's rule, with its error).
    pub fn set_fill(&mut self, op: &str, values: &[f64], channels: usize) -> Result<()> {
        let per_channel = fill_per_channel(op, values, channels.max(1))?;
        self.fill = per_channel
            .iter()
            .map(|&v| {
                let mut e = vec![0u8; self.out_type.size()];
                store_f64(self.out_type, &mut e, 0, v);
                e
            })
            .collect();
        Ok(())
    }

    /// Sets the fill values as output element bytes, one per channel (channel `c` takes
    /// `fill[min(c, len - 1)]`), for operators that convert them their own way.
    pub fn set_fill_elements(&mut self, fill: Vec<Vec<u8>>) {
        debug_assert!(!fill.is_empty() && fill.iter().all(|e| e.len() == self.out_type.size()));
        self.fill = fill;
    }

    /// Gives each sample its own fill value (output element bytes, one per sample).
    pub fn set_sample_fill(&mut self, fill: Vec<Vec<u8>>) {
        debug_assert!(fill.iter().all(|e| e.len() == self.out_type.size()));
        self.sample_fill = fill;
    }

    /// Sample `i`'s fill values, one per channel (or one for all).
    fn fill_of(&self, i: usize) -> &[Vec<u8>] {
        if self.sample_fill.is_empty() { &self.fill } else { std::slice::from_ref(&self.sample_fill[i]) }
    }

    pub fn spans(&self, i: usize) -> &[Span] {
        &self.spans[i * self.ndim..(i + 1) * self.ndim]
    }

    fn len(&self) -> usize {
        self.samples
    }

    /// Gives the output `layout` instead of the input's (`fn.crop` names the HWC it took an
    /// unlabelled image for, as DALI's does).
    pub fn name_layout(&mut self, layout: Layout) {
        self.layout = Some(layout);
    }

    /// The output batch's metadata: the windows' shapes, the input's layout (or the one
    /// named) and sources.
    pub fn out_meta(&self, input: &BatchMeta) -> BatchMeta {
        let shapes: Vec<Vec<usize>> = (0..input.len()).map(|i| if self.ndim == 0 { Vec::new() } else { self.spans(i).iter().map(|s| s.len).collect() }).collect();
        let mut meta = BatchMeta::new(self.out_type, self.ndim, shapes.iter().map(|s| s.as_slice()));
        meta.set_layout(self.layout.clone().unwrap_or_else(|| input.layout().clone()));
        meta.inherit_source_info(input);
        meta
    }

    /// The cpu backend: every sample's window, in parallel.
    pub fn run_cpu(&self, pool: &rayon::ThreadPool, input: &TensorList) -> Result<TensorList> {
        let mut out = TensorList::for_overwrite(self.out_meta(input.meta()));
        for_each_sample(pool, &mut out, |i, dst| {
            let spans: &[Span] = if self.ndim == 0 { &[] } else { self.spans(i) };
            crop_nd(dst, input.bytes(i), input.shape(i), spans, self.in_type, self.out_type, self.fill_of(i), self.c_axis);
            Ok(())
        })?;
        Ok(out)
    }
}

impl WindowPlan {
    /// The fill words `window.cu` reads: the batch's, then each sample's own (if any), each
    /// an output element's bits in the low bytes.
    fn fill_words(&self) -> Vec<u64> {
        self.fill
            .iter()
            .chain(&self.sample_fill)
            .map(|e| {
                let mut w = [0u8; 8];
                w[..e.len()].copy_from_slice(e);
                u64::from_le_bytes(w)
            })
            .collect()
    }

    /// Sample `i`'s descriptor for `window.cu` (input of `shape`, `numel` output elements, at
    /// device addresses `src` and `dst`). Its `fill` holds the index of its first fill word in
    /// [`WindowPlan::fill_words`], made an address once the block is placed. `None`: the
    /// window cuts more than [`MAX_DIMS`] dimensions.
    fn descriptor(&self, i: usize, shape: &[usize], numel: usize, src: u64, dst: u64) -> Option<WindowSample> {
        let spans: &[Span] = if self.ndim == 0 { &[] } else { self.spans(i) };
        let dims = merged_dims(shape, spans)?;
        let (fill, nfill) = if self.sample_fill.is_empty() { (0, self.fill.len()) } else { (self.fill.len() + i, 1) };
        let mut d = WindowSample { r#in: src, out: dst, numel: numel as i64, out_ext: [1; MAX_DIMS], in_ext: [1; MAX_DIMS], in_stride: [0; MAX_DIMS], anchor: [0; MAX_DIMS], fill: fill as u64, cstride: 1, ndim: dims.len() as i32, channels: 1, nfill: nfill as i32, pad: 0 };
        let mut stride = 1i64;
        for (k, &(o, e, a)) in dims.iter().enumerate().rev() {
            (d.out_ext[k], d.in_ext[k], d.anchor[k], d.in_stride[k]) = (o, e, a, stride);
            stride *= e;
        }
        if let Some(c) = self.c_axis.filter(|&c| c < spans.len()) {
            d.channels = spans[c].len.max(1) as i32;
            d.cstride = spans[c + 1..].iter().map(|s| s.len as i64).product::<i64>().max(1);
        }
        Some(d)
    }
}

/// Dimensions `window.cu` takes after merging.
const MAX_DIMS: usize = 6;

pub(crate) const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("../cast/cast.cu"), include_str!("window.cu"));

cuda_struct! {
    /// One sample (`struct WindowSample` in window.cu).
    pub(crate) struct WindowSample {
        r#in: u64,
        out: u64,
        numel: i64,
        out_ext: [i64; MAX_DIMS],
        in_ext: [i64; MAX_DIMS],
        in_stride: [i64; MAX_DIMS],
        anchor: [i64; MAX_DIMS],
        fill: u64,
        cstride: i64,
        ndim: i32,
        channels: i32,
        nfill: i32,
        pad: i32,
    }
}

/// One sample's window with the dimensions it spans whole merged into the one outside them
/// (an HWC crop is two dimensions: rows, and columns x channels): `(out extent, in extent,
/// anchor)`, outermost first. `None` when more than [`MAX_DIMS`] remain.
fn merged_dims(shape: &[usize], spans: &[Span]) -> Option<Vec<(i64, i64, i64)>> {
    let mut dims: Vec<(i64, i64, i64)> = Vec::with_capacity(shape.len().max(1));
    for (&ext, s) in shape.iter().zip(spans) {
        let (len, ext) = (s.len as i64, ext as i64);
        match dims.last_mut() {
            // Output coordinate m = o * ext + inner reads input m + anchor * ext, and is inside
            // exactly when o + anchor is: the inner dimension never leaves the input.
            Some(last) if s.anchor == 0 && s.len as i64 == ext => {
                last.0 *= len;
                last.1 *= ext;
                last.2 *= ext;
            }
            _ => dims.push((len, ext, s.anchor)),
        }
    }
    if dims.is_empty() {
        dims.push((1, 1, 0)); // a scalar
    }
    (dims.len() <= MAX_DIMS).then_some(dims)
}

/// The gpu backend of a [`WindowPlan`].
#[derive(Default)]
pub struct WindowCopyGpu {
    params: ParamUpload,
}

impl WindowCopyGpu {
    /// Queues the copy of every sample's window of `input` on the stream; returns the output.
    pub fn run(&mut self, ws: &GpuWorkspace<'_>, op: &str, plan: &WindowPlan, input: &TensorListGpu) -> Result<TensorListGpu> {
        let (Some(in_code), Some(out_code)) = (type_code(plan.in_type), type_code(plan.out_type)) else {
            return Err(Error::Unsupported(format!("{op}: {} -> {} is not supported on the GPU", plan.in_type, plan.out_type)));
        };
        let out = TensorListGpu::alloc(plan.out_meta(input.meta()), ws.device, ws.stream)?;
        let fill_words = plan.fill_words();
        let mut descs: Vec<WindowSample> = Vec::with_capacity(plan.len());
        let mut max_numel = 0usize;
        for i in 0..plan.len().min(input.len()) {
            let numel = out.numel(i);
            if numel == 0 {
                continue;
            }
            let shape = input.shape(i);
            let d = plan.descriptor(i, shape, numel, input.sample_ptr(i), out.sample_ptr(i)).ok_or_else(|| {
                Error::Unsupported(format!("{op}: the window of sample {i} (input shape {shape:?}) cuts more than {MAX_DIMS} dimensions, which the GPU backend does not take"))
            })?;
            max_numel = max_numel.max(numel);
            descs.push(d);
        }
        if descs.is_empty() {
            return Ok(out);
        }
        // One block: the descriptors, then the fill words.
        let used = descs.len() * std::mem::size_of::<WindowSample>();
        let len = used + fill_words.len() * 8;
        let base = self.params.upload_with(ws, len, |block, base| {
            let (d, f) = block.split_at_mut(used);
            let fill_at = base + used as u64;
            for (dst, s) in d.chunks_exact_mut(std::mem::size_of::<WindowSample>()).zip(&descs) {
                let mut s = *s;
                s.fill = fill_at + s.fill * 8;
                dst.copy_from_slice(bytemuck::bytes_of(&s));
            }
            f.copy_from_slice(bytemuck::cast_slice(&fill_words));
            Ok(())
        })?;
        let copy_bytes = if plan.in_type == plan.out_type { plan.in_type.size() as i32 } else { 0 };
        let out_bytes = plan.out_type.size() as i32;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "window", SRC, "window_copy")?;
        // SAFETY: each descriptor points into `input` and `out` (alive, ordered on this
        // stream) and at the fill words uploaded after the descriptors; the merged extents
        // multiply to the sample's output elements (written) and input coordinates are read
        // only where they lie inside the sample's merged input extents.
        for (first, cfg) in per_sample_launches(max_numel, descs.len()) {
            let descs_at = base + (first * std::mem::size_of::<WindowSample>()) as u64;
            unsafe {
                ws.stream
                    .launch_builder(&f)
                    .arg(&descs_at)
                    .arg(&in_code)
                    .arg(&out_code)
                    .arg(&copy_bytes)
                    .arg(&out_bytes)
                    .launch(cfg)
                    .map_err(sluice_cuda::CudaError::from)?;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_struct_matches() {
        crate::ops::gpu_params::check_cuda_source("window", SRC, &[("WindowSample", &WindowSample::LAYOUT)]);
    }

    /// A C++ program running one launch of window.cu on the CPU (tools/cuda_shim/shim.h, every
    /// thread of a small grid in turn) from a case file written by [`run_on_host`].
    const HARNESS: &str = r#"#include <cstdlib>
#include <vector>
#include "@SHIM@"
#include "@SRC@"
static FILE* in_file;
static void read_exactly(void* p, size_t n) {
    if (fread(p, 1, n, in_file) != n) { fprintf(stderr, "short case file\n"); exit(2); }
}
int main(int argc, char** argv) {
    if (argc != 2 || !(in_file = fopen(argv[1], "rb"))) return 2;
    int head[7];  // samples, fills, in type, out type, copy bytes, out bytes, blocks
    read_exactly(head, sizeof head);
    std::vector<WindowSample> samples(head[0]);
    read_exactly(samples.data(), head[0] * sizeof(WindowSample));
    std::vector<unsigned long long> fill(head[1]);
    read_exactly(fill.data(), head[1] * 8);
    unsigned long long in_len, out_len;
    read_exactly(&in_len, 8);
    std::vector<unsigned long long> input(in_len / 8 + 1);
    read_exactly(input.data(), in_len);
    read_exactly(&out_len, 8);
    std::vector<unsigned long long> out(out_len / 8 + 1, 0xababababababababULL);
    // Addresses in the case file are byte offsets into the input and the output.
    for (WindowSample& s : samples) {
        s.in += (unsigned long long)input.data();
        s.out += (unsigned long long)out.data();
        s.fill = (unsigned long long)(fill.data() + s.fill);  // a word index in the case file
    }
    const unsigned threads = 32, blocks = head[6];
    blockDim = {threads, 1, 1};
    gridDim = {blocks, (unsigned)head[0], 1};
    for (unsigned y = 0; y < (unsigned)head[0]; y++)
        for (unsigned b = 0; b < blocks; b++)
            for (unsigned t = 0; t < threads; t++) {
                blockIdx = {b, y, 0};
                threadIdx = {t, 0, 0};
                window_copy(samples.data(), head[2], head[3], head[4], head[5]);
            }
    fwrite(out.data(), 1, out_len, stdout);
    return 0;
}
"#;

    /// Runs `plan` over `input` with window.cu on the host, with the descriptors
    /// [`WindowCopyGpu::run`] uploads; returns every sample's output bytes.
    fn run_on_host(plan: &WindowPlan, input: &TensorList) -> Vec<Vec<u8>> {
        use std::sync::OnceLock;
        static KERNELS: OnceLock<crate::ops::gpu_params::HostKernels> = OnceLock::new();
        let kernels = KERNELS.get_or_init(|| crate::ops::gpu_params::HostKernels::build("window", SRC, HARNESS));
        let meta = plan.out_meta(input.meta());
        let (mut in_bytes, mut descs, mut out_at) = (Vec::new(), Vec::new(), Vec::new());
        let mut out_len = 0usize;
        for i in 0..input.len() {
            descs.push(plan.descriptor(i, input.shape(i), meta.numel(i), in_bytes.len() as u64, out_len as u64).unwrap());
            in_bytes.extend_from_slice(input.bytes(i));
            while in_bytes.len() % 8 != 0 {
                in_bytes.push(0);
            }
            out_at.push(out_len..out_len + meta.byte_range(i).len());
            out_len += meta.byte_range(i).len().next_multiple_of(8);
        }
        let mut case = Vec::new();
        let same = plan.in_type == plan.out_type;
        let fill_words = plan.fill_words();
        for v in [descs.len() as i32, fill_words.len() as i32, type_code(plan.in_type).unwrap(), type_code(plan.out_type).unwrap(), if same { plan.in_type.size() as i32 } else { 0 }, plan.out_type.size() as i32, 3] {
            case.extend(v.to_le_bytes());
        }
        case.extend(bytemuck::cast_slice::<WindowSample, u8>(&descs));
        case.extend(bytemuck::cast_slice::<u64, u8>(&fill_words));
        case.extend((in_bytes.len() as u64).to_le_bytes());
        case.extend(&in_bytes);
        case.extend((out_len as u64).to_le_bytes());
        let stdout = kernels.run("window_copy", &case);
        out_at.into_iter().map(|r| stdout[r].to_vec()).collect()
    }

    /// An HWC batch of `t` with pseudo-random bytes (FLOAT: some NaNs, infinities and values
    /// past every integer range among them).
    fn batch(t: DType, shapes: &[[usize; 3]]) -> TensorList {
        let shapes: Vec<&[usize]> = shapes.iter().map(|s| &s[..]).collect();
        let mut x = TensorList::new(t, 3, shapes).with_layout("HWC");
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for s in x.samples_mut() {
            for b in s.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *b = (state >> 24) as u8;
            }
            if t == DType::F32 {
                for (k, w) in s.chunks_exact_mut(4).enumerate() {
                    let v: f32 = match k % 7 { 0 => f32::NAN, 1 => f32::INFINITY, 2 => -3e9, 3 => 1e10, _ => (k as f32 * 37.25) % 300.0 - 20.0 };
                    w.copy_from_slice(&v.to_le_bytes());
                }
            }
        }
        x
    }

    #[test]
    fn the_kernel_gives_the_cpu_backends_bytes() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let sp = |anchor: i64, len: usize| Span { anchor, len };
        for (it, ot) in [(DType::U8, DType::U8), (DType::I16, DType::F32), (DType::F32, DType::U8), (DType::F32, DType::F16), (DType::U8, DType::I64)] {
            let input = batch(it, &[[5, 7, 3], [4, 4, 3], [6, 2, 3]]);
            let mut plan = WindowPlan::new(3, it, ot, Some(2));
            // Inside; past every edge (padding); a window wider and taller than the input.
            plan.push_sample([sp(1, 3), sp(2, 4), Span::full(3)]);
            plan.push_sample([sp(-2, 5), sp(3, 4), Span::full(3)]);
            plan.push_sample([sp(-1, 9), sp(-3, 8), Span::full(3)]);
            plan.set_fill("t", &[7.0, -2.0, 300.5], 3).unwrap();
            let cpu = plan.run_cpu(&pool, &input).unwrap();
            let gpu = run_on_host(&plan, &input);
            for (i, g) in gpu.iter().enumerate() {
                assert_eq!(cpu.bytes(i), &g[..], "{it} -> {ot}, sample {i}");
            }
        }
        // Channels cut too (CHW-like windows over every dimension), one fill value.
        let input = batch(DType::U8, &[[4, 5, 3]]);
        let mut plan = WindowPlan::new(3, DType::U8, DType::U8, Some(2));
        plan.push_sample([sp(1, 2), sp(-1, 7), sp(1, 4)]);
        plan.set_fill("t", &[9.0], 4).unwrap();
        let cpu = plan.run_cpu(&pool, &input).unwrap();
        assert_eq!(cpu.bytes(0), &run_on_host(&plan, &input)[0][..]);
        // A fill value per sample (fn.pad), with the per-channel ones unused.
        let input = batch(DType::I16, &[[3, 4, 2], [2, 2, 2]]);
        let mut plan = WindowPlan::new(3, DType::I16, DType::I16, None);
        plan.push_sample([sp(0, 5), sp(0, 6), Span::full(2)]);
        plan.push_sample([sp(0, 4), sp(0, 2), sp(0, 3)]);
        plan.set_sample_fill(vec![7i16.to_le_bytes().to_vec(), (-300i16).to_le_bytes().to_vec()]);
        let cpu = plan.run_cpu(&pool, &input).unwrap();
        for (i, g) in run_on_host(&plan, &input).iter().enumerate() {
            assert_eq!(cpu.bytes(i), &g[..], "per-sample fill, sample {i}");
        }
    }

    #[test]
    fn dimensions_spanned_whole_merge_into_the_one_outside() {
        let full = Span::full;
        // An HWC crop: rows, then columns x channels.
        assert_eq!(merged_dims(&[10, 20, 3], &[Span { anchor: 2, len: 4 }, Span { anchor: -1, len: 5 }, full(3)]), Some(vec![(4, 10, 2), (15, 60, -3)]));
        // A crop of rows only: one dimension.
        assert_eq!(merged_dims(&[10, 20, 3], &[Span { anchor: 2, len: 4 }, full(20), full(3)]), Some(vec![(240, 600, 120)]));
        // Nothing cut: the first dimension stays, the rest merge into it.
        assert_eq!(merged_dims(&[2, 3], &[full(2), full(3)]), Some(vec![(6, 6, 0)]));
        assert_eq!(merged_dims(&[], &[]), Some(vec![(1, 1, 0)]));
        let cut = Span { anchor: 1, len: 1 };
        assert_eq!(merged_dims(&[3; 7], &[cut; 7]), None);
    }
}
