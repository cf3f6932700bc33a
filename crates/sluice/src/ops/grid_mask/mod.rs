//! `fn.grid_mask` (cpu and gpu): GridMask augmentation (https://arxiv.org/abs/2001.04086),
//! a grid of squares zeroed out of an image. This is DALI 2.4's operator
//! (`dali/operators/image/mask/grid_mask.*`, `dali/kernels/mask/grid_mask_cpu.h`), checked
//! bit for bit against DALI 2.4's cpu operator by `tests/test_grid_mask.py`:
//!
//! - The input is an image, H x W x C. Pixel (y, x) is mapped into tile units, rotated by
//!   `angle` and moved by (`shift_x`, `shift_y`): `fx = (x cos a - y sin a - shift_x) / tile`,
//!   `fy = (x sin a + y cos a - shift_y) / tile`. The pixel keeps its value when the
//!   fractional part of `fx` or of `fy` is at least `ratio`; otherwise every channel of
//!   the pixel is zeroed (the black squares are where both fractions are below `ratio`).
//! - The arithmetic is DALI's cpu kernel's, in f32, operation by operation ([`Grid`]):
//!   `ca = cosf(angle) / tile`, `sa = sinf(angle) / tile`, `sx = shift_x / tile`,
//!   `sy = shift_y / tile` (the tile converted to float); per row `-sx + y * -sa` and
//!   `-sy + y * ca`; per pixel `row_x + x * ca`, `row_y + x * sa`; `v - floor(v) >= ratio`.
//!   Each product and sum rounds on its own (DALI's build does not fuse them, and neither
//!   does Rust). `cosf`/`sinf` are the C library's, which DALI's process calls too (glibc;
//!   Rust's `f32::cos` is that call): computing them in f64 and rounding, or fusing the
//!   multiply-adds, moves pixels on the edges of the squares (the unit tests hold such
//!   pixels, read back from DALI).
//! - "Zeroed" is DALI's `input * keep`: integers become 0; FLOAT values are multiplied by
//!   0.0 or 1.0 as x86 does, so a masked negative value is -0.0, a masked infinity is
//!   x86's default NaN (0xffc00000), and NaNs stay NaN, quieted (a signaling NaN is
//!   quieted also where the pixel is kept). [`float_times`] writes that rule down once.
//! - Types: UINT8, INT16, INT32, FLOAT (DALI's cpu list). The output has the input's type,
//!   shape and layout.
//! - `tile` (int, > 0), `ratio`, `angle`, `shift_x`, `shift_y` may be argument inputs, one
//!   value per sample.
//!
//! Both backends share [`GridMask::plan_batch`] (checks, per-sample arguments, each
//! sample's [`Grid`]). The cpu backend walks each row once, finds the runs of kept and
//! masked pixels and copies or zeroes each run; the gpu backend (`gpu.rs`,
//! `grid_mask.cu`, one launch per batch) evaluates the same f32 operations per element
//! (`__fmul_rn`/`__fadd_rn`, so NVRTC fuses nothing) and writes the same bits.
//!
//! Where Sluice departs from DALI 2.4:
//! - Only 3-D inputs with layout "HWC" or no layout (read as HWC, as DALI does) are taken;
//!   anything else is an error naming the operator and the layout. DALI reads every 3-D
//!   input as HWC whatever its layout (a CHW image gets a grid over its channel and row
//!   axes, the same in every column), and reads 2-D or 4-D inputs out of bounds (a crash,
//!   or a sequence of which only the first H*W*C elements are masked and the rest is
//!   garbage).
//! - Argument inputs of any numeric type are read (DALI wants INT32 for `tile` and FLOAT
//!   for the others); a `tile` value must then be a whole number. A `tile` past the int32
//!   range is an error (DALI truncates it to int).
//! - The gpu backend equals the cpu: DALI's gpu kernel fuses its multiply-adds (so its
//!   squares' edges differ from its cpu's), writes +0.0 for every masked FLOAT value and
//!   takes only UINT8 and FLOAT.
//! - Errors leave the pipeline usable (DALI's pipeline is invalid after any error).

