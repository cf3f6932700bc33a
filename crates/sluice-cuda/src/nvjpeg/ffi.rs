//! The slice of nvJPEG's C API (nvjpeg.h, CUDA 12/13) that Sluice uses, loaded at run time
//! with libloading so that the crate builds and runs without nvJPEG installed.
//!
//! Enums are plain `c_int` constants rather than Rust enums: the library may return values
//! a newer header added, and an out-of-range Rust enum would be undefined behaviour.

#![allow(non_camel_case_types, non_snake_case, dead_code)]

use std::ffi::c_void;
use std::os::raw::{c_int, c_uchar, c_uint};
use std::sync::OnceLock;

use libloading::Library;

use crate::error::{CudaError, CudaResult};

/// nvjpegStatus_t.
pub type nvjpegStatus_t = c_int;
pub const NVJPEG_STATUS_SUCCESS: nvjpegStatus_t = 0;
pub const NVJPEG_STATUS_NOT_INITIALIZED: nvjpegStatus_t = 1;
pub const NVJPEG_STATUS_INVALID_PARAMETER: nvjpegStatus_t = 2;
pub const NVJPEG_STATUS_BAD_JPEG: nvjpegStatus_t = 3;
pub const NVJPEG_STATUS_JPEG_NOT_SUPPORTED: nvjpegStatus_t = 4;
pub const NVJPEG_STATUS_ALLOCATOR_FAILURE: nvjpegStatus_t = 5;
pub const NVJPEG_STATUS_EXECUTION_FAILED: nvjpegStatus_t = 6;
pub const NVJPEG_STATUS_ARCH_MISMATCH: nvjpegStatus_t = 7;
pub const NVJPEG_STATUS_INTERNAL_ERROR: nvjpegStatus_t = 8;
pub const NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: nvjpegStatus_t = 9;
pub const NVJPEG_STATUS_INCOMPLETE_BITSTREAM: nvjpegStatus_t = 10;

/// The C name of a status, for error messages.
pub fn status_name(s: nvjpegStatus_t) -> String {
    match s {
        NVJPEG_STATUS_SUCCESS => "NVJPEG_STATUS_SUCCESS".into(),
        NVJPEG_STATUS_NOT_INITIALIZED => "NVJPEG_STATUS_NOT_INITIALIZED".into(),
        NVJPEG_STATUS_INVALID_PARAMETER => "NVJPEG_STATUS_INVALID_PARAMETER".into(),
        NVJPEG_STATUS_BAD_JPEG => "NVJPEG_STATUS_BAD_JPEG".into(),
        NVJPEG_STATUS_JPEG_NOT_SUPPORTED => "NVJPEG_STATUS_JPEG_NOT_SUPPORTED".into(),
        NVJPEG_STATUS_ALLOCATOR_FAILURE => "NVJPEG_STATUS_ALLOCATOR_FAILURE".into(),
        NVJPEG_STATUS_EXECUTION_FAILED => "NVJPEG_STATUS_EXECUTION_FAILED".into(),
        NVJPEG_STATUS_ARCH_MISMATCH => "NVJPEG_STATUS_ARCH_MISMATCH".into(),
        NVJPEG_STATUS_INTERNAL_ERROR => "NVJPEG_STATUS_INTERNAL_ERROR".into(),
        NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED => "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED".into(),
        NVJPEG_STATUS_INCOMPLETE_BITSTREAM => "NVJPEG_STATUS_INCOMPLETE_BITSTREAM".into(),
        other => format!("nvjpegStatus_t({other})"),
    }
}

/// Turns a status into a result whose error names the function and the status, e.g.
/// "nvjpegDecodeBatched: NVJPEG_STATUS_BAD_JPEG".
pub fn check(function: &str, s: nvjpegStatus_t) -> CudaResult<()> {
    if s == NVJPEG_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(CudaError(format!("{function}: {}", status_name(s))))
    }
}

/// nvjpegBackend_t.
pub type nvjpegBackend_t = c_int;
pub const NVJPEG_BACKEND_DEFAULT: nvjpegBackend_t = 0;
pub const NVJPEG_BACKEND_HYBRID: nvjpegBackend_t = 1;
pub const NVJPEG_BACKEND_GPU_HYBRID: nvjpegBackend_t = 2;
pub const NVJPEG_BACKEND_HARDWARE: nvjpegBackend_t = 3;

