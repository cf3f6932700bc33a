//! `fn.experimental.remap`: `output(x, y) = input(mapx(x, y), mapy(x, y))`, DALI 2.4's
//! operator (GPU-only in DALI, through NPP) on both backends. The reference is the one DALI's
//! own test uses, `cv2.remap` with a constant 0 border: Sluice samples with OpenCV 5.0's
//! arithmetic (`ops::warp::cv`, the sampler `fn.experimental.warp_perspective` uses), so
//! nearest rounds half to even and linear interpolates in f32 with fused multiply-adds
//! (`fma(a, p01 - p00, p00)`, ...), as OpenCV 5.0's UINT8, UINT16 and FLOAT remap kernels do;
//! INT16 interpolates at the point rounded to 1/32 pixel with OpenCV's table of weights, as
//! its older `remapBilinear` does (checked equal to `cv2.remap`; `tests/test_remap.py`
//! compares with `cv2.remap` and with a NumPy model).
//!
//! - Inputs: the image (`HWC` or `FHWC`, 1 or 3 channels, UINT8, INT16, UINT16 or FLOAT) and
//!   two FLOAT maps of the output's height x width (`HW`, or `HWC` with one channel); for a
//!   sequence, maps with a leading frame dimension give one map per frame, otherwise one map
//!   serves every frame. The output has the input's shape, type and layout.
//! - `pixel_origin="corner"` (the default) subtracts 0.5 from every map value (in f32, as
//!   DALI shifts its maps), `"center"` uses them as they are (OpenCV's convention).
//! - `interp`: INTERP_NN or INTERP_LINEAR (NPP's cubic is not supported yet: an error).
//! - Points outside the image read 0 (NPP's fixed border).

pub(crate) mod gpu;

use crate::error::{Error, Result};
use crate::ops::gpu_params::ParamUpload;
use crate::ops::warp::cv::{self, BorderMode, CvKernel, CvPixel, Image, Interp};
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

/// `fn.experimental.remap`.
pub static REMAP: OpDef = OpDef {
    schema: OpSchema {
        name: "experimental__Remap",
        doc: "The remap operation applies a generic geometrical transformation to an image: output(x,y) = input(mapx(x,y), mapy(x,y)). The output has the input's type and shape. Handles only HWC layout (and sequences of it); the border is always constant 0.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 3,
        max_inputs: 3,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("interp", T::InterpType, D::Int(1), "Interpolation type: INTERP_NN or INTERP_LINEAR."),
            arg("pixel_origin", T::Str, D::Str("corner"), "Pixel origin: \"corner\" or \"center\". Defines which part of the pixel (upper-left corner or center) is interpreted as its origin; to match OpenCV, pick \"center\"."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Remap::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::RemapGpu { remap: Remap::new(ctx)?, params: ParamUpload::default() }))),
};

/// One sample's geometry: `frames` images of `h` x `w` x `c`; `per_frame_maps`: each frame
/// has its own map (else one map serves all).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub frames: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub per_frame_maps: bool,
}

pub(crate) struct Remap {
    ctx: OpContext,
    pub interp: Interp,
    /// Added to every map value: -0.5 for `pixel_origin="corner"`.
    pub shift: f32,
    pub plans: Vec<Plan>,
}

impl Remap {
    fn new(ctx: &OpContext) -> Result<Remap> {
        let name = &ctx.display_name;
        let interp = match ctx.args.int("interp") {
            0 => Interp::Nearest,
            1 => Interp::Linear,
            2 => return Err(Error::arg(name, "interp", "INTERP_CUBIC is not supported yet; use INTERP_NN or INTERP_LINEAR")),
            v => return Err(Error::arg(name, "interp", format!("unsupported interpolation type {v}; use INTERP_NN or INTERP_LINEAR"))),
        };
        let shift = match ctx.args.str("pixel_origin") {
            "corner" => -0.5,
            "center" => 0.0,
            v => return Err(Error::arg(name, "pixel_origin", format!("Undefined pixel_origin parameter {v:?}. Please choose one of: [\"center\", \"corner\"]"))),
        };
        Ok(Remap { ctx: ctx.clone(), interp, shift, plans: Vec::new() })
    }