mod gpu;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::ops::{for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

const DOC: &str = "Performs the gridmask augmentation (https://arxiv.org/abs/2001.04086).

Zeroes out pixels of an image in a grid-like fashion. The grid consists of squares repeating in the x and y directions, with the same spacing in both directions, and can be rotated around the origin and shifted.

A pixel (y, x) is zeroed (all its channels) when both fractional parts of fx = (x cos(angle) - y sin(angle) - shift_x) / tile and fy = (x sin(angle) + y cos(angle) - shift_y) / tile are below `ratio`.

The input is an image with layout HWC (or no layout, read as HWC) of type UINT8, INT16, INT32 or FLOAT; the output has its type, shape and layout.";

/// `fn.grid_mask`.
pub static GRID_MASK: OpDef = OpDef {
    schema: OpSchema {
        name: "GridMask",
        doc: DOC,
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("tile", T::Int, D::Int(100), "The length of a single tile, in pixels: the width of a black square plus the spacing between two squares. Must be positive."),
            tensor_arg("ratio", T::Float, D::Float(0.5), "The ratio between the width of a black square and the width of a tile."),
            tensor_arg("angle", T::Float, D::Float(0.0), "Angle, in radians, by which the grid is rotated."),
            tensor_arg("shift_x", T::Float, D::Float(0.0), "The x component of the translation vector, applied after rotation."),
            tensor_arg("shift_y", T::Float, D::Float(0.0), "The y component of the translation vector, applied after rotation."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(GridMask::new(ctx)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::GridMaskGpu::new(GridMask::new(ctx))))),
};

/// The element types DALI's cpu operator takes.
const TYPES: [DType; 4] = [DType::U8, DType::I16, DType::I32, DType::F32];

/// The arguments that may come per sample, with their defaults (the schema's).
const ARGS: [(&str, f64); 5] = [("tile", 100.0), ("ratio", 0.5), ("angle", 0.0), ("shift_x", 0.0), ("shift_y", 0.0)];

/// One sample's grid: the f32 values DALI's cpu kernel computes from the arguments, and
/// the operations it applies to them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Grid {
    /// `cosf(angle) / tile`, `sinf(angle) / tile`: one pixel's step in tile units.
    pub ca: f32,
    pub sa: f32,
    /// `shift_x / tile`, `shift_y / tile`.
    pub sx: f32,
    pub sy: f32,
    pub ratio: f32,
}

impl Grid {
    pub(crate) fn new(tile: i32, ratio: f32, angle: f32, shift_x: f32, shift_y: f32) -> Grid {
        // The tile is converted to float before each division (C++'s float / int).
        let t = tile as f32;
        Grid { ca: angle.cos() / t, sa: angle.sin() / t, sx: shift_x / t, sy: shift_y / t, ratio }
    }

    /// Row `y`'s grid coordinates at x = 0. `y` is below 2^31 (checked by the plan), so the
    /// conversion is C++'s int to float.
    #[inline(always)]
    pub(crate) fn row(&self, y: usize) -> (f32, f32) {
        let y = y as i32 as f32;
        (-self.sx + y * -self.sa, -self.sy + y * self.ca)
    }

    /// True when pixel `x` of the row whose coordinates are `row` keeps its value.
    #[inline(always)]
    pub(crate) fn keeps(&self, row: (f32, f32), x: usize) -> bool {
        let x = x as i32 as f32;
        let fx = row.0 + x * self.ca;
        let fy = row.1 + x * self.sa;
        fx - floor_exact(fx) >= self.ratio || fy - floor_exact(fy) >= self.ratio
    }
}

/// `v.floor()` without a libm call (the baseline x86-64 target has no rounding
/// instruction, and this loop runs per pixel), the same value for every input: below
/// 2^23 in magnitude truncation through i32 is exact and is corrected downwards for
/// negative fractions; from 2^23 on every f32 is an integer, and NaN and infinities are
/// their own floor. (-0.0 comes out as +0.0; the only use, `v - floor(v) >= ratio`,
/// cannot tell them apart.)
#[inline(always)]
fn floor_exact(v: f32) -> f32 {
    if v.abs() < 8_388_608.0 {
        let t = v as i32 as f32;
        if t > v {
            t - 1.0
        } else {
            t
        }
    } else {
        v
    }
}

