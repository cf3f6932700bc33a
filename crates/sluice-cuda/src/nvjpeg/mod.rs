//! JPEG decoding on the GPU with nvJPEG, loaded at run time.
//!
//! Two paths, as in DALI's mixed decoder:
//! - [`HwBatchDecoder`]: the A100/H100/H200 hardware JPEG engine, whole batches per call.
//!   It takes baseline, single-scan JPEGs with common subsamplings; ask
//!   [`HwBatchDecoder::supported`] per image first.
//! - [`HybridDecoder`]: nvJPEG's default backend (Huffman on the CPU, IDCT and colour
//!   conversion on the GPU), one image per call, for what the engine refuses (progressive,
//!   4:1:1 / 4:1:0 ...).
//!
//! Both write interleaved 8-bit RGB (NVJPEG_OUTPUT_RGBI) into device memory the caller owns
//! (row pitch chosen by the caller), ordered on the caller's stream.
//!
//! Every nvJPEG failure becomes a [`CudaError`] naming the function and the status, e.g.
//! "nvjpegDecodeBatched: NVJPEG_STATUS_BAD_JPEG"; a missing libnvjpeg is an error, never a
//! panic.

mod ffi;

use std::os::raw::{c_int, c_uint};
use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::device::GpuDevice;
use crate::event::GpuEvent;
use crate::error::{CudaError, CudaResult};
use ffi::{check, NvJpegLib};

/// True when libnvjpeg (13, 12 or unversioned) can be loaded and has every function we use.
/// Never panics.
pub fn library_present() -> bool {
    ffi::lib().is_ok()
}

/// Version of the loaded nvJPEG library as (major, minor, patch); needs no GPU.
pub fn library_version() -> CudaResult<(u32, u32, u32)> {
    let lib = ffi::lib()?;
    let get = |p: ffi::libraryPropertyType| -> CudaResult<u32> {
        let mut v: c_int = 0;
        // SAFETY: plain query; the out-pointer outlives the call.
        check("nvjpegGetProperty", unsafe { (lib.nvjpegGetProperty)(p, &mut v) })?;
        Ok(v.max(0) as u32)
    };
    Ok((get(ffi::MAJOR_VERSION)?, get(ffi::MINOR_VERSION)?, get(ffi::PATCH_LEVEL)?))
}

/// Which nvJPEG backend a handle drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// NVJPEG_BACKEND_HARDWARE: the GPU's JPEG engine (batched decoding only).
    Hardware,
    /// NVJPEG_BACKEND_DEFAULT: CPU Huffman + GPU IDCT; takes any JPEG nvJPEG understands.
    Hybrid,
}

/// Chroma subsampling of a JPEG, as nvJPEG classifies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Subsampling {
    S444,
    S422,
    S420,
    S440,
    S411,
    S410,
    /// One (luma) component.
    Gray,
    S410V,
    /// Non-standard sampling factors, or a component count nvJPEG does not classify.
    Unknown,
}

impl Subsampling {
    fn from_raw(v: ffi::nvjpegChromaSubsampling_t) -> Subsampling {
        match v {
            ffi::NVJPEG_CSS_444 => Subsampling::S444,
            ffi::NVJPEG_CSS_422 => Subsampling::S422,
            ffi::NVJPEG_CSS_420 => Subsampling::S420,
            ffi::NVJPEG_CSS_440 => Subsampling::S440,
            ffi::NVJPEG_CSS_411 => Subsampling::S411,
            ffi::NVJPEG_CSS_410 => Subsampling::S410,
            ffi::NVJPEG_CSS_GRAY => Subsampling::Gray,
            ffi::NVJPEG_CSS_410V => Subsampling::S410V,
            _ => Subsampling::Unknown,
        }
    }
}

/// What a JPEG header says, read by nvJPEG on the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct JpegInfo {
    /// Width of the full-resolution (luma) component, in pixels.
    pub width: u32,
    pub height: u32,
    /// Encoded components: 1 (gray), 3 (YCbCr) or 4 (CMYK / YCCK).
    pub components: u32,
    pub subsampling: Subsampling,
}

impl JpegInfo {
    /// Smallest row pitch, in bytes, of an interleaved RGB output of this image.
    pub fn min_rgb_pitch(&self) -> usize {
        self.width as usize * 3
    }
}

/// One nvjpegHandle_t. Shared (Arc) by the [`NvJpeg`] clones and every decoder made from
/// it, so the handle outlives the states created from it.
struct Handle {
    lib: &'static NvJpegLib,
    raw: ffi::nvjpegHandle_t,
    device: Arc<GpuDevice>,
    backend: Backend,
    version: (u32, u32, u32),
    /// (engines, cores per engine) for the hardware backend, when nvJPEG can tell.
    engines: Option<(u32, u32)>,
}

// SAFETY: nvJPEG's thread-safety rules ask for a separate JpegState / JpegStream per thread
// but allow one library handle to be shared; nvjpegGetImageInfo is documented thread safe.
// The handle is destroyed once, in Drop.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

impl Drop for Handle {
    fn drop(&mut self) {
        // Nothing to report an error to; a dead context at exit takes nvJPEG's memory anyway.
        if self.device.bind().is_ok() {
            // SAFETY: created by nvjpegCreateEx; every state/stream holding an Arc to us is gone.
            unsafe {
                (self.lib.nvjpegDestroy)(self.raw);
            }
        }
    }
}

impl Handle {
    fn create(dev: &Arc<GpuDevice>, backend: Backend) -> CudaResult<Handle> {
        let lib = ffi::lib()?;
        let version = library_version()?;
        // nvJPEG works through the CUDA runtime, which uses the thread's current context:
        // make it this device's primary context (the one GpuDevice holds).
        dev.bind()?;
        let raw_backend = match backend {
            Backend::Hardware => ffi::NVJPEG_BACKEND_HARDWARE,
            Backend::Hybrid => ffi::NVJPEG_BACKEND_DEFAULT,
        };
        let mut raw: ffi::nvjpegHandle_t = std::ptr::null_mut();
        // SAFETY: null allocators select nvJPEG's cudaMalloc/cudaHostAlloc defaults; flags 0.
        check("nvjpegCreateEx", unsafe {
            (lib.nvjpegCreateEx)(raw_backend, std::ptr::null_mut(), std::ptr::null_mut(), 0, &mut raw)
        })
        .map_err(|e| match backend {
            Backend::Hardware => CudaError(format!("{e} (no hardware JPEG decoder on {}?)", dev.name())),
            Backend::Hybrid => e,
        })?;
        Ok(Handle { lib, raw, device: dev.clone(), backend, version, engines: None })
    }

    fn info(&self, data: &[u8]) -> CudaResult<JpegInfo> {
        if data.is_empty() {
            return Err(CudaError("nvjpegGetImageInfo: empty data".into()));
        }
        let mut comps: c_int = 0;
        let mut css: ffi::nvjpegChromaSubsampling_t = ffi::NVJPEG_CSS_UNKNOWN;
        let mut widths = [0 as c_int; ffi::NVJPEG_MAX_COMPONENT];
        let mut heights = [0 as c_int; ffi::NVJPEG_MAX_COMPONENT];
        // SAFETY: `data` is valid for its length during this synchronous, CPU-only call; the
        // out-arrays have NVJPEG_MAX_COMPONENT entries as the API requires.
        check("nvjpegGetImageInfo", unsafe {
            (self.lib.nvjpegGetImageInfo)(
                self.raw,
                data.as_ptr(),
                data.len(),
                &mut comps,
                &mut css,
                widths.as_mut_ptr(),
                heights.as_mut_ptr(),
            )
        })?;
        if widths[0] <= 0 || heights[0] <= 0 {
            return Err(CudaError(format!("nvjpegGetImageInfo: bad image size {}x{}", widths[0], heights[0])));
        }
        Ok(JpegInfo {
            width: widths[0] as u32,
            height: heights[0] as u32,
            components: comps.max(0) as u32,
            subsampling: Subsampling::from_raw(css),
        })
    }