    /// Checks the image and the maps, fills `self.plans` and describes the output. Shared by
    /// both backends.
    pub(crate) fn plan_batch(&mut self, ws: &Workspace<'_>, input: &BatchMeta, mapx: &BatchMeta, mapy: &BatchMeta) -> Result<BatchMeta> {
        let name = self.ctx.display_name.clone();
        let sequence = match (input.layout().as_str(), input.ndim()) {
            ("HWC", 3) | ("", 3) => false,
            ("FHWC", 4) | ("", 4) => true,
            (l, nd) => {
                let got = if l.is_empty() { format!("{nd} dimensions without a layout") } else { format!("layout \"{l}\"") };
                return Err(Error::type_mismatch(&name, format!("input 0: {got} does not match any of the allowed layouts: HWC, FHWC")));
            }
        };
        let dtype = input.dtype();
        if !matches!(dtype, DType::U8 | DType::U16 | DType::I16 | DType::F32) {
            return Err(Error::type_mismatch(&name, format!("input 0: unsupported input type {dtype}: the types are uint8, int16, uint16, float")));
        }
        for (k, m) in [(1, mapx), (2, mapy)] {
            if m.dtype() != DType::F32 {
                return Err(Error::type_mismatch(&name, format!("input {k} ({}): the maps must be FLOAT, got {}", if k == 1 { "mapx" } else { "mapy" }, m.dtype())));
            }
            if m.len() != input.len() {
                return Err(Error::type_mismatch(&name, format!("input {k}: {} maps for {} images", m.len(), input.len())));
            }
        }
        self.plans.clear();
        for i in 0..input.len() {
            let shape = input.shape(i);
            let (frames, rest) = if sequence { (shape[0], &shape[1..]) } else { (1, shape) };
            let (h, w, c) = (rest[0], rest[1], rest[2]);
            if c != 1 && c != 3 {
                return Err(Error::data(self.ctx.at(ws.iteration, i, input.source_info(i)), format!("incorrect number of channels: {c}; only images with 1 and 3 channels are supported (shape {shape:?})")));
            }
            let (xs, ys) = (mapx.shape(i), mapy.shape(i));
            if xs != ys {
                return Err(Error::arg(&name, "mapy", format!("sample {i}: maps shapes do not match: mapx {xs:?}, mapy {ys:?}")));
            }
            // [H, W] or [H, W, 1]; with a frame dimension in front: one map per frame.
            let spatial = |s: &[usize]| s.len() >= 2 && s[0] == h && s[1] == w && (s.len() == 2 || (s.len() == 3 && s[2] == 1));
            let per_frame_maps = sequence && !xs.is_empty() && xs[0] == frames && spatial(&xs[1..]) && !spatial(xs);
            if !per_frame_maps && !spatial(xs) {
                return Err(Error::arg(&name, "mapx", format!("sample {i}: output and maps shapes do not match: the output is {shape:?}, the maps {xs:?} (height x width{})", if sequence { ", or frames x height x width" } else { "" })));
            }
            self.plans.push(Plan { frames, h, w, c, per_frame_maps });
        }
        let mut meta = BatchMeta::new(dtype, input.ndim(), (0..input.len()).map(|i| input.shape(i)));
        meta.set_layout(Layout::from(if sequence { "FHWC" } else { "HWC" }));
        meta.inherit_source_info(input);
        Ok(meta)
    }
}