/// nvjpegOutputFormat_t.
pub type nvjpegOutputFormat_t = c_int;
pub const NVJPEG_OUTPUT_UNCHANGED: nvjpegOutputFormat_t = 0;
pub const NVJPEG_OUTPUT_RGB: nvjpegOutputFormat_t = 3;
pub const NVJPEG_OUTPUT_RGBI: nvjpegOutputFormat_t = 5;

/// nvjpegChromaSubsampling_t.
pub type nvjpegChromaSubsampling_t = c_int;
pub const NVJPEG_CSS_444: nvjpegChromaSubsampling_t = 0;
pub const NVJPEG_CSS_422: nvjpegChromaSubsampling_t = 1;
pub const NVJPEG_CSS_420: nvjpegChromaSubsampling_t = 2;
pub const NVJPEG_CSS_440: nvjpegChromaSubsampling_t = 3;
pub const NVJPEG_CSS_411: nvjpegChromaSubsampling_t = 4;
pub const NVJPEG_CSS_410: nvjpegChromaSubsampling_t = 5;
pub const NVJPEG_CSS_GRAY: nvjpegChromaSubsampling_t = 6;
pub const NVJPEG_CSS_410V: nvjpegChromaSubsampling_t = 7;
pub const NVJPEG_CSS_UNKNOWN: nvjpegChromaSubsampling_t = -1;

/// libraryPropertyType (library_types.h).
pub type libraryPropertyType = c_int;
pub const MAJOR_VERSION: libraryPropertyType = 0;
pub const MINOR_VERSION: libraryPropertyType = 1;
pub const PATCH_LEVEL: libraryPropertyType = 2;

pub const NVJPEG_MAX_COMPONENT: usize = 4;

/// nvjpegImage_t: one output image, up to four planes (interleaved formats use plane 0 only).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct nvjpegImage_t {
    pub channel: [*mut c_uchar; NVJPEG_MAX_COMPONENT],
    pub pitch: [usize; NVJPEG_MAX_COMPONENT],
}

impl Default for nvjpegImage_t {
    fn default() -> Self {
        nvjpegImage_t { channel: [std::ptr::null_mut(); NVJPEG_MAX_COMPONENT], pitch: [0; NVJPEG_MAX_COMPONENT] }
    }
}