    fn new_state(&self) -> CudaResult<ffi::nvjpegJpegState_t> {
        let mut state: ffi::nvjpegJpegState_t = std::ptr::null_mut();
        // SAFETY: live handle; out-pointer valid.
        check("nvjpegJpegStateCreate", unsafe { (self.lib.nvjpegJpegStateCreate)(self.raw, &mut state) })?;
        Ok(state)
    }
}

/// An nvJPEG library handle for one backend on one GPU. Cheap to clone; Send + Sync (the
/// decoders made from it are the per-thread parts).
#[derive(Clone)]
pub struct NvJpeg {
    h: Arc<Handle>,
}

impl std::fmt::Debug for NvJpeg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, b, c) = self.h.version;
        write!(f, "NvJpeg({:?} on GPU {}, nvJPEG {a}.{b}.{c} from {})", self.h.backend, self.h.device.ordinal(), self.h.lib.soname)
    }
}

impl NvJpeg {
    /// The hardware JPEG engine of `dev` (NVJPEG_BACKEND_HARDWARE). Errors when nvJPEG is
    /// missing or the GPU has no JPEG engine (anything but A100/A30/H100/H200/B200-class
    /// parts): nvJPEG refuses to create the handle there, or reports zero engines.
    pub fn hardware(dev: &Arc<GpuDevice>) -> CudaResult<NvJpeg> {
        let mut h = Handle::create(dev, Backend::Hardware)?;
        // An unsupported GPU normally fails creation already; the engine count catches
        // drivers that create the handle but have nothing to run it on. (`h` destroys the
        // nvJPEG handle if we return early.)
        if let Some(get_info) = h.lib.nvjpegGetHardwareDecoderInfo {
            let (mut engines, mut cores): (c_uint, c_uint) = (0, 0);
            // SAFETY: live handle; out-pointers valid.
            check("nvjpegGetHardwareDecoderInfo", unsafe { get_info(h.raw, &mut engines, &mut cores) })?;
            if engines == 0 {
                return Err(CudaError(format!("{} has no hardware JPEG decoder", dev.name())));
            }
            h.engines = Some((engines, cores));
        }
        Ok(NvJpeg { h: Arc::new(h) })
    }

    /// nvJPEG's default (hybrid CPU + GPU) backend on `dev` (NVJPEG_BACKEND_DEFAULT), for
    /// [`HybridDecoder`].
    pub fn hybrid(dev: &Arc<GpuDevice>) -> CudaResult<NvJpeg> {
        Ok(NvJpeg { h: Arc::new(Handle::create(dev, Backend::Hybrid)?) })
    }

    /// Which backend this handle drives.
    pub fn backend(&self) -> Backend {
        self.h.backend
    }

    /// The GPU this handle decodes on.
    pub fn device(&self) -> &Arc<GpuDevice> {
        &self.h.device
    }

    /// nvJPEG's version as (major, minor, patch), e.g. (13, 0, 2).
    pub fn version(&self) -> (u32, u32, u32) {
        self.h.version
    }

    /// Hardware backend: (JPEG engines, cores per engine) when nvJPEG reports them (>= 11.9).
    pub fn hardware_engines(&self) -> Option<(u32, u32)> {
        self.h.engines
    }

    /// Reads a JPEG header on the CPU (nvjpegGetImageInfo). Errors on data nvJPEG cannot
    /// parse.
    pub fn info(&self, data: &[u8]) -> CudaResult<JpegInfo> {
        self.h.info(data)
    }
}

fn stream_ptr(stream: &CudaStream) -> ffi::cudaStream_t {
    stream.cu_stream() as ffi::cudaStream_t
}

/// Batched decoding on the hardware JPEG engine into interleaved RGB.
///
/// Owns one nvJPEG decode state and one parsed-stream object; Send but not Sync (nvJPEG
/// wants those per thread). The state's buffers are reused from batch to batch, so
/// [`decode`](Self::decode) first waits (on the host) for this decoder's previous batch to
/// finish on the GPU; use one decoder per batch in flight to overlap batches.
pub struct HwBatchDecoder {
    h: Arc<Handle>,
    state: ffi::nvjpegJpegState_t,
    jstream: ffi::nvjpegJpegStream_t,
    max_batch: usize,
    /// Batch size nvjpegDecodeBatchedInitialize was last called with; None after a failure,
    /// since nvJPEG documents re-initialising as the way to reset a failed batch.
    initialized: Option<usize>,
    /// Our own stream: decoders of one batch run side by side, each joined to the caller's.
    stream: Arc<CudaStream>,
    /// Where the caller's stream stood when [`decode`](Self::decode) was called.
    start: GpuEvent,
    fence: GpuEvent,
    /// One nvJPEG decode-parameter object per batch slot, for windows (ROI) decoded on the
    /// engine; empty when this nvJPEG lacks nvjpegDecodeBatchedEx.
    params: Vec<ffi::nvjpegDecodeParams_t>,
    // Scratch reused across calls so steady state allocates nothing.
    ptrs: Vec<*const u8>,
    lens: Vec<usize>,
    dests: Vec<ffi::nvjpegImage_t>,
}

/// Where one image of a hardware batch goes: `ptr` (device memory) with rows `pitch` bytes
/// apart, the image `width` pixels wide (as its header says) and, optionally, only a window
/// of it decoded (see [`HwBatchDecoder::decodes_windows`]).
#[derive(Clone, Copy, Debug)]
pub struct HwTarget {
    pub ptr: u64,
    pub pitch: usize,
    pub width: usize,
    pub window: Option<HwWindow>,
}

/// A window of an image, in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HwWindow {
    pub x: usize,
    pub y: usize,
    pub width: usize,
    pub height: usize,
}

// SAFETY: the raw nvJPEG objects are used only through &mut self, so from one thread at a
// time, which is all nvJPEG asks; the scratch pointers are cleared after each call.
unsafe impl Send for HwBatchDecoder {}

