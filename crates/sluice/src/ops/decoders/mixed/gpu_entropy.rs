//! The mixed decoders' CPU share with the Huffman decoding on the GPU too: a worker only
//! checks the file and copies its scan, stuffing removed, with the derived tables in front
//! (`sluice_codecs::scan::prepare_scan`, memcpy speed); one launch per batch
//! (jpeg_entropy.cu, a CUDA block per image, self-synchronising chunks) writes the
//! coefficients `gpu_idct` finishes. The pixels equal libjpeg-turbo's bit for bit, as on
//! the coefficient path, and the workers are free for the files nothing on the GPU decodes.
//!
//! Eligible: single-scan baseline JPEGs without restart markers, vetted as for the hardware
//! engine (`jpeg_suits_hardware_decoder`: complete, YCbCr, a sampling `gpu_idct` handles),
//! decoded to RGB with the accurate IDCT, upright. Windows decode at full scale (a DCT-scaled
//! decode would need libjpeg's reduced IDCTs on the GPU). `SLUICE_GPU_ENTROPY=0` turns the
//! path off (the coefficient path takes these files again), for measurements.

use sluice_codecs::scan::{scan_room, ScanHeader};
use sluice_codecs::{CoefLayout, Roi};
use sluice_cuda::{DeviceBuffer, PushKernelArg};

use super::gpu_idct::{plane_bytes, CoefSample, GpuIdct};
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, ParamUpload};
use crate::ops::GpuWorkspace;
use crate::tensor::TensorListGpu;

pub(super) const SRC: &str = include_str!("jpeg_entropy.cu");

/// The most threads per image (the kernel's THREADS), so the most chunks. A group launches
/// as few as its largest image needs (a power of two, at least a warp): ImageNet-sized
/// files have ~80 chunks, and idle threads would still hold the SM's registers and slots,
/// which a training step running beside the pipeline wants.
const THREADS: u32 = 1024;

/// Chunk length and count for a scan of `bits` bits.
fn chunking(bits: u64) -> (u64, u64) {
    let chunk = bits.div_ceil(u64::from(THREADS)).max(MIN_CHUNK_BITS);
    (chunk, bits.div_ceil(chunk).max(1))
}

/// Chunks are at least this long, so a guess made SYNC_LEAD (4,096) bits early has almost
/// always fallen into step by the chunk's start (measured in sluice-codecs' scan tests).
const MIN_CHUNK_BITS: u64 = 8192;

/// Bytes in front of each staged scan: its header.
pub(super) const HEADER_BYTES: usize = std::mem::size_of::<ScanHeader>();

/// Whether the path is on (see the module docs).
pub(super) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SLUICE_GPU_ENTROPY").is_none_or(|v| v != "0"))
}

/// Staging a file of `file_len` bytes takes (a multiple of 128, as every staged sample).
pub(super) fn staged_len(file_len: usize) -> usize {
    (HEADER_BYTES + scan_room(file_len)).next_multiple_of(128)
}

/// Scans larger than this stay on the CPU (the kernel counts bits in 32 bits).
pub(super) const MAX_FILE_BYTES: usize = 256 << 20;

/// One sample whose scan is staged.
pub(super) struct ScanSample {
    pub index: usize,
    pub window: Roi,
    pub layout: CoefLayout,
    pub staged_at: usize,
    pub quant: [[u16; 64]; 3],
    pub data_bytes: u32,
    pub total_blocks: u64,
}

/// The per-batch job descriptors and their upload ring.
#[derive(Default)]
pub(super) struct GpuEntropy {
    params: ParamUpload,
    jobs: Vec<Job>,
}

/// Coefficient bytes decoded per group: the groups of a batch take turns with one buffer of
/// coefficients and one of IDCT planes, so a batch of large photos (~1 GiB of coefficients
/// for full-scale windows) holds a fraction of that at a time.
const GROUP_COEF_BYTES: usize = 256 << 20;

cuda_struct! {
    /// The blocks of one component that a window keeps (`struct Window` in jpeg_entropy.cu).
    pub(super) struct Window {
        bx0: i32,
        by0: i32,
        bw: i32,
        bh: i32,
        /// Where its first coefficient goes in the sample's run.
        offset: i64,
    }
}

cuda_struct! {
    /// One scan's entropy decode (`struct Job` in jpeg_entropy.cu).
    pub(super) struct Job {
        /// Device addresses: the staged ScanHeader, the scan data after it, the sample's run
        /// of coefficients, its DC scratch.
        header: u64,
        data: u64,
        coefs: u64,
        dc: u64,
        chunk_bits: i64,
        chunks: i32,
        components: i32,
        win: [Window; 3],
    }
}

/// Size of a job descriptor.
const JOB_BYTES: u64 = size_of::<Job>() as u64;

