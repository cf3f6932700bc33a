//! `fn.crop`: cuts a window (see [`super::window`]) out of HWC, CHW, FHWC, DHWC ... inputs
//! of any element type, optionally converting to `dtype`. Out-of-bounds areas are filled
//! with `fill_values` (per channel when the layout has C) under `out_of_bounds_policy="pad"`.

use super::window::{CropSpec, Span, CROP_WINDOW_ARGS, CROP_OOB_ARGS};
use super::window_copy::{WindowCopyGpu, WindowPlan};
use crate::error::{Error, Result};
use crate::ops::{arg, removed_arg, ArgDefault as D, ArgType as T, Device, GpuOperator, GpuWorkspace, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::element::{load, store};
use crate::tensor::{BatchMeta, DType, Layout, TensorList, TensorListGpu};

/// Schema and backends.
pub static CROP: OpDef = OpDef {
    schema: OpSchema {
        name: "Crop",
        doc: "Crops the images with the specified window dimensions and window position (upper left corner). Accepts HWC, CHW, FHWC, DHWC and similar layouts of any type.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[arg("dtype", T::DType, D::Optional, "Output data type; the input type when not given."), removed_arg("image_type", T::ImageType)], CROP_WINDOW_ARGS, CROP_OOB_ARGS],
        arg_aliases: &[("output_dtype", "dtype")],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Crop { ctx: ctx.clone() }))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(CropGpu { crop: Crop { ctx: ctx.clone() }, copy: WindowCopyGpu::default() }))),
};

struct Crop {
    ctx: OpContext,
}

/// Fills `dst` with `pattern` repeated (its length a multiple of the pattern's), by doubling
/// copies.
fn repeat_pattern(dst: &mut [u8], pattern: &[u8]) {
    if dst.is_empty() || pattern.is_empty() {
        return;
    }
    if pattern.iter().all(|&b| b == pattern[0]) {
        dst.fill(pattern[0]);
        return;
    }
    let first = pattern.len().min(dst.len());
    dst[..first].copy_from_slice(&pattern[..first]);
    let mut done = first;
    while done < dst.len() {
        let n = done.min(dst.len() - done);
        dst.copy_within(..n, done);
        done += n;
    }
}

/// Copies the window `spans` (one per dimension) of `src` (shape `shape`, type `it`) into
/// `dst` (type `ot`); elements outside the input get `fill[channel]` (already encoded as
/// `ot` bytes), `c_axis` being the channel dimension, if any.
#[allow(clippy::too_many_arguments)]
pub fn crop_nd(dst: &mut [u8], src: &[u8], shape: &[usize], spans: &[Span], it: DType, ot: DType, fill: &[Vec<u8>], c_axis: Option<usize>) {
    let nd = shape.len();
    let mut in_stride = vec![1usize; nd];
    let mut out_stride = vec![1usize; nd];
    for a in (0..nd.saturating_sub(1)).rev() {
        in_stride[a] = in_stride[a + 1] * shape[a + 1];
        out_stride[a] = out_stride[a + 1] * spans[a + 1].len;
    }
    // Padding that spans whole pixels of innermost channels repeats this row of fill values.
    let uniform = fill.iter().all(|f| f == &fill[0]);
    let channel_row: Option<Vec<u8>> = c_axis
        .filter(|&c| !uniform && c + 1 == nd)
        .map(|c| (0..spans[c].len).flat_map(|k| fill[k.min(fill.len() - 1)].iter().copied()).collect());
    let ctx = Nd { shape, spans, in_stride: &in_stride, out_stride: &out_stride, it, ot, fill, uniform, channel_row: channel_row.as_deref(), c_axis };
    if nd == 0 {
        dst.copy_from_slice(src);
        return;
    }
    ctx.rec(dst, src, 0, 0, 0, true, None);
}

struct Nd<'a> {
    shape: &'a [usize],
    spans: &'a [Span],
    in_stride: &'a [usize],
    out_stride: &'a [usize],
    it: DType,
    ot: DType,
    fill: &'a [Vec<u8>],
    /// Every channel fills alike.
    uniform: bool,
    /// The fill values of one pixel when the channels are innermost and fill differently.
    channel_row: Option<&'a [u8]>,
    c_axis: Option<usize>,
}