impl HwBatchDecoder {
    /// A decoder for batches of up to `max_batch` images, on a handle from
    /// [`NvJpeg::hardware`].
    pub fn new(nv: &NvJpeg, max_batch: usize) -> CudaResult<HwBatchDecoder> {
        if nv.backend() != Backend::Hardware {
            return Err(CudaError("HwBatchDecoder needs an NvJpeg::hardware handle".into()));
        }
        if max_batch == 0 || max_batch > c_int::MAX as usize {
            return Err(CudaError(format!("HwBatchDecoder: bad max_batch {max_batch}")));
        }
        let h = nv.h.clone();
        h.device.bind()?;
        let fence = GpuEvent::new(&h.device)?;
        let start = GpuEvent::new(&h.device)?;
        let stream = h.device.new_stream()?;
        let state = h.new_state()?;
        let mut jstream: ffi::nvjpegJpegStream_t = std::ptr::null_mut();
        // SAFETY: live handle; out-pointer valid.
        let created = check("nvjpegJpegStreamCreate", unsafe { (h.lib.nvjpegJpegStreamCreate)(h.raw, &mut jstream) });
        if let Err(e) = created {
            // SAFETY: created just above and not shared.
            unsafe { (h.lib.nvjpegJpegStateDestroy)(state) };
            return Err(e);
        }
        let mut d = HwBatchDecoder {
            h,
            state,
            jstream,
            max_batch,
            initialized: None,
            stream,
            start,
            fence,
            params: Vec::new(),
            ptrs: Vec::with_capacity(max_batch),
            lens: Vec::with_capacity(max_batch),
            dests: Vec::with_capacity(max_batch),
        };
        // Initialise for the full batch now: the common case then never re-initialises.
        d.initialize(max_batch)?;
        let lib = d.h.lib;
        // Reserve the engine's buffers once: without it nvJPEG (re)allocates them as batches
        // come, which NVIDIA's nvImageCodec measured at >20% of throughput. Size hints of 1
        // still switch the state to its memory pool.
        if let Some(prealloc) = lib.nvjpegDecodeBatchedPreAllocate {
            // SAFETY: live handle and state, nothing in flight.
            let st = unsafe { prealloc(d.h.raw, d.state, max_batch as c_int, 1, 1, ffi::NVJPEG_CSS_444, ffi::NVJPEG_OUTPUT_RGBI) };
            check("nvjpegDecodeBatchedPreAllocate", st)?;
        }
        if let (Some(_), Some(create), Some(_)) = (lib.nvjpegDecodeBatchedEx, lib.nvjpegDecodeParamsCreate, lib.nvjpegDecodeParamsSetROI) {
            for _ in 0..max_batch {
                let mut p: ffi::nvjpegDecodeParams_t = std::ptr::null_mut();
                // SAFETY: live handle; out-pointer valid. Destroyed in Drop.
                check("nvjpegDecodeParamsCreate", unsafe { create(d.h.raw, &mut p) })?;
                d.params.push(p);
            }
        }
        Ok(d)
    }

    /// The largest batch [`decode`](Self::decode) accepts.
    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    fn initialize(&mut self, n: usize) -> CudaResult<()> {
        // One CPU thread: the hardware backend does its CPU work (header parsing, staging)
        // inside nvjpegDecodeBatched on the calling thread.
        // SAFETY: live handle and state; nothing of ours is in flight (callers waited).
        check("nvjpegDecodeBatchedInitialize", unsafe {
            (self.h.lib.nvjpegDecodeBatchedInitialize)(self.h.raw, self.state, n as c_int, 1, ffi::NVJPEG_OUTPUT_RGBI)
        })?;
        self.initialized = Some(n);
        Ok(())
    }

    /// True when the hardware engine can decode `data`: it parses (on the CPU), has a
    /// subsampling the engine takes (4:4:4, 4:2:2, 4:2:0, 4:4:0, gray) and nvJPEG accepts it
    /// for batched hardware decoding (nvjpegDecodeBatchedSupported: baseline, single scan,
    /// 8-bit). False for anything unparsable. Does not touch the GPU.
    pub fn supported(&mut self, data: &[u8]) -> bool {
        // nvjpeg.h: the hardware backend takes no 4:1:1 / 4:1:0; NVIDIA's nvImageCodec also
        // filters on the subsampling before asking nvJPEG, so we do the same.
        match self.h.info(data) {
            Ok(info) => {
                use Subsampling::*;
                if !matches!(info.subsampling, S444 | S422 | S420 | S440 | Gray) {
                    return false;
                }
            }
            Err(_) => return false,
        }
        let lib = self.h.lib;
        // SAFETY: `data` is valid during these synchronous CPU-side calls; the JpegStream is
        // ours alone (&mut self). Metadata and the stream body are not needed, so a header
        // parse suffices where the library has it.
        let parsed = unsafe {
            match lib.nvjpegJpegStreamParseHeader {
                Some(parse_header) => parse_header(self.h.raw, data.as_ptr(), data.len(), self.jstream),
                None => (lib.nvjpegJpegStreamParse)(self.h.raw, data.as_ptr(), data.len(), 0, 0, self.jstream),
            }
        };
        if parsed != ffi::NVJPEG_STATUS_SUCCESS {
            return false;
        }
        let mut is_supported: c_int = -1;
        // SAFETY: live handle and freshly parsed stream; out-pointer valid.
        let st = unsafe { (lib.nvjpegDecodeBatchedSupported)(self.h.raw, self.jstream, &mut is_supported) };
        // nvJPEG's convention: 0 means supported.
        st == ffi::NVJPEG_STATUS_SUCCESS && is_supported == 0
    }

    /// Decodes `images` into interleaved RGB (3 bytes per pixel, row `i` of image `k` at
    /// `outputs[k].0 + i * outputs[k].1`), ordered on `stream`: the decode starts after the
    /// work queued there so far and work queued there later sees its results. Returns once
    /// the work is queued (and, see `start_after`, once `stream` has run what came before it).
    /// Reads each header with nvJPEG first to check the pitches; callers
    /// that know the widths already use [`submit`](Self::submit) and [`join`](Self::join).
    ///
    /// The whole batch shares one status: on error every output is undefined (decode the
    /// images singly, or on the CPU, to find the bad one) and the decoder resets itself, so
    /// the next call works normally.
    ///
    /// # Safety
    /// As [`submit`](Self::submit), with `stream` in place of `start`.
    pub unsafe fn decode(&mut self, images: &[&[u8]], outputs: &[(u64, usize)], stream: &CudaStream) -> CudaResult<()> {
        if images.len() != outputs.len() {
            return Err(CudaError(format!("HwBatchDecoder::decode: {} images but {} outputs", images.len(), outputs.len())));
        }
        let mut targets = Vec::with_capacity(images.len());
        for (k, (data, &(ptr, pitch))) in images.iter().zip(outputs).enumerate() {
            let info = self.h.info(data).map_err(|e| CudaError(format!("{e} (image {k} of the batch)")))?;
            targets.push(HwTarget { ptr, pitch, width: info.width as usize, window: None });
        }
        self.h.device.bind()?;
        self.start.record(stream)?;
        Self::start_after(&self.start, &self.stream)?;
        // SAFETY: forwarded contract; our stream now waits for the caller's position.
        unsafe { self.queue(images, &targets) }?;
        self.join(stream)
    }

    /// Orders this decoder's work after `start`: our stream waits for it, and so does this
    /// thread. The stream wait alone is not enough: nvJPEG's hardware path was seen writing
    /// its outputs before the stream reached `start` (H200, nvJPEG 13.0), which breaks
    /// outputs in memory that the caller's stream freed and reallocated just before
    /// (stream-ordered reuse of the pool). Make `start` a blocking event
    /// ([`GpuEvent::blocking`]) where the thread's core has other work.
    fn start_after(start: &GpuEvent, stream: &CudaStream) -> CudaResult<()> {
        start.wait()?;
        start.make_wait(stream)
    }

    /// Queues the decode of `images` (`widths[k]` pixels wide, as their headers say) on this
    /// decoder's own stream, to start once `start` (recorded by the caller on its stream,
    /// after allocating the outputs there) is reached. Several decoders can thus work on one
    /// batch at once, each called from its own thread. Afterwards [`join`](Self::join) the
    /// caller's stream. Waits on the host for `start` (see `start_after`), and for this
    /// decoder's previous batch when it has not finished yet (its nvJPEG buffers are reused).
    ///
    /// # Safety
    /// - `outputs[k].0` must be device memory of this decoder's GPU, writable for at least
    ///   `outputs[k].1 * height_k` bytes, and not used by anything else until the joined
    ///   stream reaches the join point; `start` must be an event of the same GPU.
    /// - Host data: nvJPEG reads `images` during this call and stages the bitstreams into
    ///   its own pinned buffers (NVIDIA's nvImageCodec releases the encoded data as soon as
    ///   nvjpegDecodeBatched returns), but the nvJPEG documentation does not promise it;
    ///   keep `images` alive and unchanged until the joined stream reaches the join point.
    pub unsafe fn submit(&mut self, images: &[&[u8]], targets: &[HwTarget], start: &GpuEvent) -> CudaResult<()> {
        self.h.device.bind()?;
        Self::start_after(start, &self.stream)?;
        // SAFETY: forwarded contract; our stream now waits for `start`.
        unsafe { self.queue(images, targets) }
    }

