//! One GPU: its context, the pipeline's streams and a stream-ordered memory pool.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use cudarc::driver::{sys, CudaContext, CudaStream};

use crate::error::{check, CudaError, CudaResult};
use crate::kernels::KernelCache;

/// Memory the pool keeps cached after frees before returning it to the driver: enough for a
/// few batches in flight, so steady state allocates nothing from the driver.
pub const POOL_RELEASE_THRESHOLD: u64 = 512 << 20;

/// True when the CUDA driver library can be loaded on this machine. Never panics.
pub fn driver_present() -> bool {
    // cudarc panics on first use when libcuda is missing: ask first.
    catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false)
}

/// Number of CUDA devices (0 when there is no driver or no GPU).
pub fn device_count() -> usize {
    if !driver_present() {
        return 0;
    }
    catch_unwind(|| CudaContext::device_count().map(|n| n.max(0) as usize).unwrap_or(0)).unwrap_or(0)
}

/// The GPU whose memory device address `ptr` is in; None when the driver does not know it
/// as device memory (or no context is current on the calling thread).
pub fn pointer_ordinal(ptr: u64) -> Option<usize> {
    let mut ordinal: i32 = -1;
    // SAFETY: a plain query; the driver only reads `ptr` as a number.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            &mut ordinal as *mut i32 as *mut std::ffi::c_void,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr,
        )
    };
    (r == sys::CUresult::CUDA_SUCCESS && ordinal >= 0).then_some(ordinal as usize)
}

/// An open GPU. Cheap to share (`Arc`); every pipeline on the same ordinal shares one.
pub struct GpuDevice {
    ctx: Arc<CudaContext>,
    ordinal: usize,
    name: String,
    compute_capability: (i32, i32),
    kernels: KernelCache,
}

impl std::fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuDevice({} {}, sm_{}{})", self.ordinal, self.name, self.compute_capability.0, self.compute_capability.1)
    }
}

impl GpuDevice {
    /// Opens device `ordinal` (its primary context) and sets up its memory pool. Returns an
    /// error, never panics, when there is no driver, no such device or CUDA fails.
    pub fn open(ordinal: usize) -> CudaResult<Arc<GpuDevice>> {
        static DEVICES: OnceLock<std::sync::Mutex<Vec<Option<Arc<GpuDevice>>>>> = OnceLock::new();
        if !driver_present() {
            return Err(CudaError("no CUDA driver found (libcuda.so.1); run with device_id=None for CPU only".into()));
        }
        let count = device_count();
        if ordinal >= count {
            return Err(CudaError(format!(
                "device_id={ordinal} but this machine has {count} CUDA device(s); use device_id=None for CPU only"
            )));
        }
        let lock = DEVICES.get_or_init(Default::default);
        let mut devices = lock.lock().unwrap_or_else(|p| p.into_inner());
        if devices.len() <= ordinal {
            devices.resize(ordinal + 1, None);
        }
        if let Some(d) = &devices[ordinal] {
            return Ok(d.clone());
        }
        let ctx = catch_unwind(AssertUnwindSafe(|| CudaContext::new(ordinal)))
            .map_err(|_| CudaError("the CUDA driver failed to initialise".into()))??;
        // We order every use of a buffer with explicit events; cudarc's own tracking would
        // add an event per allocation on top.
        unsafe { ctx.disable_event_tracking() };
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let compute_capability = ctx.compute_capability()?;
        ctx.bind_to_thread()?;
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: plain driver calls on a live context; the value pointer outlives the call.
        unsafe {
            check("cuDeviceGetDefaultMemPool", sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()))?;
            let mut threshold = POOL_RELEASE_THRESHOLD;
            check(
                "cuMemPoolSetAttribute(release threshold)",
                sys::cuMemPoolSetAttribute(
                    pool,
                    sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                    &mut threshold as *mut u64 as *mut _,
                ),
            )?;
        }
        let dev = Arc::new(GpuDevice { ctx, ordinal, name, compute_capability, kernels: KernelCache::default() });
        devices[ordinal] = Some(dev.clone());
        Ok(dev)
    }

    /// The CUDA context (bound to the calling thread by every method that needs it).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Makes this device's context current on the calling thread.
    pub fn bind(&self) -> CudaResult<()> {
        Ok(self.ctx.bind_to_thread()?)
    }

    /// A new non-blocking stream.
    pub fn new_stream(&self) -> CudaResult<Arc<CudaStream>> {
        Ok(self.ctx.new_stream()?)
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// True when device address `ptr` (another library's memory) is not this device's: it
    /// belongs to another GPU. Memory the driver cannot place (host, managed) counts as
    /// ours: copies from it work from any device. Call with this device's context bound.
    pub fn is_foreign_pointer(&self, ptr: u64) -> bool {
        pointer_ordinal(ptr).is_some_and(|o| o != self.ordinal)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// (major, minor), e.g. (9, 0) for Hopper.
    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    /// NVRTC-compiled kernels of this device, compiled once per process.
    pub fn kernels(&self) -> &KernelCache {
        &self.kernels
    }

    /// (free, total) device memory in bytes.
    pub fn memory_info(&self) -> CudaResult<(usize, usize)> {
        self.bind()?;
        Ok(self.ctx.mem_get_info()?)
    }

    /// Bytes the default memory pool holds from the driver right now (used or cached), and
    /// the most it ever held.
    pub fn pool_usage(&self) -> CudaResult<(u64, u64)> {
        self.bind()?;
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        let (mut current, mut high) = (0u64, 0u64);
        // SAFETY: live context; out-pointers outlive the calls.
        unsafe {
            check("cuDeviceGetDefaultMemPool", sys::cuDeviceGetDefaultMemPool(&mut pool, self.ctx.cu_device()))?;
            check(
                "cuMemPoolGetAttribute",
                sys::cuMemPoolGetAttribute(pool, sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &mut current as *mut u64 as *mut _),
            )?;
            check(
                "cuMemPoolGetAttribute",
                sys::cuMemPoolGetAttribute(pool, sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &mut high as *mut u64 as *mut _),
            )?;
        }
        Ok((current, high))
    }
}