impl Operator for Remap {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let (input, mapx, mapy) = (ws.inputs[0], ws.inputs[1], ws.inputs[2]);
        let meta = self.plan_batch(ws, input.meta(), mapx.meta(), mapy.meta())?;
        let mut out = TensorList::for_overwrite(meta);
        let (plans, interp, shift) = (&self.plans, self.interp, self.shift);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let job = Job { dst, src: input.bytes(i), mapx: bytemuck::cast_slice(mapx.bytes(i)), mapy: bytemuck::cast_slice(mapy.bytes(i)), plan: plans[i], interp, shift };
            cv::dispatch(input.dtype(), job).expect("type checked by plan_batch");
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// One sample's frames, typed by [`cv::dispatch`].
struct Job<'a> {
    dst: &'a mut [u8],
    src: &'a [u8],
    mapx: &'a [f32],
    mapy: &'a [f32],
    plan: Plan,
    interp: Interp,
    shift: f32,
}

impl CvKernel for Job<'_> {
    type Output = ();

    fn run<T: CvPixel>(self) {
        let Plan { frames, h, w, c, per_frame_maps } = self.plan;
        let (frame, points) = (h * w * c, h * w);
        if frame == 0 || frames == 0 {
            return;
        }
        let src: &[T] = bytemuck::cast_slice(self.src);
        let dst: &mut [T] = bytemuck::cast_slice_mut(self.dst);
        for (f, out) in dst.chunks_exact_mut(frame).enumerate() {
            let img = Image { data: &src[f * frame..(f + 1) * frame], h: h as i32, w: w as i32, c };
            let m = if per_frame_maps { f * points } else { 0 };
            let (mx, my) = (&self.mapx[m..m + points], &self.mapy[m..m + points]);
            cv::remap(out, w, &img, mx, my, self.shift, self.interp, BorderMode::Constant, &[T::from_f32(0.0); 4]);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ops::args::Args;
    use crate::ops::ArgValue;

    pub(crate) fn context(given: Vec<(&str, ArgValue)>) -> Result<OpContext> {
        Ok(OpContext {
            args: Args::check(&REMAP.schema, "remap", given.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), &[])?,
            display_name: "remap".into(),
            instance_name: "r".into(),
            op_id: 1,
            seed: 1,
            max_batch_size: 4,
            num_threads: 1,
            device_id: None,
            arg_input_names: vec![],
            resume_samples: 0,
        })
    }

    fn run(args: Vec<(&str, ArgValue)>, x: &TensorList, mx: &TensorList, my: &TensorList) -> Result<TensorList> {
        let mut op = Remap::new(&context(args)?)?;
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let ws = Workspace { inputs: vec![x, mx, my], arg_inputs: Default::default(), iteration: 0, batch_size: x.len(), frames: None, pool: &pool };
        Ok(op.run(&ws)?.remove(0))
    }

    #[test]
    fn identity_and_flip_maps() {
        let (h, w) = (3usize, 5usize);
        let img: Vec<u8> = (0..(h * w * 3) as u8).collect();
        let x = TensorList::from_samples(&[vec![h, w, 3]], &[img.clone()]).with_layout("HWC");
        let ident_x: Vec<f32> = (0..h * w).map(|i| (i % w) as f32).collect();
        let ident_y: Vec<f32> = (0..h * w).map(|i| (i / w) as f32).collect();
        let flip_x: Vec<f32> = (0..h * w).map(|i| (w - 1 - i % w) as f32).collect();
        let (mx, my, fx) = (TensorList::from_samples(&[vec![h, w]], &[ident_x]), TensorList::from_samples(&[vec![h, w]], &[ident_y]), TensorList::from_samples(&[vec![h, w]], &[flip_x]));
        for interp in [0, 1] {
            let center = vec![("interp", ArgValue::Int(interp)), ("pixel_origin", ArgValue::Str("center".into()))];
            let out = run(center.clone(), &x, &mx, &my).unwrap();
            assert_eq!(out.bytes(0), &img[..], "identity, interp {interp}");
            let out = run(center, &x, &fx, &my).unwrap();
            let flipped: Vec<u8> = (0..h * w).flat_map(|i| { let (y, xx) = (i / w, i % w); img[(y * w + w - 1 - xx) * 3..][..3].to_vec() }).collect();
            assert_eq!(out.bytes(0), &flipped[..], "flip, interp {interp}");
        }
        // Corner origin: the same maps sample half a pixel up-left, and nearest rounds the
        // halves to even: columns 0 0 2 2 4, rows 0 0 2.
        let out = run(vec![("interp", ArgValue::Int(0))], &x, &mx, &my).unwrap();
        let even = |v: usize| (v as f32 - 0.5).round_ties_even() as usize;
        let want: Vec<u8> = (0..h * w).flat_map(|i| img[(even(i / w) * w + even(i % w)) * 3..][..3].to_vec()).collect();
        assert_eq!(out.bytes(0), &want[..]);
        // Linear at -0.5: half the fill (0) and half the first pixel.
        let out = run(vec![], &x, &mx, &my).unwrap();
        assert_eq!(out.bytes(0)[0], 0);
        assert_eq!(out.bytes(0)[3 * (w + 1)], ((img[0] as f32 + img[3] as f32 + img[3 * w] as f32 + img[3 * w + 3] as f32) / 4.0).round_ties_even() as u8);
    }

    #[test]
    fn errors_name_the_operator_the_input_and_the_sample() {
        let x = TensorList::from_samples(&[vec![2, 2, 3], vec![2, 2, 3]], &[vec![0u8; 12], vec![0u8; 12]]).with_layout("HWC");
        let good = TensorList::from_samples(&[vec![2, 2], vec![2, 2]], &[vec![0f32; 4], vec![0f32; 4]]);
        let bad = TensorList::from_samples(&[vec![2, 2], vec![2, 3]], &[vec![0f32; 4], vec![0f32; 6]]);
        let e = run(vec![], &x, &bad, &bad).unwrap_err().to_string();
        assert!(e.contains("remap") && e.contains("sample 1") && e.contains("do not match"), "{e}");
        let e = run(vec![], &x, &good, &bad).unwrap_err().to_string();
        assert!(e.contains("mapy") && e.contains("sample 1"), "{e}");
        let x4 = TensorList::from_samples(&[vec![2, 2, 4]], &[vec![0u8; 16]]).with_layout("HWC");
        let one = TensorList::from_samples(&[vec![2, 2]], &[vec![0f32; 4]]);
        let e = run(vec![], &x4, &one, &one).unwrap_err().to_string();
        assert!(e.contains("1 and 3 channels"), "{e}");
        let chw = TensorList::from_samples(&[vec![3, 2, 2]], &[vec![0u8; 12]]).with_layout("CHW");
        assert!(run(vec![], &chw, &one, &one).unwrap_err().to_string().contains("HWC, FHWC"));
        assert!(context(vec![("pixel_origin", ArgValue::Str("top".into()))]).and_then(|c| Remap::new(&c).map(|_| ())).unwrap_err().to_string().contains("pixel_origin"));
    }

    #[test]
    fn sequences_take_per_frame_or_shared_maps() {
        let x = TensorList::from_samples(&[vec![2, 2, 3, 1]], &[vec![1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]]).with_layout("FHWC");
        let shared_x = TensorList::from_samples(&[vec![2, 3]], &[vec![2f32, 1.0, 0.0, 2.0, 1.0, 0.0]]);
        let shared_y = TensorList::from_samples(&[vec![2, 3]], &[vec![0f32, 0.0, 0.0, 1.0, 1.0, 1.0]]);
        let center = || vec![("interp", ArgValue::Int(0)), ("pixel_origin", ArgValue::Str("center".into()))];
        let out = run(center(), &x, &shared_x, &shared_y).unwrap();
        assert_eq!(out.bytes(0), &[3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10]);
        let px = TensorList::from_samples(&[vec![2, 2, 3]], &[vec![2f32, 1.0, 0.0, 2.0, 1.0, 0.0, 0.0, 1.0, 2.0, 0.0, 1.0, 2.0]]);
        let py = TensorList::from_samples(&[vec![2, 2, 3]], &[vec![0f32, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]]);
        let out = run(center(), &x, &px, &py).unwrap();
        assert_eq!(out.bytes(0), &[3, 2, 1, 6, 5, 4, 10, 11, 12, 7, 8, 9]);
    }
}
