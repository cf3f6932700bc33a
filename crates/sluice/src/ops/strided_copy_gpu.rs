//! GPU gather copy shared by `fn.flip` and `fn.transpose`: both only move elements, each
//! output element coming from one input element at an affine offset of its coordinates.
//! The host reduces a sample to at most [`MAX_DIMS`] output dimensions with an input stride
//! each ([`Gather`]); one kernel launch copies the whole batch.

use crate::error::{Error, Result};
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::GpuWorkspace;
use crate::tensor::TensorListGpu;

pub(crate) const SRC: &str = include_str!("strided_copy.cu");

/// Most dimensions a gather may keep after merging (`MAX_DIMS` in the .cu).
pub const MAX_DIMS: usize = 8;

cuda_struct! {
    /// The per-sample descriptor of the strided copy (`struct CopySample` in
    /// strided_copy.cu) and of normalize's output pass (`struct NormSample`).
    pub struct CopySample {
        r#in: u64,
        out: u64,
        count: i64,
        base: i64,
        ndim: i32,
        unused: i32,
        extent: [i64; MAX_DIMS],
        stride: [i64; MAX_DIMS],
    }
}

/// One sample's copy: output element `o`, with coordinates `idx` in `extent`, is input
/// element `base + sum(idx[d] * stride[d])`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gather {
    pub ndim: usize,
    pub base: i64,
    pub extent: [i64; MAX_DIMS],
    pub stride: [i64; MAX_DIMS],
}

impl Gather {
    /// The kernels' per-sample descriptor: source and destination addresses, element
    /// count, then this gather. The strided copy and normalize share it.
    pub fn descriptor(&self, src: u64, dst: u64, count: usize) -> CopySample {
        CopySample { r#in: src, out: dst, count: count as i64, base: self.base, ndim: self.ndim as i32, unused: 0, extent: self.extent, stride: self.stride }
    }

    /// From output dimensions given as (extent, input stride), outermost first. Unit
    /// dimensions are dropped and neighbours that walk the input as one dimension are merged
    /// (stride[d] == stride[d + 1] * extent[d + 1]), so an HWC flip or an HWC <-> CHW
    /// transpose needs 2 or 3 dimensions: fewer divisions per element in the kernel.
    /// `None` when more than [`MAX_DIMS`] dimensions remain.
    pub fn new(base: i64, dims: impl Iterator<Item = (usize, i64)>) -> Option<Gather> {
        let mut g = Gather { base, ..Gather::default() };
        for (extent, stride) in dims {
            if extent == 1 {
                continue;
            }
            let extent = extent as i64;
            if g.ndim > 0 && g.stride[g.ndim - 1] == stride * extent {
                g.extent[g.ndim - 1] *= extent;
                g.stride[g.ndim - 1] = stride;
                continue;
            }
            if g.ndim == MAX_DIMS {
                return None;
            }
            g.extent[g.ndim] = extent;
            g.stride[g.ndim] = stride;
            g.ndim += 1;
        }
        Some(g)
    }

    /// A dense tensor of `shape` reversed along every axis `a` with `flip[a]` (the gather
    /// form of [`crate::ops::flip::kernel::flip_bytes`]). Flip allows at most 8 dimensions,
    /// so this never fails for its inputs; `None` otherwise.
    pub fn flip(shape: &[usize], flip: &[bool]) -> Option<Gather> {
        let strides = dense_strides(shape);
        let base = (0..shape.len()).filter(|&a| flip[a] && shape[a] > 0).map(|a| (shape[a] as i64 - 1) * strides[a]).sum();
        Gather::new(base, (0..shape.len()).map(|a| (shape[a], if flip[a] { -strides[a] } else { strides[a] })))
    }

    /// A dense tensor of `shape` transposed by `perm`: output dimension d is input dimension
    /// perm[d] (the gather form of [`crate::ops::transpose::transpose_bytes`]).
    pub fn transpose(shape: &[usize], perm: &[usize]) -> Option<Gather> {
        let strides = dense_strides(shape);
        Gather::new(0, perm.iter().map(|&p| (shape[p], strides[p])))
    }

    /// The input element output element `o` reads: the kernel's index math, on the host
    /// (the unit tests check it against the cpu kernels).
    pub fn source(&self, o: i64) -> i64 {
        let (mut rem, mut src) = (o, self.base);
        for d in (0..self.ndim).rev() {
            src += rem % self.extent[d] * self.stride[d];
            rem /= self.extent[d];
        }
        src
    }
}

/// Most input dimensions (transpose's limit; merging then has to fit [`MAX_DIMS`]).
const MAX_INPUT_DIMS: usize = 16;

/// Element strides of a dense tensor of `shape` (i64: they become signed strides). A fixed
/// array: this runs per sample per batch, so no allocation.
fn dense_strides(shape: &[usize]) -> [i64; MAX_INPUT_DIMS] {
    assert!(shape.len() <= MAX_INPUT_DIMS, "gather: {} dimensions", shape.len());
    let mut strides = [0i64; MAX_INPUT_DIMS];
    let mut s = 1i64;
    for a in (0..shape.len()).rev() {
        strides[a] = s;
        s *= shape[a] as i64;
    }
    strides
}

/// The launcher: parameter uploads and the per-batch descriptor block, reused across batches.
#[derive(Default)]
pub struct StridedCopy {
    params: ParamUpload,
    samples: Vec<CopySample>,
}

impl StridedCopy {
    /// Queues one launch that writes every sample of `out` from `input` by `gathers[i]`.
    /// Both batches hold elements of the same size; `out`'s sample i has as many elements
    /// as `gathers[i]` covers.
    pub fn run(&mut self, ws: &GpuWorkspace<'_>, op: &str, input: &TensorListGpu, out: &TensorListGpu, gathers: &[Gather]) -> Result<()> {
        debug_assert_eq!(gathers.len(), input.len());
        self.samples.clear();
        for (i, g) in gathers.iter().enumerate() {
            self.samples.push(g.descriptor(input.sample_ptr(i), out.sample_ptr(i), out.numel(i)));
        }
        self.launch(ws, op, input.dtype().size())
    }

