//! `fn.bb_flip` (DALI's `bb_flip.cc`, `BbFlipCPU`): mirrors boxes horizontally and/or
//! vertically in relative coordinates.
//!
//! Boxes are read as DALI's cpu operator reads them (`ReadBoxes` into `Box<2, float>`, no
//! bounds check): `ltrb=True` is `[l, t, r, b]`; otherwise `[x, y, w, h]` becomes
//! `lo = (x, y)`, `hi = lo + (w, h)` in f32. A flipped axis becomes `lo' = 1 - hi`,
//! `hi' = 1 - lo`; the box is then written back (`xywh`: `w' = hi' - lo'`). So in `xywh`
//! the extents go through that round trip even on an axis that is not flipped, and
//! `w'` may differ from `w` in the last bit: DALI's cpu gives those bits, and so do both
//! Sluice backends (DALI's gpu kernel copies `w`, `h`, and so differs from its cpu there).
//! `horizontal` and `vertical` (non-zero: flip) may come per sample.
//!
//! Input: float32 samples of whole boxes, `(..., 4)` or a flat multiple of 4 values (DALI's
//! gpu checks; its cpu leaves the remainder of other shapes unwritten: Sluice refuses them
//! on both backends). Boxes outside `[0, 1]` are flipped as they are, as in DALI.
//!
//! Checked by `tests/test_bb_flip.py` against DALI 2.4's cpu operator, bit for bit; the gpu
//! kernel (`bb_flip.cu`) is run on the host against this backend by `flip_gpu.rs`'s tests.

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// `fn.bb_flip`.
pub static BB_FLIP: OpDef = OpDef {
    schema: OpSchema {
        name: "BbFlip",
        doc: "Flips bounding boxes horizontally or vertically (mirror).\n\nThe bounding box coordinates for the  input are in the [x, y, width, height] - ``xywh`` or [left, top, right, bottom] - ``ltrb`` format. All coordinates are in the image coordinate system, that is 0.0-1.0",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("ltrb", T::Bool, D::Bool(false), "True for ``ltrb`` or False for ``xywh``."),
            tensor_arg("horizontal", T::Int, D::Int(1), "Flip horizontal dimension."),
            tensor_arg("vertical", T::Int, D::Int(0), "Flip vertical dimension."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(BbFlip::new(ctx)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(super::flip_gpu::BbFlipGpu::new(BbFlip::new(ctx))))),
};

/// One sample's flips.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Flips {
    pub horizontal: bool,
    pub vertical: bool,
}

pub(super) struct BbFlip {
    pub(super) ctx: OpContext,
    pub(super) ltrb: bool,
    /// The last planned batch's flips, one per sample (kept to reuse the allocation).
    pub(super) flips: Vec<Flips>,
}

impl BbFlip {
    pub(super) fn new(ctx: &OpContext) -> BbFlip {
        BbFlip { ctx: ctx.clone(), ltrb: ctx.args.bool("ltrb"), flips: Vec::new() }
    }

    /// The planning both backends share: checks the input, reads each sample's flips into
    /// `self.flips`; the output has the input's shapes.
    pub(super) fn plan(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<BatchMeta> {
        let op = &self.ctx.display_name;
        if input.dtype() != DType::F32 {
            return Err(Error::type_mismatch(op, format!("Bounding box in wrong format: expected FLOAT boxes, got {}", input.dtype().dali_name())));
        }
        super::check_box_shapes(&self.ctx, ws.iteration, "bboxes", input, 4)?;
        self.flips.clear();
        for i in 0..input.len() {
            let h = ws.per_sample(&self.ctx, "horizontal").get(op, i)?.unwrap_or(1.0);
            let v = ws.per_sample(&self.ctx, "vertical").get(op, i)?.unwrap_or(0.0);
            self.flips.push(Flips { horizontal: h != 0.0, vertical: v != 0.0 });
        }
        Ok(input.clone())
    }
}

/// One box, as DALI's `ReadBoxes`, `HorizontalFlip` / `VerticalFlip` and `WriteBoxes`
/// compute it in f32 (the gpu kernel repeats these operations).
#[inline]
pub(super) fn flip_box(b: [f32; 4], ltrb: bool, f: Flips) -> [f32; 4] {
    let (mut lo, mut hi) = if ltrb { ([b[0], b[1]], [b[2], b[3]]) } else { ([b[0], b[1]], [b[0] + b[2], b[1] + b[3]]) };
    for (axis, flip) in [f.horizontal, f.vertical].into_iter().enumerate() {
        if flip {
            (lo[axis], hi[axis]) = (1.0 - hi[axis], 1.0 - lo[axis]);
        }
    }
    if ltrb {
        [lo[0], lo[1], hi[0], hi[1]]
    } else {
        [lo[0], lo[1], hi[0] - lo[0], hi[1] - lo[1]]
    }
}

impl Operator for BbFlip {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let meta = self.plan(ws, input.meta())?;
        let mut out = TensorList::for_overwrite(meta);
        let (ltrb, flips) = (self.ltrb, &self.flips);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let src: &[f32] = bytemuck::cast_slice(input.bytes(i));
            let dst: &mut [f32] = bytemuck::cast_slice_mut(dst);
            for (o, b) in dst.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
                o.copy_from_slice(&flip_box([b[0], b[1], b[2], b[3]], ltrb, flips[i]));
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::ops::{testing, ArgValue};