impl Nd<'_> {
    /// Output elements `out_off..` of the block at dimension `a`; `valid` is false inside padding.
    #[allow(clippy::too_many_arguments)]
    fn rec(&self, dst: &mut [u8], src: &[u8], a: usize, in_off: usize, out_off: usize, valid: bool, chan: Option<usize>) {
        let os = self.ot.size();
        let last = a + 1 == self.shape.len();
        let sp = self.spans[a];
        if last && self.c_axis != Some(a) {
            self.last_row(dst, src, in_off, out_off, valid, chan);
            return;
        }
        if !last && self.it == self.ot && self.c_axis != Some(a) && self.inner_full(a + 1) {
            // Whole inner blocks: the run inside the input is one copy, the padding on either
            // side one fill each.
            let n = self.out_stride[a];
            let (lo, hi) = if valid {
                let lo = (-sp.anchor).clamp(0, sp.len as i64) as usize;
                (lo, (self.shape[a] as i64 - sp.anchor).clamp(lo as i64, sp.len as i64) as usize)
            } else {
                (0, 0)
            };
            let (before, rest) = dst[out_off * os..(out_off + sp.len * n) * os].split_at_mut(lo * n * os);
            let (run, after) = rest.split_at_mut((hi - lo) * n * os);
            if self.fill_whole_block(before, a + 1, chan) && self.fill_whole_block(after, a + 1, chan) {
                if hi > lo {
                    let first = in_off + (sp.anchor + lo as i64) as usize * self.in_stride[a];
                    run.copy_from_slice(&src[first * os..first * os + run.len()]);
                }
                return;
            }
        }
        for o in 0..sp.len {
            let s = sp.anchor + o as i64;
            let ok = valid && s >= 0 && (s as usize) < self.shape[a];
            let chan = if self.c_axis == Some(a) { Some(o) } else { chan };
            let in_o = if ok { in_off + s as usize * self.in_stride[a] } else { 0 };
            let out_o = out_off + o * self.out_stride[a];
            if last {
                let d = &mut dst[out_o * os..(out_o + 1) * os];
                if ok {
                    if self.it == self.ot {
                        d.copy_from_slice(&src[in_o * os..(in_o + 1) * os]);
                    } else {
                        store(self.ot, d, 0, load(self.it, src, in_o));
                    }
                } else {
                    d.copy_from_slice(self.fill_of(chan));
                }
            } else if ok && self.it == self.ot && self.inner_full(a + 1) {
                // Everything inside is a plain contiguous copy.
                let n = self.out_stride[a];
                dst[out_o * os..(out_o + n) * os].copy_from_slice(&src[in_o * os..(in_o + n) * os]);
            } else if !ok && self.fill_whole_block(&mut dst[out_o * os..(out_o + self.out_stride[a]) * os], a + 1, chan) {
                // Padding: the block was filled as a repeated pattern.
            } else {
                self.rec(dst, src, a + 1, in_o, out_o, ok, chan);
            }
        }
    }

    /// The fill value of channel `chan` (or the only one).
    fn fill_of(&self, chan: Option<usize>) -> &[u8] {
        &self.fill[chan.unwrap_or(0).min(self.fill.len() - 1)]
    }

    /// The innermost dimension when it is not the channels': the run inside the input is
    /// copied (or converted) at once, the padding on either side filled at once.
    fn last_row(&self, dst: &mut [u8], src: &[u8], in_off: usize, out_off: usize, valid: bool, chan: Option<usize>) {
        let os = self.ot.size();
        let a = self.shape.len() - 1;
        let sp = self.spans[a];
        let row = &mut dst[out_off * os..(out_off + sp.len) * os];
        let fill = self.fill_of(chan);
        // Output elements lo..hi read the input.
        let (lo, hi) = if valid {
            let lo = (-sp.anchor).clamp(0, sp.len as i64) as usize;
            let hi = (self.shape[a] as i64 - sp.anchor).clamp(lo as i64, sp.len as i64) as usize;
            (lo, hi)
        } else {
            (0, 0)
        };
        repeat_pattern(&mut row[..lo * os], fill);
        repeat_pattern(&mut row[hi * os..], fill);
        if hi > lo {
            let first = in_off + (sp.anchor + lo as i64) as usize;
            if self.it == self.ot {
                row[lo * os..hi * os].copy_from_slice(&src[first * os..(first + hi - lo) * os]);
            } else {
                for k in 0..hi - lo {
                    store(self.ot, &mut row[lo * os..], k, load(self.it, src, first + k));
                }
            }
        }
    }

    /// Fills the padding block of dimensions `from..` (output bytes `dst`) when its values
    /// repeat with a short period: one fill value (the channel is outside the block, or all
    /// channels fill alike), or the channels innermost and whole. False: not done.
    fn fill_whole_block(&self, dst: &mut [u8], from: usize, chan: Option<usize>) -> bool {
        match self.c_axis {
            Some(c) if c >= from && !self.uniform => match self.channel_row {
                Some(row) => repeat_pattern(dst, row),
                None => return false,
            },
            _ => repeat_pattern(dst, self.fill_of(chan)),
        }
        true
    }

    fn inner_full(&self, from: usize) -> bool {
        (from..self.shape.len()).all(|b| self.spans[b].anchor == 0 && self.spans[b].len == self.shape[b])
    }
}