    /// True when [`submit`](Self::submit) accepts targets with a window: only the window is
    /// decoded on the engine (nvjpegDecodeBatchedEx with a ROI).
    pub fn decodes_windows(&self) -> bool {
        !self.params.is_empty()
    }

    /// This decoder's own stream, on which [`submit`](Self::submit) queues the decode.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Blocks until this decoder's last submitted batch is done on the GPU (its encoded
    /// input, when page-locked, may be read by the GPU until then).
    pub fn wait_idle(&self) -> CudaResult<()> {
        self.fence.wait()
    }

    /// Makes `stream` wait for this decoder's last submitted batch.
    pub fn join(&self, stream: &CudaStream) -> CudaResult<()> {
        self.fence.make_wait(stream)
    }

    /// Checks the arguments and queues nvjpegDecodeBatched on our own stream.
    unsafe fn queue(&mut self, images: &[&[u8]], targets: &[HwTarget]) -> CudaResult<()> {
        let n = images.len();
        if n != targets.len() {
            return Err(CudaError(format!("HwBatchDecoder::decode: {n} images but {} targets", targets.len())));
        }
        if n == 0 {
            // Nothing to decode: the fence must still mean "after start".
            return self.fence.record(&self.stream);
        }
        if n > self.max_batch {
            return Err(CudaError(format!("HwBatchDecoder::decode: batch of {n} exceeds max_batch {}", self.max_batch)));
        }
        let windowed = targets.iter().any(|t| t.window.is_some());
        if windowed && !self.decodes_windows() {
            return Err(CudaError("HwBatchDecoder: this nvJPEG cannot decode windows (no nvjpegDecodeBatchedEx)".into()));
        }
        for (k, t) in targets.iter().enumerate() {
            let w = t.window.map_or(t.width, |r| r.width);
            if t.ptr == 0 || t.pitch < w * 3 {
                return Err(CudaError(format!(
                    "HwBatchDecoder::decode: image {k} ({w} pixels wide) needs a non-null output with pitch >= {} bytes, got ptr {:#x} pitch {}",
                    w * 3,
                    t.ptr,
                    t.pitch
                )));
            }
        }
        // The state's buffers may still be in use by our previous batch.
        self.fence.wait()?;
        if self.initialized != Some(n) {
            self.initialize(n)?;
        }
        self.ptrs.clear();
        self.lens.clear();
        self.dests.clear();
        for (data, t) in images.iter().zip(targets) {
            self.ptrs.push(data.as_ptr());
            self.lens.push(data.len());
            let mut img = ffi::nvjpegImage_t::default();
            // Interleaved output uses plane 0 only.
            img.channel[0] = t.ptr as *mut u8;
            img.pitch[0] = t.pitch;
            self.dests.push(img);
        }
        let lib = self.h.lib;
        let st = match (windowed, lib.nvjpegDecodeBatchedEx, lib.nvjpegDecodeParamsSetROI) {
            (true, Some(decode_ex), Some(set_roi)) => {
                for (p, t) in self.params.iter().zip(targets) {
                    // (0, 0, -1, -1) is nvJPEG's "whole image".
                    let r = t.window.map_or([0, 0, -1, -1], |r| [r.x as c_int, r.y as c_int, r.width as c_int, r.height as c_int]);
                    // SAFETY: live parameter object of this handle.
                    check("nvjpegDecodeParamsSetROI", unsafe { set_roi(*p, r[0], r[1], r[2], r[3]) })?;
                }
                // SAFETY: as below, plus one parameter object per image (params.len() ==
                // max_batch >= n).
                unsafe {
                    decode_ex(
                        self.h.raw,
                        self.state,
                        self.ptrs.as_ptr(),
                        self.lens.as_ptr(),
                        self.dests.as_mut_ptr(),
                        self.params.as_mut_ptr(),
                        stream_ptr(&self.stream),
                    )
                }
            }
            // SAFETY: arrays of length n == the initialised batch size; the host data and
            // output memory are valid per this function's contract; live handle/state on a
            // bound context.
            _ => unsafe {
                (lib.nvjpegDecodeBatched)(
                    self.h.raw,
                    self.state,
                    self.ptrs.as_ptr(),
                    self.lens.as_ptr(),
                    self.dests.as_mut_ptr(),
                    stream_ptr(&self.stream),
                )
            },
        };
        self.ptrs.clear();
        // Fence even on failure: nvJPEG may have queued part of the batch.
        let fenced = self.fence.record(&self.stream);
        if st != ffi::NVJPEG_STATUS_SUCCESS {
            self.initialized = None;
        }
        check("nvjpegDecodeBatched", st)?;
        fenced
    }
}

impl Drop for HwBatchDecoder {
    fn drop(&mut self) {
        if self.h.device.bind().is_ok() {
            // Do not free buffers a queued decode still uses.
            let _ = self.fence.wait();
            // SAFETY: created in new(), destroyed once; nothing of ours is in flight.
            unsafe {
                if let Some(destroy) = self.h.lib.nvjpegDecodeParamsDestroy {
                    for &p in &self.params {
                        destroy(p);
                    }
                }
                (self.h.lib.nvjpegJpegStreamDestroy)(self.jstream);
                (self.h.lib.nvjpegJpegStateDestroy)(self.state);
            }
        }
    }
}

/// Single-image decoding on nvJPEG's hybrid backend (CPU Huffman decoding, GPU IDCT and
/// colour conversion) into interleaved RGB, for JPEGs the hardware engine refuses
/// (progressive, unusual subsampling). Send but not Sync; like [`HwBatchDecoder`], a call
/// waits for this decoder's previous image before reusing its state.
pub struct HybridDecoder {
    h: Arc<Handle>,
    state: ffi::nvjpegJpegState_t,
    fence: GpuEvent,
}

// SAFETY: the state is used only through &mut self (one thread at a time).
unsafe impl Send for HybridDecoder {}

impl HybridDecoder {
    /// A decoder on a handle from [`NvJpeg::hybrid`].
    pub fn new(nv: &NvJpeg) -> CudaResult<HybridDecoder> {
        if nv.backend() != Backend::Hybrid {
            return Err(CudaError("HybridDecoder needs an NvJpeg::hybrid handle".into()));
        }
        let h = nv.h.clone();
        h.device.bind()?;
        let fence = GpuEvent::new(&h.device)?;
        let state = h.new_state()?;
        Ok(HybridDecoder { h, state, fence })
    }

    /// Reads a JPEG header (as [`NvJpeg::info`]).
    pub fn info(&self, data: &[u8]) -> CudaResult<JpegInfo> {
        self.h.info(data)
    }

