//! Crop-window math shared by `fn.crop` and `fn.crop_mirror_normalize`, matching DALI 2.4:
//!
//! * crop sizes (`crop`, `crop_h`, `crop_w`, `crop_d`) are truncated to integers
//!   (`crop_h=2.6` crops 2 rows); Sluice rejects sizes below 1 with an error;
//! * the anchor of a dimension is `roundf(pos * (extent - crop))` computed in `f32`, rounding
//!   halves away from zero (also for negative anchors when the window is larger than the
//!   input), with `pos` (`crop_pos_x/y/z`) in [0, 1];
//! * `out_of_bounds_policy`: "error" fails for a window that leaves the input, "pad" keeps
//!   the window and fills the outside with `fill_values`, "trim_to_shape" intersects the
//!   window with the input.

use crate::error::{Error, Result};
use crate::ops::{ArgDefault as D, ArgSchema, ArgType as T, OpContext, PerSample, PerSampleList, Workspace, arg, tensor_arg, MAX_LIST};

/// Arguments placing the crop window, shared by every crop operator.
pub const CROP_WINDOW_ARGS: &[ArgSchema] = &[
    tensor_arg("crop", T::FloatList, D::Optional, "Crop window shape [H, W] (or [D, H, W]) in pixels; non-integer sizes are truncated."),
    tensor_arg("crop_h", T::Float, D::Optional, "Crop window height in pixels (given together with crop_w)."),
    tensor_arg("crop_w", T::Float, D::Optional, "Crop window width in pixels (given together with crop_h)."),
    tensor_arg("crop_d", T::Float, D::Optional, "Crop window depth in pixels, for volumes (D dimension)."),
    tensor_arg("crop_pos_x", T::Float, D::Float(0.5), "Normalized (0.0 - 1.0) horizontal position of the crop window."),
    tensor_arg("crop_pos_y", T::Float, D::Float(0.5), "Normalized (0.0 - 1.0) vertical position of the crop window."),
    tensor_arg("crop_pos_z", T::Float, D::Float(0.5), "Normalized (0.0 - 1.0) depthwise position of the crop window."),
    arg("rounding", T::Str, D::Str("round"), "How the window's start becomes an integer: \"round\" (half away from zero) or \"truncate\"."),
];

/// What happens outside the input, for the crop operators that let a window leave it.
pub const CROP_OOB_ARGS: &[ArgSchema] = &[
    arg("out_of_bounds_policy", T::Str, D::Str("error"), "What to do when the window leaves the input: \"error\", \"pad\" (fill with fill_values) or \"trim_to_shape\"."),
    arg("fill_values", T::FloatList, D::FloatList(&[0.0]), "Values used for padding: one for every channel, or one per channel."),
];

/// DALI's `rounding` argument: true for "truncate", false for "round".
pub fn truncates(op: &str, rounding: &str) -> Result<bool> {
    match rounding {
        "round" => Ok(false),
        "truncate" => Ok(true),
        s => Err(Error::arg(op, "rounding", format!("must be \"round\" or \"truncate\", got \"{s}\""))),
    }
}

/// What happens to a window that leaves the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OobPolicy {
    Error,
    Pad,
    TrimToShape,
}

impl OobPolicy {
    /// Parses DALI's policy names.
    pub fn parse(op: &str, s: &str) -> Result<OobPolicy> {
        match s {
            "error" => Ok(OobPolicy::Error),
            "pad" => Ok(OobPolicy::Pad),
            "trim_to_shape" => Ok(OobPolicy::TrimToShape),
            _ => Err(Error::arg(op, "out_of_bounds_policy", format!("must be \"error\", \"pad\" or \"trim_to_shape\", got \"{s}\""))),
        }
    }
}

/// The window along one dimension: output element `o` reads input element `anchor + o`
/// (outside `0..extent` it is padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub anchor: i64,
    pub len: usize,
}

impl Span {
    /// The whole dimension.
    pub fn full(extent: usize) -> Span {
        Span { anchor: 0, len: extent }
    }

    /// True when every output element reads inside `0..extent`.
    pub fn inside(&self, extent: usize) -> bool {
        self.anchor >= 0 && self.anchor + self.len as i64 <= extent as i64
    }
}

/// DALI's anchor: `round(pos * (extent - crop))`, computed in double precision.
pub fn anchor(extent: usize, crop: usize, pos: f32) -> i64 {
    anchor_with_rounding(extent, crop, pos as f64, false)
}

