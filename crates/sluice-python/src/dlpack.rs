//! DLPack export of host batches: the capsule owns a reference to the batch, so the data
//! stays alive until the consumer (NumPy, PyTorch, JAX) calls the deleter.

use std::ffi::{c_void, CStr};
use std::sync::Arc;

use pyo3::ffi;
use pyo3::prelude::*;

use sluice::tensor::TensorList;

#[repr(C)]
struct DLDevice {
    device_type: i32, // kDLCPU = 1
    device_id: i32,
}

#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// What the managed tensor keeps alive: the batch and the shape array it points into.
struct Owner {
    _batch: Arc<TensorList>,
    shape: Vec<i64>,
}

unsafe extern "C" fn delete_managed(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    // SAFETY: `m` and its ctx were created by `host_capsule` with Box::into_raw.
    unsafe {
        let managed = Box::from_raw(m);
        drop(Box::from_raw(managed.manager_ctx as *mut Owner));
    }
}

const NAME: &CStr = c"dltensor";
const USED: &CStr = c"used_dltensor";

unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with a live capsule. A consumer that took the tensor renames
    // the capsule to "used_dltensor" and owns the deleter call; otherwise we free it here.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()) as *mut DLManagedTensor;
            if let Some(d) = (*m).deleter {
                d(m);
            }
        } else {
            let _ = USED;
        }
    }
}

/// A "dltensor" capsule viewing `shape` elements of `batch` starting at byte `offset`.
pub fn host_capsule<'py>(py: Python<'py>, batch: Arc<TensorList>, offset: usize, shape: Vec<usize>) -> PyResult<Bound<'py, PyAny>> {
    let (code, bits) = batch.dtype().dlpack();
    let data = batch.buffer().as_ptr() as *mut c_void;
    let mut owner = Box::new(Owner { _batch: batch, shape: shape.iter().map(|&d| d as i64).collect() });
    let ndim = owner.shape.len() as i32;
    let shape_ptr = owner.shape.as_mut_ptr();
    let managed = Box::new(DLManagedTensor {
        dl_tensor: DLTensor {
            data,
            device: DLDevice { device_type: 1, device_id: 0 },
            ndim,
            dtype: DLDataType { code, bits, lanes: 1 },
            shape: shape_ptr,
            strides: std::ptr::null_mut(), // compact row-major
            byte_offset: offset as u64,
        },
        manager_ctx: Box::into_raw(owner) as *mut c_void,
        deleter: Some(delete_managed),
    });
    let raw = Box::into_raw(managed);
    // SAFETY: `raw` stays valid until its deleter runs; the name is a static C string.
    unsafe {
        let cap = ffi::PyCapsule_New(raw as *mut c_void, NAME.as_ptr(), Some(capsule_destructor));
        if cap.is_null() {
            delete_managed(raw);
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, cap))
    }
}