    /// Decodes one JPEG into interleaved RGB at `out.0` with row pitch `out.1` bytes, queued
    /// on `stream`. The Huffman decoding runs on the calling thread; the GPU part is ready
    /// when `stream` reaches this point. On error the decoder replaces its state, so the
    /// next call works normally.
    ///
    /// # Safety
    /// - `out.0` must be device memory of this decoder's GPU, writable for at least
    ///   `out.1 * height` bytes and not used by anything else until `stream` reaches this
    ///   point; `stream` must belong to the same GPU (context).
    /// - `data` is consumed on the CPU during the call (nvJPEG does not document whether any
    ///   of it is read later): keep it alive and unchanged until `stream` reaches this point.
    pub unsafe fn decode(&mut self, data: &[u8], out: (u64, usize), stream: &CudaStream) -> CudaResult<()> {
        let info = self.h.info(data)?;
        let (ptr, pitch) = out;
        if ptr == 0 || pitch < info.min_rgb_pitch() {
            return Err(CudaError(format!(
                "HybridDecoder::decode: a {}x{} image needs a non-null output with pitch >= {} bytes, got ptr {ptr:#x} pitch {pitch}",
                info.width,
                info.height,
                info.min_rgb_pitch()
            )));
        }
        self.h.device.bind()?;
        self.fence.wait()?;
        let mut img = ffi::nvjpegImage_t::default();
        img.channel[0] = ptr as *mut u8;
        img.pitch[0] = pitch;
        // SAFETY: output and data valid per this function's contract; live handle and state
        // on a bound context.
        let st = unsafe {
            (self.h.lib.nvjpegDecode)(
                self.h.raw,
                self.state,
                data.as_ptr(),
                data.len(),
                ffi::NVJPEG_OUTPUT_RGBI,
                &mut img,
                stream_ptr(stream),
            )
        };
        let fenced = self.fence.record(stream);
        if st != ffi::NVJPEG_STATUS_SUCCESS {
            // A state that failed mid-image is not documented as reusable: start afresh.
            self.reset_state();
        }
        check("nvjpegDecode", st)?;
        fenced
    }

    fn reset_state(&mut self) {
        let _ = self.fence.wait();
        if let Ok(fresh) = self.h.new_state() {
            // SAFETY: the old state is ours, and idle after the wait.
            unsafe { (self.h.lib.nvjpegJpegStateDestroy)(self.state) };
            self.state = fresh;
        }
    }
}

impl Drop for HybridDecoder {
    fn drop(&mut self) {
        if self.h.device.bind().is_ok() {
            let _ = self.fence.wait();
            // SAFETY: created in new() (or reset_state), destroyed once, idle.
            unsafe {
                (self.h.lib.nvjpegJpegStateDestroy)(self.state);
            }
        }
    }
}

/// nvJPEG's GPU-Huffman decoder (NVJPEG_BACKEND_GPU_HYBRID, decoupled API) on a handle from
/// [`NvJpeg::hybrid`]: the host only parses the stream; Huffman decoding, IDCT and colour
/// conversion run on the GPU. DALI uses it for large images its engine share leaves over,
/// where CPU Huffman decoding is the bottleneck. Shared by the per-thread
/// [`GpuHuffmanState`]s (nvJPEG allows one decoder object for many states).
pub struct GpuHuffman {
    h: Arc<Handle>,
    api: &'static ffi::Decoupled,
    decoder: ffi::nvjpegJpegDecoder_t,
}

// SAFETY: the decoder object holds no per-decode state (that lives in the states); nvJPEG
// shares it between threads in its own samples. Destroyed once, in Drop.
unsafe impl Send for GpuHuffman {}
unsafe impl Sync for GpuHuffman {}

impl GpuHuffman {
    /// Errors when this nvJPEG lacks the decoupled API or the GPU-Huffman backend.
    pub fn new(nv: &NvJpeg) -> CudaResult<Arc<GpuHuffman>> {
        if nv.backend() != Backend::Hybrid {
            return Err(CudaError("GpuHuffman needs an NvJpeg::hybrid handle".into()));
        }
        let h = nv.h.clone();
        let api = h.lib.decoupled.as_ref().ok_or_else(|| CudaError(format!("{} lacks nvJPEG's decoupled API", h.lib.soname)))?;
        h.device.bind()?;
        let mut decoder: ffi::nvjpegJpegDecoder_t = std::ptr::null_mut();
        // SAFETY: live handle; out-pointer valid.
        check("nvjpegDecoderCreate", unsafe { (api.nvjpegDecoderCreate)(h.raw, ffi::NVJPEG_BACKEND_GPU_HYBRID, &mut decoder) })?;
        Ok(Arc::new(GpuHuffman { h, api, decoder }))
    }
}

impl Drop for GpuHuffman {
    fn drop(&mut self) {
        if self.h.device.bind().is_ok() {
            // SAFETY: created in new(); every state made from it (holding an Arc) is gone.
            unsafe { (self.api.nvjpegDecoderDestroy)(self.decoder) };
        }
    }
}

/// One thread's GPU-Huffman decoding: an nvJPEG state with its buffers, a parsed-stream
/// object, and a stream of its own, so several threads' images decode side by side on the
/// GPU. Send but not Sync. Two page-locked buffers are used in turn: the host phase of the
/// next image fills one while the previous image's copy to the GPU reads the other.
pub struct GpuHuffmanState {
    g: Arc<GpuHuffman>,
    state: ffi::nvjpegJpegState_t,
    jstream: ffi::nvjpegJpegStream_t,
    params: ffi::nvjpegDecodeParams_t,
    pinned: [ffi::nvjpegBufferPinned_t; 2],
    device_buf: ffi::nvjpegBufferDevice_t,
    stream: Arc<CudaStream>,
    /// Recorded after the copy out of `pinned[k]`: the host waits on it before refilling.
    copied: [GpuEvent; 2],
    /// Recorded after the last decode.
    done: GpuEvent,
    turn: usize,
}

// SAFETY: all nvJPEG objects here are used only through &mut self (one thread at a time).
unsafe impl Send for GpuHuffmanState {}

impl GpuHuffmanState {
    pub fn new(g: &Arc<GpuHuffman>) -> CudaResult<GpuHuffmanState> {
        let (h, api) = (&g.h, g.api);
        h.device.bind()?;
        let create_params = h.lib.nvjpegDecodeParamsCreate.ok_or_else(|| CudaError("nvJPEG lacks nvjpegDecodeParamsCreate".into()))?;
        let mut s = GpuHuffmanState {
            g: g.clone(),
            state: std::ptr::null_mut(),
            jstream: std::ptr::null_mut(),
            params: std::ptr::null_mut(),
            pinned: [std::ptr::null_mut(); 2],
            device_buf: std::ptr::null_mut(),
            stream: h.device.new_stream()?,
            // Waited on by the decoding thread: sleeping, so a worker's core is not burnt.
            copied: [GpuEvent::blocking(&h.device)?, GpuEvent::blocking(&h.device)?],
            done: GpuEvent::blocking(&h.device)?,
            turn: 0,
        };
        // SAFETY: live handle and decoder; out-pointers valid; null allocators pick nvJPEG's
        // defaults. Whatever was created is destroyed by Drop if a later step fails.
        unsafe {
            check("nvjpegJpegStreamCreate", (h.lib.nvjpegJpegStreamCreate)(h.raw, &mut s.jstream))?;
            check("nvjpegDecodeParamsCreate", create_params(h.raw, &mut s.params))?;
            check("nvjpegDecodeParamsSetOutputFormat", (api.nvjpegDecodeParamsSetOutputFormat)(s.params, ffi::NVJPEG_OUTPUT_RGBI))?;
            for k in 0..2 {
                check("nvjpegBufferPinnedCreate", (api.nvjpegBufferPinnedCreate)(h.raw, std::ptr::null_mut(), &mut s.pinned[k]))?;
            }
            check("nvjpegBufferDeviceCreate", (api.nvjpegBufferDeviceCreate)(h.raw, std::ptr::null_mut(), &mut s.device_buf))?;
        }
        s.new_state()?;
        Ok(s)
    }

