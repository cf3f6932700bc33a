//! GPU backend of `fn.decoders.inflate`: the cpu twin's plan (checks, chunk table, shapes,
//! layout), one descriptor per chunk uploaded with room for its status, one launch of
//! `inflate.cu` per 65535 chunks (a warp each), then the statuses read back (one wait for the
//! stream) and turned into the cpu backend's errors.


use super::lz4::{Fault, FaultKind};
use super::{Chunk, Inflate, Plan};
use crate::error::{Error, Result};
use crate::ops::gpu_params::{block_per_record, cuda_struct, launch_records_in_rows, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::TensorListGpu;

pub(super) const SRC: &str = include_str!("inflate.cu");

/// Threads per chunk: one warp (inflate.cu).
const THREADS: u32 = 32;

cuda_struct! {
    /// One chunk (`struct InflateChunk` in inflate.cu).
    pub(super) struct InflateChunk {
        r#in: u64,
        out: u64,
        in_size: u64,
        out_size: u64,
        status: u64,
    }
}

cuda_struct! {
    /// How a chunk decoded (`struct InflateStatus` in inflate.cu), written by the kernel.
    pub(super) struct InflateStatus {
        decoded: u64,
        fault: u64,
        at: u64,
        value: u64,
    }
}

const STATUS_BYTES: usize = std::mem::size_of::<InflateStatus>();
const DESC_BYTES: usize = std::mem::size_of::<InflateChunk>();

impl InflateStatus {
    /// The outcome as the cpu decoder gives it (`lz4::decode`); `None` for a fault code the
    /// kernel does not write.
    pub(super) fn outcome(&self) -> Option<std::result::Result<u64, Fault>> {
        if self.fault == 0 {
            return Some(Ok(self.decoded));
        }
        let kind = FaultKind::from_code(self.fault)?;
        Some(Err(Fault { kind, at: self.at, value: self.value, decoded: self.decoded }))
    }
}

/// The descriptors of `chunks`: chunk `k` reads from `input(sample) + from` and writes
/// `chunk_bytes[sample]` bytes at `output(sample)` plus its place in the sample, and its
/// status at `status + k * 32`.
pub(super) fn describe(chunks: &[Chunk], chunk_bytes: &[usize], input: impl Fn(usize) -> u64, output: impl Fn(usize) -> u64, status: u64) -> Vec<InflateChunk> {
    chunks
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let bytes = chunk_bytes[c.sample];
            InflateChunk {
                r#in: input(c.sample) + c.from as u64,
                out: output(c.sample) + (c.index * bytes) as u64,
                in_size: c.len as u64,
                out_size: bytes as u64,
                status: status + (k * STATUS_BYTES) as u64,
            }
        })
        .collect()
}

pub(super) struct InflateGpu {
    inflate: Inflate,
    params: ParamUpload,
    statuses: Vec<u8>,
}

impl InflateGpu {
    pub(super) fn new(inflate: Inflate) -> InflateGpu {
        InflateGpu { inflate, params: ParamUpload::default(), statuses: Vec::new() }
    }
}

