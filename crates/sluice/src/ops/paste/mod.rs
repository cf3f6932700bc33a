//! `fn.paste` (cpu, gpu): each image pasted onto a larger canvas filled with `fill_value`.
//! DALI 2.4's operator (`dali/operators/image/paste/paste.*`), checked against DALI's cpu
//! operator, bit for bit, by `tests/test_paste.py`:
//!
//! - The canvas of an H x W x C sample is `max(trunc(ratio * H), trunc(min_canvas_size))` by
//!   the same for W (f32 products, as DALI), `ratio >= 1` and `min_canvas_size >= 0` (after
//!   truncation) per sample.
//! - The image goes at `(trunc(paste_y * (canvas_h - H)), trunc(paste_x * (canvas_w - W)))`,
//!   f32 products, `paste_x` and `paste_y` in [0, 1] per sample.
//! - `fill_value` holds one value or `n_channels` values (DALI's rule), converted as C's
//!   `static_cast` (integers wrap: 300 is 44 in UINT8).
//! - Input: HWC (or 3 dimensions without a layout); the output is "HWC".
//!
//! Paste is a window copy (`ops/crop/window_copy.rs`): the window starts before the image
//! (a negative anchor) and ends past it, and what lies outside is the fill. Both backends
//! execute the same [`WindowPlan`].
//!
//! Where Sluice departs from DALI 2.4:
//! - DALI documents UINT8 only and copies bytes as UINT8 whatever the type (garbage for
//!   wider types); Sluice pastes any element type.
//! - An image whose channels differ from `n_channels` is an error naming the sample (DALI
//!   reads past its fill values or writes outside the row).
//! - Errors leave the pipeline usable.

