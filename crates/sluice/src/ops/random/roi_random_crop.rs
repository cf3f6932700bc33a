//! `roi_random_crop`: a crop window start (INT64, one value per dimension of `crop_shape`)
//! drawn uniformly, per dimension, so that the window of `crop_shape` contains the region of
//! interest when it is larger than it, and lies inside it when it is smaller (DALI 2.4's
//! `ROIRandomCrop`, cpu only). The ROI is `roi_start` with `roi_end` or `roi_shape`. With an
//! input shape (`in_shape`, or the shape of the optional input, whose leading dimensions are
//! used) the window also stays inside it, and the shapes are checked as DALI checks them;
//! without one the window is unbounded. A list of one value stands for every dimension, as
//! DALI broadcasts it. The draw is Sluice's (its own Philox stream per sample), the rule
//! DALI's: checked by DALI's invariants on both libraries (`tests/test_roi_random_crop.py`).

use crate::error::{Error, Result};
use crate::ops::{generate_samples, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, PerSampleList, Workspace, MAX_LIST};
use crate::rng::SampleRng;
use crate::tensor::{DType, TensorList};

/// Schema and backend.
pub static ROI_RANDOM_CROP: OpDef = OpDef {
    schema: OpSchema {
        name: "ROIRandomCrop",
        doc: "Produces a fixed shape cropping window, randomly placed so that as much of the provided region of interest (ROI) is contained in it. If the ROI is bigger than the window, the window is a subwindow of the ROI; if smaller, the whole ROI is contained in the window. Given an input shape (`in_shape`, or the shape of the input), the window stays within it; otherwise it is unbounded. Outputs the window's start coordinates (INT64).",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("crop_shape", T::IntList, D::Required, "Cropping window dimensions."),
            tensor_arg("roi_start", T::IntList, D::Required, "ROI start coordinates."),
            tensor_arg("roi_end", T::IntList, D::Optional, "ROI end coordinates. Mutually exclusive with `roi_shape`."),
            tensor_arg("roi_shape", T::IntList, D::Optional, "ROI shape. Mutually exclusive with `roi_end`."),
            tensor_arg("in_shape", T::IntList, D::Optional, "Shape of the input data: the window is then selected within its bounds. Incompatible with feeding the data as the positional input."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(RoiRandomCrop::new(ctx)?))),
    mixed: None,
    gpu: None,
};

struct RoiRandomCrop {
    ctx: OpContext,
    /// The ROI is `roi_start..roi_end` (else `roi_start` + `roi_shape`).
    by_end: bool,
    /// Inclusive start ranges, `ndim` per sample; refilled every batch, the buffer is reused.
    ranges: Vec<(i64, i64)>,
}

/// DALI's wording, kept so its tests' patterns match our messages too.
const ONE_OF_END_OR_SHAPE: &str = "Either ROI end or ROI shape should be defined, but not both";

impl RoiRandomCrop {
    fn new(ctx: &OpContext) -> Result<RoiRandomCrop> {
        let op = &ctx.display_name;
        let by_end = match (ctx.given("roi_end"), ctx.given("roi_shape")) {
            (true, false) => true,
            (false, true) => false,
            (true, true) => return Err(Error::arg(op, "roi_shape", format!("{ONE_OF_END_OR_SHAPE}: `roi_end` and `roi_shape` are mutually exclusive"))),
            (false, false) => return Err(Error::arg(op, "roi_end", format!("{ONE_OF_END_OR_SHAPE}: give `roi_end` or `roi_shape`"))),
        };
        Ok(RoiRandomCrop { ctx: ctx.clone(), by_end, ranges: Vec::new() })
    }
}

/// Sample `i` of integer list `name`: its values as integers in `out`, returning how many.
/// Fractional values (a float argument input) are an error: a window start is a whole index.
fn read_ints(op: &str, arg: &PerSampleList<'_>, name: &str, i: usize, out: &mut [i64; MAX_LIST]) -> Result<usize> {
    let mut buf = [0f64; MAX_LIST];
    let Some(values) = arg.get(op, name, i, &[], &mut buf)? else {
        return Err(Error::arg(op, name, "is required"));
    };
    for (o, &v) in out.iter_mut().zip(values) {
        // 2^63 is the first f64 outside i64 (NaN and infinities fail the test too).
        if !(v.fract() == 0.0 && v.abs() < (1u64 << 63) as f64) {
            return Err(Error::arg(op, name, format!("sample {i}: values must be integers, got {values:?}")));
        }
        *o = v as i64;
    }
    Ok(values.len())
}

/// Like [`read_ints`], for a list with one value per dimension of the crop: a single value
/// is broadcast to `ndim` (DALI broadcasts one-element arguments to the expected shape).
fn read_per_dim(op: &str, arg: &PerSampleList<'_>, name: &str, i: usize, ndim: usize, out: &mut [i64; MAX_LIST]) -> Result<()> {
    let n = read_ints(op, arg, name, i, out)?;
    if n == 1 && ndim != 1 {
        let v = out[0];
        out[..ndim].fill(v);
    } else if n != ndim {
        return Err(Error::arg(op, name, format!("sample {i} has {n} values; expected {ndim}, one per dimension of `crop_shape` (or one for all)")));
    }
    Ok(())
}

