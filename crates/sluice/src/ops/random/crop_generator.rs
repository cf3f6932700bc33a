//! `fn.random_crop_generator` (cpu, as in DALI 2.4): from a shape (HW or HWC, one integer
//! list per sample) to a random crop window, as the anchor `(y, x)` and the shape `(h, w)`
//! (two INT32 outputs of 2 values), ready for `fn.slice(images, start=anchor, shape=shape,
//! axes=[0, 1])` or `decoders.image_slice`. The window is DALI's `RandomCropAttr` window
//! (`random_area`, `random_aspect_ratio`, `num_attempts`), the one `decoders.image_random_crop`
//! and `fn.random_resized_crop` draw ([`RandomCropParams`]), from Sluice's counter-based RNG:
//! the same windows whatever `num_threads`. DALI's sequence of windows for a seed differs
//! (its generator is a per-sample mt19937); `tests/test_random_crop_generator.py` checks the
//! windows' invariants and distribution against DALI's.

use crate::error::{Error, Result};
use crate::ops::args::element_as_f64;
use crate::ops::decoders::random_crop_window::{RandomCropParams, RANDOM_CROP_ARGS};
use crate::ops::{Device, OpDef, OpSchema, Operator, Workspace, OpContext};
use crate::tensor::{DType, TensorList};

/// Schema and backend.
pub static RANDOM_CROP_GENERATOR: OpDef = OpDef {
    schema: OpSchema {
        name: "RandomCropGenerator",
        doc: "Produces a cropping window with a randomly selected area and aspect ratio.

Expects a one-dimensional input representing the shape of the input we want to crop (HW or HWC representation).

Produces two outputs, representing the anchor and shape of the cropping window.

The outputs of this operator (anchor and shape) can be fed to `fn.slice`, `fn.decoders.image_slice` or any other operator accepting a region of interest. For example::

  crop_anchor, crop_shape = fn.random_crop_generator(image_shapes)
  images_crop = fn.slice(images, start=crop_anchor, shape=crop_shape, axes=[0, 1])
",
        devices: &[Device::Cpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 2,
        host_inputs: &[],
        args: &[RANDOM_CROP_ARGS],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(RandomCropGenerator { ctx: ctx.clone(), params: RandomCropParams::from_args(ctx)? }))),
    mixed: None,
    gpu: None,
};

struct RandomCropGenerator {
    ctx: OpContext,
    params: RandomCropParams,
}

impl Operator for RandomCropGenerator {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let op = self.ctx.display_name.as_str();
        let shapes = ws.inputs[0];
        if !matches!(shapes.dtype(), DType::U8 | DType::I8 | DType::U16 | DType::I16 | DType::U32 | DType::I32 | DType::I64) {
            return Err(Error::arg(op, "input", format!("Only integer types are supported. Got: {}", shapes.dtype().cpp_name())));
        }
        let n = shapes.len();
        let mut anchors = TensorList::uniform(DType::I32, &[2], n);
        let mut sizes = TensorList::uniform(DType::I32, &[2], n);
        // A few values per sample: the draws are cheap, one thread does them all.
        for i in 0..n {
            let sh = shapes.shape(i);
            if sh.len() != 1 || !(sh[0] == 2 || sh[0] == 3) {
                return Err(Error::data(ws_at(&self.ctx, ws, i, shapes), format!("Expected a 1D tensor with 2 or 3 values representing an input shape (HW or HWC), got shape {sh:?}")));
            }
            let (h, w) = (element_as_f64(shapes, i, 0), element_as_f64(shapes, i, 1));
            // DALI reads the extents as int32.
            if !(0.0..=i32::MAX as f64).contains(&h) || !(0.0..=i32::MAX as f64).contains(&w) {
                return Err(Error::data(ws_at(&self.ctx, ws, i, shapes), format!("the shape's height and width must lie in [0, 2^31), got {h} x {w}")));
            }
            let win = self.params.window(&mut ws.rng(&self.ctx, i), h as usize, w as usize);
            anchors.sample_mut::<i32>(i).copy_from_slice(&[win.y as i32, win.x as i32]);
            sizes.sample_mut::<i32>(i).copy_from_slice(&[win.h as i32, win.w as i32]);
        }
        Ok(vec![anchors, sizes])
    }
}

fn ws_at(ctx: &OpContext, ws: &Workspace<'_>, i: usize, shapes: &TensorList) -> crate::error::Location {
    ctx.at(ws.iteration, i, shapes.source_info(i))
}
