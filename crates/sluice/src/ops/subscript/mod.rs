//! `TensorSubscript`: `node[...]` on DataNodes. Integer indices (negative count from the end)
//! remove their dimension; slices `lo:hi:step` keep it, with Python's semantics (clamped
//! bounds, negative steps). Indices may be per-sample argument inputs. Matches DALI 2.4.
//! Both backends share the plan (each sample's selection per axis); the GPU backend
//! (`gpu.rs`) turns it into strided gathers.

mod gpu;

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgSchema, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, Layout, TensorList};

/// Most subscripts one `[...]` may have.
pub const MAX_SUBSCRIPTS: usize = 8;

macro_rules! sub_args {
    ($($i:literal),*) => {
        &[$(
            tensor_arg(concat!("at_", $i), T::Int, D::Optional, "Index at this axis; removes the axis."),
            tensor_arg(concat!("lo_", $i), T::Int, D::Optional, "Slice start at this axis."),
            tensor_arg(concat!("hi_", $i), T::Int, D::Optional, "Slice end (exclusive) at this axis."),
            tensor_arg(concat!("step_", $i), T::Int, D::Optional, "Slice step at this axis (not 0; negative walks backwards)."),
        )*]
    };
}

const SUB_ARGS: &[ArgSchema] = sub_args!(0, 1, 2, 3, 4, 5, 6, 7);
const NAMES: [[&str; 4]; MAX_SUBSCRIPTS] = [
    ["at_0", "lo_0", "hi_0", "step_0"], ["at_1", "lo_1", "hi_1", "step_1"], ["at_2", "lo_2", "hi_2", "step_2"],
    ["at_3", "lo_3", "hi_3", "step_3"], ["at_4", "lo_4", "hi_4", "step_4"], ["at_5", "lo_5", "hi_5", "step_5"],
    ["at_6", "lo_6", "hi_6", "step_6"], ["at_7", "lo_7", "hi_7", "step_7"],
];

/// Schema and backends. Hidden from `fn`; Python builds it from `DataNode.__getitem__`.
pub static TENSOR_SUBSCRIPT: OpDef = OpDef {
    schema: OpSchema {
        name: "_TensorSubscript",
        doc: "Indexes and slices each sample (`node[1:3, :, 0]`). Created by `DataNode.__getitem__`.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[
            &[arg("num_subscripts", T::Int, D::Int(0), "Number of subscripts given; further axes are kept whole.")],
            SUB_ARGS,
        ],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Subscript::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::SubscriptGpu::new(Subscript::new(ctx)?)))),
};

struct Subscript {
    ctx: OpContext,
    num: usize,
}

impl Subscript {
    fn new(ctx: &OpContext) -> Result<Subscript> {
        let num = ctx.args.int("num_subscripts");
        if !(0..=MAX_SUBSCRIPTS as i64).contains(&num) {
            return Err(Error::arg(&ctx.display_name, "num_subscripts", format!("must be 0 to {MAX_SUBSCRIPTS}, got {num}")));
        }
        Ok(Subscript { ctx: ctx.clone(), num: num as usize })
    }
}

/// One axis of the result, in source terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AxisSel {
    /// A single index: the axis is removed.
    At(usize),
    /// `start`, `count` elements, `step` apart.
    Range { start: i64, count: usize, step: i64 },
}

/// Python's slice resolution for an axis of `len` elements.
pub fn resolve_slice(lo: Option<i64>, hi: Option<i64>, step: i64, len: usize) -> (i64, usize) {
    let n = len as i64;
    let clamp = |v: i64, lo_b: i64, hi_b: i64| v.max(lo_b).min(hi_b);
    let norm = |v: i64| if v < 0 { v + n } else { v };
    let (start, stop) = if step > 0 {
        (lo.map_or(0, |v| clamp(norm(v), 0, n)), hi.map_or(n, |v| clamp(norm(v), 0, n)))
    } else {
        (lo.map_or(n - 1, |v| clamp(norm(v), -1, n - 1)), hi.map_or(-1, |v| clamp(norm(v), -1, n - 1)))
    };
    let count = if step > 0 {
        if stop > start { (stop - start + step - 1) / step } else { 0 }
    } else if start > stop {
        (start - stop + (-step) - 1) / (-step)
    } else {
        0
    };
    (start, count as usize)
}