    /// Queues one launch that copies whole samples: `jobs` are (source address, destination
    /// address, elements), all elements of `elem_size` bytes (split and merge).
    pub fn copy_samples(&mut self, ws: &GpuWorkspace<'_>, op: &str, elem_size: usize, jobs: &[(u64, u64, usize)]) -> Result<()> {
        self.samples.clear();
        for &(src, dst, count) in jobs {
            let whole = Gather::new(0, std::iter::once((count, 1))).expect("one dimension fits");
            self.samples.push(whole.descriptor(src, dst, count));
        }
        self.launch(ws, op, elem_size)
    }

    /// Launches the kernel over the descriptors in `self.samples`.
    fn launch(&mut self, ws: &GpuWorkspace<'_>, op: &str, elem_size: usize) -> Result<()> {
        let kernel = match elem_size {
            1 => "strided_copy_1",
            2 => "strided_copy_2",
            4 => "strided_copy_4",
            8 => "strided_copy_8",
            s => return Err(Error::Unsupported(format!("{op}: {s}-byte elements are not supported on the GPU"))),
        };
        let max_count = self.samples.iter().map(|s| s.count as usize).max().unwrap_or(0);
        if max_count == 0 {
            return Ok(());
        }
        let samples_ptr = self.params.upload(ws, bytemuck::cast_slice(&self.samples))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "strided_copy", SRC, kernel)?;
        // SAFETY: every descriptor reads inside a live input sample and writes exactly a
        // live output sample, both on this stream.
        unsafe {
            launch_records::<CopySample>(&ws.stream, &f, samples_ptr, self.samples.len(), max_count)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::flip::kernel::flip_bytes;
    use crate::ops::transpose::transpose_bytes;

    /// The output the kernel would write for gather `g` over `src` (1-byte elements).
    fn emulate(g: &Gather, src: &[u8]) -> Vec<u8> {
        (0..src.len() as i64).map(|o| src[g.source(o) as usize]).collect()
    }

    #[test]
    fn flip_gathers_match_the_cpu_kernel() {
        for shape in [vec![3usize, 4, 5], vec![2, 3, 4, 3], vec![2, 1, 3, 5, 2], vec![7], vec![1, 1, 3]] {
            let n: usize = shape.iter().product();
            let src: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            for mask in 0..(1u32 << shape.len()) {
                let flip: Vec<bool> = (0..shape.len()).map(|a| mask >> a & 1 == 1).collect();
                let mut want = vec![0; n];
                flip_bytes(&mut want, &src, &shape, &flip, 1);
                let g = Gather::flip(&shape, &flip).unwrap();
                assert_eq!(emulate(&g, &src), want, "shape {shape:?} flip {flip:?}");
            }
        }
        // HWC horizontal flip keeps 3 dimensions, vertical merges W and C.
        assert_eq!(Gather::flip(&[4, 5, 3], &[false, true, false]).unwrap().ndim, 3);
        assert_eq!(Gather::flip(&[4, 5, 3], &[true, false, false]).unwrap().ndim, 2);
    }

    #[test]
    fn transpose_gathers_match_the_cpu_kernel() {
        use crate::ops::transpose::tests::perms;
        for shape in [vec![2usize, 3, 4], vec![3, 1, 2, 5], vec![2, 3, 2, 2], vec![4, 5], vec![1, 3, 1]] {
            let n: usize = shape.iter().product();
            let src: Vec<u8> = (0..n).map(|i| i as u8).collect();
            for perm in perms(shape.len()) {
                let mut want = vec![0; n];
                transpose_bytes(&mut want, &src, &shape, &perm, 1);
                let g = Gather::transpose(&shape, &perm).unwrap();
                assert_eq!(emulate(&g, &src), want, "{shape:?} {perm:?}");
            }
        }
        // HWC -> CHW stays 2-D after merging H and W.
        assert_eq!(Gather::transpose(&[4, 5, 3], &[2, 0, 1]).unwrap().ndim, 2);
    }

    #[test]
    fn too_many_dimensions_are_refused() {
        // 9 alternating dimensions cannot merge.
        let shape = [2usize; 9];
        let perm = [8, 7, 6, 5, 4, 3, 2, 1, 0];
        assert!(Gather::transpose(&shape, &perm).is_none());
        assert!(Gather::transpose(&[2usize; 9], &[0, 1, 2, 3, 4, 5, 6, 7, 8]).is_some());
    }
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("strided_copy", SRC, &[("CopySample", &CopySample::LAYOUT)]);
    }
}