use crate::error::{Error, Result};
use crate::ops::crop::window::Span;
use crate::ops::crop::window_copy::{WindowCopyGpu, WindowPlan};
use crate::ops::{arg, tensor_arg, ArgDefault as D, ArgType as T, Device, GpuOperator, GpuWorkspace, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::element::store_static_cast;
use crate::tensor::{BatchMeta, Layout, TensorList, TensorListGpu};

/// `fn.paste`.
pub static PASTE: OpDef = OpDef {
    schema: OpSchema {
        name: "Paste",
        doc: "Pastes the input images on a larger canvas, where the canvas size is equal to ``input size * ratio``. Images are HWC; the canvas outside the image is `fill_value`.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("ratio", T::Float, D::Required, "Ratio of canvas size to input size. Must be >= 1."),
            arg("n_channels", T::Int, D::Int(3), "Number of channels in the image."),
            arg("fill_value", T::IntList, D::Required, "Tuple of the values of the color that is used to fill the canvas. The length of the tuple must be equal to `n_channels` (or 1)."),
            tensor_arg("paste_x", T::Float, D::Float(0.5), "Horizontal position of the paste in (0.0 - 1.0) image coordinates."),
            tensor_arg("paste_y", T::Float, D::Float(0.5), "Vertical position of the paste in (0.0 - 1.0) image coordinates."),
            tensor_arg("min_canvas_size", T::Float, D::Float(0.0), "Enforces the minimum paste canvas dimension after scaling the input size by the ratio."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Paste::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(PasteGpu { paste: Paste::new(ctx)?, copy: WindowCopyGpu::default() }))),
};

/// DALI's bound on `n_channels` (its GPU kernel keeps the fill values in shared memory).
const MAX_CHANNELS: i64 = 1024;

struct Paste {
    ctx: OpContext,
    /// The fill value of each channel (`n_channels` of them).
    fill: Vec<f32>,
}

impl Paste {
    fn new(ctx: &OpContext) -> Result<Paste> {
        let op = ctx.display_name.as_str();
        let c = ctx.args.int("n_channels");
        if c > MAX_CHANNELS {
            return Err(Error::arg(op, "n_channels", format!("n_channels of more than {MAX_CHANNELS} is not supported, got {c}")));
        }
        if c < 1 {
            return Err(Error::arg(op, "n_channels", format!("must be at least 1, got {c}")));
        }
        let values = ctx.args.ints("fill_value");
        let fill: Vec<f32> = match values.len() {
            1 => vec![values[0] as f32; c as usize],
            n if n as i64 == c => values.iter().map(|&v| v as f32).collect(),
            n => return Err(Error::arg(op, "fill_value", format!("expects a single value or {c} values (n_channels), got {n}"))),
        };
        Ok(Paste { ctx: ctx.clone(), fill })
    }

    /// The batch's windows, shared by both backends.
    fn plan(&self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<WindowPlan> {
        let ctx = &self.ctx;
        let op = ctx.display_name.as_str();
        let layout = input.layout().as_str();
        if input.ndim() != 3 || !(layout.is_empty() || layout == "HWC") {
            return Err(Error::data(ctx.at(ws.iteration, 0, input.source_info(0)), format!("expects HWC images (3 dimensions), got {} dimensions with layout '{layout}'", input.ndim())));
        }
        let (ratio, paste_x, paste_y, min_canvas) = (ws.per_sample(ctx, "ratio"), ws.per_sample(ctx, "paste_x"), ws.per_sample(ctx, "paste_y"), ws.per_sample(ctx, "min_canvas_size"));
        let dtype = input.dtype();
        let mut plan = WindowPlan::new(3, dtype, dtype, Some(2));
        for i in 0..input.len() {
            let [h, w, c] = input.shape(i)[..] else { unreachable!("3 dimensions") };
            if c != self.fill.len() {
                return Err(Error::data(ctx.at(ws.iteration, i, input.source_info(i)), format!("the image has {c} channels, but n_channels is {} (fill_value has one value per channel)", self.fill.len())));
            }
            let f32_of = |v: Option<f64>| v.unwrap_or(0.0) as f32;
            let r = f32_of(ratio.get(op, i)?);
            if !(r >= 1.0) {
                return Err(Error::arg(op, "ratio", format!("sample {i}: ratio of less than 1 is not supported, got {r}")));
            }
            // f32 products truncated to int, as DALI's `static_cast<int>(ratio * H)`.
            let min_size = f32_of(min_canvas.get(op, i)?) as i64;
            if min_size < 0 {
                return Err(Error::arg(op, "min_canvas_size", format!("sample {i}: min_canvas_size of less than 0 is not supported, got {min_size}")));
            }
            let canvas_h = ((r * h as f32) as i64).max(min_size);
            let canvas_w = ((r * w as f32) as i64).max(min_size);
            let (px, py) = (f32_of(paste_x.get(op, i)?), f32_of(paste_y.get(op, i)?));
            for (name, v) in [("paste_x", px), ("paste_y", py)] {
                if !(0.0..=1.0).contains(&v) {
                    return Err(Error::arg(op, name, format!("sample {i}: {name} must be in range [0, 1], got {v}")));
                }
            }
            let at_x = (px * (canvas_w - w as i64) as f32) as i64;
            let at_y = (py * (canvas_h - h as i64) as f32) as i64;
            plan.push_sample([Span { anchor: -at_y, len: canvas_h as usize }, Span { anchor: -at_x, len: canvas_w as usize }, Span::full(c)]);
        }
        plan.set_fill_elements(self.fill.iter().map(|&v| store_static_cast(dtype, v)[..dtype.size()].to_vec()).collect());
        Ok(plan)
    }
}

impl Operator for Paste {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let mut out = self.plan(ws, input.meta())?.run_cpu(ws.pool, input)?;
        out.set_layout(Layout::new("HWC").expect("a valid layout"));
        Ok(vec![out])
    }
}

/// The gpu backend: the cpu twin's windows, one launch of the window copy.
struct PasteGpu {
    paste: Paste,
    copy: WindowCopyGpu,
}

impl GpuOperator for PasteGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let plan = self.paste.plan(&ws.host_view(), input.meta())?;
        let mut out = self.copy.run(ws, &self.paste.ctx.display_name, &plan, input)?;
        out.set_layout(Layout::new("HWC").expect("a valid layout"));
        Ok(vec![out])
    }
}
