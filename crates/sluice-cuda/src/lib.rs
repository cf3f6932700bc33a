//! Sluice's GPU runtime. Everything CUDA is loaded at run time (cudarc's dynamic loading and
//! libloading for nvJPEG), so this crate builds, and its users run CPU-only, on machines with
//! no CUDA at all; asking for a GPU there is an error, never a crash.

pub mod buffer;
pub mod device;
pub mod error;
pub mod event;
pub mod kernels;
pub mod nvjpeg;

pub use buffer::{DeviceBuffer, PinnedBuffer};
pub use cudarc::driver::{sys, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
pub use device::{device_count, driver_present, GpuDevice};
pub use error::{CudaError, CudaResult};
pub use event::GpuEvent;

/// True when tests must fail rather than skip without a GPU (`SLUICE_REQUIRE_GPU=1`).
pub fn gpu_required() -> bool {
    std::env::var("SLUICE_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// For GPU tests: the device to test on, or `None` to skip. Panics (fails the test) when no
/// GPU is usable and `SLUICE_REQUIRE_GPU=1`.
pub fn test_device() -> Option<std::sync::Arc<GpuDevice>> {
    match GpuDevice::open(0) {
        Ok(d) => Some(d),
        Err(e) if gpu_required() => panic!("SLUICE_REQUIRE_GPU=1 but no usable GPU: {e}"),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_a_gpu_without_one_is_an_error_not_a_crash() {
        if device_count() == 0 {
            let e = GpuDevice::open(0).unwrap_err().to_string();
            assert!(e.contains("device_id") || e.contains("driver"), "{e}");
        }
        assert!(GpuDevice::open(1 << 20).is_err());
    }

    #[test]
    fn device_buffers_round_trip_through_pinned_memory() {
        let Some(dev) = test_device() else { return };
        let stream = dev.new_stream().unwrap();
        let mut pinned = PinnedBuffer::alloc(&dev, 1 << 20).unwrap();
        for (i, b) in pinned.as_mut_slice().iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        let buf = DeviceBuffer::alloc(&dev, &stream, 1 << 20).unwrap();
        unsafe { buf.copy_from_host_async(0, pinned.as_slice()).unwrap() };
        let mut back = vec![0u8; 1 << 20];
        buf.copy_to_host(0, &mut back).unwrap();
        assert_eq!(back, pinned.as_slice());
    }

    #[test]
    fn nvrtc_kernels_compile_once_and_run() {
        let Some(dev) = test_device() else { return };
        const SRC: &str = r#"extern "C" __global__ void add_one(unsigned char* p, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += 1; }"#;
        let stream = dev.new_stream().unwrap();
        let f = dev.kernels().function(dev.context(), dev.compute_capability(), "test_add_one", SRC, "add_one").unwrap();
        let again = dev.kernels().function(dev.context(), dev.compute_capability(), "test_add_one", SRC, "add_one");
        assert!(again.is_ok());
        let n = 4096usize;
        let buf = DeviceBuffer::alloc(&dev, &stream, n).unwrap();
        let host: Vec<u8> = (0..n).map(|i| i as u8).collect();
        unsafe { buf.copy_from_host_async(0, &host).unwrap() };
        stream.synchronize().unwrap();
        let ptr = buf.device_ptr();
        let ni = n as i32;
        unsafe {
            stream.launch_builder(&f).arg(&ptr).arg(&ni).launch(LaunchConfig::for_num_elems(n as u32)).unwrap();
        }
        let mut back = vec![0u8; n];
        buf.copy_to_host(0, &mut back).unwrap();
        assert!(back.iter().enumerate().all(|(i, &v)| v == (i as u8).wrapping_add(1)));
    }
}