/// The window start `pos * (extent - crop)`, rounded half away from zero or truncated.
/// `pos` is a single-precision argument in DALI but the product is taken in double
/// precision: with pos 0.7, extent 428 and crop 33 an f32 product would round up to 276.5
/// (anchor 277) where DALI anchors at 276.
pub fn anchor_with_rounding(extent: usize, crop: usize, pos: f64, truncate: bool) -> i64 {
    let a = pos as f32 as f64 * (extent as f64 - crop as f64);
    if truncate { a.trunc() as i64 } else { a.round() as i64 }
}

/// A crop size from its (float) argument value: truncated, at least 1.
pub fn crop_size(op: &str, name: &str, v: f64) -> Result<usize> {
    if !v.is_finite() || v.trunc() < 1.0 {
        return Err(Error::arg(op, name, format!("crop size must be a positive number of pixels (at least 1), got {v}")));
    }
    Ok(v.trunc() as usize)
}

/// The window along one dimension of `extent` under `policy`; `what` names the dimension's
/// size argument for the error message.
pub fn span(extent: usize, crop: usize, pos: f64, policy: OobPolicy, truncate: bool) -> std::result::Result<Span, Span> {
    let s = Span { anchor: anchor_with_rounding(extent, crop, pos, truncate), len: crop };
    if s.inside(extent) {
        return Ok(s);
    }
    match policy {
        OobPolicy::Error => Err(s),
        OobPolicy::Pad => Ok(s),
        OobPolicy::TrimToShape => {
            let lo = s.anchor.max(0);
            let hi = (s.anchor + crop as i64).min(extent as i64);
            Ok(Span { anchor: lo, len: (hi - lo).max(0) as usize })
        }
    }
}

/// The crop arguments of one operator instance, read once per batch.
pub struct CropSpec<'a> {
    /// `crop` ([H, W] or [D, H, W]), a constant or one per sample.
    crop: PerSampleList<'a>,
    h: PerSample<'a>,
    w: PerSample<'a>,
    d: PerSample<'a>,
    x: PerSample<'a>,
    y: PerSample<'a>,
    z: PerSample<'a>,
    pub policy: OobPolicy,
    /// `rounding="truncate"`: window starts are truncated, not rounded.
    truncate: bool,
}

/// Where the spatial dimensions are in a layout, and their windows for one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    pub h: Span,
    pub w: Span,
    pub d: Option<Span>,
}

impl<'a> CropSpec<'a> {
    /// Reads and checks the batch-constant parts; `required` makes a missing window an error.
    pub fn new(ctx: &'a OpContext, ws: &Workspace<'a>, required: bool) -> Result<CropSpec<'a>> {
        let op = &ctx.display_name;
        let crop = ws.per_sample_list(ctx, "crop");
        if !crop.is_input() {
            // A constant is checked once here; inputs per sample in `windows`.
            crop.get(op, "crop", 0, &[2, 3], &mut [0.0; MAX_LIST])?;
        }
        let h = ws.per_sample(ctx, "crop_h");
        let w = ws.per_sample(ctx, "crop_w");
        let d = ws.per_sample(ctx, "crop_d");
        let given = |p: &PerSample| !matches!(p, PerSample::Unset);
        if given(&h) != given(&w) {
            return Err(Error::arg(op, if given(&h) { "crop_w" } else { "crop_h" }, "crop_h and crop_w must be given together"));
        }
        if crop.is_set() && (given(&h) || given(&d)) {
            return Err(Error::arg(op, "crop", "give either crop or crop_h/crop_w/crop_d, not both"));
        }
        if required && !crop.is_set() && !given(&h) {
            return Err(Error::arg(op, "crop", "no crop window: give crop=[H, W] or crop_h and crop_w"));
        }
        Ok(CropSpec {
            crop,
            h,
            w,
            d,
            x: ws.per_sample(ctx, "crop_pos_x"),
            y: ws.per_sample(ctx, "crop_pos_y"),
            z: ws.per_sample(ctx, "crop_pos_z"),
            // Operators without the argument (resize_crop_mirror) keep windows that leave the
            // input, as DALI's `CropAttr` does: resampling extends the border.
            policy: OobPolicy::parse(op, ctx.args.opt_str("out_of_bounds_policy").unwrap_or("pad"))?,
            truncate: truncates(op, ctx.args.str("rounding"))?,
        })
    }

    /// The windows of sample `i` whose H, W (and D) extents are given; errors name the
    /// operator, the argument and the sample.
    pub fn windows(&self, ctx: &OpContext, iteration: u64, source: &str, i: usize, h: usize, w: usize, d: Option<usize>) -> Result<Windows> {
        let op = &ctx.display_name;
        let mut buf = [0f64; MAX_LIST];
        let (ch, cw, cd) = match self.crop.get(op, "crop", i, &[2, 3], &mut buf)? {
            Some(&[d, h, w]) => (Some(("crop", h)), Some(("crop", w)), Some(("crop", d))),
            Some(c) => (Some(("crop", c[0])), Some(("crop", c[1])), None),
            None => (
                self.h.get(op, i)?.map(|v| ("crop_h", v)),
                self.w.get(op, i)?.map(|v| ("crop_w", v)),
                self.d.get(op, i)?.map(|v| ("crop_d", v)),
            ),
        };
        let pos = |p: &PerSample, name: &str| -> Result<f64> {
            let v = p.get(op, i)?.unwrap_or(0.5);
            if !(0.0..=1.0).contains(&v) {
                return Err(Error::data(ctx.at(iteration, i, source), format!("argument '{name}' must be in [0, 1], got {v}")));
            }
            Ok(v)
        };
        let one = |extent: usize, c: Option<(&str, f64)>, p: &PerSample, pname: &str| -> Result<Span> {
            let Some((cname, cv)) = c else { return Ok(Span::full(extent)) };
            let size = crop_size(op, cname, cv).map_err(|e| match e {
                Error::InvalidArgument { message, .. } => Error::data(ctx.at(iteration, i, source), format!("argument '{cname}': {message}")),
                e => e,
            })?;
            span(extent, size, pos(p, pname)?, self.policy, self.truncate).map_err(|s| {
                Error::data(
                    ctx.at(iteration, i, source),
                    format!(
                        "crop window (argument '{cname}' = {size}, '{pname}' anchor {}) does not fit in the input extent {extent}; \
                         set out_of_bounds_policy to \"pad\" or \"trim_to_shape\" to allow it",
                        s.anchor
                    ),
                )
            })
        };
        let wh = one(h, ch, &self.y, "crop_pos_y")?;
        let ww = one(w, cw, &self.x, "crop_pos_x")?;
        let wd = match d {
            Some(ext) => Some(one(ext, cd, &self.z, "crop_pos_z")?),
            None => None,
        };
        Ok(Windows { h: wh, w: ww, d: wd })
    }
}