impl GpuOperator for InflateGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let Plan { meta, chunks, chunk_bytes, .. } = self.inflate.plan(&ws.host_view(), input.meta())?;
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let n = chunks.len();
        if n == 0 {
            return Ok(vec![out]);
        }
        // The block: the descriptors, then the statuses (zeroed: the kernel writes each).
        let statuses_at = n * DESC_BYTES;
        let base = self.params.upload_with(ws, statuses_at + n * STATUS_BYTES, |block, base| {
            let descs = describe(&chunks, &chunk_bytes, |i| input.sample_ptr(i), |i| out.sample_ptr(i), base + statuses_at as u64);
            block[..statuses_at].copy_from_slice(bytemuck::cast_slice(&descs));
            block[statuses_at..].fill(0);
            Ok(())
        })?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "inflate", SRC, "inflate_lz4")?;
        // SAFETY: each descriptor points at its chunk's bytes in `input` and its place in
        // `out` (alive, ordered on this stream; the plan checked the chunks lie inside the
        // samples and sized the outputs), and at its status in the uploaded block; the
        // kernel reads `in_size` and writes at most `out_size` bytes.
        unsafe { launch_records_in_rows::<InflateChunk>(ws.stream, &f, base, n, |rows| block_per_record(THREADS, rows))? };
        self.statuses.resize(n * STATUS_BYTES, 0);
        self.params.read_back_last(statuses_at, &mut self.statuses)?;
        for (c, status) in chunks.iter().zip(self.statuses.chunks_exact(STATUS_BYTES)) {
            let status: InflateStatus = bytemuck::pod_read_unaligned(status);
            let outcome = status.outcome().ok_or_else(|| Error::Cuda(format!("{}: the kernel wrote an unknown status {status:?} for chunk {} of sample {}", self.inflate.op(), c.index, c.sample)))?;
            self.inflate.check_chunk(ws.iteration, input.meta(), c, chunk_bytes[c.sample], outcome)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use super::super::lz4::encode::{compress, sequence};
    use super::super::lz4::{self, FaultKind};
    use super::super::tests::{bytes, ints, op, run};
    use super::*;
    use crate::ops::gpu_params::PerSampleKernels;
    use crate::ops::{testing, ArgValue};
    use crate::tensor::DType;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("inflate", SRC, &[("InflateChunk", &InflateChunk::LAYOUT), ("InflateStatus", &InflateStatus::LAYOUT)]);
    }

    fn harness() -> &'static PerSampleKernels {
        static KERNELS: OnceLock<PerSampleKernels> = OnceLock::new();
        KERNELS.get_or_init(|| PerSampleKernels::build("inflate", SRC, "InflateChunk", &["in"], &["out", "status"], &["inflate_lz4"]))
    }

    fn status_of(outcome: std::result::Result<u64, Fault>) -> InflateStatus {
        match outcome {
            Ok(decoded) => InflateStatus { decoded, fault: 0, at: 0, value: 0 },
            Err(f) => InflateStatus { decoded: f.decoded, fault: f.kind as u64, at: f.at, value: f.value },
        }
    }

    /// Runs the kernel on the host over `blocks` (a compressed chunk and its output's size
    /// each) and checks every chunk's status against the cpu decoder's outcome, and its
    /// output where it decoded: the data, then zeros.
    fn check(what: &str, blocks: &[(Vec<u8>, usize)]) {
        let mut input = Vec::new();
        let mut descs = Vec::new();
        let mut out_len = 0;
        for (block, cap) in blocks {
            descs.push(InflateChunk { r#in: input.len() as u64, out: out_len as u64, in_size: block.len() as u64, out_size: *cap as u64, status: 0 });
            input.extend_from_slice(block);
            out_len += cap;
        }
        let statuses_at = out_len.next_multiple_of(8);
        for (k, d) in descs.iter_mut().enumerate() {
            d.status = (statuses_at + k * STATUS_BYTES) as u64;
        }
        let got = harness().run_blocks("inflate_lz4", bytemuck::cast_slice(&descs), descs.len(), &input, statuses_at + blocks.len() * STATUS_BYTES);
        for (k, ((block, cap), d)) in blocks.iter().zip(&descs).enumerate() {
            let mut want = vec![0u8; *cap];
            let outcome = lz4::decode(block, &mut want);
            let status: InflateStatus = bytemuck::pod_read_unaligned(&got[d.status as usize..d.status as usize + STATUS_BYTES]);
            assert_eq!(format!("{status:?}"), format!("{:?}", status_of(outcome)), "{what}: chunk {k}");
            assert_eq!(status.outcome(), Some(outcome), "{what}: chunk {k}");
            if outcome.is_ok() {
                let at = d.out as usize;
                assert!(got[at..at + cap] == want[..], "{what}: chunk {k} of {} bytes into {cap}", block.len());
            }
        }
    }

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed.wrapping_add(0x9e3779b97f4a7c15);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u8
            })
            .collect()
    }

    #[test]
    fn the_kernel_run_on_the_host_equals_the_cpu_decoder() {
        let text: Vec<u8> = noise(3000, 1).iter().map(|b| b"sluice inflates lz4 blocks on the gpu "[(*b % 38) as usize]).collect();
        let mut data: Vec<Vec<u8>> = vec![vec![], vec![5], noise(31, 2), noise(32, 3), noise(33, 4), noise(1000, 5), vec![0; 4000], b"abc".repeat(700), text];
        // Runs of a few values: many short matches.
        data.push(noise(2000, 6).iter().map(|b| b % 3).collect());
        let mut blocks = Vec::new();
        for d in &data {
            let c = compress(d);
            // Output as large as the data, larger (zeros after it) and smaller (the size is
            // still counted; only the output's bytes are written).
            for cap in [d.len(), d.len() + 37, d.len() / 2] {
                blocks.push((c.clone(), cap));
            }
        }
        check("compressed data", &blocks);
    }

    #[test]
    fn overlapping_matches_on_the_host_equal_the_cpu() {
        let mut blocks = Vec::new();
        for offset in 1..=40usize {
            for len in [4, 7, 31, 32, 33, 64, 65, 100, 300] {
                let mut b = Vec::new();
                sequence(&mut b, &noise(offset, offset as u64), Some((offset as u16, len)));
                // A second match reaching into the first one's bytes.
                sequence(&mut b, &noise(3, len as u64), Some(((offset + 2) as u16, len + 1)));
                sequence(&mut b, b"end", None);
                let size = offset + len + 3 + len + 1 + 3;
                blocks.push((b, size));
            }
        }
        check("overlapping matches", &blocks);
    }

    #[test]
    fn corrupt_blocks_on_the_host_fault_as_the_cpu() {
        let mut blocks: Vec<(Vec<u8>, usize)> = vec![
            (vec![0x40, 1, 2, 3], 8),
            (vec![0xf0, 255], 8),
            (vec![0xf0], 8),
            (vec![0x20, 1, 2, 1], 8),
            (vec![0x20, 1, 2, 0, 0, 0x00], 8),
            (vec![0x20, 1, 2, 3, 0, 0x00], 8),
            (vec![0x2f, 1, 2, 2, 0, 255], 8),
            (vec![0x20, 1, 2, 2, 0], 8),
        ];
        let kinds: Vec<u64> = blocks.iter().map(|(b, cap)| lz4::decode(b, &mut vec![0; *cap]).unwrap_err().kind as u64).collect();
        assert_eq!(kinds, [3, 2, 2, 4, 5, 6, 7, 1]);
        assert_eq!(FaultKind::ALL.len(), 7);
        // Cut short anywhere, and bytes overwritten.
        let data: Vec<u8> = noise(600, 7).iter().map(|b| b % 4).collect();
        let good = compress(&data);
        for cut in (1..good.len()).step_by(3) {
            blocks.push((good[..cut].to_vec(), data.len()));
        }
        for (k, b) in noise(60, 8).iter().enumerate() {
            let mut bad = good.clone();
            bad[(k * 37) % good.len()] = *b;
            blocks.push((bad, data.len()));
        }
        check("corrupt blocks", &blocks);
    }

    #[test]
    fn the_gpu_plan_and_kernel_equal_the_cpu_backend() {
        // Samples of several chunks (an empty one among them), oversized chunk shapes.
        let frames: Vec<Vec<u8>> = (0..5u64).map(|f| if f == 3 { vec![] } else { noise(30 + 9 * f as usize, f).iter().map(|b| b % 6).collect() }).collect();
        let blocks: Vec<Vec<u8>> = frames.iter().map(|f| compress(f)).collect();
        let sizes: Vec<i32> = blocks.iter().map(|b| b.len() as i32).collect();
        let x = bytes(&[blocks.concat(), blocks[..2].concat(), blocks[3..].concat()]);
        let chunk_sizes = ints(&[sizes.clone(), sizes[..2].to_vec(), sizes[3..].to_vec()]);
        for dtype in [DType::U8, DType::I16, DType::F32] {
            let args = vec![("shape", ArgValue::IntList(vec![72 / dtype.size() as i64])), ("dtype", ArgValue::Int(dtype as i64))];
            let mut o = op(args, &["chunk_sizes"]).unwrap();
            let want = run(&mut o, &x, &[("chunk_sizes", &chunk_sizes)]).unwrap();
            let plan = testing::with_args(&[("chunk_sizes", &chunk_sizes)], x.len(), |ws| o.plan(ws, x.meta())).unwrap();
            let statuses_at = want.total_bytes().next_multiple_of(8);
            let descs = describe(&plan.chunks, &plan.chunk_bytes, |i| x.offset(i) as u64, |i| want.offset(i) as u64, statuses_at as u64);
            let got = harness().run_blocks("inflate_lz4", bytemuck::cast_slice(&descs), descs.len(), &x.buffer().as_slice()[..x.total_bytes()], statuses_at + descs.len() * STATUS_BYTES);
            for i in 0..x.len() {
                assert_eq!(&got[want.byte_range(i)], want.bytes(i), "{dtype}: sample {i}");
            }
            for (k, c) in plan.chunks.iter().enumerate() {
                let status: InflateStatus = bytemuck::pod_read_unaligned(&got[statuses_at + k * STATUS_BYTES..][..STATUS_BYTES]);
                assert_eq!(status.outcome(), Some(Ok(frames[c.index + if c.sample == 2 { 3 } else { 0 }].len() as u64)), "{dtype}: chunk {k}");
            }
        }
    }
}
