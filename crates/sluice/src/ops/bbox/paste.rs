//! `fn.bbox_paste` (DALI's `bbox_paste.cc`, cpu only as in DALI): moves boxes so they stay on
//! their object when the image is pasted onto a canvas `ratio` times larger at
//! (`paste_x`, `paste_y`).
//!
//! Per sample, in f32 as DALI: `scale = 1 / ratio`, `ofs = paste * ((ratio - 1) / ratio)`,
//! and when `scale + ofs > 1` the offset becomes `1 - scale`, then steps down (`nextafter`
//! towards -1) until `scale + ofs <= 1`, so boxes inside [0, 1] stay inside. Corners become
//! `v * scale + ofs` (a product then a sum, no fused multiply-add); `xywh` extents
//! `v * scale`. `ratio`, `paste_x`, `paste_y` may come per sample.
//!
//! Input: float32 samples of any shape holding a multiple of 4 values (DALI's check). A
//! `ratio` below 1 (or not finite) is refused naming the sample: DALI's documentation
//! requires at least 1 but computes boxes off the canvas (or NaN for 0).
//!
//! Checked by `tests/test_bbox_paste.py` against DALI 2.4's cpu operator, bit for bit.

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{DType, TensorList};

/// `fn.bbox_paste`.
pub static BBOX_PASTE: OpDef = OpDef {
    schema: OpSchema {
        name: "BBoxPaste",
        doc: "Transforms bounding boxes so that the boxes remain in the same place in the image after the image is pasted on a larger canvas.\n\nCorner coordinates are transformed according to the following formula::\n\n  (x', y') = (x/ratio + paste_x', y/ratio + paste_y')\n\nBox sizes (if ``xywh`` is used) are transformed according to the following formula::\n\n  (w', h') = (w/ratio, h/ratio)\n\nWhere::\n\n  paste_x' = paste_x * (ratio - 1)/ratio\n  paste_y' = paste_y * (ratio - 1)/ratio\n\nThe paste coordinates are normalized so that ``(0,0)`` aligns the image to top-left of the canvas and ``(1,1)`` aligns it to bottom-right.",
        devices: &[Device::Cpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("ratio", T::Float, D::Required, "Ratio of the canvas size to the input size; the value must be at least 1."),
            arg("ltrb", T::Bool, D::Bool(false), "True for ``ltrb`` or False for ``xywh``."),
            tensor_arg("paste_x", T::Float, D::Float(0.5), "Horizontal position of the paste in image coordinates (0.0 - 1.0)."),
            tensor_arg("paste_y", T::Float, D::Float(0.5), "Vertical position of the paste in image coordinates (0.0 - 1.0)."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(BBoxPaste { ctx: ctx.clone(), ltrb: ctx.args.bool("ltrb") }))),
    mixed: None,
    gpu: None,
};

struct BBoxPaste {
    ctx: OpContext,
    ltrb: bool,
}

/// `nextafter(x, -1)` for f32 (x > -1 and finite, as here).
fn step_down(x: f32) -> f32 {
    if x == 0.0 {
        -f32::from_bits(1)
    } else if x > 0.0 {
        f32::from_bits(x.to_bits() - 1)
    } else {
        f32::from_bits(x.to_bits() + 1)
    }
}

/// One axis's offset: DALI's `paste * (ratio - 1) / ratio`, pulled back so `scale + ofs <= 1`.
fn offset(paste: f32, ratio: f32, scale: f32) -> f32 {
    let mut ofs = paste * ((ratio - 1.0) / ratio);
    if scale + ofs > 1.0 {
        ofs = 1.0 - scale;
        while scale + ofs > 1.0 {
            ofs = step_down(ofs);
        }
    }
    ofs
}

impl Operator for BBoxPaste {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let op = &self.ctx.display_name;
        let input = ws.inputs[0];
        if input.dtype() != DType::F32 {
            return Err(Error::type_mismatch(op, format!("Bounding box in wrong format: expected FLOAT boxes, got {}", input.dtype().dali_name())));
        }
        let mut plans = Vec::with_capacity(input.len());
        for i in 0..input.len() {
            if input.numel(i) % 4 != 0 {
                return Err(Error::data(self.ctx.at(ws.iteration, i, ""), format!(
                    "input 'bboxes': Bounding box tensor size must be a multiple of 4; got {} values (shape {:?})",
                    input.numel(i),
                    input.shape(i)
                )));
            }
            let ratio = ws.per_sample(&self.ctx, "ratio").get(op, i)?.unwrap_or(1.0) as f32;
            if !(ratio >= 1.0 && ratio.is_finite()) {
                return Err(Error::arg(op, "ratio", format!("sample {i}: the ratio must be a finite value of at least 1; got {ratio}")));
            }
            let px = ws.per_sample(&self.ctx, "paste_x").get(op, i)?.unwrap_or(0.5) as f32;
            let py = ws.per_sample(&self.ctx, "paste_y").get(op, i)?.unwrap_or(0.5) as f32;
            let scale = 1.0 / ratio;
            plans.push((scale, offset(px, ratio, scale), offset(py, ratio, scale)));
        }
        let mut out = TensorList::for_overwrite(input.meta().clone());
        let ltrb = self.ltrb;
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let (scale, ox, oy) = plans[i];
            let src: &[f32] = bytemuck::cast_slice(input.bytes(i));
            let dst: &mut [f32] = bytemuck::cast_slice_mut(dst);
            for (o, b) in dst.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
                o[0] = b[0] * scale + ox;
                o[1] = b[1] * scale + oy;
                if ltrb {
                    o[2] = b[2] * scale + ox;
                    o[3] = b[3] * scale + oy;
                } else {
                    o[2] = b[2] * scale;
                    o[3] = b[3] * scale;
                }
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_keeps_unit_boxes_inside() {
        for ratio in [1.0f32, 1.5, 3.0, 7.3, 100.0] {
            let scale = 1.0 / ratio;
            for p in [0.0f32, 0.5, 1.0, 1.7] {
                let o = offset(p, ratio, scale);
                assert!(scale + o <= 1.0, "{ratio} {p}");
            }
        }
        assert_eq!(step_down(0.0), -f32::from_bits(1));
        assert_eq!(step_down(1.0), f32::from_bits(1.0f32.to_bits() - 1));
        assert_eq!(step_down(-0.5), f32::from_bits((-0.5f32).to_bits() + 1));
    }
}