    /// A fresh decode state with our device buffer attached (replacing any old one).
    fn new_state(&mut self) -> CudaResult<()> {
        let (h, api) = (&self.g.h, self.g.api);
        let mut state: ffi::nvjpegJpegState_t = std::ptr::null_mut();
        // SAFETY: live handle, decoder and buffer; the old state (if any) is idle: callers
        // wait for `done` first.
        unsafe {
            check("nvjpegDecoderStateCreate", (api.nvjpegDecoderStateCreate)(h.raw, self.g.decoder, &mut state))?;
            if !self.state.is_null() {
                (h.lib.nvjpegJpegStateDestroy)(self.state);
            }
            self.state = state;
            check("nvjpegStateAttachDeviceBuffer", (api.nvjpegStateAttachDeviceBuffer)(state, self.device_buf))
        }
    }

    /// The stream this state decodes on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Decodes one JPEG (or only `window` of it) into interleaved RGB at `out.0` with row
    /// pitch `out.1`, queued on this state's stream after `after` (the point on another
    /// stream where the output memory became ours). Returns Ok(false), queueing nothing,
    /// when the GPU-Huffman decoder does not take this image (progressive, 12-bit, unusual
    /// sampling ...). The host phase (parsing, and staging the entropy-coded data in
    /// page-locked memory) runs on the calling thread. On a decode error the state is
    /// replaced, so the next call works normally.
    ///
    /// # Safety
    /// - `out.0` must be device memory of this GPU, writable for `out.1 * rows` bytes (rows:
    ///   the window's or the image's height, `out.1` at least 3 x its width) and not used by
    ///   anything else until this state's stream has passed this decode.
    /// - `data` is read during the call only (nvJPEG copies the entropy-coded data into its
    ///   page-locked buffer).
    pub unsafe fn decode(&mut self, data: &[u8], window: Option<HwWindow>, out: (u64, usize), after: &GpuEvent) -> CudaResult<bool> {
        let (h, api) = (self.g.h.clone(), self.g.api);
        let set_roi = h.lib.nvjpegDecodeParamsSetROI.ok_or_else(|| CudaError("nvJPEG lacks nvjpegDecodeParamsSetROI".into()))?;
        if out.0 == 0 {
            return Err(CudaError("GpuHuffmanState::decode: null output".into()));
        }
        h.device.bind()?;
        let r = window.map_or([0, 0, -1, -1], |r| [r.x as c_int, r.y as c_int, r.width as c_int, r.height as c_int]);
        let mut unsupported: c_int = 1;
        // SAFETY: live objects of this handle; `data` valid for the call.
        unsafe {
            check("nvjpegJpegStreamParse", (h.lib.nvjpegJpegStreamParse)(h.raw, data.as_ptr(), data.len(), 0, 0, self.jstream))?;
            check("nvjpegDecodeParamsSetROI", set_roi(self.params, r[0], r[1], r[2], r[3]))?;
            check("nvjpegDecoderJpegSupported", (api.nvjpegDecoderJpegSupported)(self.g.decoder, self.jstream, self.params, &mut unsupported))?;
        }
        if unsupported != 0 {
            return Ok(false);
        }
        let info = h.info(data)?;
        let width = window.map_or(info.width as usize, |r| r.width);
        if out.1 < width * 3 {
            return Err(CudaError(format!("GpuHuffmanState::decode: {width} pixels wide needs pitch >= {} bytes, got {}", width * 3, out.1)));
        }
        // The buffer we are about to refill may still be feeding an earlier copy.
        let k = self.turn;
        self.copied[k].wait()?;
        let mut img = ffi::nvjpegImage_t::default();
        img.channel[0] = out.0 as *mut u8;
        img.pitch[0] = out.1;
        let raw_stream = stream_ptr(&self.stream);
        after.make_wait(&self.stream)?;
        // SAFETY: live objects; the pinned buffer is idle (waited above); output valid per
        // this function's contract.
        let st = unsafe {
            let mut st = (api.nvjpegStateAttachPinnedBuffer)(self.state, self.pinned[k]);
            if st == ffi::NVJPEG_STATUS_SUCCESS {
                st = (api.nvjpegDecodeJpegHost)(h.raw, self.g.decoder, self.state, self.params, self.jstream);
            }
            if st == ffi::NVJPEG_STATUS_SUCCESS {
                st = (api.nvjpegDecodeJpegTransferToDevice)(h.raw, self.g.decoder, self.state, self.jstream, raw_stream);
            }
            let copied = self.copied[k].record(&self.stream);
            if st == ffi::NVJPEG_STATUS_SUCCESS {
                st = (api.nvjpegDecodeJpegDevice)(h.raw, self.g.decoder, self.state, &mut img, raw_stream);
            }
            copied?;
            st
        };
        self.turn ^= 1;
        let fenced = self.done.record(&self.stream);
        if st != ffi::NVJPEG_STATUS_SUCCESS {
            // A state that failed mid-image is not documented as reusable: start afresh.
            self.done.wait()?;
            self.new_state()?;
        }
        check("nvjpegDecodeJpeg", st)?;
        fenced.map(|()| true)
    }

    /// Blocks until every decode queued so far is done on the GPU.
    pub fn wait_idle(&self) -> CudaResult<()> {
        self.done.wait()
    }
}

