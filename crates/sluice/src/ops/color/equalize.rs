//! `fn.equalize` (and its deprecated alias `fn.experimental.equalize`): histogram equalization of UINT8 images and videos, each
//! channel of each frame on its own, as OpenCV's `equalizeHist` (which DALI 2.4's cpu operator
//! calls): the 256-bin histogram, the first occupied bin `i` maps to 0 and bin `j > i` to
//! `round_half_even(cumulative(i+1..=j) * (255 / (total - hist[i])))` in f32; a plane of one
//! value stays as it is.
//!
//! Layouts `HW`, `HWC`, `CHW`, `FHW`, `FHWC`, `FCHW` (no layout: `HW`, `HWC`, `FHWC` by the
//! number of dimensions); channel-first inputs are equalized per channel plane, as DALI does.

use super::gpu::EqualizeGpu;
use crate::error::{Error, Result};
use crate::ops::{for_each_sample, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

const fn schema(name: &'static str, doc: &'static str) -> OpSchema {
    OpSchema {
        name,
        doc,
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    }
}

/// `fn.equalize`.
pub static EQUALIZE: OpDef = OpDef {
    schema: schema("Equalize", "Performs grayscale/per-channel histogram equalization. The supported inputs are images and videos of uint8_t type."),
    cpu: Some(|ctx| Ok(Box::new(Equalize { ctx: ctx.clone() }))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(EqualizeGpu::new(Equalize { ctx: ctx.clone() })))),
};

/// `fn.experimental.equalize`: DALI 2.4 keeps it as a deprecated alias.
pub static EXPERIMENTAL_EQUALIZE: OpDef = OpDef {
    schema: schema("experimental__Equalize", "Deprecated alias of fn.equalize (the operator left the experimental phase)."),
    cpu: Some(|ctx| Ok(Box::new(Equalize { ctx: ctx.clone() }))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(EqualizeGpu::new(Equalize { ctx: ctx.clone() })))),
};

/// One channel of one frame: `count` elements `stride` apart from `offset` (in a sample).
#[derive(Debug, Clone, Copy)]
pub struct Plane {
    pub offset: usize,
    pub stride: usize,
    pub count: usize,
}

/// Shared by both backends.
pub struct Equalize {
    ctx: OpContext,
}

/// How a sample of a layout divides into planes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Geometry {
    sequence: bool,
    channel_first: bool,
    has_channels: bool,
}

impl Geometry {
    /// The planes of a sample of `shape`, in memory order of their first element.
    pub(super) fn planes(self, shape: &[usize]) -> impl Iterator<Item = Plane> {
        let (frames, rest) = if self.sequence { (shape[0], &shape[1..]) } else { (1, shape) };
        let (channels, pixels) = match (self.has_channels, self.channel_first) {
            (false, _) => (1, rest[0] * rest[1]),
            (true, true) => (rest[0], rest[1] * rest[2]),
            (true, false) => (rest[2], rest[0] * rest[1]),
        };
        let channel_first = self.channel_first;
        (0..frames).flat_map(move |f| {
            (0..channels).map(move |c| {
                let frame = f * channels * pixels;
                if channel_first {
                    Plane { offset: frame + c * pixels, stride: 1, count: pixels }
                } else {
                    Plane { offset: frame + c, stride: channels, count: pixels }
                }
            })
        })
    }
}

impl Equalize {
    /// Checks the batch (UINT8, a supported layout); the output is shaped as the input.
    pub(super) fn plan(&self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<(BatchMeta, Geometry)> {
        let name = &self.ctx.display_name;
        let layout = match (input.layout().as_str(), input.ndim()) {
            ("", 2) => Layout::from("HW"),
            ("", 3) => Layout::from("HWC"),
            ("", 4) => Layout::from("FHWC"),
            (l @ ("HW" | "FHW" | "HWC" | "CHW" | "FHWC" | "FCHW"), nd) if l.len() == nd => input.layout().clone(),
            (l, nd) => {
                let got = if l.is_empty() { format!("{nd} dimensions without a layout") } else { format!("layout \"{l}\"") };
                return Err(Error::type_mismatch(name, format!("input 0: {got} does not match any of the allowed layouts: HW, HWC, CHW, FHW, FHWC, FCHW")));
            }
        };
        if input.dtype() != DType::U8 && !input.is_empty() {
            return Err(Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), format!("unsupported input type {}: equalize takes UINT8 images", input.dtype())));
        }
        let l = layout.as_str();
        let geometry = Geometry { sequence: l.starts_with('F'), channel_first: l.ends_with("CHW"), has_channels: l.contains('C') };
        let mut meta = BatchMeta::new(DType::U8, input.ndim(), (0..input.len()).map(|i| input.shape(i)));
        meta.set_layout(layout);
        meta.inherit_source_info(input);
        Ok((meta, geometry))
    }
}

