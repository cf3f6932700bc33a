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
pub use device::{device_count, driver_present, pointer_ordinal, GpuDevice};
pub use error::{CudaError, CudaResult};
pub use event::GpuEvent;

/// For GPU tests: the device to test on, or `None` (the test returns) after
/// [`missing_for_test`] has said the test is skipped.
pub fn test_device() -> Option<std::sync::Arc<GpuDevice>> {
    GpuDevice::open(0).map_err(|e| missing_for_test("GPU", e)).ok()
}

/// What a GPU test does when something it needs (`what`: a GPU, nvJPEG) is missing, by
/// tests/conftest.py's rule: under `SLUICE_REQUIRE_GPU=1` (the GPU machine) the test fails, so
/// lost GPU coverage cannot pass as a skip; elsewhere it prints a `SKIPPED` line and the
/// caller returns.
pub fn missing_for_test(what: &str, why: impl std::fmt::Display) {
    if std::env::var("SLUICE_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        panic!("SLUICE_REQUIRE_GPU=1 but no usable {what}: {why}");
    }
    report_skip(&format!("no {what}"), why);
}

/// One `SKIPPED: <reason>: <test> (<why>)` line on stderr.
pub(crate) fn report_skip(reason: &str, why: impl std::fmt::Display) {
    use std::io::Write;
    // libtest names each test's thread after the test.
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("test");
    // Written to stderr directly: libtest captures eprintln! of a passing test, which would
    // hide the skip.
    let _ = writeln!(std::io::stderr(), "SKIPPED: {reason}: {test} ({why})");
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
