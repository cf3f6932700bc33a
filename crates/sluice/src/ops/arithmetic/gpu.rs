//! GPU backend of arithmetic expressions: the cpu backend's typing and broadcasting
//! (`Arithmetic::plan`), then one launch per batch in which every thread evaluates the typed
//! program for its elements (arithmetic.cu) with the cpu evaluator's semantics. Integer
//! results and the basic float operations are bit-exact with the cpu; library functions
//! (pow, exp, sin, ...) may differ in the last bit of the double.
//!
//! Broadcasting: per sample, axes of extent 1 are dropped and neighbouring axes merged
//! wherever every operand reads them contiguously, so the common cases (same shapes, a
//! scalar, a per-channel vector against HWC) cost one or two index steps per element.

use sluice_cuda::PushKernelArg;

use super::expr::{self, Kind, Program, MAX_NDIM};
use super::{Arithmetic, Planned};
use crate::error::{Error, Result};
use crate::ops::cast::gpu::type_code;
use crate::ops::gpu_params::{cuda_struct, per_sample_launches, push, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::{BatchMeta, DType, TensorListGpu};

pub(super) const SRC: &str = include_str!("arithmetic.cu");

/// Most nodes (inputs, constants, operations) a program may have on the GPU (`MAX_NODES`
/// in arithmetic.cu: each thread keeps one word per node).
const MAX_NODES: usize = 128;

cuda_struct! {
    /// One node of the program (`struct Node` in arithmetic.cu).
    pub(super) struct GpuNode {
        kind: i32,
        op: i32,
        dtype: i32,
        compute: i32,
        ch: [i32; 3],
        input: i32,
        bits: u64,
    }
}

/// How an operand is read (`enum Mode` in arithmetic.cu).
const DENSE: i64 = 0;
const SCALAR: i64 = 1;
const STRIDED: i64 = 2;

pub(super) struct ArithmeticGpu {
    arith: Arithmetic,
    params: ParamUpload,
    /// Nodes, sample records, then one flag per sample; reused across batches.
    block: Vec<u8>,
}

impl ArithmeticGpu {
    pub(super) fn new(ctx: &OpContext) -> Result<ArithmeticGpu> {
        Ok(ArithmeticGpu { arith: Arithmetic::new(ctx)?, params: ParamUpload::default(), block: Vec::new() })
    }
}

/// The program as arithmetic.cu reads it.
fn gpu_nodes(prog: &Program) -> Vec<GpuNode> {
    let code = |t: DType| type_code(t).expect("every type has a code");
    prog.nodes
        .iter()
        .map(|n| {
            let mut g = GpuNode { kind: 0, op: 0, dtype: code(n.dtype), compute: code(n.compute), ch: [-1; 3], input: 0, bits: 0 };
            match n.kind {
                Kind::Input(j) => g.input = j as i32,
                Kind::Const(b) => {
                    g.kind = 1;
                    g.bits = b;
                }
                Kind::Call(op, ch) => {
                    g.kind = 2;
                    g.op = op as i32;
                    for (k, c) in ch.iter().enumerate().take(op.arity()) {
                        g.ch[k] = *c as i32;
                    }
                }
            }
            g
        })
        .collect()
}

/// One sample's iteration space after dropping extent-1 axes and merging axes every operand
/// reads contiguously: the extents, and per operand its element strides on them.
struct Collapsed {
    shape: Vec<usize>,
    strides: Vec<[usize; MAX_NDIM]>,
}

fn collapse(out_shape: &[usize], in_shapes: &[&[usize]]) -> Collapsed {
    let full: Vec<[usize; MAX_NDIM]> = in_shapes.iter().map(|s| expr::strides_for(s, out_shape)).collect();
    let mut shape: Vec<usize> = Vec::with_capacity(out_shape.len());
    let mut strides: Vec<[usize; MAX_NDIM]> = vec![[0; MAX_NDIM]; in_shapes.len()];
    for (k, &extent) in out_shape.iter().enumerate() {
        if extent == 1 {
            continue;
        }
        let d = shape.len();
        // Merge into the previous kept axis when, for every operand, stepping that axis
        // equals stepping this one `extent` times.
        let mergeable = d > 0 && full.iter().zip(&strides).all(|(f, s)| s[d - 1] == f[k] * extent);
        if mergeable {
            shape[d - 1] *= extent;
            for (f, s) in full.iter().zip(strides.iter_mut()) {
                s[d - 1] = f[k];
            }
        } else {
            shape.push(extent);
            for (f, s) in full.iter().zip(strides.iter_mut()) {
                s[d] = f[k];
            }
        }
    }
    Collapsed { shape, strides }
}

impl GpuOperator for ArithmeticGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let inputs = &ws.gpu_inputs;
        let metas: Vec<&BatchMeta> = inputs.iter().map(|t| t.meta()).collect();
        let Planned { prog, ndim, shapes, meta } = self.arith.plan(ws.iteration, &metas, ws.batch_size)?;
        let name = &self.arith.ctx.display_name;
        if prog.nodes.len() > MAX_NODES {
            return Err(Error::Unsupported(format!(
                "{name}: the expression has {} terms; the GPU evaluates up to {MAX_NODES} (split it, or use device=\"cpu\")",
                prog.nodes.len()
            )));
        }
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let n = out.len();
        let max_count = (0..n).map(|i| out.numel(i)).max().unwrap_or(0);
        if max_count == 0 {
            return Ok(vec![out]);
        }

        // Every sample's space, collapsed; the launch uses the largest dimension count.
        let collapsed: Vec<Collapsed> = (0..n)
            .map(|i| {
                let in_shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape(i)).collect();
                collapse(&shapes[i * ndim..(i + 1) * ndim], &in_shapes)
            })
            .collect();
        let dims = collapsed.iter().map(|c| c.shape.len()).max().unwrap_or(0).max(1);

        // Block: nodes, then n records, then n flags (zero).
        let nodes = gpu_nodes(&prog);
        self.block.clear();
        self.block.extend_from_slice(bytemuck::cast_slice(&nodes));
        let records_at = self.block.len();
        for (i, c) in collapsed.iter().enumerate() {
            push(&mut self.block, out.sample_ptr(i));
            push(&mut self.block, out.numel(i) as i64);
            // Collapsed axes sit at the right; the left is padded with extent 1, stride 0.
            let pad = dims - c.shape.len();
            for d in 0..dims {
                push(&mut self.block, if d < pad { 1 } else { c.shape[d - pad] as i64 });
            }
            for (j, t) in inputs.iter().enumerate() {
                let mode = if t.numel(i) == 1 {
                    SCALAR
                } else if t.numel(i) == out.numel(i) {
                    DENSE // same element count after broadcasting: the same shape
                } else {
                    STRIDED
                };
                push(&mut self.block, t.sample_ptr(i));
                push(&mut self.block, mode);
                for d in 0..dims {
                    push(&mut self.block, if d < pad { 0 } else { c.strides[j][d - pad] as i64 });
                }
            }
        }
        let record_bytes = ((self.block.len() - records_at) / n) as i64;
        let flags_at = self.block.len();
        self.block.resize(flags_at + 4 * n, 0);

        let base = self.params.upload(ws, &self.block)?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "arithmetic", SRC, "arithmetic")?;
        let (n_nodes, n_inputs, dims, out_type) = (nodes.len() as i32, inputs.len() as i32, dims as i32, type_code(out.dtype()).expect("coded"));
        for (first, cfg) in per_sample_launches(max_count, n) {
            // The kernel indexes the records and the division flags by grid row.
            let nodes_ptr = base;
            let samples_ptr = base + records_at as u64 + first as u64 * record_bytes as u64;
            let flags_ptr = base + (flags_at + 4 * first) as u64;
            // SAFETY: records point into the inputs and `out`, alive on this stream; every
            // operand's strides (or its dense / scalar mode) stay inside its sample (broadcast
            // checked by `plan`); each thread writes its own elements of its sample.
            unsafe {
                ws.stream
                    .launch_builder(&f)
                    .arg(&nodes_ptr)
                    .arg(&n_nodes)
                    .arg(&samples_ptr)
                    .arg(&record_bytes)
                    .arg(&n_inputs)
                    .arg(&dims)
                    .arg(&out_type)
                    .arg(&flags_ptr)
                    .launch(cfg)
                    .map_err(sluice_cuda::CudaError::from)?;
            }
        }
        if prog.divides_integers() {
            // Only expressions with an integer `//` or `%` wait for their result here.
            let mut flags = vec![0u8; 4 * n];
            self.params.read_back_last(flags_at, &mut flags)?;
            let flags: &[i32] = bytemuck::cast_slice(&flags);
            if let Some(i) = flags.iter().position(|&f| f != 0) {
                return Err(self.arith.division_by_zero(ws.iteration, i, out.source_info(i)));
            }
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::arithmetic::expr::Op;

    #[test]
    fn kernel_op_codes_follow_the_rust_enum() {
        let start = SRC.find("enum Op {").expect("enum Op in arithmetic.cu") + "enum Op {".len();
        let body = &SRC[start..start + SRC[start..].find('}').unwrap()];
        let names: Vec<&str> = body.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        let ours: Vec<String> = Op::ALL.iter().map(|op| format!("{op:?}")).collect();
        assert_eq!(names, ours);
        for (k, op) in Op::ALL.iter().enumerate() {
            assert_eq!(*op as usize, k, "{op:?}");
        }
    }

    #[test]
    fn collapse_merges_contiguous_axes_and_keeps_broadcasts() {
        // Same shapes: one axis.
        let c = collapse(&[4, 5, 3], &[&[4, 5, 3], &[4, 5, 3]]);
        assert_eq!(c.shape, vec![60]);
        assert_eq!((c.strides[0][0], c.strides[1][0]), (1, 1));
        // A per-channel vector against HWC: HW merged, channels apart.
        let c = collapse(&[4, 5, 3], &[&[4, 5, 3], &[3]]);
        assert_eq!(c.shape, vec![20, 3]);
        assert_eq!(&c.strides[0][..2], &[3, 1]);
        assert_eq!(&c.strides[1][..2], &[0, 1]);
        // A column against a matrix; extent-1 axes dropped.
        let c = collapse(&[1, 4, 6], &[&[1, 4, 6], &[4, 1]]);
        assert_eq!(c.shape, vec![4, 6]);
        assert_eq!(&c.strides[1][..2], &[1, 0]);
        // Scalars only.
        let c = collapse(&[1, 1], &[&[1, 1]]);
        assert!(c.shape.is_empty());
    }
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("arithmetic", SRC, &[("Node", &GpuNode::LAYOUT)]);
    }
}
