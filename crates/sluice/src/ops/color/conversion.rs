//! `fn.color_space_conversion`: UINT8 pixels between RGB, BGR, GRAY and YCbCr, as DALI 2.4's
//! cpu operator computes them (bit for bit, `tests/test_color.py`):
//!
//! - RGB <-> BGR swaps channels; GRAY -> RGB/BGR repeats the grey value.
//! - RGB/BGR -> GRAY is OpenCV's `cvtColor` (15-bit fixed point: `(9798 R + 19235 G + 3735 B
//!   + 2^14) >> 15`).
//! - To and from YCbCr: ITU-R BT.601 limited range (Y in 16..235) in f32, DALI's
//!   `itu_r_bt_601` formulas in their operation order, then `ConvertSat`.
//!
//! A conversion to the same space copies (DALI refuses it). Inputs are channel-last (`HWC`,
//! `FHWC`, `DHWC`, `FDHWC`) with the channel count of `image_type`.

use super::gpu::ConversionGpu;
use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::channel::{avx2_twin, Channel};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

/// `fn.color_space_conversion`.
pub static COLOR_SPACE_CONVERSION: OpDef = OpDef {
    schema: OpSchema {
        name: "ColorSpaceConversion",
        doc: "Converts between various image color models (UINT8 RGB, BGR, GRAY and YCbCr; YCbCr is ITU-R BT.601, limited range).",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("image_type", T::ImageType, D::Required, "The color space of the input image."),
            arg("output_type", T::ImageType, D::Required, "The color space of the output image."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Conversion::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(ConversionGpu::new(Conversion::new(ctx)?)))),
};

/// A colour space this operator converts between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    Rgb,
    Bgr,
    Gray,
    YCbCr,
}

impl Space {
    fn from_arg(ctx: &OpContext, name: &str) -> Result<Space> {
        Ok(match ctx.args.int(name) {
            0 => Space::Rgb,
            1 => Space::Bgr,
            2 => Space::Gray,
            3 => Space::YCbCr,
            v => return Err(Error::arg(&ctx.display_name, name, format!("image type {v} is not supported: use types.RGB, BGR, GRAY or YCbCr"))),
        })
    }

    pub fn channels(self) -> usize {
        if self == Space::Gray { 1 } else { 3 }
    }

    /// The code `conversion.cu` knows it by.
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// Shared by both backends.
pub struct Conversion {
    ctx: OpContext,
    pub(super) from: Space,
    pub(super) to: Space,
}

impl Conversion {
    fn new(ctx: &OpContext) -> Result<Conversion> {
        Ok(Conversion { ctx: ctx.clone(), from: Space::from_arg(ctx, "image_type")?, to: Space::from_arg(ctx, "output_type")? })
    }

    /// Checks the batch and describes the output (the channel count of `output_type`).
    pub(super) fn output_meta(&self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<BatchMeta> {
        let name = &self.ctx.display_name;
        let layout = match (input.layout().as_str(), input.ndim()) {
            ("", 3) => Layout::from("HWC"),
            ("", 4) => Layout::from("FHWC"),
            ("", 5) => Layout::from("FDHWC"),
            ("HWC", 3) | ("FHWC", 4) | ("DHWC", 4) | ("FDHWC", 5) => input.layout().clone(),
            (l, nd) => {
                let got = if l.is_empty() { format!("{nd} dimensions without a layout") } else { format!("layout \"{l}\"") };
                return Err(Error::type_mismatch(name, format!("input 0: {got} does not match any of the allowed layouts: HWC, FHWC, DHWC, FDHWC (channels last)")));
            }
        };
        let n = input.len();
        if input.dtype() != DType::U8 && n > 0 {
            return Err(Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), format!("unsupported input type {}: color space conversion takes UINT8", input.dtype())));
        }
        let want = self.from.channels();
        let mut shapes = Vec::with_capacity(n);
        for i in 0..n {
            let mut shape = input.shape(i).to_vec();
            let c = shape.last_mut().expect("checked ndim");
            if *c != want {
                return Err(Error::data(self.ctx.at(ws.iteration, i, input.source_info(i)), format!("image_type {:?} has {want} channel(s); the sample of shape {:?} has {c}", self.from, input.shape(i))));
            }
            *c = self.to.channels();
            shapes.push(shape);
        }
        let mut meta = BatchMeta::new(DType::U8, input.ndim(), shapes.iter().map(|s| &s[..]));
        meta.set_layout(layout);
        meta.inherit_source_info(input);
        Ok(meta)
    }
}

