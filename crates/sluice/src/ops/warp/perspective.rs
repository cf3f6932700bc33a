//! `fn.experimental.warp_perspective`, as DALI 2.4's cpu operator computes it: DALI hands
//! each image to OpenCV 5.0's `cv::warpPerspective`, whose arithmetic [`super::cv`]
//! reproduces bit for bit (checked against DALI side by side, `tests/test_warp_perspective.py`).
//!
//! - The 3x3 matrix (row-major, x first) comes from the second input (FLOAT, 3 x 3 per
//!   sample), else the `matrix` argument (9 values, or a 3 x 3 argument input). Both at once
//!   is an error, as in DALI.
//! - `pixel_origin="corner"` (the default) moves the map to OpenCV's pixel-centre
//!   coordinates as DALI does, in f32: `shift(-0.5) * (M * shift(+0.5))`, each product a
//!   left-to-right sum from 0. `"center"` takes the matrix as it is.
//! - `inverse_map=True` (the default): the matrix maps output points to source points;
//!   otherwise it is inverted in f64 as `cv::invert` does a 3x3 (the closed form over the
//!   determinant). A singular matrix is an error naming the sample (DALI warps with an
//!   all-zero map instead, which fills the output with garbage).
//! - `size` (1 or 2 values, constant or per sample) rounds half away from zero, at least 1;
//!   without it the output keeps the input's size.
//! - `border_mode` (constant, replicate, reflect, reflect_101, wrap) and `fill_value` (for
//!   constant: one value, or one per channel; 0 when not given); `interp_type` INTERP_NN,
//!   INTERP_LINEAR or INTERP_CUBIC (OpenCV 5.0's bicubic kernels, `cv::warp_cubic`).
//! - Layouts `HW`, `HWC`, `FHWC` (one map for every frame), `CHW`, `FCHW` (each plane warped
//!   alone, a scalar `fill_value` only); a sample without a layout is `HW`, `HWC` or `FHWC` by
//!   its dimensions. UINT8, UINT16, INT16, FLOAT; at most 4 channels; the output has the
//!   input's type and layout.

use super::cv::{self, BorderMode, CvKernel, CvPixel, Image, Interp, Perspective};
use crate::error::{Error, Result};
use crate::ops::args::element_as_f64;
use crate::ops::gpu_params::ParamUpload;
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