/// The bits of FLOAT `x * 1.0f` (`keep`) or `x * 0.0f` on x86, which is how DALI's cpu
/// kernel (`in * mask`) writes a FLOAT element: a NaN comes back quieted with its sign and
/// payload, an infinity times zero is the "real indefinite" NaN 0xffc00000, any other value
/// times zero is a zero of its sign. Written as bits so that neither the compiler (which may
/// fold `x * 1.0` to `x`) nor the platform (ARM's default NaN is positive) changes it; the
/// gpu kernel applies the same rule.
#[inline(always)]
pub(crate) fn float_times(bits: u32, keep: bool) -> u32 {
    const EXP: u32 = 0x7f80_0000;
    let special = bits & EXP == EXP;
    if special && bits & 0x007f_ffff != 0 {
        bits | 0x0040_0000
    } else if keep {
        bits
    } else if special {
        0xffc0_0000
    } else {
        bits & 0x8000_0000
    }
}

/// One sample's plan.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SamplePlan {
    pub grid: Grid,
    pub height: usize,
    pub width: usize,
    pub channels: usize,
}

/// The operator, both backends' planning and the cpu backend.
pub struct GridMask {
    ctx: OpContext,
    /// The current batch's plans, one per sample (kept to reuse the allocation).
    samples: Vec<SamplePlan>,
}

impl GridMask {
    fn new(ctx: &OpContext) -> GridMask {
        GridMask { ctx: ctx.clone(), samples: Vec::new() }
    }

    /// Checks the batch, fills `self.samples` and returns the output's metadata (the
    /// input's). Shared by both backends.
    fn plan_batch(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<BatchMeta> {
        let op = self.ctx.display_name.as_str();
        let mut samples = std::mem::take(&mut self.samples);
        samples.clear();
        let layout = input.layout();
        if input.ndim() != 3 || !(layout.is_empty() || layout.as_str() == "HWC") {
            let got = if layout.is_empty() { format!("{} dimensions without a layout", input.ndim()) } else { format!("layout \"{layout}\"") };
            let hint = if layout.as_str() == "CHW" { " (fn.transpose(x, perm=[1, 2, 0]) makes it HWC)" } else { "" };
            self.samples = samples;
            return Err(Error::type_mismatch(op, format!(
                "input 0: {got}; grid_mask takes images with layout HWC (or 3 dimensions without a layout, read as HWC){hint}"
            )));
        }
        let n = input.len();
        let dtype = input.dtype();
        if n > 0 && !TYPES.contains(&dtype) {
            let supported: Vec<&str> = TYPES.iter().map(|d| d.dali_name()).collect();
            self.samples = samples;
            return Err(Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), format!("unsupported input type {dtype}; supported: {}", supported.join(", "))));
        }
        let planned = plan_samples(&self.ctx, ws, input, &mut samples);
        self.samples = samples;
        planned?;
        Ok(input.clone())
    }
}

/// Appends every sample's plan to `out`.
fn plan_samples(ctx: &OpContext, ws: &Workspace<'_>, input: &BatchMeta, out: &mut Vec<SamplePlan>) -> Result<()> {
    let op = ctx.display_name.as_str();
    let n = input.len();
    for (name, _) in ARGS {
        if let Some(batch) = ws.arg_inputs.get(name) {
            if batch.len() != n {
                return Err(Error::arg(op, name, format!("argument input has {} samples, the batch has {n}", batch.len())));
            }
        }
    }
    for i in 0..n {
        let shape = input.shape(i);
        let (height, width, channels) = (shape[0], shape[1], shape[2]);
        // DALI counts rows and columns in int; so do the grid coordinates here.
        if height > i32::MAX as usize || width > i32::MAX as usize {
            return Err(Error::data(ctx.at(ws.iteration, i, input.source_info(i)), format!("sample of shape {shape:?}: height and width must be below 2^31")));
        }
        let mut v = [0.0f64; ARGS.len()];
        for (slot, (name, default)) in v.iter_mut().zip(ARGS) {
            *slot = ws.per_sample(ctx, name).get(op, i)?.unwrap_or(default);
        }
        let tile = v[0];
        if !((1.0..=i32::MAX as f64).contains(&tile) && tile.fract() == 0.0) {
            let what = if tile.fract() == 0.0 && tile < 1.0 { "Tile argument must be positive" } else { "must be a whole number from 1 to 2^31 - 1" };
            return Err(Error::arg(op, "tile", format!("sample {i}: {what}; got {tile}")));
        }
        let grid = Grid::new(tile as i32, v[1] as f32, v[2] as f32, v[3] as f32, v[4] as f32);
        out.push(SamplePlan { grid, height, width, channels });
    }
    Ok(())
}