impl Operator for Equalize {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let (meta, geometry) = self.plan(ws, input.meta())?;
        let mut out = TensorList::for_overwrite(meta);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let src = input.bytes(i);
            let shape = input.shape(i);
            let channels = if geometry.has_channels && !geometry.channel_first { shape[shape.len() - 1] } else { 1 };
            // Values of one interleaved frame (H x W x channels; only read for 2 to 4 channels).
            let frame = || channels * shape[shape.len() - 3] * shape[shape.len() - 2];
            match channels {
                // Every plane of a frame in one pass over its interleaved pixels.
                1 => geometry.planes(shape).for_each(|p| equalize_interleaved::<1>(&src[p.offset..][..p.count], &mut dst[p.offset..][..p.count])),
                2 => frames(src, dst, frame(), equalize_interleaved::<2>),
                3 => frames(src, dst, frame(), equalize_interleaved::<3>),
                4 => frames(src, dst, frame(), equalize_interleaved::<4>),
                _ => {
                    for p in geometry.planes(shape) {
                        let mut hist = [0u32; 256];
                        for k in 0..p.count {
                            hist[src[p.offset + k * p.stride] as usize] += 1;
                        }
                        let lut = lookup_table(&hist);
                        for k in 0..p.count {
                            let at = p.offset + k * p.stride;
                            dst[at] = lut[src[at] as usize];
                        }
                    }
                }
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// Runs `equalize` on each frame of `frame_len` bytes.
fn frames(src: &[u8], dst: &mut [u8], frame_len: usize, equalize: fn(&[u8], &mut [u8])) {
    if frame_len == 0 {
        return;
    }
    for (s, d) in src.chunks_exact(frame_len).zip(dst.chunks_exact_mut(frame_len)) {
        equalize(s, d);
    }
}

/// Equalizes each of the `C` interleaved channels of one frame: the histograms in one pass
/// (two sets, even and odd pixels, so runs of equal values do not wait on one counter), then
/// the tables in one pass.
fn equalize_interleaved<const C: usize>(src: &[u8], dst: &mut [u8]) {
    let mut hist = [[[0u32; 256]; C]; 2];
    let mut pairs = src.chunks_exact(2 * C);
    for px in &mut pairs {
        let (even, odd) = px.split_at(C);
        for c in 0..C {
            hist[0][c][even[c] as usize] += 1;
            hist[1][c][odd[c] as usize] += 1;
        }
    }
    for px in pairs.remainder().chunks_exact(C) {
        for c in 0..C {
            hist[0][c][px[c] as usize] += 1;
        }
    }
    let luts: [[u8; 256]; C] = std::array::from_fn(|c| lookup_table(&std::array::from_fn(|j| hist[0][c][j] + hist[1][c][j])));
    for (d, s) in dst.chunks_exact_mut(C).zip(src.chunks_exact(C)) {
        for c in 0..C {
            d[c] = luts[c][s[c] as usize];
        }
    }
}

/// OpenCV's `equalizeHist` table for a histogram (bins below the first occupied one are
/// never looked up and stay 0).
pub fn lookup_table(hist: &[u32; 256]) -> [u8; 256] {
    let mut lut = [0u8; 256];
    let Some(first) = hist.iter().position(|&h| h != 0) else { return lut };
    let total: u32 = hist.iter().sum();
    if hist[first] == total {
        lut[first] = first as u8;
        return lut;
    }
    let scale = 255.0f32 / (total - hist[first]) as f32;
    let mut sum = 0u32;
    for j in first + 1..256 {
        sum += hist[j];
        // cvRound: to nearest, ties to even.
        lut[j] = (sum as f32 * scale).round_ties_even().clamp(0.0, 255.0) as u8;
    }
    lut
}
