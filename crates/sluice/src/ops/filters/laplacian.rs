//! `fn.laplacian`, bit for bit DALI 2.4's cpu operator (`tests/test_laplacian.py`):
//!
//! - One partial derivative per spatial axis `d` (outermost first): a separable correlation
//!   with the derivative window of `window_size[d]` along `d` and smoothing windows along the
//!   other axes, of `smoothing_size[a]` when given, else of `window_size[d]` (one value or one
//!   per axis; per sample). Derivative windows are odd, 3 to 31 points; smoothing windows odd,
//!   1 to 31 (1: no smoothing along that axis).
//! - Windows as DALI's `LaplacianWindows<float>` builds them, by recurrences in f32: the
//!   smoothing window of n points is row n - 1 of Pascal's triangle added row by row (exact
//!   up to 27 points; 29 and 31 carry the f32 rounding of the sums); the derivative window
//!   is the smoothing window of n - 2 points convolved twice with `[-1, 1]`.
//! - Each partial derivative through the separable engine ([`super::separable`]: innermost
//!   axis first, f32 throughout, reflect-101), its f32 result times `scale[d]` (f32), then
//!   `((t0 + t1) + t2)` in f32 in axis order and one `ConvertSat` to the output type. With
//!   `normalized_kernel`, `scale[d] = 2^-(sum of the partial's window sizes - axes - 2)`;
//!   giving `scale` too is an error (whatever its value), checked after the window sizes.
//! - Windows of one point are skipped where they are the outermost or innermost passes
//!   (DALI skips them everywhere; a one-point pass `0 + x * 1` changes no value that reaches
//!   the output, so where it stays, between two other passes, the bits are the same).
//! - Input types: UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT (DALI also takes 64-bit
//!   integers and FLOAT16, which the engine does not: an error naming the type); the
//!   output is the input type or FLOAT. Zero-sized extents give empty outputs (DALI crashes).
//!
//! The GPU backend plans with the cpu twin, runs `separable.cu`'s passes for each partial
//! derivative into its own f32 plane (the same sums), then `laplacian.cu` scales, adds and
//! converts them with the same f32 operations, so both backends give the same bits.

use std::cell::RefCell;
use std::sync::OnceLock;

use sluice_cuda::DeviceBuffer;

use super::gaussian_blur::{output_meta, TYPES};
use super::separable;
use super::Dims;
use crate::error::{Error, Result};
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, GpuOperator, GpuWorkspace, OpContext, OpDef, OpSchema, Operator, Workspace, MAX_LIST};
use crate::tensor::channel::{dispatch_same_or_float, short_name, Channel, PairKernel};
use crate::tensor::{BatchMeta, DType, TensorList, TensorListGpu};

/// `fn.laplacian`.
pub static LAPLACIAN: OpDef = OpDef {
    schema: OpSchema {
        name: "Laplacian",
        doc: "Computes the Laplacian of the input: the sum over the spatial axes of the second-order partial derivatives, each a separable convolution with a derivative window along its axis and smoothing windows along the others (reflect-101 borders), in f32. `window_size` (odd, 3 to 31) and `smoothing_size` (odd, 1 to 31; default: the derivative window's size) take one value or one per spatial axis; `scale` (default 1) one factor or one per partial derivative, or `normalized_kernel=True` scales each by 2^-(sum of its window sizes - axes - 2).",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("window_size", T::IntList, D::IntList(&[3]), "Size of the derivative window (odd, 3 to 31), one value or one per spatial axis.").per_frame(),
            tensor_arg("smoothing_size", T::IntList, D::Optional, "Size of the smoothing windows (odd, 1 to 31; 1: no smoothing), one value or one per spatial axis. Default: the size of the derivative window of the partial derivative computed.").per_frame(),
            tensor_arg("scale", T::FloatList, D::Optional, "Factors scaling the partial derivatives, one value or one per spatial axis (default 1). Must not be given with `normalized_kernel`.").per_frame(),
            arg("normalized_kernel", T::Bool, D::Bool(false), "Scales each partial derivative by 2^-(s - n - 2), s being the sum of its window sizes and n the number of spatial axes. Must be False if `scale` is given."),
            arg("dtype", T::DType, D::Optional, "Output data type: the input type (default) or FLOAT."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Laplacian::new(ctx)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(LaplacianGpu { op: Laplacian::new(ctx), params: ParamUpload::default() }))),
};