impl Operator for Conversion {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let mut out = TensorList::for_overwrite(self.output_meta(ws, input.meta())?);
        let (from, to) = (self.from, self.to);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            convert(from, to, input.bytes(i), dst);
            Ok(())
        })?;
        Ok(vec![out])
    }
}

avx2_twin!(
    /// Converts packed pixels of `from` in `src` to packed pixels of `to` in `dst`. With AVX2
    /// (checked once) the same loops run as 8- and 16-lane vectors, the 3-channel loads included.
    pub fn convert(from: Space, to: Space, src: &[u8], dst: &mut [u8]) => convert_body
);

#[inline(always)]
fn convert_body(from: Space, to: Space, src: &[u8], dst: &mut [u8]) {
    use Space::*;
    let (fc, tc) = (from.channels(), to.channels());
    let pixels = src.chunks_exact(fc).zip(dst.chunks_exact_mut(tc));
    match (from, to) {
        _ if from == to => dst.copy_from_slice(src),
        (Rgb | Bgr, Rgb | Bgr) => pixels.for_each(|(s, d)| d.copy_from_slice(&[s[2], s[1], s[0]])), // a swap: from != to
        // Constant channel positions per loop, so the loops vectorise.
        (Rgb, Gray) => dst.iter_mut().zip(src.chunks_exact(3)).for_each(|(d, s)| *d = gray([s[0], s[1], s[2]])),
        (Bgr, Gray) => dst.iter_mut().zip(src.chunks_exact(3)).for_each(|(d, s)| *d = gray([s[2], s[1], s[0]])),
        (Gray, Rgb | Bgr) => pixels.for_each(|(s, d)| d.fill(s[0])),
        (Rgb | Bgr, YCbCr) => {
            let order = if from == Bgr { [2, 1, 0] } else { [0, 1, 2] };
            planar(src, order, dst, [0, 1, 2], |[r, g, b], [y, cb, cr], n| {
                for p in 0..n {
                    [y[p], cb[p], cr[p]] = ycbcr_f32(r[p], g[p], b[p]);
                }
            })
        }
        (YCbCr, Rgb | Bgr) => {
            let order = if to == Bgr { [2, 1, 0] } else { [0, 1, 2] };
            planar(src, [0, 1, 2], dst, order, |[y, cb, cr], [r, g, b], n| {
                for p in 0..n {
                    [r[p], g[p], b[p]] = ycbcr_to_rgb_f32(y[p], cb[p], cr[p]);
                }
            })
        }
        (Gray, YCbCr) => pixels.for_each(|(s, d)| d.copy_from_slice(&[gray_to_y(s[0]), 128, 128])),
        (YCbCr, Gray) => pixels.for_each(|(s, d)| d[0] = y_to_gray(s[0])),
        _ => unreachable!("every pair of different spaces is listed"),
    }
}

/// OpenCV's RGB -> GRAY for 8 bits (15-bit fixed point, rounded).
#[inline(always)]
pub fn gray([r, g, b]: [u8; 3]) -> u8 {
    ((r as u32 * 9798 + g as u32 * 19235 + b as u32 * 3735 + (1 << 14)) >> 15) as u8
}

const BLOCK: usize = 512;