/// The crop starts (inclusive) along one dimension: from the start where the window's far
/// edge meets the ROI's far edge to the ROI's own start, whichever order they come in. A
/// window larger than the ROI then contains it, a smaller one lies within it. `in_extent`
/// (the input's size) clamps the range to windows inside the input; the checks in `run`
/// (ROI inside the input, window no larger than it) keep the clamped range non-empty.
fn start_range(roi_start: i64, roi_extent: i64, crop: i64, in_extent: Option<i64>) -> (i64, i64) {
    if roi_extent == crop {
        return (roi_start, roi_start);
    }
    // i128: the sum of three i64 arguments cannot overflow.
    let a = roi_start as i128;
    let b = a + roi_extent as i128 - crop as i128;
    let (mut lo, mut hi) = (a.min(b), a.max(b));
    if let Some(e) = in_extent {
        lo = lo.max(0);
        hi = hi.min(e as i128 - crop as i128);
    }
    let sat = |v: i128| v.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    (sat(lo), sat(hi.max(lo)))
}

/// A start uniform in `lo..=hi`.
fn draw(rng: &mut SampleRng, (lo, hi): (i64, i64)) -> i64 {
    if lo == hi {
        return lo;
    }
    // Only windows with absurd unbounded coordinates (near +-2^63) span more than u64 values;
    // those are cut to u64::MAX values rather than failing.
    let width = (hi as i128 - lo as i128 + 1).min(u64::MAX as i128) as u64;
    (lo as i128 + rng.below(width) as i128) as i64
}

impl Operator for RoiRandomCrop {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let op = self.ctx.display_name.as_str();
        let input = ws.inputs.first().copied();
        let in_shape = ws.per_sample_list(&self.ctx, "in_shape");
        if input.is_some() && in_shape.is_set() {
            return Err(Error::arg(op, "in_shape", "``in_shape`` argument is incompatible with providing an input: give the shape or the data, not both"));
        }
        let crop_arg = ws.per_sample_list(&self.ctx, "crop_shape");
        let start_arg = ws.per_sample_list(&self.ctx, "roi_start");
        let ext_name = if self.by_end { "roi_end" } else { "roi_shape" };
        let ext_arg = ws.per_sample_list(&self.ctx, ext_name);
        let n = input.map_or(ws.batch_size, |x| x.len());

        let (mut crop, mut start, mut ext, mut bound) = ([0i64; MAX_LIST], [0i64; MAX_LIST], [0i64; MAX_LIST], [0i64; MAX_LIST]);
        // An empty batch still has an output of the constant crop's dimensionality.
        let mut ndim = match crop_arg {
            PerSampleList::Constant(_) => Some(read_ints(op, &crop_arg, "crop_shape", 0, &mut crop)?),
            _ => None,
        };
        let mut ranges = std::mem::take(&mut self.ranges);
        ranges.clear();
        for i in 0..n {
            let nd = read_ints(op, &crop_arg, "crop_shape", i, &mut crop)?;
            let ndim = *ndim.get_or_insert(nd);
            if nd != ndim {
                // The output is one list of starts per sample, all of one length (DALI's uniform shape).
                return Err(Error::arg(op, "crop_shape", format!("sample {i} has {nd} values, earlier samples {ndim}; every sample needs the same number of dimensions")));
            }
            read_per_dim(op, &start_arg, "roi_start", i, ndim, &mut start)?;
            read_per_dim(op, &ext_arg, ext_name, i, ndim, &mut ext)?;
            // The ROI's extent along each dimension.
            if self.by_end {
                for d in 0..ndim {
                    ext[d] = ext[d].saturating_sub(start[d]);
                }
            }
            let bounded = if let Some(x) = input {
                let sh = x.shape(i);
                if sh.len() < ndim {
                    return Err(Error::arg(op, "crop_shape", format!("sample {i}: {ndim} dimensions, but the input sample has shape {sh:?}")));
                }
                for d in 0..ndim {
                    bound[d] = sh[d] as i64;
                }
                true
            } else if in_shape.is_set() {
                read_per_dim(op, &in_shape, "in_shape", i, ndim, &mut bound)?;
                true
            } else {
                false
            };
            if bounded {
                check_bounds(op, i, &crop[..ndim], &start[..ndim], &ext[..ndim], &bound[..ndim], ext_name)?;
            }
            for d in 0..ndim {
                ranges.push(start_range(start[d], ext[d], crop[d], bounded.then_some(bound[d])));
            }
        }
        let ndim = ndim.unwrap_or(0);
        let mut out = TensorList::uniform(DType::I64, &[ndim], n);
        let (ctx, ranges_ref) = (&self.ctx, &ranges);
        generate_samples(ws.pool, &mut out, |i, bytes| {
            let mut rng = ws.rng(ctx, i);
            for (d, &r) in ranges_ref[i * ndim..(i + 1) * ndim].iter().enumerate() {
                bytes[d * 8..d * 8 + 8].copy_from_slice(&draw(&mut rng, r).to_le_bytes());
            }
            Ok(())
        })?;
        self.ranges = ranges;
        Ok(vec![out])
    }
}