impl Drop for GpuHuffmanState {
    fn drop(&mut self) {
        if self.g.h.device.bind().is_err() {
            return;
        }
        let _ = self.done.wait();
        let (lib, api) = (self.g.h.lib, self.g.api);
        // SAFETY: each object was created in new() (or is null), is idle after the wait,
        // and is destroyed once: the state before the buffers attached to it.
        unsafe {
            if !self.state.is_null() {
                (lib.nvjpegJpegStateDestroy)(self.state);
            }
            for b in self.pinned {
                if !b.is_null() {
                    (api.nvjpegBufferPinnedDestroy)(b);
                }
            }
            if !self.device_buf.is_null() {
                (api.nvjpegBufferDeviceDestroy)(self.device_buf);
            }
            if !self.params.is_null() {
                if let Some(destroy) = lib.nvjpegDecodeParamsDestroy {
                    destroy(self.params);
                }
            }
            if !self.jstream.is_null() {
                (lib.nvjpegJpegStreamDestroy)(self.jstream);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{missing_for_test, report_skip, test_device, DeviceBuffer};

    #[test]
    fn library_presence_is_a_bool_never_a_panic() {
        let present = library_present();
        // Asking twice hits the cached result and must agree.
        assert_eq!(present, library_present());
        match library_version() {
            Ok(v) => {
                assert!(present);
                eprintln!("nvJPEG {v:?} from {}", ffi::lib().unwrap().soname);
            }
            Err(e) => {
                assert!(!present);
                assert!(e.to_string().contains("nvJPEG"), "{e}");
            }
        }
    }

    #[test]
    fn statuses_become_errors_naming_function_and_status() {
        assert!(check("nvjpegDecode", ffi::NVJPEG_STATUS_SUCCESS).is_ok());
        let e = check("nvjpegDecodeBatched", ffi::NVJPEG_STATUS_BAD_JPEG).unwrap_err();
        assert_eq!(e.to_string(), "nvjpegDecodeBatched: NVJPEG_STATUS_BAD_JPEG");
        let e = check("nvjpegCreateEx", 77).unwrap_err();
        assert_eq!(e.to_string(), "nvjpegCreateEx: nvjpegStatus_t(77)");
    }

    /// A smooth synthetic RGB image (gradients plus a slow pattern), so JPEG loss is small
    /// and decoder differences show up as upsampling / rounding only.
    fn synthetic(w: usize, h: usize) -> Vec<u8> {
        let mut px = Vec::with_capacity(w * h * 3);
        for y in 0..h {
            for x in 0..w {
                let r = (x * 255 / w.max(2).saturating_sub(1).max(1)).min(255);
                let g = (y * 255 / h.max(2).saturating_sub(1).max(1)).min(255);
                let b = (128.0 + 100.0 * ((x as f32 / 13.0).sin() * (y as f32 / 17.0).cos())) as usize;
                px.extend_from_slice(&[r as u8, g as u8, b.min(255) as u8]);
            }
        }
        px
    }

    /// (jpeg bytes, libjpeg-turbo's decode, width, height)
    fn test_image(w: usize, h: usize) -> (Vec<u8>, Vec<u8>, usize, usize) {
        let jpeg = sluice_codecs::encode_jpeg(&synthetic(w, h), w, h, 3, 92).unwrap();
        let (reference, shape) = sluice_codecs::decode(&jpeg, &sluice_codecs::DecodeParams::default()).unwrap();
        assert_eq!(shape, (h, w, 3));
        (jpeg, reference, w, h)
    }

    /// Device output -> dense host rows; asserts closeness to the CPU decode and prints it.
    fn compare(label: &str, buf: &DeviceBuffer, pitch: usize, w: usize, h: usize, reference: &[u8]) {
        let mut host = vec![0u8; pitch * h];
        buf.copy_to_host(0, &mut host).unwrap();
        let got: Vec<u8> = host.chunks(pitch).flat_map(|row| row[..w * 3].iter().copied()).collect();
        assert_eq!(got.len(), reference.len(), "{label}: shape");
        let (mut sum, mut max) = (0u64, 0u8);
        for (a, b) in got.iter().zip(reference) {
            let d = a.abs_diff(*b);
            sum += d as u64;
            max = max.max(d);
        }
        let mean = sum as f64 / got.len() as f64;
        eprintln!("{label} {w}x{h}: mean abs diff {mean:.3}, max {max} vs libjpeg-turbo");
        assert!(mean < 1.5, "{label} {w}x{h}: mean abs diff {mean}");
        assert!(max <= 40, "{label} {w}x{h}: max diff {max}");
    }

    fn corrupt_inputs(good: &[u8]) -> Vec<Vec<u8>> {
        let mut bad_sof = good.to_vec();
        // Damage everything after SOI: the header no longer parses.
        for b in bad_sof.iter_mut().skip(2).take(64) {
            *b = 0x5a;
        }
        vec![vec![0x5a; 1000], good[..20].to_vec(), bad_sof]
    }

    fn nvjpeg_or_skip() -> bool {
        ffi::lib().map_err(|e| missing_for_test("nvJPEG", e)).is_ok()
    }

    #[test]
    fn hardware_batch_decode_matches_libjpeg_turbo() {
        let Some(dev) = test_device() else { return };
        if !nvjpeg_or_skip() {
            return;
        }
        let nv = match NvJpeg::hardware(&dev) {
            Ok(nv) => nv,
            // A100 (8.0), H100/H200 (9.0) and B200 (10.0) have JPEG engines; elsewhere
            // having none is expected.
            Err(e) if ![(8, 0), (9, 0), (10, 0)].contains(&dev.compute_capability()) => {
                report_skip("no JPEG engine", e);
                return;
            }
            Err(e) => panic!("{dev:?} should have a hardware JPEG decoder: {e}"),
        };
        eprintln!("{nv:?}, engines {:?}", nv.hardware_engines());
        let stream = dev.new_stream().unwrap();
        let images = [test_image(320, 240), test_image(173, 97), test_image(640, 480)];
        let mut dec = HwBatchDecoder::new(&nv, 4).unwrap();
        for (jpeg, _, w, h) in &images {
            let info = nv.info(jpeg).unwrap();
            assert_eq!((info.width as usize, info.height as usize, info.components), (*w, *h, 3));
            assert_eq!(info.subsampling, Subsampling::S420);
            assert!(dec.supported(jpeg), "{w}x{h} 4:2:0 baseline should be hardware-decodable");
        }
        // One dense pitch, two padded ones, to check the pitch is honoured.
        let pitches: Vec<usize> = images.iter().enumerate().map(|(k, (_, _, w, _))| w * 3 + [0, 64, 7][k]).collect();
        let bufs: Vec<DeviceBuffer> = images
            .iter()
            .zip(&pitches)
            .map(|((_, _, _, h), p)| DeviceBuffer::alloc(&dev, &stream, p * h).unwrap())
            .collect();
        let outs: Vec<(u64, usize)> = bufs.iter().zip(&pitches).map(|(b, &p)| (b.device_ptr(), p)).collect();
        let data: Vec<&[u8]> = images.iter().map(|(j, ..)| j.as_slice()).collect();

        let run = |dec: &mut HwBatchDecoder, label: &str| {
            // SAFETY: buffers are pitch*height bytes on this device; data outlives the sync in
            // copy_to_host below.
            unsafe { dec.decode(&data, &outs, &stream).unwrap() };
            for (((_, reference, w, h), buf), p) in images.iter().zip(&bufs).zip(&pitches) {
                compare(label, buf, *p, *w, *h, reference);
            }
        };
        run(&mut dec, "hardware");
        // A smaller batch re-initialises; then the full batch again.
        // SAFETY: as above.
        unsafe { dec.decode(&data[..1], &outs[..1], &stream).unwrap() };
        compare("hardware (batch of 1)", &bufs[0], pitches[0], images[0].2, images[0].3, &images[0].1);
        run(&mut dec, "hardware (again)");

        // Corrupt data: the hardware engine does not always notice (seen on an H200: a
        // damaged header can decode to garbage without an error), so callers must vet files
        // themselves (the mixed decoder does). What must hold: no crash, and the decoder
        // works again afterwards.
        for bad in corrupt_inputs(&images[0].0) {
            let batch: Vec<&[u8]> = vec![&images[1].0, &bad];
            // SAFETY: as above.
            let r = unsafe { dec.decode(&batch, &outs[1..], &stream) };
            eprintln!("corrupt batch: {:?}", r.err());
        }
        // ...a too-small pitch is refused, and more images than max_batch too...
        // SAFETY: rejected before any GPU work.
        unsafe {
            assert!(dec.decode(&data[..1], &[(outs[0].0, 10)], &stream).is_err());
            assert!(dec.decode(&[data[0]; 5], &[outs[0]; 5], &stream).is_err());
            assert!(dec.decode(&data[..2], &outs[..1], &stream).is_err());
        }
        // ...and the decoder still works afterwards.
        run(&mut dec, "hardware (after errors)");

        // Two decoders sharing one batch side by side, each on its own stream after one start
        // point, joined back (as the mixed decoder runs them). Outputs are cleared first so
        // stale results cannot pass.
        let zeros: Vec<Vec<u8>> = bufs.iter().map(|b| vec![0u8; b.len()]).collect();
        for (b, z) in bufs.iter().zip(&zeros) {
            // SAFETY: `zeros` outlive the synchronize below.
            unsafe { b.copy_from_host_async(0, z).unwrap() };
        }
        let mut dec2 = HwBatchDecoder::new(&nv, 4).unwrap();
        let start = GpuEvent::new(&dev).unwrap();
        start.record(&stream).unwrap();
        let targets: Vec<HwTarget> =
            images.iter().zip(&outs).map(|(i, &(ptr, pitch))| HwTarget { ptr, pitch, width: i.2, window: None }).collect();
        // SAFETY: as above; both join `stream` before the copies back.
        unsafe {
            dec.submit(&data[..2], &targets[..2], &start).unwrap();
            dec2.submit(&data[2..], &targets[2..], &start).unwrap();
        }
        dec.join(&stream).unwrap();
        dec2.join(&stream).unwrap();
        for (((_, reference, w, h), buf), p) in images.iter().zip(&bufs).zip(&pitches) {
            compare("two decoders side by side", buf, *p, *w, *h, reference);
        }
        stream.synchronize().unwrap();

        // A window decoded on the engine equals that window of the whole image (an odd
        // offset and size, into a padded pitch).
        if dec.decodes_windows() {
            let (jpeg, reference, w, _) = &images[2];
            let win = HwWindow { x: 37, y: 21, width: 101, height: 57 };
            let pitch = win.width * 3 + 5;
            let buf = DeviceBuffer::alloc(&dev, &stream, pitch * win.height).unwrap();
            let expected: Vec<u8> = (win.y..win.y + win.height)
                .flat_map(|y| reference[(y * w + win.x) * 3..(y * w + win.x + win.width) * 3].iter().copied())
                .collect();
            let t = HwTarget { ptr: buf.device_ptr(), pitch, width: *w, window: Some(win) };
            start.record(&stream).unwrap();
            // SAFETY: `buf` holds the window at this pitch; joined before the copy back.
            unsafe { dec.submit(&[jpeg.as_slice()], &[t], &start).unwrap() };
            dec.join(&stream).unwrap();
            compare("hardware window", &buf, pitch, win.width, win.height, &expected);
        } else {
            eprintln!("this nvJPEG has no nvjpegDecodeBatchedEx: window decoding not tested");
        }
        stream.synchronize().unwrap();
        drop(dec2);
        drop(dec);
        stream.synchronize().unwrap();
    }

    #[test]
    fn gpu_huffman_decode_matches_libjpeg_turbo_whole_and_windows() {
        let Some(dev) = test_device() else { return };
        if !nvjpeg_or_skip() {
            return;
        }
        let nv = NvJpeg::hybrid(&dev).unwrap();
        let g = GpuHuffman::new(&nv).unwrap();
        let mut st = GpuHuffmanState::new(&g).unwrap();
        let stream = dev.new_stream().unwrap();
        let ready = GpuEvent::new(&dev).unwrap();
        ready.record(&stream).unwrap();
        let images = [test_image(1280, 960), test_image(173, 97), test_image(640, 480)];
        let decode_all = |st: &mut GpuHuffmanState, label: &str| {
            for (k, (jpeg, reference, w, h)) in images.iter().enumerate() {
                let pitch = w * 3 + [0, 64, 7][k];
                let buf = DeviceBuffer::alloc(&dev, &stream, pitch * h).unwrap();
                ready.record(&stream).unwrap();
                // SAFETY: buffer is pitch*height bytes on this device, not used elsewhere
                // until the wait below.
                assert!(unsafe { st.decode(jpeg, None, (buf.device_ptr(), pitch), &ready).unwrap() }, "{label}: refused");
                st.wait_idle().unwrap();
                compare(label, &buf, pitch, *w, *h, reference);
                // A window: the same pixels as the whole image's.
                let win = HwWindow { x: w / 4, y: h / 3, width: w / 2, height: h / 2 };
                let wbuf = DeviceBuffer::alloc(&dev, &stream, win.width * 3 * win.height).unwrap();
                ready.record(&stream).unwrap();
                // SAFETY: as above, for the window's size.
                assert!(unsafe { st.decode(jpeg, Some(win), (wbuf.device_ptr(), win.width * 3), &ready).unwrap() });
                st.wait_idle().unwrap();
                let cut: Vec<u8> = (win.y..win.y + win.height)
                    .flat_map(|y| reference[(y * w + win.x) * 3..(y * w + win.x + win.width) * 3].iter().copied())
                    .collect();
                compare(&format!("{label} window"), &wbuf, win.width * 3, win.width, win.height, &cut);
            }
        };
        decode_all(&mut st, "gpu huffman");
        let buf = DeviceBuffer::alloc(&dev, &stream, 1280 * 3 * 960).unwrap();
        for (k, bad) in corrupt_inputs(&images[0].0).iter().enumerate() {
            // SAFETY: buffer is large enough for the one valid size used in this test.
            let r = unsafe { st.decode(bad, None, (buf.device_ptr(), 1280 * 3), &ready) };
            eprintln!("corrupt image {k}: {r:?}");
            // No JPEG at all, or only its start: an error, or refused (the caller then
            // decodes on the CPU, which reports it). nvJPEG "decodes" a damaged header
            // (k = 2) into garbage: the pipeline vets files before sending them here.
            if k < 2 {
                assert!(!matches!(r, Ok(true)), "corrupt image {k} decoded");
            }
        }
        let truncated = &images[0].0[..images[0].0.len() / 2];
        // SAFETY: as above.
        let r = unsafe { st.decode(truncated, None, (buf.device_ptr(), 1280 * 3), &ready) };
        eprintln!("truncated image: {:?}", r.as_ref().map(|_| "decoded"));
        st.wait_idle().unwrap();
        decode_all(&mut st, "gpu huffman (after errors)");
    }

    #[test]
    fn hybrid_decode_matches_libjpeg_turbo() {
        let Some(dev) = test_device() else { return };
        if !nvjpeg_or_skip() {
            return;
        }
        let nv = NvJpeg::hybrid(&dev).unwrap();
        assert!(HwBatchDecoder::new(&nv, 2).is_err(), "a hybrid handle cannot make a hardware decoder");
        eprintln!("{nv:?}");
        let (a, b, c) = nv.version();
        assert!(a >= 11 && (a, b, c) == library_version().unwrap());
        let stream = dev.new_stream().unwrap();
        let mut dec = HybridDecoder::new(&nv).unwrap();
        let images = [test_image(320, 240), test_image(173, 97), test_image(640, 480)];
        let decode_all = |dec: &mut HybridDecoder, label: &str| {
            for (k, (jpeg, reference, w, h)) in images.iter().enumerate() {
                let pitch = w * 3 + [0, 64, 7][k];
                let buf = DeviceBuffer::alloc(&dev, &stream, pitch * h).unwrap();
                // SAFETY: buffer is pitch*height bytes on this device; jpeg outlives the sync.
                unsafe { dec.decode(jpeg, (buf.device_ptr(), pitch), &stream).unwrap() };
                compare(label, &buf, pitch, *w, *h, reference);
            }
        };
        decode_all(&mut dec, "hybrid");
        let buf = DeviceBuffer::alloc(&dev, &stream, 320 * 3 * 240).unwrap();
        for bad in corrupt_inputs(&images[0].0) {
            // SAFETY: buffer is large enough for the one valid size used in this test.
            let e = unsafe { dec.decode(&bad, (buf.device_ptr(), 320 * 3), &stream) }.unwrap_err();
            eprintln!("corrupt image: {e}");
        }
        // A JPEG whose entropy-coded data is cut short past the header: nvJPEG may decode it
        // (with grey) or refuse it, but must not wedge the decoder.
        let truncated = &images[0].0[..images[0].0.len() / 2];
        // SAFETY: as above (320x240).
        let r = unsafe { dec.decode(truncated, (buf.device_ptr(), 320 * 3), &stream) };
        eprintln!("truncated image: {:?}", r.as_ref().map(|_| "decoded"));
        stream.synchronize().unwrap();
        decode_all(&mut dec, "hybrid (after errors)");
    }
}