/// Largest derivative or smoothing window (DALI's `maxWindowSize`).
pub const MAX_WINDOW: usize = 31;

/// Row `n - 1` of Pascal's triangle, added row by row in f32 (DALI's smoothing window).
pub fn smoothing_window(n: usize) -> Vec<f32> {
    let mut row = vec![1.0f32];
    for size in 2..=n {
        let mut next = Vec::with_capacity(size);
        next.push(row[0]);
        for j in 1..size - 1 {
            next.push(row[j - 1] + row[j]);
        }
        next.push(row[row.len() - 1]);
        row = next;
    }
    row
}

/// DALI's second-derivative window of `n` points: `[1]`, then alternately the smoothing
/// window of one point less or the previous window, convolved with `[-1, 1]` in f32.
pub fn deriv_window(n: usize) -> Vec<f32> {
    let mut cur = vec![1.0f32];
    for size in 2..=n {
        let prev = if size % 2 == 0 { smoothing_window(size - 1) } else { cur };
        let mut next = Vec::with_capacity(size);
        next.push(-prev[0]);
        for j in 1..size - 1 {
            next.push(prev[j - 1] - prev[j]);
        }
        next.push(prev[prev.len() - 1]);
        cur = next;
    }
    cur
}

/// Every window a plan can name, computed once: smoothing windows of 1, 3, .. 31 points and
/// derivative windows of 3, .. 31 points in one array (the GPU uploads it whole).
pub struct Windows {
    pub data: Vec<f32>,
    /// `(start, len)` in `data`, by `[deriv as usize][points]`.
    at: [[(usize, usize); MAX_WINDOW + 1]; 2],
}

impl Windows {
    /// Where the `n`-point derivative (`deriv`) or smoothing window lies in `data`.
    pub fn place(&self, deriv: bool, n: usize) -> (usize, usize) {
        self.at[deriv as usize][n]
    }

    pub fn get(&self, deriv: bool, n: usize) -> &[f32] {
        let (at, len) = self.place(deriv, n);
        &self.data[at..at + len]
    }
}

/// The window table.
pub fn windows() -> &'static Windows {
    static TABLE: OnceLock<Windows> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut w = Windows { data: Vec::new(), at: [[(0, 0); MAX_WINDOW + 1]; 2] };
        for n in (1..=MAX_WINDOW).step_by(2) {
            w.at[0][n] = (w.data.len(), n);
            w.data.extend(smoothing_window(n));
        }
        for n in (3..=MAX_WINDOW).step_by(2) {
            w.at[1][n] = (w.data.len(), n);
            w.data.extend(deriv_window(n));
        }
        w
    })
}

/// An unused window slot.
const NONE: &[f32] = &[];

/// A batch's plan: the output, its types and dimensions, and per sample the window sizes
/// (`sizes[i][d][a]`: partial derivative `d`, axis `a`) and the scale of each partial.
pub struct Plan {
    pub meta: BatchMeta,
    pub in_type: DType,
    pub out_type: DType,
    pub dims: Dims,
    pub sizes: Vec<[[u8; 3]; 3]>,
    pub scales: Vec<[f32; 3]>,
}

impl Plan {
    /// Sample `i`'s windows: `[d][a]` for partial derivative `d` along axis `a` (unused
    /// entries empty).
    pub fn sample_windows(&self, i: usize) -> [[&'static [f32]; 3]; 3] {
        let table = windows();
        let axes = self.dims.spatial;
        let mut w = [[NONE; 3]; 3];
        for d in 0..axes {
            for a in 0..axes {
                w[d][a] = table.get(a == d, self.sizes[i][d][a] as usize);
            }
        }
        w
    }
}

pub struct Laplacian {
    ctx: OpContext,
    dtype: Option<DType>,
    normalized: bool,
}

impl Laplacian {
    fn new(ctx: &OpContext) -> Laplacian {
        Laplacian { ctx: ctx.clone(), dtype: ctx.args.has("dtype").then(|| ctx.args.dtype("dtype")), normalized: ctx.args.bool("normalized_kernel") }
    }