/// Runs `f` over blocks of 3-channel pixels split into f32 planes (input channel
/// `in_order[k]` in plane k; plane k written to output channel `out_order[k]`), rounding and
/// saturating its results to bytes: the arithmetic runs as vector code.
#[inline(always)]
fn planar(src: &[u8], in_order: [usize; 3], dst: &mut [u8], out_order: [usize; 3], f: impl Fn([&[f32]; 3], [&mut [f32]; 3], usize)) {
    // Planes by input channel, results by plane, bytes by output channel: the loops that
    // (de)interleave pixels have fixed channel positions.
    let mut planes = [[0.0f32; BLOCK]; 3];
    let mut out = [[0.0f32; BLOCK]; 3];
    let mut bytes = [[0u8; BLOCK]; 3];
    for (d, s) in dst.chunks_mut(3 * BLOCK).zip(src.chunks(3 * BLOCK)) {
        let n = s.len() / 3;
        for (p, px) in s.chunks_exact(3).enumerate() {
            (planes[0][p], planes[1][p], planes[2][p]) = (px[0] as f32, px[1] as f32, px[2] as f32);
        }
        let [x, y, z] = &mut out;
        // Every slice `n` long, so the loops over them need no bounds checks.
        f(in_order.map(|c| &planes[c][..n]), [&mut x[..n], &mut y[..n], &mut z[..n]], n);
        for (k, o) in out.iter().enumerate() {
            u8::sat_f32_row(&mut bytes[out_order[k]][..n], &o[..n]);
        }
        for (p, px) in d.chunks_exact_mut(3).enumerate() {
            (px[0], px[1], px[2]) = (bytes[0][p], bytes[1][p], bytes[2][p]);
        }
    }
}

/// BT.601 limited range, DALI's `itu_r_bt_601::rgb_to_y/cb/cr`: a dot product in f32 then
/// the bias. (The constants are DALI's literals, rounded to f32 as C++ rounds them; Cr's last
/// is a double literal there.)
#[allow(clippy::excessive_precision)]
#[inline(always)]
pub fn ycbcr_f32(r: f32, g: f32, b: f32) -> [f32; 3] {
    let dot = |c: [f32; 3]| c[0] * r + c[1] * g + c[2] * b;
    [
        dot([0.25678823529, 0.50412941176, 0.09790588235]) + 16.0,
        dot([-0.14822289945, -0.29099278682, 0.43921568627]) + 128.0,
        dot([0.43921568627, -0.36778831435, -0.07142737192f64 as f32]) + 128.0,
    ]
}

/// DALI's `itu_r_bt_601::ycbcr_to_rgb`, before `ConvertSat`.
#[allow(clippy::excessive_precision)]
#[inline(always)]
pub fn ycbcr_to_rgb_f32(y: f32, cb: f32, cr: f32) -> [f32; 3] {
    let ys = (y - 16.0) * (255.0f32 / 219.0);
    let (tb, tr) = (cb - 128.0, cr - 128.0);
    [ys + 1.5960267848 * tr, ys - 0.39176228842 * tb - 0.81296764538 * tr, ys + 2.0172321417 * tb]
}

/// DALI's `itu_r_bt_601::gray_to_y`: full range to 16..235.
#[inline(always)]
pub fn gray_to_y(v: u8) -> u8 {
    u8::sat_f32(v as f32 * (219.0f32 / 255.0) + 16.0)
}

/// DALI's `itu_r_bt_601::y_to_gray`.
#[inline(always)]
pub fn y_to_gray(y: u8) -> u8 {
    u8::sat_f32((255.0f32 / 219.0) * (y as f32 - 16.0))
}

#[cfg(test)]
mod speed {
    use super::*;

    /// `cargo test --release -p sluice color::conversion::speed -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn conversions_of_one_image() {
        let n = 480 * 640;
        let src: Vec<u8> = (0..n * 3).map(|v| (v * 37 % 251) as u8).collect();
        let mut dst = vec![0u8; n * 3];
        for (from, to) in [(Space::Rgb, Space::Gray), (Space::Rgb, Space::YCbCr), (Space::Rgb, Space::Bgr)] {
            let t = std::time::Instant::now();
            for _ in 0..50 {
                convert(from, to, &src, &mut dst[..n * to.channels()]);
            }
            let avx2 = t.elapsed().as_secs_f64() * 1e3 / 50.0;
            let t = std::time::Instant::now();
            for _ in 0..50 {
                convert_body(from, to, &src, &mut dst[..n * to.channels()]);
            }
            let baseline = t.elapsed().as_secs_f64() * 1e3 / 50.0;
            eprintln!("{from:?} -> {to:?} 480x640: {avx2:.3} ms per image ({baseline:.3} ms for baseline x86-64)");
        }
    }
}
