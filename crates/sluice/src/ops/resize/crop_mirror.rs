//! `fn.resize_crop_mirror` (cpu, gpu) and its legacy alias `fn.fast_resize_crop_mirror`
//! (antialiasing off by default), as DALI 2.4 (`dali/operators/image/resize/resize_crop_mirror.*`):
//! `resize`, then `crop` of the resized image, then `flip` by the `mirror` mask (1:
//! horizontal, 2: vertical, 4: depth), computed as one resampling of the source window the
//! crop and flips map back to ([`super::crop_and_mirror`]). Every sizing and filter argument
//! of `fn.resize`, every window argument of `fn.crop` (`crop_d` / `crop_pos_z` for volumes; a
//! window may leave the resized image: resampling extends the border, as DALI's), per-sample
//! `mirror`. The layouts are `fn.resize`'s (images, sequences, volumes). On sequences and
//! channel-first layouts every frame is mirrored as an image (or DHWC volume) is; DALI 2.4
//! mirrors them along other axes (on FHWC mirror=1 flips H, mirror=2 nothing), which Sluice
//! does not copy.

use super::{gpu::ResizeGpu, Resize, ANTIALIAS, RESIZE_ARGS};
use crate::ops::crop::window::CROP_WINDOW_ARGS;
use crate::ops::{arg, tensor_arg, ArgDefault as D, ArgType as T, Device, OpDef, OpSchema};

const DOC: &str = "Performs a fused resize, crop, mirror operation.

The result of the operation is equivalent to applying ``resize``, followed by ``crop`` and ``flip``. Internally, the operator calculates the relevant region of interest and performs a single resizing operation on that region.";

const MIRROR: &[crate::ops::ArgSchema] = &[tensor_arg("mirror", T::Int, D::Int(0), "Mask for flipping: 0 no flip, 1 horizontal, 2 vertical, 4 depthwise, or any bitwise combination.")];

/// `fn.resize_crop_mirror`.
pub static RESIZE_CROP_MIRROR: OpDef = OpDef {
    schema: OpSchema {
        name: "ResizeCropMirror",
        doc: DOC,
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[RESIZE_ARGS, &[ANTIALIAS], CROP_WINDOW_ARGS, MIRROR],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Resize::crop_mirror(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(ResizeGpu::with(Resize::crop_mirror(ctx)?)))),
};

/// `fn.fast_resize_crop_mirror`: DALI's legacy alias, antialiasing off by default.
pub static FAST_RESIZE_CROP_MIRROR: OpDef = OpDef {
    schema: OpSchema {
        name: "FastResizeCropMirror",
        doc: "Legacy alias for ResizeCropMirror, with antialiasing disabled by default.",
        args: &[RESIZE_ARGS, &[arg("antialias", T::Bool, D::Bool(false), "Widen the filter when scaling down (not for INTERP_NN).")], CROP_WINDOW_ARGS, MIRROR],
        ..RESIZE_CROP_MIRROR.schema
    },
    ..RESIZE_CROP_MIRROR
};