/// One batch's plan: the output's metadata and every sample's selection, `ndim` axes per
/// sample in source order.
struct Plan {
    meta: BatchMeta,
    sels: Vec<AxisSel>,
    ndim: usize,
}

impl Plan {
    fn sample(&self, i: usize) -> &[AxisSel] {
        &self.sels[i * self.ndim..(i + 1) * self.ndim]
    }
}

impl Subscript {
    /// Resolves every sample's indices and slices against its shape (errors name the sample).
    fn plan(&self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<Plan> {
        let name = &self.ctx.display_name;
        let n = input.len();
        let ndim = input.ndim();
        if self.num > ndim {
            return Err(Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), format!("too many indices ({}) for a {ndim}D tensor", self.num)));
        }
        // Which axes are indexed (removed) is the same for every sample.
        let mut removed = [false; MAX_SUBSCRIPTS];
        for (a, r) in removed.iter_mut().enumerate().take(self.num) {
            *r = ws.arg_inputs.contains_key(NAMES[a][0]) || self.ctx.args.has(NAMES[a][0]);
        }
        let out_ndim = ndim - removed.iter().filter(|&&r| r).count();
        // Per-sample selections (one allocation per batch).
        let mut sels: Vec<AxisSel> = Vec::with_capacity(n * ndim);
        let mut shapes: Vec<usize> = Vec::with_capacity(n * out_ndim);
        for i in 0..n {
            let shape = input.shape(i);
            let loc = || self.ctx.at(ws.iteration, i, input.source_info(i));
            for (a, &len) in shape.iter().enumerate() {
                let get = |k: usize| -> Result<Option<i64>> {
                    if a >= self.num {
                        return Ok(None);
                    }
                    Ok(ws.per_sample(&self.ctx, NAMES[a][k]).get(name, i)?.map(|v| v as i64))
                };
                let sel = if removed[a] {
                    let at = get(0)?.expect("present");
                    let idx = if at < 0 { at + len as i64 } else { at };
                    if idx < 0 || idx >= len as i64 {
                        return Err(Error::data(loc(), format!("index {at} is out of range for axis {a} of length {len}; sample shape {shape:?}")));
                    }
                    AxisSel::At(idx as usize)
                } else {
                    let step = get(3)?.unwrap_or(1);
                    if step == 0 {
                        return Err(Error::data(loc(), format!("step cannot be zero (axis {a})")));
                    }
                    let (start, count) = resolve_slice(get(1)?, get(2)?, step, len);
                    shapes.push(count);
                    AxisSel::Range { start, count, step }
                };
                sels.push(sel);
            }
        }
        let mut meta = BatchMeta::new(input.dtype(), out_ndim, (0..n).map(|i| &shapes[i * out_ndim..(i + 1) * out_ndim]));
        let layout = input.layout();
        if !layout.is_empty() {
            let kept: String = layout.as_str().chars().enumerate().filter(|(a, _)| !(*a < MAX_SUBSCRIPTS && removed[*a])).map(|(_, c)| c).collect();
            meta.set_layout(Layout::new(&kept).expect("subset of a valid layout"));
        }
        meta.inherit_source_info(input);
        Ok(Plan { meta, sels, ndim })
    }
}