    /// The checks and windows of a batch (shared by both backends).
    pub fn plan(&self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<Plan> {
        let name = &self.ctx.display_name;
        let dims = Dims::parse(name, input.layout().as_str(), input.ndim())?;
        let in_type = input.dtype();
        let out_type = self.dtype.unwrap_or(in_type);
        if out_type != in_type && out_type != DType::F32 {
            return Err(Error::arg(name, "dtype", format!("the output type must be the input type ({in_type}) or FLOAT, got {out_type}")));
        }
        if !TYPES.contains(&in_type) && !input.is_empty() {
            let names: Vec<&str> = TYPES.iter().map(|t| t.dali_name()).collect();
            return Err(Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), format!("unsupported input type {in_type}; supported: {}", names.join(", "))));
        }
        let axes = dims.spatial;
        let n = input.len();
        let lengths: &[usize] = if axes == 1 { &[1] } else { &[1, axes] };
        let pick = |v: &[f64], a: usize| if v.len() == 1 { v[0] } else { v[a] };
        // An odd integer in lo..=31, else None.
        let odd_in = |v: f64, lo: i64| {
            let k = v as i64;
            (k as f64 == v && (lo..=MAX_WINDOW as i64).contains(&k) && k % 2 == 1).then_some(k as u8)
        };
        let (window, smoothing) = (ws.per_sample_list(&self.ctx, "window_size"), ws.per_sample_list(&self.ctx, "smoothing_size"));
        let (mut wbuf, mut sbuf) = ([0.0; MAX_LIST], [0.0; MAX_LIST]);
        let mut sizes = Vec::with_capacity(n);
        // DALI's order: every sample's window sizes (derivative, then smoothing), then scales.
        for i in 0..n {
            let w = window.get(name, "window_size", i, lengths, &mut wbuf)?.unwrap_or(&[3.0]);
            let mut deriv = [0u8; 3];
            for (a, d) in deriv.iter_mut().enumerate().take(axes) {
                let v = pick(w, a);
                *d = odd_in(v, 3).ok_or_else(|| Error::arg(name, "window_size", format!("the window size must be an odd integer between 3 and {MAX_WINDOW}, got {v} for sample {i}")))?;
            }
            let smooth = match smoothing.get(name, "smoothing_size", i, lengths, &mut sbuf)? {
                None => None,
                Some(s) => {
                    let mut out = [0u8; 3];
                    for (a, o) in out.iter_mut().enumerate().take(axes) {
                        let v = pick(s, a);
                        *o = odd_in(v, 1).ok_or_else(|| Error::arg(name, "smoothing_size", format!("the smoothing window size must be an odd integer between 1 and {MAX_WINDOW}, got {v} for sample {i}")))?;
                    }
                    Some(out)
                }
            };
            let mut s = [[0u8; 3]; 3];
            for d in 0..axes {
                for a in 0..axes {
                    s[d][a] = match smooth {
                        Some(sm) if a != d => sm[a],
                        _ => deriv[d],
                    };
                }
            }
            sizes.push(s);
        }
        let scale = ws.per_sample_list(&self.ctx, "scale");
        if self.normalized && scale.is_set() {
            return Err(Error::arg(name, "scale", "cannot be specified when `normalized_kernel` is set to True"));
        }
        let mut cbuf = [0.0; MAX_LIST];
        let mut scales = Vec::with_capacity(n);
        for (i, s) in sizes.iter().enumerate() {
            let mut f = [0.0f32; 3];
            if self.normalized {
                for d in 0..axes {
                    let exponent = s[d][..axes].iter().map(|&v| v as i32).sum::<i32>() - axes as i32 - 2;
                    f[d] = 2f64.powi(-exponent) as f32; // exp2f of an integer: exact
                }
            } else {
                let c = scale.get(name, "scale", i, lengths, &mut cbuf)?.unwrap_or(&[1.0]);
                for (d, v) in f.iter_mut().enumerate().take(axes) {
                    *v = pick(c, d) as f32;
                }
            }
            scales.push(f);
        }
        Ok(Plan { meta: output_meta(input, out_type), in_type, out_type, dims, sizes, scales })
    }
}

impl Operator for Laplacian {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let plan = self.plan(ws, input.meta())?;
        let mut out = TensorList::for_overwrite(plan.meta.clone());
        let plan = &plan;
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let (outer, spatial, c) = plan.dims.split(input.shape(i));
            let job = Job { dst, src: input.bytes(i), outer, spatial, c, windows: plan.sample_windows(i), scales: plan.scales[i] };
            dispatch_same_or_float(plan.in_type, plan.out_type, job).expect("types checked by the plan");
            Ok(())
        })?;
        Ok(vec![out])
    }
}