impl Operator for GridMask {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let meta = self.plan_batch(ws, input.meta())?;
        let dtype = meta.dtype();
        let mut out = TensorList::for_overwrite(meta); // every element is written
        let samples = &self.samples;
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let (s, src) = (&samples[i], input.bytes(i));
            match dtype {
                DType::U8 => mask_sample::<u8>(dst, src, s),
                DType::I16 => mask_sample::<i16>(bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(src), s),
                DType::I32 => mask_sample::<i32>(bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(src), s),
                _ => mask_sample::<f32>(bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(src), s),
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// An element type and how DALI's `in * mask` writes it.
trait Masked: bytemuck::Pod + Send + Sync {
    /// A run of kept elements (`in * 1`).
    fn keep(dst: &mut [Self], src: &[Self]) {
        dst.copy_from_slice(src);
    }

    /// A run of masked elements (`in * 0`).
    fn zero(dst: &mut [Self], _src: &[Self]) {
        dst.fill(<Self as bytemuck::Zeroable>::zeroed());
    }
}

impl Masked for u8 {}
impl Masked for i16 {}
impl Masked for i32 {}

impl Masked for f32 {
    fn keep(dst: &mut [f32], src: &[f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f32::from_bits(float_times(s.to_bits(), true));
        }
    }

    fn zero(dst: &mut [f32], src: &[f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f32::from_bits(float_times(s.to_bits(), false));
        }
    }
}

/// Elements per parallel chunk of a sample's rows.
const CHUNK: usize = 1 << 16;

/// Sample `src` masked into `dst` (both H x W x C elements). Chunks of rows run in
/// parallel on the pool this runs on, so one large image does not wait on one worker.
fn mask_sample<T: Masked>(dst: &mut [T], src: &[T], s: &SamplePlan) {
    let row_len = s.width * s.channels;
    if row_len == 0 || s.height == 0 {
        return;
    }
    let rows = (CHUNK / row_len).max(1);
    dst.par_chunks_mut(rows * row_len).zip(src.par_chunks(rows * row_len)).enumerate().for_each(|(k, (d, sr))| {
        let mut keep = Vec::with_capacity(s.width);
        for (r, (drow, srow)) in d.chunks_exact_mut(row_len).zip(sr.chunks_exact(row_len)).enumerate() {
            mask_row(drow, srow, &s.grid, k * rows + r, s.channels, &mut keep);
        }
    });
}

/// Row `y` of a sample: the pixels' verdicts first (a loop the compiler can vectorize),
/// then each run of equal verdicts copied or zeroed as one slice. `keep` is scratch.
fn mask_row<T: Masked>(dst: &mut [T], src: &[T], grid: &Grid, y: usize, channels: usize, keep: &mut Vec<bool>) {
    let width = dst.len() / channels;
    let row = grid.row(y);
    keep.clear();
    keep.extend((0..width).map(|x| grid.keeps(row, x)));
    let mut x0 = 0;
    while x0 < width {
        let k = keep[x0];
        let x1 = keep[x0..].iter().position(|&v| v != k).map_or(width, |p| x0 + p);
        let (a, b) = (x0 * channels, x1 * channels);
        if k {
            T::keep(&mut dst[a..b], &src[a..b]);
        } else {
            T::zero(&mut dst[a..b], &src[a..b]);
        }
        x0 = x1;
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::ops::{ArgValue, Args};
    use crate::tensor::Element;

    /// The operator with constant arguments `given` and argument inputs named `inputs`.
    pub(in crate::ops::grid_mask) fn op(given: Vec<(&str, ArgValue)>, inputs: &[&str]) -> Result<GridMask> {
        let per_sample: Vec<String> = inputs.iter().map(|s| s.to_string()).collect();
        let ctx = OpContext {
            args: Args::check(&GRID_MASK.schema, "grid_mask", given.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), &per_sample)?,
            display_name: "grid_mask".into(),
            instance_name: "g".into(),
            op_id: 1,
            seed: 1,
            max_batch_size: 8,
            num_threads: 1,
            device_id: None,
            arg_input_names: per_sample,
            resume_samples: 0,
        };
        Ok(GridMask::new(&ctx))
    }

    /// Runs the cpu backend on `x` with argument inputs `args`.
    pub(in crate::ops::grid_mask) fn run(g: &mut GridMask, x: &TensorList, args: &[(&'static str, &TensorList)]) -> Result<TensorList> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let arg_inputs: HashMap<&str, &TensorList> = args.iter().copied().collect();
        let ws = Workspace { inputs: vec![x], arg_inputs, iteration: 0, batch_size: x.len(), frames: None, pool: &pool };
        Ok(g.run(&ws)?.remove(0))
    }

    /// Plans `x` with argument inputs `args` (the planning both backends run).
    pub(in crate::ops::grid_mask) fn plan(g: &mut GridMask, x: &BatchMeta, args: &[(&'static str, &TensorList)]) -> Result<Vec<SamplePlan>> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let arg_inputs: HashMap<&str, &TensorList> = args.iter().copied().collect();
        let ws = Workspace { inputs: vec![], arg_inputs, iteration: 0, batch_size: x.len(), frames: None, pool: &pool };
        g.plan_batch(&ws, x)?;
        Ok(g.samples.clone())
    }

    fn image<E: Element>(shapes: &[[usize; 3]], value: impl Fn(usize) -> E) -> TensorList {
        let shapes: Vec<Vec<usize>> = shapes.iter().map(|s| s.to_vec()).collect();
        let data: Vec<Vec<E>> = shapes.iter().map(|s| (0..s.iter().product::<usize>()).map(&value).collect()).collect();
        TensorList::from_samples(&shapes, &data).with_layout("HWC")
    }

    /// The verdicts of a sample's pixels, row by row ('1': kept).
    fn mask_of(g: &Grid, h: usize, w: usize) -> Vec<String> {
        (0..h).map(|y| (0..w).map(|x| if g.keeps(g.row(y), x) { '1' } else { '0' }).collect()).collect()
    }

    #[test]
    fn an_upright_grid_zeroes_squares_of_ratio_times_tile() {
        // tile 4, ratio 0.5: pixels whose x and y are both 0 or 1 modulo 4 are zeroed.
        let g = Grid::new(4, 0.5, 0.0, 0.0, 0.0);
        assert_eq!(g, Grid { ca: 0.25, sa: 0.0, sx: 0.0, sy: 0.0, ratio: 0.5 });
        assert_eq!(mask_of(&g, 5, 9), ["001100110", "001100110", "111111111", "111111111", "001100110"]);
        // Shifted by one pixel to the right and two down: the squares follow.
        let g = Grid::new(4, 0.5, 0.0, 1.0, 2.0);
        assert_eq!(mask_of(&g, 5, 9), ["111111111", "111111111", "100110011", "100110011", "111111111"]);
        // ratio 0 keeps everything, ratio 1 (or NaN) zeroes everything.
        assert!(mask_of(&Grid::new(3, 0.0, 0.7, 0.0, 0.0), 6, 6).iter().all(|r| r == "111111"));
        assert!(mask_of(&Grid::new(3, 1.0, 0.7, 0.0, 0.0), 6, 6).iter().all(|r| r == "000000"));
        assert!(mask_of(&Grid::new(3, f32::NAN, 0.7, 0.0, 0.0), 6, 6).iter().all(|r| r == "000000"));
    }

    #[test]
    fn grid_coordinates_round_as_dalis_cpu_kernel() {
        // (tile, ratio, angle, shift_x, shift_y as f32 bits, pixel (y, x), DALI 2.4's verdict):
        // pixels where computing cos/sin in f64, or fusing the multiply-adds, gives the
        // other verdict. Read back from DALI's cpu operator on a 256x256 image.
        let cases: [(i32, [u32; 4], (usize, usize), bool); 3] = [
            (20, [0x3ef3_51d0, 0xc058_54c5, 0xc19d_8ba4, 0x4211_3e79], (96, 141), false),
            (38, [0x3e5d_c138, 0x40b7_4b15, 0x41f6_0ffa, 0x4190_f3ef], (115, 151), false),
            (9, [0x3f2c_cdc5, 0xc0a7_ce54, 0x41b9_b368, 0xc0c4_e34a], (216, 207), true),
        ];
        for (tile, bits, (y, x), want) in cases {
            let [ratio, angle, sx, sy] = bits.map(f32::from_bits);
            let g = Grid::new(tile, ratio, angle, sx, sy);
            assert_eq!(g.keeps(g.row(y), x), want, "tile {tile}, {bits:x?}, pixel ({y}, {x})");
        }
    }

    #[test]
    fn floor_exact_is_floor() {
        let mut values = vec![0.0f32, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -1.5, 0.999_999_94, -0.999_999_94, 8_388_607.5, -8_388_607.5, 8_388_608.0, -8_388_609.0, 1e20, -1e20, f32::MIN_POSITIVE, -f32::MIN_POSITIVE, 1e-45, -1e-45];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let v = f32::from_bits(state as u32);
            if v.is_finite() {
                values.push(v);
            }
        }
        for v in values {
            // Equal as values (-0.0 and +0.0 compare equal): all `keeps` looks at.
            assert_eq!(floor_exact(v), v.floor(), "{v:e}");
            assert_eq!(v - floor_exact(v), v - v.floor(), "{v:e}");
        }
        assert!(floor_exact(f32::NAN).is_nan());
        assert_eq!(floor_exact(f32::INFINITY), f32::INFINITY);
        assert_eq!(floor_exact(f32::NEG_INFINITY), f32::NEG_INFINITY);
    }

    #[test]
    fn float_elements_are_multiplied_as_on_x86() {
        // DALI 2.4's outputs for these inputs (masked; kept).
        let cases: [(u32, u32, u32); 10] = [
            (0x3fc0_0000, 0x0000_0000, 0x3fc0_0000),  // 1.5
            (0xbfc0_0000, 0x8000_0000, 0xbfc0_0000),  // -1.5 -> -0.0
            (0x8000_0000, 0x8000_0000, 0x8000_0000),  // -0.0
            (0x0000_0001, 0x0000_0000, 0x0000_0001),  // denormal
            (0x8000_0001, 0x8000_0000, 0x8000_0001),
            (0x7f80_0000, 0xffc0_0000, 0x7f80_0000),  // inf * 0: the default NaN
            (0xff80_0000, 0xffc0_0000, 0xff80_0000),
            (0x7fc1_2345, 0x7fc1_2345, 0x7fc1_2345),  // quiet NaN: as it is
            (0x7f80_0001, 0x7fc0_0001, 0x7fc0_0001),  // signaling NaN: quieted, even kept
            (0xff81_2345, 0xffc1_2345, 0xffc1_2345),
        ];
        for (x, masked, kept) in cases {
            assert_eq!(float_times(x, false), masked, "{x:#x} masked");
            assert_eq!(float_times(x, true), kept, "{x:#x} kept");
            #[cfg(target_arch = "x86_64")]
            {
                // The hardware agrees (black_box: no constant folding of `x * 1.0`).
                let v = std::hint::black_box(f32::from_bits(x));
                assert_eq!((v * std::hint::black_box(0.0f32)).to_bits(), masked, "{x:#x} * 0");
                assert_eq!((v * std::hint::black_box(1.0f32)).to_bits(), kept, "{x:#x} * 1");
            }
        }
    }

    #[test]
    fn plans_take_per_sample_arguments_and_defaults() {
        let x = image::<u8>(&[[4, 5, 3], [2, 3, 1], [0, 7, 3]], |k| k as u8);
        // `tile` as DALI wants it (INT32), one value per sample as shape (1,).
        let tiles = TensorList::from_samples(&[vec![1], vec![1], vec![1]], &[vec![10i32], vec![7], vec![1]]);
        let angles = TensorList::from_samples(&[vec![], vec![], vec![]], &[vec![0.5f32], vec![-1.0], vec![2.0]]);
        let mut g = op(vec![("ratio", ArgValue::Float(0.25)), ("shift_x", ArgValue::Int(3))], &["tile", "angle"]).unwrap();
        let plans = plan(&mut g, x.meta(), &[("tile", &tiles), ("angle", &angles)]).unwrap();
        assert_eq!(plans.len(), 3);
        assert_eq!((plans[0].height, plans[0].width, plans[0].channels), (4, 5, 3));
        assert_eq!((plans[2].height, plans[2].width, plans[2].channels), (0, 7, 3));
        assert_eq!(plans[0].grid, Grid::new(10, 0.25, 0.5, 3.0, 0.0));
        assert_eq!(plans[1].grid, Grid::new(7, 0.25, -1.0, 3.0, 0.0));
        assert_eq!(plans[2].grid, Grid::new(1, 0.25, 2.0, 3.0, 0.0));
        // Defaults: tile 100, ratio 0.5, no rotation, no shift.
        let mut g = op(vec![], &[]).unwrap();
        let plans = plan(&mut g, x.meta(), &[]).unwrap();
        assert!(plans.iter().all(|p| p.grid == Grid { ca: 0.01, sa: 0.0, sx: 0.0, sy: 0.0, ratio: 0.5 }));
        // Integral values of any numeric type, FLOAT64 rounded to f32.
        let tiles = TensorList::from_samples(&[vec![], vec![], vec![]], &[vec![10.0f64], vec![7.0], vec![1.0]]);
        let ratios = TensorList::from_samples(&[vec![], vec![], vec![]], &[vec![0.1f64], vec![0.2], vec![0.3]]);
        let mut g = op(vec![], &["tile", "ratio"]).unwrap();
        let plans = plan(&mut g, x.meta(), &[("tile", &tiles), ("ratio", &ratios)]).unwrap();
        assert_eq!(plans[1].grid, Grid::new(7, 0.2, 0.0, 0.0, 0.0));
    }

    #[test]
    fn plans_refuse_bad_tiles_layouts_and_types() {
        let x = image::<u8>(&[[4, 5, 3], [2, 3, 1]], |k| k as u8);
        let err = |e: Error| e.to_string();
        // A constant tile of 0, a per-sample one of -3 in sample 1, a fraction, too large.
        let mut g = op(vec![("tile", ArgValue::Int(0))], &[]).unwrap();
        let e = err(plan(&mut g, x.meta(), &[]).unwrap_err());
        assert!(e.contains("grid_mask") && e.contains("'tile'") && e.contains("sample 0") && e.contains("must be positive"), "{e}");
        for (values, sample, what) in [([4i64, -3], 1, "must be positive"), ([4, 1 << 31], 1, "from 1 to 2^31 - 1")] {
            let tiles = TensorList::from_samples(&[vec![], vec![]], &[vec![values[0]], vec![values[1]]]);
            let mut g = op(vec![], &["tile"]).unwrap();
            let e = err(plan(&mut g, x.meta(), &[("tile", &tiles)]).unwrap_err());
            assert!(e.contains("'tile'") && e.contains(&format!("sample {sample}")) && e.contains(what), "{e}");
        }
        let tiles = TensorList::from_samples(&[vec![], vec![]], &[vec![4.5f32], vec![4.0]]);
        let mut g = op(vec![], &["tile"]).unwrap();
        let e = err(plan(&mut g, x.meta(), &[("tile", &tiles)]).unwrap_err());
        assert!(e.contains("'tile'") && e.contains("sample 0") && e.contains("whole number"), "{e}");
        // Two values for one sample; an argument input of another batch size.
        let ratios = TensorList::from_samples(&[vec![2], vec![2]], &[vec![0.1f32, 0.2], vec![0.1, 0.2]]);
        let mut g = op(vec![], &["ratio"]).unwrap();
        let e = err(plan(&mut g, x.meta(), &[("ratio", &ratios)]).unwrap_err());
        assert!(e.contains("'ratio'") && e.contains("sample 0"), "{e}");
        let ratios = TensorList::from_samples(&[vec![]], &[vec![0.1f32]]);
        let mut g = op(vec![], &["ratio"]).unwrap();
        let e = err(plan(&mut g, x.meta(), &[("ratio", &ratios)]).unwrap_err());
        assert!(e.contains("'ratio'") && e.contains("1 samples, the batch has 2"), "{e}");
        // Layouts: CHW, 2-D, 4-D; no layout is HWC.
        let mut g = op(vec![], &[]).unwrap();
        let chw = image::<u8>(&[[3, 4, 5]], |k| k as u8).with_layout("CHW");
        let e = err(plan(&mut g, chw.meta(), &[]).unwrap_err());
        assert!(e.contains("grid_mask") && e.contains("input 0") && e.contains("layout \"CHW\"") && e.contains("transpose"), "{e}");
        let hw = TensorList::from_samples(&[vec![4, 5]], &[vec![0u8; 20]]).with_layout("HW");
        assert!(err(plan(&mut g, hw.meta(), &[]).unwrap_err()).contains("layout \"HW\""));
        let fhwc = TensorList::from_samples(&[vec![2, 4, 5, 3]], &[vec![0u8; 120]]);
        assert!(err(plan(&mut g, fhwc.meta(), &[]).unwrap_err()).contains("4 dimensions without a layout"));
        let bare = TensorList::from_samples(&[vec![4, 5, 3]], &[vec![0u8; 60]]);
        assert_eq!(plan(&mut g, bare.meta(), &[]).unwrap().len(), 1);
        // Types.
        let u16s = TensorList::from_samples(&[vec![4, 5, 3]], &[vec![0u16; 60]]).with_layout("HWC");
        let e = err(plan(&mut g, u16s.meta(), &[]).unwrap_err());
        assert!(e.contains("grid_mask") && e.contains("unsupported input type UINT16; supported: UINT8, INT16, INT32, FLOAT"), "{e}");
        // The operator still plans a good batch after the errors.
        assert_eq!(plan(&mut g, x.meta(), &[]).unwrap().len(), 2);
    }

    #[test]
    fn the_cpu_backend_zeroes_every_channel_of_masked_pixels() {
        let f32s = [1.5f32, -2.5, f32::INFINITY, f32::NAN, -0.0, 7.0, 1e-42, -3.0];
        let cases: Vec<(TensorList, Vec<(&str, ArgValue)>)> = vec![
            (image::<u8>(&[[9, 11, 3], [5, 4, 1], [0, 3, 3], [3, 0, 2], [4, 4, 0]], |k| (k % 250 + 1) as u8), vec![("tile", ArgValue::Int(4))]),
            (image::<i16>(&[[17, 13, 4]], |k| k as i16 - 300), vec![("tile", ArgValue::Int(5)), ("angle", ArgValue::Float(0.6)), ("ratio", ArgValue::Float(0.3))]),
            (image::<i32>(&[[40, 70, 2]], |k| -(k as i32)), vec![("tile", ArgValue::Int(7)), ("angle", ArgValue::Float(-2.0)), ("shift_x", ArgValue::Float(2.5)), ("shift_y", ArgValue::Float(-11.0))]),
            (image::<f32>(&[[6, 33, 1], [300, 2, 1]], |k| f32s[k % 8]), vec![("tile", ArgValue::Int(3)), ("angle", ArgValue::Float(0.3))]),
        ];
        for (x, args) in cases {
            let what = format!("{} {args:?}", x.dtype());
            let mut g = op(args, &[]).unwrap();
            let out = run(&mut g, &x, &[]).unwrap();
            assert_eq!(out.meta().layout().as_str(), "HWC");
            let plans = g.samples.clone();
            let size = x.dtype().size();
            for (i, p) in plans.iter().enumerate() {
                assert_eq!(out.shape(i), x.shape(i));
                let (src, dst) = (x.bytes(i), out.bytes(i));
                for e in 0..x.numel(i) {
                    let pixel = e / p.channels;
                    let (y, px) = (pixel / p.width, pixel % p.width);
                    let keep = p.grid.keeps(p.grid.row(y), px);
                    let s = &src[e * size..(e + 1) * size];
                    let want: Vec<u8> = match x.dtype() {
                        DType::F32 => float_times(u32::from_le_bytes(s.try_into().unwrap()), keep).to_le_bytes().to_vec(),
                        _ if keep => s.to_vec(),
                        _ => vec![0; size],
                    };
                    assert_eq!(&dst[e * size..(e + 1) * size], &want[..], "{what}: sample {i} element {e}");
                }
            }
        }
    }

    #[test]
    fn large_images_are_split_into_row_chunks_that_agree() {
        // 300 rows of 160 x 3: several chunks of rows; every row against the definition.
        let x = image::<u8>(&[[300, 160, 3]], |k| (k % 255 + 1) as u8);
        let mut g = op(vec![("tile", ArgValue::Int(37)), ("angle", ArgValue::Float(1.1)), ("ratio", ArgValue::Float(0.6))], &[]).unwrap();
        let out = run(&mut g, &x, &[]).unwrap();
        let grid = g.samples[0].grid;
        let (src, dst) = (x.bytes(0), out.bytes(0));
        for y in 0..300 {
            for px in 0..160 {
                let keep = grid.keeps(grid.row(y), px);
                for c in 0..3 {
                    let e = (y * 160 + px) * 3 + c;
                    assert_eq!(dst[e], if keep { src[e] } else { 0 }, "({y}, {px}, {c})");
                }
            }
        }
    }
}
