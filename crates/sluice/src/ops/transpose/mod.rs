//! `fn.transpose`: permutes dimensions (`out.shape[i] = in.shape[perm[i]]`) of any element
//! type by moving element bytes. HWC <-> CHW (perm [2, 0, 1] / [1, 2, 0] on 3-D data) has a
//! dedicated loop; everything else goes through a strided odometer. Matches DALI 2.4.

mod gpu;

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, Layout, TensorList};

/// Most dimensions a transposed tensor may have.
pub const MAX_NDIM: usize = 16;

/// Schema and backends.
pub static TRANSPOSE: OpDef = OpDef {
    schema: OpSchema {
        name: "Transpose",
        doc: "Transposes the tensors by reordering the dimensions based on the `perm` parameter: output dimension i is input dimension perm[i].",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("perm", T::IntList, D::Optional, "Permutation of the dimensions of the input, for example [2, 0, 1]. When not given, the dimensions are reversed."),
            arg("transpose_layout", T::Bool, D::Bool(true), "When True, the output layout is the input layout permuted by `perm`; otherwise it is kept as is. Ignored when `output_layout` is set."),
            arg("output_layout", T::Str, D::Optional, "Explicitly sets the output layout; overrides `transpose_layout`."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Transpose::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _dev| Ok(Box::new(gpu::TransposeGpu::new(ctx)?))),
};

/// Argument checks and output planning, shared by the cpu and gpu backends.
struct Transpose {
    ctx: OpContext,
    /// The permutation; `None`: the input's dimensions reversed (DALI 2.4's default).
    perm: Option<Vec<usize>>,
    output_layout: Option<Layout>,
}

impl Transpose {
    fn new(ctx: &OpContext) -> Result<Transpose> {
        let name = &ctx.display_name;
        let given = ctx.args.has("perm");
        let raw: &[i64] = if given { ctx.args.ints("perm") } else { &[] };
        let n = raw.len();
        let mut seen = vec![false; n];
        let mut perm = Vec::with_capacity(n);
        for &p in raw {
            let ok = p >= 0 && (p as usize) < n && !seen[p as usize];
            if !ok {
                return Err(Error::arg(name, "perm", format!("{raw:?} is not a permutation of [0, ..., {}]", n as i64 - 1)));
            }
            seen[p as usize] = true;
            perm.push(p as usize);
        }
        if n > MAX_NDIM {
            return Err(Error::arg(name, "perm", format!("at most {MAX_NDIM} dimensions are supported, got {n}")));
        }
        let output_layout = match ctx.args.opt_str("output_layout") {
            Some(s) => Some(Layout::new(s).map_err(|m| Error::arg(name, "output_layout", m))?),
            None => None,
        };
        if let Some(l) = &output_layout {
            if given && !l.is_empty() && l.ndim() != n {
                return Err(Error::arg(name, "output_layout", format!("'{l}' does not have {n} dimensions")));
            }
        }
        Ok(Transpose { ctx: ctx.clone(), perm: given.then_some(perm), output_layout })
    }
}

impl Transpose {
    /// The permutation for inputs of `ndim` dimensions.
    fn perm_for(&self, ndim: usize) -> Vec<usize> {
        self.perm.clone().unwrap_or_else(|| (0..ndim).rev().collect())
    }

    /// The output of a batch of `input`: shapes permuted, layout per `transpose_layout` /
    /// `output_layout`; an error when `perm` does not fit the input's dimensions.
    fn output_meta(&self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<BatchMeta> {
        let ndim = input.ndim();
        let perm = &self.perm_for(ndim);
        if let Some(l) = self.output_layout.as_ref().filter(|l| !l.is_empty() && l.ndim() != ndim) {
            return Err(Error::arg(&self.ctx.display_name, "output_layout", format!("'{l}' does not have {ndim} dimensions")));
        }
        if ndim != perm.len() {
            return Err(Error::data(
                self.ctx.at(ws.iteration, 0, input.source_info(0)),
                format!("argument 'perm' {perm:?} has {} entries but the input has {ndim} dimensions", perm.len()),
            ));
        }
        let n = input.len();
        let mut shapes = vec![0usize; n * ndim];
        for i in 0..n {
            let s = input.shape(i);
            for (d, &p) in perm.iter().enumerate() {
                shapes[i * ndim + d] = s[p];
            }
        }
        let mut meta = BatchMeta::new(input.dtype(), ndim, (0..n).map(|i| &shapes[i * ndim..(i + 1) * ndim]));
        let layout = match &self.output_layout {
            Some(l) => l.clone(),
            None if self.ctx.args.bool("transpose_layout") && !input.layout().is_empty() => {
                let src = input.layout().as_str().as_bytes();
                let s: String = perm.iter().map(|&p| src[p] as char).collect();
                Layout::from(s.as_str())
            }
            None => input.layout().clone(),
        };
        meta.set_layout(layout);
        meta.inherit_source_info(input);
        Ok(meta)
    }
}

impl Operator for Transpose {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let mut out = TensorList::for_overwrite(self.output_meta(ws, input.meta())?); // every element is written
        let (perm, elem) = (&self.perm_for(input.ndim()), input.dtype().size());
        for_each_sample(ws.pool, &mut out, |i, dst| {
            transpose_bytes(dst, input.bytes(i), input.shape(i), perm, elem);
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// Writes `src` (dense, `shape`, `elem`-byte elements) transposed by `perm` to `dst`.
pub fn transpose_bytes(dst: &mut [u8], src: &[u8], shape: &[usize], perm: &[usize], elem: usize) {
    let ndim = shape.len();
    assert!(ndim == perm.len() && ndim <= MAX_NDIM, "transpose: bad permutation");
    assert_eq!(dst.len(), src.len());
    assert_eq!(src.len(), shape.iter().product::<usize>() * elem);
    if src.is_empty() {
        return;
    }
    // Drop unit dimensions: they do not move data.
    let mut sh = [0usize; MAX_NDIM];
    let mut pm = [0usize; MAX_NDIM];
    let mut map = [usize::MAX; MAX_NDIM];
    let mut k = 0;
    for a in 0..ndim {
        if shape[a] != 1 {
            map[a] = k;
            sh[k] = shape[a];
            k += 1;
        }
    }
    let mut j = 0;
    for &p in perm {
        if map[p] != usize::MAX {
            pm[j] = map[p];
            j += 1;
        }
    }
    let (shape, perm) = (&sh[..k], &pm[..k]);
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        dst.copy_from_slice(src);
        return;
    }
    match elem {
        1 => tr::<1>(dst, src, shape, perm),
        2 => tr::<2>(dst, src, shape, perm),
        4 => tr::<4>(dst, src, shape, perm),
        8 => tr::<8>(dst, src, shape, perm),
        _ => unreachable!("element sizes are 1, 2, 4 or 8"),
    }
}

fn tr<const N: usize>(dst: &mut [u8], src: &[u8], shape: &[usize], perm: &[usize]) {
    let ndim = shape.len();
    // Element strides of the input.
    let mut in_stride = [0usize; MAX_NDIM];
    let mut s = 1;
    for a in (0..ndim).rev() {
        in_stride[a] = s;
        s *= shape[a];
    }
    let load = |e: usize| -> [u8; N] { src[e * N..e * N + N].try_into().unwrap() };
    // Fast path: HWC -> CHW and CHW -> HWC (after dropping unit dims, any 2-D swap too).
    if ndim == 3 && perm == [2, 0, 1] {
        let (h, w, c) = (shape[0], shape[1], shape[2]);
        let plane = h * w;
        for (p, px) in src.chunks_exact(c * N).enumerate() {
            for ch in 0..c {
                let o = (ch * plane + p) * N;
                dst[o..o + N].copy_from_slice(&px[ch * N..ch * N + N]);
            }
        }
        return;
    }
    if ndim == 3 && perm == [1, 2, 0] {
        let (c, h, w) = (shape[0], shape[1], shape[2]);
        let plane = h * w;
        for (p, px) in dst.chunks_exact_mut(c * N).enumerate() {
            for ch in 0..c {
                px[ch * N..ch * N + N].copy_from_slice(&load(ch * plane + p));
            }
        }
        return;
    }
    // Generic: walk the output in order; the innermost output axis strides the input by
    // in_stride[perm[last]].
    let last = ndim - 1;
    let inner = shape[perm[last]];
    let inner_stride = in_stride[perm[last]];
    let mut idx = [0usize; MAX_NDIM];
    let mut off = 0usize; // input element offset of the current output row
    let rows = dst.len() / N / inner;
    for r in 0..rows {
        let row = &mut dst[r * inner * N..(r + 1) * inner * N];
        let mut e = off;
        for d in row.chunks_exact_mut(N) {
            d.copy_from_slice(&load(e));
            e += inner_stride;
        }
        for a in (0..last).rev() {
            idx[a] += 1;
            off += in_stride[perm[a]];
            if idx[a] < shape[perm[a]] {
                break;
            }
            off -= idx[a] * in_stride[perm[a]];
            idx[a] = 0;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn reference(src: &[u8], shape: &[usize], perm: &[usize]) -> Vec<u8> {
        let n: usize = shape.iter().product();
        let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let mut out = vec![0; n];
        for lin in 0..n {
            let mut rem = lin;
            let mut oi = vec![0; shape.len()];
            for a in (0..shape.len()).rev() {
                oi[a] = rem % out_shape[a];
                rem /= out_shape[a];
            }
            let mut ii = vec![0; shape.len()];
            for (a, &p) in perm.iter().enumerate() {
                ii[p] = oi[a];
            }
            let s = ii.iter().zip(shape).fold(0, |acc, (&i, &e)| acc * e + i);
            out[lin] = src[s];
        }
        out
    }

    /// Every permutation of 0..n (also used by the GPU gather tests).
    pub(crate) fn perms(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![vec![]];
        }
        let mut out = vec![];
        for p in perms(n - 1) {
            for pos in 0..=p.len() {
                let mut q = p.clone();
                q.insert(pos, n - 1);
                out.push(q);
            }
        }
        out
    }

    #[test]
    fn every_permutation_matches_the_reference() {
        for shape in [vec![2usize, 3, 4], vec![3, 1, 2, 5], vec![2, 3, 2, 2], vec![4, 5], vec![1, 3, 1]] {
            let n: usize = shape.iter().product();
            let src: Vec<u8> = (0..n).map(|i| i as u8).collect();
            for perm in perms(shape.len()) {
                let mut dst = vec![0; n];
                transpose_bytes(&mut dst, &src, &shape, &perm, 1);
                assert_eq!(dst, reference(&src, &shape, &perm), "{shape:?} {perm:?}");
            }
        }
    }
}