/// DALI's checks when the input shape is known: no negative extents, a window no larger
/// than the input, a ROI inside it. Its phrases are kept so its tests' patterns match.
fn check_bounds(op: &str, i: usize, crop: &[i64], start: &[i64], ext: &[i64], shape: &[i64], ext_name: &str) -> Result<()> {
    for d in 0..crop.len() {
        if shape[d] < 0 {
            return Err(Error::arg(op, "in_shape", format!("sample {i}: Input shape can't be negative. Got {} for d={d}", shape[d])));
        }
        if crop[d] < 0 {
            return Err(Error::arg(op, "crop_shape", format!("sample {i}: Crop shape can't be negative. Got {} for d={d}", crop[d])));
        }
        if crop[d] > shape[d] {
            return Err(Error::arg(op, "crop_shape", format!(
                "sample {i}: Cropping shape can't be bigger than the input shape. Got crop_shape[{d}] = {} and input shape[{d}] = {}", crop[d], shape[d]
            )));
        }
    }
    for d in 0..crop.len() {
        let end = start[d].saturating_add(ext[d]);
        if start[d] < 0 || end > shape[d] {
            let name = if start[d] < 0 { "roi_start" } else { ext_name };
            return Err(Error::arg(op, name, format!(
                "sample {i}: ROI can't be out of bounds. Got roi_start[{d}] = {}, roi_end[{d}] = {end}, input shape[{d}] = {}", start[d], shape[d]
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every start of the range gives a window that contains the ROI (window larger) or lies
    /// within it (window smaller), inside the input when one bounds it; the draws cover the
    /// whole range evenly and repeat for the same stream.
    #[test]
    fn windows_contain_or_lie_within_the_roi_and_cover_the_range() {
        let cases: &[(i64, i64, i64, Option<i64>)] = &[
            (20, 15, 35, Some(300)), // window larger than the ROI
            (20, 120, 35, Some(300)), // smaller
            (0, 15, 90, Some(250)),  // larger, clamped at 0
            (240, 10, 30, Some(250)), // larger, clamped at the far edge
            (5, 5, 5, Some(10)),     // equal: the ROI's start
            (3, 10, 40, None),       // unbounded: may start below 0
        ];
        for &(s, e, c, bound) in cases {
            let (lo, hi) = start_range(s, e, c, bound);
            assert!(lo <= hi, "{s} {e} {c} {bound:?}");
            for x in lo..=hi {
                if c >= e {
                    assert!(x <= s && x + c >= s + e, "window {x}+{c} misses ROI {s}+{e}");
                } else {
                    assert!(x >= s && x + c <= s + e, "window {x}+{c} leaves ROI {s}+{e}");
                }
                if let Some(b) = bound {
                    assert!(x >= 0 && x + c <= b);
                }
            }
            let mut hits = vec![0u32; (hi - lo + 1) as usize];
            let mut rng = SampleRng::new(7, 1, 0, 3);
            let draws = 2000 * hits.len() as u32;
            for _ in 0..draws {
                let x = draw(&mut rng, (lo, hi));
                hits[(x - lo) as usize] += 1;
            }
            // 2000 expected per start; 5 sigma is about 224.
            assert!(hits.iter().all(|&h| (1750..2250).contains(&h)), "{hits:?}");
        }
        assert_eq!(start_range(3, 10, 40, None), (-27, 3));
        let a: Vec<i64> = (0..16).map({ let mut r = SampleRng::new(5, 2, 1, 0); move |_| draw(&mut r, (-27, 3)) }).collect();
        let b: Vec<i64> = (0..16).map({ let mut r = SampleRng::new(5, 2, 1, 0); move |_| draw(&mut r, (-27, 3)) }).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn bounds_are_checked_as_dali_checks_them() {
        let ok = check_bounds("roi_random_crop", 0, &[2, 2], &[1, 1], &[1, 1], &[4, 4], "roi_shape");
        assert!(ok.is_ok());
        for (crop, start, ext, shape, arg) in [
            ([2, 2], [1, 1], [1, 1], [-4, 4], "in_shape"),
            ([1, -1], [1, 1], [1, 1], [4, 4], "crop_shape"),
            ([10, 10], [1, 1], [1, 1], [4, 4], "crop_shape"),
            ([2, 2], [-1, -1], [1, 1], [4, 4], "roi_start"),
            ([2, 2], [1, 1], [4, 4], [4, 4], "roi_shape"),
        ] {
            let e = check_bounds("roi_random_crop", 0, &crop, &start, &ext, &shape, "roi_shape").unwrap_err().to_string();
            assert!(e.starts_with(&format!("roi_random_crop: argument '{arg}'")), "{e}");
        }
    }

    #[test]
    fn huge_unbounded_ranges_do_not_overflow() {
        let (lo, hi) = start_range(i64::MIN, i64::MAX, -5, None);
        assert!(lo <= hi);
        let mut rng = SampleRng::new(1, 1, 1, 1);
        let _ = draw(&mut rng, (i64::MIN, i64::MAX));
    }
}