    /// The operator with constant arguments `given` and argument inputs named `inputs`.
    pub(in crate::ops::bbox) fn op(given: Vec<(&str, ArgValue)>, inputs: &[&str]) -> Result<BbFlip> {
        Ok(BbFlip::new(&testing::context(&BB_FLIP, given, inputs)?))
    }

    /// Runs the cpu backend on `x` with argument inputs `args`.
    pub(in crate::ops::bbox) fn run(f: &mut BbFlip, x: &TensorList, args: &[(&'static str, &TensorList)]) -> Result<TensorList> {
        Ok(testing::run(f, &[x], args)?.remove(0))
    }

    #[test]
    fn ltrb_boxes_swap_and_mirror_their_edges() {
        let f = Flips { horizontal: true, vertical: false };
        assert_eq!(flip_box([0.1, 0.2, 0.3, 0.7], true, f), [0.7, 0.2, 0.9, 0.7]);
        let f = Flips { horizontal: true, vertical: true };
        assert_eq!(flip_box([0.0, 0.25, 0.5, 1.0], true, f), [0.5, 0.0, 1.0, 0.75]);
        assert_eq!(flip_box([0.1, 0.2, 0.3, 0.7], true, Flips::default()), [0.1, 0.2, 0.3, 0.7]);
    }

    #[test]
    fn xywh_extents_take_dalis_round_trip() {
        // DALI's cpu: x' = 1 - (x + w), w' = (1 - x) - x'; 0.7 comes back as 0.70000005 here.
        let (x, w) = (0.1f32, 0.7f32);
        let got = flip_box([x, 0.0, w, 0.5], false, Flips { horizontal: true, vertical: false });
        assert_eq!(got[0], 1.0 - (x + w));
        assert_eq!(got[2], (1.0 - x) - (1.0 - (x + w)));
        // An axis not flipped still goes through (y + h) - y.
        let (y, h) = (0.3f32, 0.1f32);
        assert_eq!(flip_box([0.0, y, 0.5, h], false, Flips::default())[3], (y + h) - y);
    }

    #[test]
    fn bad_shapes_and_types_are_refused_naming_the_sample() {
        let mut f = op(vec![], &[]).unwrap();
        let x = TensorList::from_samples(&[vec![1, 4], vec![2, 5]], &[vec![0.0f32; 4], vec![0.0f32; 10]]);
        let e = run(&mut f, &x, &[]).unwrap_err().to_string();
        assert!(e.contains("bb_flip") && e.contains("sample 1") && e.contains("[2, 5]"), "{e}");
        let x = TensorList::from_samples(&[vec![6]], &[vec![0.0f32; 6]]);
        assert!(run(&mut f, &x, &[]).is_err());
        let x = TensorList::from_samples(&[vec![1, 4]], &[vec![0.0f64; 4]]);
        let e = run(&mut f, &x, &[]).unwrap_err().to_string();
        assert!(e.contains("FLOAT"), "{e}");
        // Flat lists of whole boxes and more dimensions are fine.
        let x = TensorList::from_samples(&[vec![8], vec![0]], &[vec![0.5f32; 8], vec![]]);
        assert_eq!(run(&mut f, &x, &[]).unwrap().shape(0), &[8]);
        let x = TensorList::from_samples(&[vec![2, 1, 4], vec![0, 0, 4]], &[vec![0.25f32; 8], vec![]]);
        assert_eq!(run(&mut f, &x, &[]).unwrap().shape(0), &[2, 1, 4]);
    }

    #[test]
    fn per_sample_flags_pick_each_samples_flips() {
        let mut f = op(vec![("ltrb", ArgValue::Bool(true))], &["horizontal", "vertical"]).unwrap();
        let x = TensorList::from_samples(&[vec![1, 4], vec![1, 4]], &[vec![0.1f32, 0.2, 0.3, 0.4], vec![0.1f32, 0.2, 0.3, 0.4]]);
        let h = TensorList::from_samples(&[vec![], vec![]], &[vec![0i32], vec![1]]);
        let v = TensorList::from_samples(&[vec![], vec![]], &[vec![1i32], vec![0]]);
        let y = run(&mut f, &x, &[("horizontal", &h), ("vertical", &v)]).unwrap();
        let s0: &[f32] = bytemuck::cast_slice(y.bytes(0));
        let s1: &[f32] = bytemuck::cast_slice(y.bytes(1));
        assert_eq!(s0, &[0.1, 1.0 - 0.4, 0.3, 1.0 - 0.2]);
        assert_eq!(s1, &[1.0 - 0.3, 0.2, 1.0 - 0.1, 0.4]);
    }
}
