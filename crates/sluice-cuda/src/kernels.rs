//! CUDA kernels compiled at run time by NVRTC for the GPU actually present, once per
//! process and device: nothing to ship per architecture, nothing compiled twice.

use std::collections::HashMap;
use std::panic::catch_unwind;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};

use crate::error::{CudaError, CudaResult};

/// Compiled modules by source name.
#[derive(Default)]
pub struct KernelCache {
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
}

/// True when libnvrtc can be loaded. Never panics.
pub fn nvrtc_present() -> bool {
    catch_unwind(|| unsafe { cudarc::nvrtc::sys::is_culib_present() }).unwrap_or(false)
}

fn virtual_arch(cc: (i32, i32)) -> &'static str {
    // PTX for the device's own virtual architecture; the driver turns it into machine code
    // once (and caches it across runs).
    match cc {
        (12, _) => "compute_120",
        (10, _) => "compute_100",
        (9, _) => "compute_90",
        (8, 9) => "compute_89",
        (8, 6) => "compute_86",
        (8, _) => "compute_80",
        _ => "compute_75",
    }
}

impl KernelCache {
    /// The kernel `function` of the CUDA C++ source `src` (named `name` for errors and the
    /// cache), compiling and loading the module the first time it is asked for.
    pub fn function(&self, ctx: &Arc<CudaContext>, cc: (i32, i32), name: &'static str, src: &'static str, function: &str) -> CudaResult<CudaFunction> {
        let module = {
            let mut modules = self.modules.lock().unwrap_or_else(|p| p.into_inner());
            match modules.get(name) {
                Some(m) => m.clone(),
                None => {
                    if !nvrtc_present() {
                        return Err(CudaError("NVRTC (libnvrtc.so) not found: GPU kernels cannot be compiled".into()));
                    }
                    let opts = CompileOptions {
                        arch: Some(virtual_arch(cc)),
                        options: vec!["--std=c++17".into()],
                        name: Some(format!("{name}.cu")),
                        ..Default::default()
                    };
                    let ptx = catch_unwind(|| compile_ptx_with_opts(src, opts))
                        .map_err(|_| CudaError(format!("NVRTC failed to load while compiling {name}")))?
                        .map_err(|e| CudaError::during(&format!("compiling kernel {name}"), e))?;
                    let m = ctx.load_module(ptx).map_err(|e| CudaError::during(&format!("loading kernel {name}"), e))?;
                    modules.insert(name, m.clone());
                    m
                }
            }
        };
        module.load_function(function).map_err(|e| CudaError::during(&format!("kernel {name}::{function}"), e))
    }
}