impl Operator for Subscript {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let plan = self.plan(ws, input.meta())?;
        let mut out = TensorList::for_overwrite(plan.meta.clone());
        let elem = input.dtype().size();
        for_each_sample(ws.pool, &mut out, |i, dst| {
            gather(dst, input.bytes(i), input.shape(i), plan.sample(i), elem);
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// Sample `i`'s selection as (first element, then (count, element step) per walked axis,
/// outermost first), for a dense tensor of `shape`: what both the cpu walk and the GPU's
/// strided gather follow.
fn walk<'a>(shape: &'a [usize], sel: &'a [AxisSel]) -> (i64, impl Iterator<Item = (usize, i64)> + 'a) {
    let stride = |a: usize| shape[a + 1..].iter().product::<usize>() as i64;
    let base = sel
        .iter()
        .enumerate()
        .map(|(a, s)| match *s {
            AxisSel::At(i) => i as i64 * stride(a),
            AxisSel::Range { start, .. } => start * stride(a),
        })
        .sum();
    let walked = sel.iter().enumerate().filter_map(move |(a, s)| match *s {
        AxisSel::At(_) => None,
        AxisSel::Range { count, step, .. } => Some((count, step * stride(a))),
    });
    (base, walked)
}

/// Copies the selected elements of `src` (a dense tensor of `shape`) to `dst`.
pub fn gather(dst: &mut [u8], src: &[u8], shape: &[usize], sel: &[AxisSel], elem: usize) {
    const MAXD: usize = 16;
    let nd = shape.len();
    assert!(nd <= MAXD, "subscript: at most {MAXD} dimensions");
    if dst.is_empty() {
        return;
    }
    let (base, walked) = walk(shape, sel);
    let mut counts = [0usize; MAXD];
    let mut steps = [0i64; MAXD];
    let mut m = 0;
    for (count, step) in walked {
        counts[m] = count;
        steps[m] = step;
        m += 1;
    }
    // The innermost walked axis with unit step on the last source axis is a contiguous run.
    let (run, outer) = if m > 0 && steps[m - 1] == 1 { (counts[m - 1], m - 1) } else { (1, m) };
    let run_bytes = run * elem;
    let mut idx = [0usize; MAXD];
    let mut off = base;
    let mut d = 0;
    while d < dst.len() {
        let o = off as usize * elem;
        dst[d..d + run_bytes].copy_from_slice(&src[o..o + run_bytes]);
        d += run_bytes;
        let mut k = outer;
        while k > 0 {
            k -= 1;
            idx[k] += 1;
            off += steps[k];
            if idx[k] < counts[k] {
                break;
            }
            off -= idx[k] as i64 * steps[k];
            idx[k] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_resolve_like_python() {
        // (lo, hi, step, len) -> python's range(len)[lo:hi:step], checked against DALI 2.4.
        let list = |lo, hi, step, len: usize| {
            let (s, c) = resolve_slice(lo, hi, step, len);
            (0..c).map(|k| s + k as i64 * step).collect::<Vec<_>>()
        };
        assert_eq!(list(None, None, 2, 8), [0, 2, 4, 6]);
        assert_eq!(list(None, None, -1, 8), [7, 6, 5, 4, 3, 2, 1, 0]);
        assert_eq!(list(Some(6), Some(1), -2, 8), [6, 4, 2]);
        assert_eq!(list(Some(1), Some(6), -1, 8), Vec::<i64>::new());
        assert_eq!(list(Some(-2), None, -3, 8), [6, 3, 0]);
        assert_eq!(list(Some(10), Some(-10), -1, 8), [7, 6, 5, 4, 3, 2, 1, 0]);
        assert_eq!(list(Some(-10), Some(2), 1, 4), [0, 1]);
        assert_eq!(list(Some(3), Some(1), 1, 4), Vec::<i64>::new());
    }

    #[test]
    fn gather_picks_rows_columns_and_reversed_runs() {
        let src: Vec<u8> = (0..24).collect(); // shape [2, 4, 3]
        let mut dst = vec![0u8; 6];
        // [:, -1] -> [[9,10,11],[21,22,23]]
        gather(&mut dst, &src, &[2, 4, 3], &[AxisSel::Range { start: 0, count: 2, step: 1 }, AxisSel::At(3), AxisSel::Range { start: 0, count: 3, step: 1 }], 1);
        assert_eq!(dst, [9, 10, 11, 21, 22, 23]);
        let mut dst = vec![0u8; 4];
        // [1, ::-2, 0]... -> at 1, rows 3,1, column 0 reversed step
        gather(&mut dst, &src, &[2, 4, 3], &[AxisSel::At(1), AxisSel::Range { start: 3, count: 2, step: -2 }, AxisSel::Range { start: 2, count: 2, step: -2 }], 1);
        assert_eq!(dst, [23, 21, 17, 15]);
    }
}