struct Job<'a> {
    dst: &'a mut [u8],
    src: &'a [u8],
    outer: usize,
    spatial: &'a [usize],
    c: usize,
    windows: [[&'static [f32]; 3]; 3],
    scales: [f32; 3],
}

impl PairKernel for Job<'_> {
    type Output = ();

    fn run<I: Channel, O: Channel>(self) {
        laplacian::<I, O>(bytemuck::cast_slice_mut(self.dst), bytemuck::cast_slice(self.src), self.outer, self.spatial, self.c, &self.windows, &self.scales);
    }
}

thread_local! {
    /// The running sum and one partial derivative, f32, one block each: reused by every
    /// sample a worker runs.
    static PARTIALS: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// The Laplacian of one sample: `outer` independent blocks of `spatial` extents (outermost
/// first) times `c` channels; `windows[d][a]`: partial derivative `d`'s window along axis
/// `a`; `scales[d]` its factor.
pub fn laplacian<I: Channel, O: Channel>(dst: &mut [O], src: &[I], outer: usize, spatial: &[usize], c: usize, windows: &[[&[f32]; 3]; 3], scales: &[f32; 3]) {
    let axes = spatial.len();
    let block = spatial.iter().product::<usize>() * c;
    if block == 0 || outer == 0 {
        return;
    }
    PARTIALS.with(|p| {
        let (acc, part) = &mut *p.borrow_mut();
        acc.resize(block, 0.0);
        part.resize(block, 0.0);
        for o in 0..outer {
            let (src, dst) = (&src[o * block..(o + 1) * block], &mut dst[o * block..(o + 1) * block]);
            // t_d = v_d * s_d; the sum ((t_0 + t_1) + t_2), each operation rounded to f32.
            for (d, &s) in scales.iter().enumerate().take(axes) {
                if d == 0 {
                    partial(acc, src, spatial, c, &windows[d][..axes]);
                    acc.iter_mut().for_each(|v| *v *= s);
                } else {
                    partial(part, src, spatial, c, &windows[d][..axes]);
                    if d + 1 < axes {
                        acc.iter_mut().zip(part.iter()).for_each(|(a, &v)| *a = v * s + *a);
                    } else {
                        part.iter_mut().zip(acc.iter()).for_each(|(v, &a)| *v = *v * s + a);
                    }
                }
            }
            // One ConvertSat: the rounding as vector code, then the saturating stores.
            let sum = if axes == 1 { &mut acc[..] } else { &mut part[..] };
            O::round_block(sum);
            for (out, &v) in dst.iter_mut().zip(sum.iter()) {
                *out = O::from_rounded(v);
            }
        }
    });
}

/// One partial derivative of one block into `dst` (f32): the separable engine over the
/// axes between the first and the last window longer than one point (outer one-point axes
/// fold into the engine's outer blocks, inner ones into its channels).
fn partial<I: Channel>(dst: &mut [f32], src: &[I], spatial: &[usize], c: usize, windows: &[&[f32]]) {
    let (mut lo, mut hi, mut outer, mut inner) = (0, spatial.len(), 1, c);
    while hi - lo > 1 && windows[lo].len() == 1 {
        outer *= spatial[lo];
        lo += 1;
    }
    while hi - lo > 1 && windows[hi - 1].len() == 1 {
        hi -= 1;
        inner *= spatial[hi];
    }
    separable::convolve::<I, f32>(dst, src, outer, &spatial[lo..hi], inner, &windows[lo..hi]);
}

// ------------------------------------------------------------------------------------ GPU

/// `laplacian.cu`, after the shared element rules.
const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("laplacian.cu"));

cuda_struct! {
    /// One sample's pass of `separable.cu` (its `struct SepSample`).
    struct SepPass {
        r#in: u64,
        out: u64,
        window: u64,
        outer: i64,
        len: i64,
        inner: i64,
        taps: i32,
        pad: i32,
    }
}

cuda_struct! {
    /// One sample's sum (`struct LapSum` in laplacian.cu).
    struct LapSum {
        part: [u64; 3],
        out: u64,
        n: i64,
        scale: [f32; 3],
        axes: i32,
    }
}

/// GPU backend: per partial derivative, the passes of `separable.cu` (one launch per pass
/// for the batch; a sample's one-point windows are no passes) into one f32 plane per
/// partial; then one launch of `lap_sum_<out>` scales, sums and converts.
pub struct LaplacianGpu {
    op: Laplacian,
    params: ParamUpload,
}

