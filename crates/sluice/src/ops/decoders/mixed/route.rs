//! Where each sample of a mixed batch is decoded (`Route`) and what the CPU share leaves
//! in its staging (`Staged`): the vocabulary the batch (`mod.rs`), the workers (`cpu_share`)
//! and the GPU-Huffman share (`gpu_huffman`) speak, kept apart so none imports another's
//! internals.

use sluice_codecs::{CoefLayout, Roi};

/// Pinned staging buffers in flight for the CPU share.
pub(crate) const STAGING_DEPTH: usize = 3;

/// Where one sample is decoded and what lands in its output slot. Unboxed on purpose (a
/// few hundred bytes per sample, no allocation per sample on the hot path).
#[derive(Clone, Copy)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Route {
    /// Hardware engine straight into the output: the whole image, or only a window.
    Hw { window: Option<Roi> },
    /// Hardware engine into scratch at this offset (whole image), then the window is copied
    /// out (for an nvJPEG that cannot decode windows on the engine).
    HwWindow { scratch: usize, window: Roi },
    /// libjpeg-turbo / image-rs on a worker: this window (None: whole image) at this DCT scale.
    Cpu { window: Option<Roi>, denom: u32 },
    /// A worker entropy-decodes the blocks of this window, the GPU does the rest (gpu_idct).
    Coef { window: Roi, layout: CoefLayout },
    /// A worker stages the scan; the GPU entropy-decodes it (gpu_entropy) and does the rest.
    Scan { window: Roi, layout: CoefLayout },
    /// A worker has nvJPEG's GPU-Huffman decoder decode this window (None: whole image)
    /// straight into the output slot at `out` (gpu_huffman).
    GpuHuffman { window: Option<Roi>, out: u64 },
}

/// What a worker left in a CPU-share sample's staging.
#[allow(clippy::large_enum_variant)] // the tables inline: no allocation per sample
pub(crate) enum Staged {
    Pixels,
    /// Decoded on the GPU, in place.
    OnGpu,
    /// Coefficients, with the sample's quantization tables.
    Coefficients([[u16; 64]; 3]),
    /// A scan for the GPU's entropy decoder: its quantization tables, data length (stuffing
    /// removed) and block count.
    Scan { quant: [[u16; 64]; 3], data_bytes: u32, total_blocks: u64 },
    /// The coefficient read failed, and a full decode produced these pixels (rare).
    Fallback(Vec<u8>),
}