impl Crop {
    /// The batch's windows, shared by both backends.
    fn plan(&self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<WindowPlan> {
        let ctx = &self.ctx;
        let n = input.len();
        let layout = Layout::spatial(input.layout(), input.ndim())
            .map_err(|m| Error::data(ctx.at(ws.iteration, 0, input.source_info(0)), m))?;
        let (ha, wa, da, ca) = (layout.find('H').unwrap(), layout.find('W').unwrap(), layout.find('D'), layout.find('C'));
        let it = input.dtype();
        let ot = if ctx.args.has("dtype") { ctx.args.dtype("dtype") } else { it };
        if ot != it && !matches!(ot, DType::U8 | DType::F32 | DType::F16) {
            return Err(Error::arg(&ctx.display_name, "dtype", format!("output type must be the input type, UINT8, FLOAT or FLOAT16, got {ot}")));
        }
        let spec = CropSpec::new(ctx, ws, true)?;
        let mut plan = WindowPlan::new(input.ndim(), it, ot, ca);
        // DALI names the HWC of an unlabelled image on the output. (A 4-D one DALI's crop
        // reads as DHWC, Sluice as FHWC: left unnamed.)
        if input.layout().is_empty() && input.ndim() == 3 {
            plan.name_layout(layout.clone());
        }
        for i in 0..n {
            let sh = input.shape(i);
            let w = spec.windows(ctx, ws.iteration, input.source_info(i), i, sh[ha], sh[wa], da.map(|a| sh[a]))?;
            plan.push_sample(sh.iter().enumerate().map(|(a, &e)| if a == ha { w.h } else if a == wa { w.w } else if Some(a) == da { w.d.unwrap() } else { Span::full(e) }));
        }
        let channels = ca.filter(|_| n > 0).map_or(1, |c| input.shape(0).get(c).copied().unwrap_or(1)); // (a branch may get no samples)
        plan.set_fill(&ctx.display_name, ctx.args.floats("fill_values"), channels)?;
        Ok(plan)
    }
}

impl Operator for Crop {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        Ok(vec![self.plan(ws, input.meta())?.run_cpu(ws.pool, input)?])
    }
}

/// The gpu backend: the cpu twin's windows, one launch of the window copy.
struct CropGpu {
    crop: Crop,
    copy: WindowCopyGpu,
}

impl GpuOperator for CropGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let plan = self.crop.plan(&ws.host_view(), input.meta())?;
        Ok(vec![self.copy.run(ws, &self.crop.ctx.display_name, &plan, input)?])
    }
}