/// nvjpegDevAllocator_t. We always pass null (nvJPEG's cudaMalloc/cudaFree), so only the
/// layout matters.
#[repr(C)]
pub struct nvjpegDevAllocator_t {
    pub dev_malloc: Option<unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int>,
    pub dev_free: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

/// nvjpegPinnedAllocator_t; always passed as null too.
#[repr(C)]
pub struct nvjpegPinnedAllocator_t {
    pub pinned_malloc: Option<unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> c_int>,
    pub pinned_free: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

#[repr(C)]
pub struct nvjpegHandle {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct nvjpegJpegState {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct nvjpegJpegStream {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct nvjpegDecodeParams {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct nvjpegJpegDecoder {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct nvjpegBufferPinned {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct nvjpegBufferDevice {
    _opaque: [u8; 0],
}
pub type nvjpegDecodeParams_t = *mut nvjpegDecodeParams;
pub type nvjpegJpegDecoder_t = *mut nvjpegJpegDecoder;
pub type nvjpegBufferPinned_t = *mut nvjpegBufferPinned;
pub type nvjpegBufferDevice_t = *mut nvjpegBufferDevice;
pub type nvjpegHandle_t = *mut nvjpegHandle;
pub type nvjpegJpegState_t = *mut nvjpegJpegState;
pub type nvjpegJpegStream_t = *mut nvjpegJpegStream;
/// cudaStream_t is the driver's CUstream.
pub type cudaStream_t = *mut c_void;

/// The functions we call, resolved once per process.
pub struct NvJpegLib {
    pub nvjpegGetProperty: unsafe extern "C" fn(libraryPropertyType, *mut c_int) -> nvjpegStatus_t,
    pub nvjpegCreateEx: unsafe extern "C" fn(
        nvjpegBackend_t,
        *mut nvjpegDevAllocator_t,
        *mut nvjpegPinnedAllocator_t,
        c_uint,
        *mut nvjpegHandle_t,
    ) -> nvjpegStatus_t,
    pub nvjpegDestroy: unsafe extern "C" fn(nvjpegHandle_t) -> nvjpegStatus_t,
    pub nvjpegJpegStateCreate: unsafe extern "C" fn(nvjpegHandle_t, *mut nvjpegJpegState_t) -> nvjpegStatus_t,
    pub nvjpegJpegStateDestroy: unsafe extern "C" fn(nvjpegJpegState_t) -> nvjpegStatus_t,
    pub nvjpegGetImageInfo: unsafe extern "C" fn(
        nvjpegHandle_t,
        *const c_uchar,
        usize,
        *mut c_int,
        *mut nvjpegChromaSubsampling_t,
        *mut c_int,
        *mut c_int,
    ) -> nvjpegStatus_t,
    pub nvjpegDecode: unsafe extern "C" fn(
        nvjpegHandle_t,
        nvjpegJpegState_t,
        *const c_uchar,
        usize,
        nvjpegOutputFormat_t,
        *mut nvjpegImage_t,
        cudaStream_t,
    ) -> nvjpegStatus_t,
    pub nvjpegDecodeBatchedInitialize:
        unsafe extern "C" fn(nvjpegHandle_t, nvjpegJpegState_t, c_int, c_int, nvjpegOutputFormat_t) -> nvjpegStatus_t,
    pub nvjpegDecodeBatched: unsafe extern "C" fn(
        nvjpegHandle_t,
        nvjpegJpegState_t,
        *const *const c_uchar,
        *const usize,
        *mut nvjpegImage_t,
        cudaStream_t,
    ) -> nvjpegStatus_t,
    pub nvjpegDecodeBatchedSupported:
        unsafe extern "C" fn(nvjpegHandle_t, nvjpegJpegStream_t, *mut c_int) -> nvjpegStatus_t,
    pub nvjpegJpegStreamCreate: unsafe extern "C" fn(nvjpegHandle_t, *mut nvjpegJpegStream_t) -> nvjpegStatus_t,
    pub nvjpegJpegStreamDestroy: unsafe extern "C" fn(nvjpegJpegStream_t) -> nvjpegStatus_t,
    pub nvjpegJpegStreamParse:
        unsafe extern "C" fn(nvjpegHandle_t, *const c_uchar, usize, c_int, c_int, nvjpegJpegStream_t) -> nvjpegStatus_t,
    /// Header-only parse (nvJPEG >= 11.?); optional, we fall back to a full parse without it.
    pub nvjpegJpegStreamParseHeader:
        Option<unsafe extern "C" fn(nvjpegHandle_t, *const c_uchar, usize, nvjpegJpegStream_t) -> nvjpegStatus_t>,
    /// Number of hardware JPEG engines; optional (nvJPEG >= 11.9).
    pub nvjpegGetHardwareDecoderInfo:
        Option<unsafe extern "C" fn(nvjpegHandle_t, *mut c_uint, *mut c_uint) -> nvjpegStatus_t>,
    /// Reserves the hardware decoder's buffers up front.
    pub nvjpegDecodeBatchedPreAllocate: Option<
        unsafe extern "C" fn(nvjpegHandle_t, nvjpegJpegState_t, c_int, c_int, c_int, nvjpegChromaSubsampling_t, nvjpegOutputFormat_t) -> nvjpegStatus_t,
    >,
    /// Batched decoding with per-image parameters (ROI).
    pub nvjpegDecodeBatchedEx: Option<
        unsafe extern "C" fn(
            nvjpegHandle_t,
            nvjpegJpegState_t,
            *const *const c_uchar,
            *const usize,
            *mut nvjpegImage_t,
            *mut nvjpegDecodeParams_t,
            cudaStream_t,
        ) -> nvjpegStatus_t,
    >,
    pub nvjpegDecodeParamsCreate: Option<unsafe extern "C" fn(nvjpegHandle_t, *mut nvjpegDecodeParams_t) -> nvjpegStatus_t>,
    pub nvjpegDecodeParamsDestroy: Option<unsafe extern "C" fn(nvjpegDecodeParams_t) -> nvjpegStatus_t>,
    pub nvjpegDecodeParamsSetROI: Option<unsafe extern "C" fn(nvjpegDecodeParams_t, c_int, c_int, c_int, c_int) -> nvjpegStatus_t>,
    /// The decoupled API (decoder objects, host / transfer / device phases, attachable
    /// buffers), used for GPU Huffman decoding (NVJPEG_BACKEND_GPU_HYBRID); None when this
    /// nvJPEG lacks any of it.
    pub decoupled: Option<Decoupled>,
    /// Which file was loaded, for messages.
    pub soname: &'static str,
    /// Keeps the code the pointers above point into mapped for the life of the process.
    _lib: Library,
}

pub struct Decoupled {
    pub nvjpegDecoderCreate: unsafe extern "C" fn(nvjpegHandle_t, nvjpegBackend_t, *mut nvjpegJpegDecoder_t) -> nvjpegStatus_t,
    pub nvjpegDecoderDestroy: unsafe extern "C" fn(nvjpegJpegDecoder_t) -> nvjpegStatus_t,
    pub nvjpegDecoderJpegSupported:
        unsafe extern "C" fn(nvjpegJpegDecoder_t, nvjpegJpegStream_t, nvjpegDecodeParams_t, *mut c_int) -> nvjpegStatus_t,
    pub nvjpegDecoderStateCreate: unsafe extern "C" fn(nvjpegHandle_t, nvjpegJpegDecoder_t, *mut nvjpegJpegState_t) -> nvjpegStatus_t,
    pub nvjpegBufferPinnedCreate:
        unsafe extern "C" fn(nvjpegHandle_t, *mut nvjpegPinnedAllocator_t, *mut nvjpegBufferPinned_t) -> nvjpegStatus_t,
    pub nvjpegBufferPinnedDestroy: unsafe extern "C" fn(nvjpegBufferPinned_t) -> nvjpegStatus_t,
    pub nvjpegBufferDeviceCreate:
        unsafe extern "C" fn(nvjpegHandle_t, *mut nvjpegDevAllocator_t, *mut nvjpegBufferDevice_t) -> nvjpegStatus_t,
    pub nvjpegBufferDeviceDestroy: unsafe extern "C" fn(nvjpegBufferDevice_t) -> nvjpegStatus_t,
    pub nvjpegStateAttachPinnedBuffer: unsafe extern "C" fn(nvjpegJpegState_t, nvjpegBufferPinned_t) -> nvjpegStatus_t,
    pub nvjpegStateAttachDeviceBuffer: unsafe extern "C" fn(nvjpegJpegState_t, nvjpegBufferDevice_t) -> nvjpegStatus_t,
    pub nvjpegDecodeParamsSetOutputFormat: unsafe extern "C" fn(nvjpegDecodeParams_t, nvjpegOutputFormat_t) -> nvjpegStatus_t,
    pub nvjpegDecodeJpegHost: unsafe extern "C" fn(
        nvjpegHandle_t,
        nvjpegJpegDecoder_t,
        nvjpegJpegState_t,
        nvjpegDecodeParams_t,
        nvjpegJpegStream_t,
    ) -> nvjpegStatus_t,
    pub nvjpegDecodeJpegTransferToDevice:
        unsafe extern "C" fn(nvjpegHandle_t, nvjpegJpegDecoder_t, nvjpegJpegState_t, nvjpegJpegStream_t, cudaStream_t) -> nvjpegStatus_t,
    pub nvjpegDecodeJpegDevice:
        unsafe extern "C" fn(nvjpegHandle_t, nvjpegJpegDecoder_t, nvjpegJpegState_t, *mut nvjpegImage_t, cudaStream_t) -> nvjpegStatus_t,
}

/// Names tried in order: the CUDA 13 library first (what the GPU machines ship), then 12,
/// then the unversioned development link.
const SONAMES: [&str; 3] = ["libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"];

/// The process-wide nvJPEG, loaded on first use. A missing library or symbol is an error
/// (remembered, so we do not retry on every call), never a panic.
pub fn lib() -> CudaResult<&'static NvJpegLib> {
    static LIB: OnceLock<Result<NvJpegLib, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(|e| CudaError(e.clone()))
}

fn load() -> Result<NvJpegLib, String> {
    let mut tried = Vec::new();
    for soname in SONAMES {
        // SAFETY: loading nvJPEG runs only its (and CUDA runtime's) initialisers, which have
        // no preconditions on our side.
        match unsafe { Library::new(soname) } {
            Ok(lib) => return resolve(lib, soname),
            Err(e) => tried.push(format!("{soname}: {e}")),
        }
    }
    Err(format!("nvJPEG is not available (tried {})", tried.join("; ")))
}

fn resolve(lib: Library, soname: &'static str) -> Result<NvJpegLib, String> {
    // SAFETY: each symbol is looked up with the signature nvjpeg.h declares for it; the copied
    // function pointers stay valid because the Library moves into the returned struct, which
    // lives in a static for the rest of the process.
    unsafe {
        macro_rules! req {
            ($name:ident) => {{
                // A local, so the borrow of `lib` ends here and `lib` can move below.
                let sym: libloading::Symbol<_> = lib
                    .get(concat!(stringify!($name), "\0").as_bytes())
                    .map_err(|e| format!("{soname} has no {}: {e}", stringify!($name)))?;
                *sym
            }};
        }
        macro_rules! opt {
            ($name:ident) => {{
                let sym: Option<libloading::Symbol<_>> = lib.get(concat!(stringify!($name), "\0").as_bytes()).ok();
                sym.map(|s| *s)
            }};
        }
        Ok(NvJpegLib {
            nvjpegGetProperty: req!(nvjpegGetProperty),
            nvjpegCreateEx: req!(nvjpegCreateEx),
            nvjpegDestroy: req!(nvjpegDestroy),
            nvjpegJpegStateCreate: req!(nvjpegJpegStateCreate),
            nvjpegJpegStateDestroy: req!(nvjpegJpegStateDestroy),
            nvjpegGetImageInfo: req!(nvjpegGetImageInfo),
            nvjpegDecode: req!(nvjpegDecode),
            nvjpegDecodeBatchedInitialize: req!(nvjpegDecodeBatchedInitialize),
            nvjpegDecodeBatched: req!(nvjpegDecodeBatched),
            nvjpegDecodeBatchedSupported: req!(nvjpegDecodeBatchedSupported),
            nvjpegJpegStreamCreate: req!(nvjpegJpegStreamCreate),
            nvjpegJpegStreamDestroy: req!(nvjpegJpegStreamDestroy),
            nvjpegJpegStreamParse: req!(nvjpegJpegStreamParse),
            nvjpegJpegStreamParseHeader: opt!(nvjpegJpegStreamParseHeader),
            nvjpegGetHardwareDecoderInfo: opt!(nvjpegGetHardwareDecoderInfo),
            nvjpegDecodeBatchedPreAllocate: opt!(nvjpegDecodeBatchedPreAllocate),
            nvjpegDecodeBatchedEx: opt!(nvjpegDecodeBatchedEx),
            nvjpegDecodeParamsCreate: opt!(nvjpegDecodeParamsCreate),
            nvjpegDecodeParamsDestroy: opt!(nvjpegDecodeParamsDestroy),
            nvjpegDecodeParamsSetROI: opt!(nvjpegDecodeParamsSetROI),
            decoupled: decoupled(&lib),
            soname,
            _lib: lib,
        })
    }
}

/// The decoupled API's entry points, or None when this nvJPEG lacks any of them.
fn decoupled(lib: &Library) -> Option<Decoupled> {
    // SAFETY: as in `resolve`: nvjpeg.h's signatures, pointers valid while `lib` lives (it
    // moves into the static NvJpegLib beside them).
    unsafe {
        macro_rules! get {
            ($name:ident) => {{
                let sym: libloading::Symbol<_> = lib.get(concat!(stringify!($name), "\0").as_bytes()).ok()?;
                *sym
            }};
        }
        Some(Decoupled {
            nvjpegDecoderCreate: get!(nvjpegDecoderCreate),
            nvjpegDecoderDestroy: get!(nvjpegDecoderDestroy),
            nvjpegDecoderJpegSupported: get!(nvjpegDecoderJpegSupported),
            nvjpegDecoderStateCreate: get!(nvjpegDecoderStateCreate),
            nvjpegBufferPinnedCreate: get!(nvjpegBufferPinnedCreate),
            nvjpegBufferPinnedDestroy: get!(nvjpegBufferPinnedDestroy),
            nvjpegBufferDeviceCreate: get!(nvjpegBufferDeviceCreate),
            nvjpegBufferDeviceDestroy: get!(nvjpegBufferDeviceDestroy),
            nvjpegStateAttachPinnedBuffer: get!(nvjpegStateAttachPinnedBuffer),
            nvjpegStateAttachDeviceBuffer: get!(nvjpegStateAttachDeviceBuffer),
            nvjpegDecodeParamsSetOutputFormat: get!(nvjpegDecodeParamsSetOutputFormat),
            nvjpegDecodeJpegHost: get!(nvjpegDecodeJpegHost),
            nvjpegDecodeJpegTransferToDevice: get!(nvjpegDecodeJpegTransferToDevice),
            nvjpegDecodeJpegDevice: get!(nvjpegDecodeJpegDevice),
        })
    }
}