/// Fill values per channel: one value broadcast, or exactly `channels` values.
pub fn fill_per_channel(op: &str, fill: &[f64], channels: usize) -> Result<Vec<f64>> {
    match fill.len() {
        0 => Ok(vec![0.0; channels]),
        1 => Ok(vec![fill[0]; channels]),
        n if n >= channels => Ok(fill[..channels].to_vec()),
        n => Err(Error::arg(op, "fill_values", format!("needs 1 or {channels} values (one per channel), got {n}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_round_like_dali() {
        // DALI 2.4 fn.crop on a 1-column image of H rows, crop (ch, 1), crop_pos_y = pos.
        for &(h, ch, pos, want) in &[
            (5usize, 2usize, 0.5f32, 2i64), (5, 4, 0.5, 1), (5, 2, 0.75, 2), (6, 1, 0.3, 2),
            (7, 1, 0.25, 2), (6, 4, 0.25, 1), (10, 3, 0.75, 5), (9, 4, 0.3, 2), (10, 1, 0.3, 3),
            // larger than the input (pad policy): -0.5 -> -1, -1.5 -> -2, -2.5 -> -3, -0.25 -> 0.
            (5, 6, 0.5, -1), (5, 8, 0.5, -2), (4, 9, 0.5, -3), (5, 6, 0.25, 0), (5, 9, 1.0, -4),
            // DALI widens to double: 0.7 * (428 - 33) = 276.4999.. -> 276 (an f32 product gives 277).
            (428, 33, 0.7, 276),
        ] {
            assert_eq!(anchor(h, ch, pos), want, "H {h} crop {ch} pos {pos}");
        }
    }

    #[test]
    fn sizes_truncate_and_policies_apply() {
        assert_eq!(crop_size("crop", "crop_h", 2.6).unwrap(), 2);
        assert_eq!(crop_size("crop", "crop_h", 3.5).unwrap(), 3);
        assert!(crop_size("crop", "crop_h", 0.0).is_err());
        assert!(crop_size("crop", "crop_h", -1.0).is_err());
        assert!(crop_size("crop", "crop_h", 0.5).is_err());
        assert_eq!(span(3, 4, 0.5, OobPolicy::Pad, false), Ok(Span { anchor: -1, len: 4 }));
        assert_eq!(span(3, 4, 0.5, OobPolicy::TrimToShape, false), Ok(Span { anchor: 0, len: 3 }));
        assert_eq!(span(3, 4, 0.5, OobPolicy::Error, false), Err(Span { anchor: -1, len: 4 }));
        assert_eq!(span(5, 7, 0.3, OobPolicy::TrimToShape, false), Ok(Span { anchor: 0, len: 5 }));
    }
}