impl GpuOperator for LaplacianGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let plan = self.op.plan(&ws.host_view(), input.meta())?;
        let out = TensorListGpu::alloc(plan.meta.clone(), ws.device, ws.stream)?;
        let n = input.len();
        let axes = plan.dims.spatial;
        let (Some(in_name), Some(out_name)) = (short_name(plan.in_type), short_name(plan.out_type)) else {
            return Err(Error::Unsupported(format!("{}: {} -> {} on the GPU", self.op.ctx.display_name, plan.in_type, plan.out_type)));
        };
        let mut offsets = Vec::with_capacity(n);
        let mut total = 0usize;
        for i in 0..n {
            offsets.push(total);
            total += input.numel(i);
        }
        if total == 0 {
            return Ok(vec![out]);
        }
        // Sample i's passes for partial d: the axes with windows longer than one point,
        // innermost first.
        let passes = |i: usize, d: usize| {
            let s = plan.sizes[i][d];
            let mut p = [0usize; 3];
            let mut k = 0;
            for a in (0..axes).rev() {
                if s[a] > 1 {
                    p[k] = a;
                    k += 1;
                }
            }
            (p, k)
        };
        let launches: Vec<usize> = (0..axes).map(|d| (0..n).map(|i| passes(i, d).1).max().unwrap_or(0)).collect();
        // f32 planes: one per partial derivative, then up to two between passes.
        let between = launches.iter().max().map_or(0, |&m| m.saturating_sub(1).min(2));
        let scratch = DeviceBuffer::alloc(ws.device, ws.stream, (axes + between) * total * 4).map_err(Error::from)?;
        let plane = |p: usize, i: usize| scratch.device_ptr() + ((p * total + offsets[i]) * 4) as u64;
        let table = windows();
        let (pass_size, sum_size) = (std::mem::size_of::<SepPass>(), std::mem::size_of::<LapSum>());
        let pass_bytes = launches.iter().sum::<usize>() * n * pass_size;
        let weights_at = pass_bytes + n * sum_size;
        let len = weights_at + table.data.len() * 4;
        let base = self.params.upload_with(ws, len, |block, base| {
            let weights = base + weights_at as u64;
            let mut k = 0;
            for d in 0..axes {
                for p in 0..launches[d] {
                    for i in 0..n {
                        let (list, count) = passes(i, d);
                        let desc = if p < count {
                            let a = list[p];
                            let (outer, spatial, c) = plan.dims.split(input.shape(i));
                            let (at, taps) = table.place(a == d, plan.sizes[i][d][a] as usize);
                            SepPass {
                                r#in: if p == 0 { input.sample_ptr(i) } else { plane(axes + (p - 1) % 2, i) },
                                out: if p + 1 == count { plane(d, i) } else { plane(axes + p % 2, i) },
                                window: weights + (at * 4) as u64,
                                outer: (outer * spatial[..a].iter().product::<usize>()) as i64,
                                len: spatial[a] as i64,
                                inner: (spatial[a + 1..].iter().product::<usize>() * c) as i64,
                                taps: taps as i32,
                                pad: 0,
                            }
                        } else {
                            // This sample has no more passes: no elements.
                            SepPass { r#in: 0, out: 0, window: weights, outer: 0, len: 1, inner: 1, taps: 1, pad: 0 }
                        };
                        block[k * pass_size..(k + 1) * pass_size].copy_from_slice(bytemuck::bytes_of(&desc));
                        k += 1;
                    }
                }
            }
            for i in 0..n {
                let mut part = [0u64; 3];
                for (d, p) in part.iter_mut().enumerate().take(axes) {
                    *p = plane(d, i);
                }
                let s = LapSum { part, out: out.sample_ptr(i), n: input.numel(i) as i64, scale: plan.scales[i], axes: axes as i32 };
                block[pass_bytes + i * sum_size..pass_bytes + (i + 1) * sum_size].copy_from_slice(bytemuck::bytes_of(&s));
            }
            block[weights_at..].copy_from_slice(bytemuck::cast_slice(&table.data));
            Ok(())
        })?;
        let max_elems = (0..n).map(|i| input.numel(i)).max().unwrap_or(0);
        let mut descs = base;
        for &count in &launches {
            for p in 0..count {
                let kernel = format!("sep_{}_f32", if p == 0 { in_name } else { "f32" });
                let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "separable", super::gpu::SRC, &kernel)?;
                // SAFETY: the descriptors point into `input` and `scratch` (alive until the
                // stream passes these launches: the scratch is freed on the stream) and at the
                // uploaded windows; each pass reads what the previous one wrote, in stream order.
                unsafe {
                    launch_records::<SepPass>(&ws.stream, &f, descs, n, max_elems)?;
                }
                descs += (n * pass_size) as u64;
            }
        }
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "laplacian", SRC, &format!("lap_sum_{out_name}"))?;
        let sums = base + pass_bytes as u64;
        // SAFETY: the descriptors point at the partial planes the passes above wrote (earlier
        // on this stream) and into `out`; threads stay within their samples.
        unsafe {
            launch_records::<LapSum>(&ws.stream, &f, sums, n, max_elems)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::filters::separable::reflect101;

    /// DALI 2.4's windows (`LaplacianWindows<float>`, printed by DALI as exact floats).
    #[test]
    fn windows_are_dalis() {
        assert_eq!(smoothing_window(1), [1.0]);
        assert_eq!(smoothing_window(3), [1.0, 2.0, 1.0]);
        assert_eq!(smoothing_window(5), [1.0, 4.0, 6.0, 4.0, 1.0]);
        assert_eq!(deriv_window(3), [1.0, -2.0, 1.0]);
        assert_eq!(deriv_window(5), [1.0, 0.0, -2.0, 0.0, 1.0]);
        assert_eq!(deriv_window(7), [1.0, 2.0, -1.0, -4.0, -1.0, 2.0, 1.0]);
        assert_eq!(deriv_window(9), [1.0, 4.0, 4.0, -4.0, -10.0, -4.0, 4.0, 4.0, 1.0]);
        // Exact binomials up to 27 points.
        for n in (1..=27).step_by(2) {
            let mut c = 1u64;
            let want: Vec<f32> = (0..n as u64)
                .map(|k| {
                    let v = c as f32;
                    c = c * (n as u64 - 1 - k) / (k + 1);
                    v
                })
                .collect();
            assert_eq!(smoothing_window(n), want, "S{n}");
        }
        // 29 and 31 points: the f32 sums of the recurrence, not the binomials.
        let s29 = smoothing_window(29);
        assert_eq!((s29[12], s29[16], s29[14]), (30421756.0, 30421756.0, 40116600.0));
        let s31: [f32; 16] = [1.0, 30.0, 435.0, 4060.0, 27405.0, 142506.0, 593775.0, 2035800.0, 5852925.0, 14307150.0, 30045016.0, 54627296.0, 86493224.0, 119759856.0, 145422688.0, 155117520.0];
        let w = smoothing_window(31);
        assert_eq!(&w[..16], &s31);
        assert!((0..31).all(|k| w[k] == w[30 - k]));
        let d29: [f32; 15] = [1.0, 24.0, 274.0, 1976.0, 10075.0, 38480.0, 113620.0, 263120.0, 476905.0, 657800.0, 624910.0, 227240.0, -482885.0, -1188640.0, -1485800.0];
        let d31: [f32; 16] = [1.0, 26.0, 323.0, 2548.0, 14301.0, 60606.0, 200655.0, 528840.0, 1116765.0, 1874730.0, 2417415.0, 2134860.0, 596506.0, -1927172.0, -4345964.0, -5348880.0];
        let (w29, w31) = (deriv_window(29), deriv_window(31));
        assert_eq!(&w29[..15], &d29);
        assert_eq!(&w31[..16], &d31);
        assert!((0..29).all(|k| w29[k] == w29[28 - k]) && (0..31).all(|k| w31[k] == w31[30 - k]));
        let t = windows();
        assert_eq!(t.get(true, 31), &w31[..]);
        assert_eq!(t.get(false, 1), &[1.0]);
        assert_eq!(t.get(false, 29), &s29[..]);
    }

    /// The definition, one pass per axis (one-point windows included), innermost first.
    fn reference(src: &[f32], spatial: &[usize], c: usize, windows: &[[&[f32]; 3]; 3], scales: &[f32; 3]) -> Vec<f32> {
        let axes = spatial.len();
        let mut sum: Vec<f32> = Vec::new();
        for d in 0..axes {
            let mut cur = src.to_vec();
            for a in (0..axes).rev() {
                let (len, inner) = (spatial[a], spatial[a + 1..].iter().product::<usize>() * c);
                let w = windows[d][a];
                let r = (w.len() / 2) as i64;
                let mut next = vec![0.0f32; cur.len()];
                for (e, out) in next.iter_mut().enumerate() {
                    let (o, i, j) = (e / (len * inner), e / inner % len, e % inner);
                    let mut acc = 0.0f32;
                    for (k, &wk) in w.iter().enumerate() {
                        acc += cur[o * len * inner + reflect101(i as i64 - r + k as i64, len as i64) * inner + j] * wk;
                    }
                    *out = acc;
                }
                cur = next;
            }
            let t: Vec<f32> = cur.iter().map(|v| v * scales[d]).collect();
            sum = if d == 0 { t } else { t.iter().zip(&sum).map(|(a, b)| a + b).collect() };
        }
        sum
    }

    #[test]
    fn partial_derivatives_sum_as_the_definition() {
        let table = windows();
        let cases: &[(&[usize], usize, [[usize; 3]; 3])] = &[
            (&[13][..], 1, [[5, 0, 0], [0; 3], [0; 3]]),
            (&[7, 9][..], 3, [[5, 5, 0], [3, 3, 0], [0; 3]]),
            (&[7, 9][..], 1, [[3, 1, 0], [1, 7, 0], [0; 3]]),
            (&[1, 6][..], 2, [[31, 9, 0], [3, 3, 0], [0; 3]]),
            (&[4, 5, 6][..], 1, [[3, 1, 1], [5, 5, 9], [3, 1, 3]]),
            (&[4, 2, 6][..], 2, [[3, 3, 1], [1, 5, 1], [9, 1, 7]]),
        ];
        for (ci, &(spatial, c, sizes)) in cases.iter().enumerate() {
            let axes = spatial.len();
            let count = spatial.iter().product::<usize>() * c;
            let mut src: Vec<f32> = (0..count).map(|v| ((v * 37 % 101) as f32 - 50.0) * 0.37).collect();
            src[0] = -0.0; // one-point passes skipped or not: the same bits
            let mut w = [[NONE; 3]; 3];
            for d in 0..axes {
                for a in 0..axes {
                    w[d][a] = table.get(a == d, sizes[d][a]);
                }
            }
            let scales = [0.5f32, 0.125, 3.0];
            let want = reference(&src, spatial, c, &w, &scales);
            let mut got = vec![0.0f32; count];
            laplacian::<f32, f32>(&mut got, &src, 1, spatial, c, &w, &scales);
            assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "case {ci}");
            // Integer outputs: the same sums, rounded half away from zero and saturated once.
            let src8: Vec<u8> = (0..count).map(|v| (v * 53 % 256) as u8).collect();
            let srcf: Vec<f32> = src8.iter().map(|&v| v as f32).collect();
            let want = reference(&srcf, spatial, c, &w, &scales);
            let mut got = vec![0i16; count];
            laplacian::<u8, i16>(&mut got, &src8, 1, spatial, c, &w, &scales);
            assert_eq!(got, want.iter().map(|&v| i16::sat_f32(v)).collect::<Vec<_>>(), "case {ci} (u8 -> i16)");
        }
    }

    /// DALI: 1-D `[0, 1, 0, 5, 0, 3, 0, 0]` as int16 with scale 0.5 and 0.25.
    #[test]
    fn integer_outputs_round_half_away_from_zero() {
        let src: [i16; 8] = [0, 1, 0, 5, 0, 3, 0, 0];
        let w = [[windows().get(true, 3), NONE, NONE], [NONE; 3], [NONE; 3]];
        for (s, want) in [(0.5f32, [1i16, -1, 3, -5, 4, -3, 2, 0]), (0.25, [1, -1, 2, -3, 2, -2, 1, 0])] {
            let mut got = [0i16; 8];
            laplacian::<i16, i16>(&mut got, &src, 1, &[8], 1, &w, &[s, 0.0, 0.0]);
            assert_eq!(got, want, "scale {s}");
        }
    }

    #[test]
    fn the_kernel_sources_compile_and_their_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("laplacian", SRC, &[("LapSum", &LapSum::LAYOUT)]);
        crate::ops::gpu_params::check_cuda_source("laplacian_separable", super::super::gpu::SRC, &[("SepSample", &SepPass::LAYOUT)]);
    }
}