/// `fn.experimental.warp_perspective`.
pub static WARP_PERSPECTIVE: OpDef = OpDef {
    schema: OpSchema {
        name: "experimental__WarpPerspective",
        doc: "Performs a perspective transform on the images. The 3x3 matrix comes from the second input (per-sample homographies) or the `matrix` argument.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 2,
        num_outputs: 1,
        host_inputs: &[1],
        args: &[&[
            tensor_arg("matrix", T::FloatList, D::Optional, "3x3 perspective transform matrix of destination to source coordinates (source to destination with inverse_map=False), row-major. Equivalent to OpenCV's warpPerspective, inverse_map being the WARP_INVERSE_MAP flag. Instead of this argument, the matrix can be the second input.").per_frame(),
            tensor_arg("size", T::FloatList, D::Optional, "Output size, in pixels (height, width; the channel dimension excluded). The input's size when not given."),
            arg("border_mode", T::Str, D::Str("constant"), "Border mode for elements outside the input image: \"constant\", \"replicate\", \"reflect\", \"reflect_101\", \"wrap\"."),
            arg("interp_type", T::InterpType, D::Int(1), "Type of interpolation used: INTERP_NN, INTERP_LINEAR or INTERP_CUBIC."),
            arg("pixel_origin", T::Str, D::Str("corner"), "Pixel origin: \"corner\" places (0, 0) at the top-left corner of the top-left pixel (like OpenGL); \"center\" at its centre (like OpenCV)."),
            arg("fill_value", T::FloatList, D::Optional, "Value (or one value per channel) for the areas outside the source image with the \"constant\" border_mode; 0 when not given."),
            arg("inverse_map", T::Bool, D::Bool(true), "True: the matrix maps destination to source coordinates; False: source to destination (it is inverted)."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(WarpPerspective::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(super::perspective_gpu::WarpPerspectiveGpu { warp: WarpPerspective::new(ctx)?, params: ParamUpload::default() }))),
};

/// How a layout splits a sample into 2-D images: `planes` images of `h` x `w` x `c`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Planes {
    pub planes: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
}

/// The accepted layouts (DALI's list), and where H and W are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Hw,
    Hwc,
    Fhwc,
    Chw,
    Fchw,
}

impl Kind {
    fn of(layout: &str, ndim: usize) -> Option<Kind> {
        Some(match (layout, ndim) {
            ("HW", 2) | ("", 2) => Kind::Hw,
            ("HWC", 3) | ("", 3) => Kind::Hwc,
            ("FHWC", 4) | ("", 4) => Kind::Fhwc,
            ("CHW", 3) => Kind::Chw,
            ("FCHW", 4) => Kind::Fchw,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Hw => "HW",
            Kind::Hwc => "HWC",
            Kind::Fhwc => "FHWC",
            Kind::Chw => "CHW",
            Kind::Fchw => "FCHW",
        }
    }

    /// Index of H in the shape (W follows it).
    fn h_axis(self) -> usize {
        match self {
            Kind::Hw | Kind::Hwc => 0,
            Kind::Fhwc | Kind::Chw => 1,
            Kind::Fchw => 2,
        }
    }

    /// Channels interleaved in each image (the planar layouts warp one plane at a time).
    fn planar(self) -> bool {
        matches!(self, Kind::Hw | Kind::Chw | Kind::Fchw)
    }

    fn split(self, s: &[usize]) -> Planes {
        match self {
            Kind::Hw => Planes { planes: 1, h: s[0], w: s[1], c: 1 },
            Kind::Hwc => Planes { planes: 1, h: s[0], w: s[1], c: s[2] },
            Kind::Fhwc => Planes { planes: s[0], h: s[1], w: s[2], c: s[3] },
            Kind::Chw => Planes { planes: s[0], h: s[1], w: s[2], c: 1 },
            Kind::Fchw => Planes { planes: s[0] * s[1], h: s[2], w: s[3], c: 1 },
        }
    }
}

/// One sample's plan: its map, output extents and fill value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub map: Perspective,
    pub out_h: usize,
    pub out_w: usize,
    pub fill: [f64; 4],
}

pub(crate) struct WarpPerspective {
    pub ctx: OpContext,
    pub interp: Interp,
    pub border: BorderMode,
    inverse_map: bool,
    /// `pixel_origin="corner"`: shift the map to OpenCV's pixel centres.
    corner: bool,
    fill: Vec<f64>,
    pub plans: Vec<Plan>,
}

impl WarpPerspective {
    pub(crate) fn new(ctx: &OpContext) -> Result<WarpPerspective> {
        let name = &ctx.display_name;
        let interp = match ctx.args.int("interp_type") {
            0 => Interp::Nearest,
            1 => Interp::Linear,
            2 => Interp::Cubic,
            v => return Err(Error::arg(name, "interp_type", format!("Unknown interpolation type: {v}; use INTERP_NN, INTERP_LINEAR or INTERP_CUBIC"))),
        };
        let mode = ctx.args.str("border_mode");
        let border = BorderMode::parse(mode).ok_or_else(|| Error::arg(name, "border_mode", format!("Unknown border mode: {mode} (supported: \"constant\", \"replicate\", \"reflect\", \"reflect_101\", \"wrap\")")))?;
        let corner = match ctx.args.str("pixel_origin") {
            "corner" => true,
            "center" => false,
            v => return Err(Error::arg(name, "pixel_origin", format!("Invalid pixel_origin argument: {v} (\"corner\" or \"center\")"))),
        };
        let fill = if ctx.args.has("fill_value") { ctx.args.floats("fill_value").to_vec() } else { Vec::new() };
        if fill.len() > 4 {
            return Err(Error::arg(name, "fill_value", format!("at most 4 values (one per channel), got {}", fill.len())));
        }
        Ok(WarpPerspective { ctx: ctx.clone(), interp, border, inverse_map: ctx.args.bool("inverse_map"), corner, fill, plans: Vec::new() })
    }

    /// Checks the batch, works out every sample's plan into `self.plans` and describes the
    /// output; `matrices` is the second input, when given. Shared by both backends.
    pub(crate) fn plan_batch(&mut self, ws: &Workspace<'_>, input: &BatchMeta, matrices: Option<&TensorList>) -> Result<(BatchMeta, LayoutKind)> {
        let name = self.ctx.display_name.clone();
        let n = input.len();
        let kind = Kind::of(input.layout().as_str(), input.ndim()).ok_or_else(|| {
            let l = input.layout().as_str();
            let got = if l.is_empty() { format!("{} dimensions without a layout", input.ndim()) } else { format!("layout \"{l}\"") };
            Error::type_mismatch(&name, format!("input 0: {got} does not match any of the allowed layouts: HW, HWC, FHWC, CHW, FCHW"))
        })?;
        let dtype = input.dtype();
        if !matches!(dtype, DType::U8 | DType::U16 | DType::I16 | DType::F32) {
            return Err(Error::type_mismatch(&name, format!("input 0: the operator accepts the following input types: uint8, int16, uint16, float; got {dtype}")));
        }
        let matrix_input = ws.arg_inputs.get("matrix").copied();
        let const_matrix = self.ctx.args.has("matrix") && matrix_input.is_none();
        if matrices.is_some() && (const_matrix || matrix_input.is_some()) {
            return Err(Error::arg(&name, "matrix", "Matrix input and `matrix` argument should not be provided at the same time"));
        }
        if let Some(m) = matrices {
            if m.dtype() != DType::F32 {
                return Err(Error::type_mismatch(&name, format!("input 1: the transformation matrix can be provided only as float32 values, got {}", m.dtype())));
            }
        }
        let constant: Option<[f32; 9]> = if matrices.is_none() && matrix_input.is_none() {
            let m = if const_matrix { self.ctx.args.floats("matrix") } else { &[] };
            if m.len() != 9 {
                return Err(Error::arg(&name, "matrix", format!("expected shape 3 x 3 but got {} values (give the matrix as 9 values, an argument input, or the second input)", m.len())));
            }
            Some(std::array::from_fn(|k| m[k] as f32))
        } else {
            None
        };
        let size_input = ws.arg_inputs.get("size").copied();
        let const_size = if size_input.is_none() && self.ctx.args.has("size") {
            let s = self.ctx.args.floats("size");
            Some(output_extents(&name, s, None)?)
        } else {
            None
        };

        self.plans.clear();
        let mut shapes = Vec::with_capacity(n);
        for i in 0..n {
            let shape = input.shape(i);
            let p = kind.split(shape);
            if p.c > 4 {
                return Err(Error::data(self.ctx.at(ws.iteration, i, input.source_info(i)), format!("images with more than 4 channels are not supported, got {} (shape {shape:?})", p.c)));
            }
            let raw = match (constant, matrices.or(matrix_input)) {
                (Some(m), _) => m,
                (None, Some(batch)) => {
                    let what = if matrices.is_some() { "input 1" } else { "argument input" };
                    if batch.dtype() != DType::F32 {
                        return Err(Error::type_mismatch(&name, format!("matrix ({what}): the transformation matrix can be provided only as float32 values, got {}", batch.dtype())));
                    }
                    if batch.shape(i) != [3, 3] {
                        return Err(Error::arg(&name, "matrix", format!("{what}: sample {i}: expected a 3 x 3 matrix, got data with shape {:?}", batch.shape(i))));
                    }
                    std::array::from_fn(|k| element_as_f64(batch, i, k) as f32)
                }
                (None, None) => unreachable!("checked above"),
            };
            let map = self.map(&raw).ok_or_else(|| Error::arg(&name, "matrix", format!("sample {i}: cannot invert a singular matrix ({raw:?}); with inverse_map=False the matrix must be invertible")))?;
            let (out_h, out_w) = match (const_size, size_input) {
                (Some(s), _) => s,
                (None, Some(b)) => {
                    let v: Vec<f64> = (0..b.numel(i)).map(|k| element_as_f64(b, i, k)).collect();
                    output_extents(&name, &v, Some(i))?
                }
                (None, None) => (p.h, p.w),
            };
            let fill = self.fill_for(&name, kind, p.c, i)?;
            if p.planes * out_h * out_w * p.c > 0 && p.h * p.w == 0 {
                return Err(Error::data(self.ctx.at(ws.iteration, i, input.source_info(i)), format!("cannot warp an empty image (shape {shape:?})")));
            }
            self.plans.push(Plan { map, out_h, out_w, fill });
            let mut out = shape.to_vec();
            out[kind.h_axis()] = out_h;
            out[kind.h_axis() + 1] = out_w;
            shapes.push(out);
        }
        let mut meta = BatchMeta::new(dtype, input.ndim(), shapes.iter().map(|s| &s[..]));
        meta.set_layout(Layout::from(kind.name()));
        meta.inherit_source_info(input);
        Ok((meta, LayoutKind(kind)))
    }

    /// The destination-to-source map OpenCV warps with, from the user's matrix.
    fn map(&self, raw: &[f32; 9]) -> Option<Perspective> {
        let m = if self.corner { corner_to_center(raw) } else { *raw };
        let m = m.map(|v| v as f64);
        Some(Perspective { m: if self.inverse_map { m } else { invert3(&m)? } })
    }

    /// DALI's `GetFillValue`: one value for every channel, or one per channel (not for the
    /// planar layouts), 0 when not given.
    fn fill_for(&self, name: &str, kind: Kind, channels: usize, i: usize) -> Result<[f64; 4]> {
        match self.fill.len() {
            0 => Ok([0.0; 4]),
            1 => Ok([self.fill[0]; 4]),
            k if kind.planar() => Err(Error::arg(name, "fill_value", format!("only a scalar fill_value can be provided when processing data in planar layout ({} values given)", k))),
            k if k != channels => Err(Error::arg(name, "fill_value", format!("sample {i}: the number of values provided as a fill_value should match the number of channels: {channels} channels, {k} values"))),
            _ => Ok(std::array::from_fn(|k| self.fill.get(k).copied().unwrap_or(0.0))),
        }
    }
}

/// The layout a batch was planned for (opaque to the gpu backend but for its planes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LayoutKind(Kind);

impl LayoutKind {
    pub(crate) fn split(self, shape: &[usize]) -> Planes {
        self.0.split(shape)
    }
}

/// `size`: one value for both extents or (height, width); DALI's `max(roundf(v), 1)`.
fn output_extents(name: &str, s: &[f64], sample: Option<usize>) -> Result<(usize, usize)> {
    let at = sample.map_or(String::new(), |i| format!("sample {i}: "));
    let (h, w) = match s {
        [v] => (*v, *v),
        [h, w] => (*h, *w),
        _ => return Err(Error::arg(name, "size", format!("{at}must give 2 extents (height, width; channels excluded), got {s:?}"))),
    };
    let extent = |v: f64| -> Result<usize> {
        let r = (v as f32).round();
        if !r.is_finite() || r > i32::MAX as f32 {
            return Err(Error::arg(name, "size", format!("{at}extents must be finite and below 2^31, got {s:?}")));
        }
        Ok(r.max(1.0) as usize)
    };
    Ok((extent(h)?, extent(w)?))
}

/// DALI's conversion of a corner-origin map to OpenCV's centre origin, in f32 as its `Matx33f`
/// products: `shift(-0.5) * (M * shift(0.5))`, each entry `((0 + a0*b0) + a1*b1) + a2*b2`.
fn corner_to_center(m: &[f32; 9]) -> [f32; 9] {
    let shift = [1.0, 0.0, 0.5, 0.0, 1.0, 0.5, 0.0, 0.0, 1.0];
    let back = [1.0, 0.0, -0.5, 0.0, 1.0, -0.5, 0.0, 0.0, 1.0];
    let mul = |a: &[f32; 9], b: &[f32; 9]| -> [f32; 9] {
        std::array::from_fn(|ij| {
            let (i, j) = (ij / 3, ij % 3);
            let mut s = 0.0f32;
            for k in 0..3 {
                s += a[i * 3 + k] * b[k * 3 + j];
            }
            s
        })
    };
    mul(&back, &mul(m, &shift))
}

/// `cv::invert` of a 3x3 f64 matrix (DECOMP_LU takes the closed form for n <= 3): the
/// adjugate over the determinant, `None` where the determinant is 0.
pub(crate) fn invert3(m: &[f64; 9]) -> Option<[f64; 9]> {
    let a = |i: usize, j: usize| m[i * 3 + j];
    let det = a(0, 0) * (a(1, 1) * a(2, 2) - a(1, 2) * a(2, 1)) - a(0, 1) * (a(1, 0) * a(2, 2) - a(1, 2) * a(2, 0)) + a(0, 2) * (a(1, 0) * a(2, 1) - a(1, 1) * a(2, 0));
    if det == 0.0 {
        return None;
    }
    let d = 1.0 / det;
    Some([
        (a(1, 1) * a(2, 2) - a(1, 2) * a(2, 1)) * d,
        (a(0, 2) * a(2, 1) - a(0, 1) * a(2, 2)) * d,
        (a(0, 1) * a(1, 2) - a(0, 2) * a(1, 1)) * d,
        (a(1, 2) * a(2, 0) - a(1, 0) * a(2, 2)) * d,
        (a(0, 0) * a(2, 2) - a(0, 2) * a(2, 0)) * d,
        (a(0, 2) * a(1, 0) - a(0, 0) * a(1, 2)) * d,
        (a(1, 0) * a(2, 1) - a(1, 1) * a(2, 0)) * d,
        (a(0, 1) * a(2, 0) - a(0, 0) * a(2, 1)) * d,
        (a(0, 0) * a(1, 1) - a(0, 1) * a(1, 0)) * d,
    ])
}

impl Operator for WarpPerspective {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let (meta, kind) = self.plan_batch(ws, input.meta(), ws.inputs.get(1).copied())?;
        let mut out = TensorList::for_overwrite(meta);
        let (plans, interp, border) = (&self.plans, self.interp, self.border);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let job = Job { dst, src: input.bytes(i), planes: kind.split(input.shape(i)), plan: &plans[i], interp, border };
            cv::dispatch(input.dtype(), job).expect("type checked by plan_batch");
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// One sample's planes, typed by [`cv::dispatch`].
struct Job<'a> {
    dst: &'a mut [u8],
    src: &'a [u8],
    planes: Planes,
    plan: &'a Plan,
    interp: Interp,
    border: BorderMode,
}

impl CvKernel for Job<'_> {
    type Output = ();

    fn run<T: CvPixel>(self) {
        let Planes { planes, h, w, c } = self.planes;
        let (oh, ow) = (self.plan.out_h, self.plan.out_w);
        let (in_plane, out_plane) = (h * w * c, oh * ow * c);
        if out_plane == 0 || planes == 0 {
            return;
        }
        let src: &[T] = bytemuck::cast_slice(self.src);
        let dst: &mut [T] = bytemuck::cast_slice_mut(self.dst);
        let fill = self.plan.fill.map(T::from_f64);
        for (p, out) in dst.chunks_exact_mut(out_plane).enumerate() {
            let img = Image { data: &src[p * in_plane..(p + 1) * in_plane], h: h as i32, w: w as i32, c };
            cv::warp_perspective(out, oh, ow, &img, &self.plan.map, self.interp, self.border, &fill);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ops::args::Args;
    use crate::ops::ArgValue;

    /// The operator's context with `given` arguments.
    pub(crate) fn context(given: Vec<(&str, ArgValue)>) -> OpContext {
        OpContext {
            args: Args::check(&WARP_PERSPECTIVE.schema, "warp_perspective", given.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), &[]).unwrap(),
            display_name: "warp_perspective".into(),
            instance_name: "w".into(),
            op_id: 1,
            seed: 1,
            max_batch_size: 4,
            num_threads: 1,
            device_id: None,
            arg_input_names: vec![],
            resume_samples: 0,
        }
    }

    #[test]
    fn the_corner_shift_is_dalis() {
        // A pure translation keeps its offset; a scale by 2 gains (2 - 1) * 0.5.
        let t = corner_to_center(&[1.0, 0.0, 3.0, 0.0, 1.0, -4.0, 0.0, 0.0, 1.0]);
        assert_eq!(t, [1.0, 0.0, 3.0, 0.0, 1.0, -4.0, 0.0, 0.0, 1.0]);
        let s = corner_to_center(&[2.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 1.0]);
        assert_eq!(s, [2.0, 0.0, 0.5, 0.0, 2.0, 0.5, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn the_inverse_is_the_closed_form() {
        let m = [2.0, 0.5, 3.0, -0.25, 1.5, 7.0, 0.001, 0.002, 1.0];
        let inv = invert3(&m).unwrap();
        for i in 0..3 {
            for j in 0..3 {
                let v: f64 = (0..3).map(|k| m[i * 3 + k] * inv[k * 3 + j]).sum();
                assert!((v - (i == j) as i32 as f64).abs() < 1e-12, "{v}");
            }
        }
        assert!(invert3(&[1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 0.0, 0.0, 1.0]).is_none());
    }

    #[test]
    fn sizes_round_half_away_and_stay_positive() {
        assert_eq!(output_extents("op", &[2.5, 3.49], None).unwrap(), (3, 3));
        assert_eq!(output_extents("op", &[0.2, -5.0], None).unwrap(), (1, 1));
        assert_eq!(output_extents("op", &[7.0], None).unwrap(), (7, 7));
        assert!(output_extents("op", &[1.0, 2.0, 3.0], Some(2)).unwrap_err().to_string().contains("sample 2"));
        assert!(output_extents("op", &[f64::NAN, 2.0], None).is_err());
    }
}