impl GpuEntropy {
    /// Finishes the CPU share's JPEGs on the GPU: entropy-decodes the staged scans of
    /// `scans` (their headers and data at `staged_dev` + `staged_at`) and runs the IDCT and
    /// colour passes of those and of `coefs` (coefficients already on the device) into
    /// `out`, group by group, with one descriptor upload per kernel for the batch.
    ///
    /// # Safety
    /// The staged scans and the coefficients of `coefs` must be on the device (copied by
    /// work queued on `ws.stream` before this call) and stay allocated until the launches
    /// queued here have run (a buffer freed in `ws.stream`'s order after the call is).
    pub(super) unsafe fn finish(
        &mut self,
        ws: &GpuWorkspace<'_>,
        idct: &mut GpuIdct,
        staged_dev: u64,
        scans: &[ScanSample],
        mut coefs: Vec<CoefSample>,
        out: &TensorListGpu,
    ) -> Result<()> {
        if scans.is_empty() && coefs.is_empty() {
            return Ok(());
        }
        // Groups of scans by coefficient bytes; the coefficient samples join the first.
        let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
        let (mut start, mut bytes) = (0usize, 0usize);
        for (k, s) in scans.iter().enumerate() {
            let b = s.layout.coefficients * 2;
            if k > start && bytes + b > GROUP_COEF_BYTES {
                groups.push(start..k);
                start = k;
                bytes = 0;
            }
            bytes += b;
        }
        groups.push(start..scans.len());
        // One coefficient buffer (and DC scratch) for the largest group, reused by each.
        let sizes: Vec<(usize, usize)> = groups
            .iter()
            .map(|r| (scans[r.clone()].iter().map(|s| s.layout.coefficients).sum(), scans[r.clone()].iter().map(|s| s.total_blocks as usize).sum()))
            .collect();
        let coef_room = sizes.iter().map(|s| s.0).max().unwrap_or(0);
        let dc_room = sizes.iter().map(|s| s.1).max().unwrap_or(0);
        let decoded = DeviceBuffer::alloc(ws.device, ws.stream, (coef_room + dc_room) * 2)?;
        let dc_base = decoded.device_ptr() + (coef_room * 2) as u64;

        // Entropy jobs for every scan, one upload; the IDCT samples in group order (the
        // coefficient samples first, in group 0).
        self.jobs.clear();
        let mut idct_groups = Vec::with_capacity(groups.len());
        // Per group, the most chunks one of its images has (the block it launches with).
        let mut most_chunks = Vec::with_capacity(groups.len());
        for (gi, range) in groups.iter().enumerate() {
            let first = coefs.len();
            let (mut coef_at, mut dc_at, mut most) = (0u64, 0u64, 1u64);
            for s in &scans[range.clone()] {
                let header = staged_dev + s.staged_at as u64;
                let (chunk, chunks) = chunking(u64::from(s.data_bytes) * 8);
                most = most.max(chunks);
                let at = decoded.device_ptr() + coef_at * 2;
                let win = std::array::from_fn(|c| {
                    let g = &s.layout.comp[c.min(s.layout.components - 1)];
                    let offset = if c < s.layout.components { g.offset as i64 } else { 0 };
                    Window { bx0: g.bx0 as i32, by0: g.by0 as i32, bw: g.bw as i32, bh: g.bh as i32, offset }
                });
                self.jobs.push(Job {
                    header,
                    data: header + HEADER_BYTES as u64,
                    coefs: at,
                    dc: dc_base + dc_at * 2,
                    chunk_bits: chunk as i64,
                    chunks: chunks as i32,
                    components: s.layout.components as i32,
                    win,
                });
                coefs.push(CoefSample { index: s.index, window: s.window, layout: s.layout, coefs: at, quant: s.quant });
                coef_at += s.layout.coefficients as u64;
                dc_at += s.total_blocks;
            }
            idct_groups.push(if gi == 0 { 0..coefs.len() } else { first..coefs.len() });
            most_chunks.push(most);
        }
        let jobs = if scans.is_empty() { 0 } else { self.params.upload(ws, bytemuck::cast_slice(&self.jobs))? };
        let planes_room = idct_groups.iter().map(|r| coefs[r.clone()].iter().map(|s| plane_bytes(&s.layout)).sum::<usize>()).max().unwrap_or(0);
        let planes = DeviceBuffer::alloc(ws.device, ws.stream, planes_room)?;
        let plan = idct.prepare(ws, &coefs, &idct_groups, planes.device_ptr(), out)?;

        let kernels = ws.device.kernels();
        let decode = kernels.function(ws.device.context(), ws.device.compute_capability(), "jpeg_entropy", SRC, "entropy_decode")?;
        let mut job_at = 0u64;
        for ((range, g), most) in groups.iter().zip(&plan).zip(most_chunks) {
            if !range.is_empty() {
                decoded.zero_async()?;
                let threads = (most as u32).next_power_of_two().clamp(32, THREADS);
                let cfg = sluice_cuda::LaunchConfig { grid_dim: (range.len() as u32, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
                let group_jobs = jobs + job_at * JOB_BYTES;
                // SAFETY: each job points at its staged scan (the contract), its run of
                // `decoded` and its part of the DC scratch after them, sized from its layout
                // and block count; the kernel writes only blocks that the layout keeps and
                // DC slots below the scan's block count. The previous group's IDCT, which
                // read `decoded`, is queued before on the same stream.
                unsafe {
                    ws.stream.launch_builder(&decode).arg(&group_jobs).launch(cfg).map_err(sluice_cuda::CudaError::from)?;
                }
                job_at += range.len() as u64;
            }
            // SAFETY: the group's coefficients are in `decoded` (just queued) or on the
            // device already (the contract); `planes` and `decoded` are freed in stream
            // order after every launch.
            unsafe { idct.launch(ws, g)? };
        }
        drop((decoded, planes));
        Ok(())
    }
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("jpeg_entropy", SRC, &[("Job", &Job::LAYOUT), ("Window", &Window::LAYOUT)]);
    }
}
