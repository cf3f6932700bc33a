//! DLPack export of host batches: the capsule owns a reference to the batch, so the data
//! stays alive until the consumer (NumPy, PyTorch, JAX) calls the deleter.

use std::ffi::{c_void, CStr};
use std::sync::Arc;

use pyo3::ffi;
use pyo3::prelude::*;

use sluice::tensor::{RawStream, TensorList, TensorListGpu};

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
    _batch: Kept,
    shape: Vec<i64>,
}

enum Kept {
    Host(#[allow(dead_code)] Arc<TensorList>),
    /// A GPU batch and the consumer's stream, which its memory's reuse must wait for.
    Device(Arc<TensorListGpu>, Option<RawStream>),
}

impl Drop for Kept {
    fn drop(&mut self) {
        if let Kept::Device(batch, Some(stream)) = self {
            // The consumer may still have work on its stream that reads this memory: queue
            // the free after it. Failure here only means the context is gone already.
            // SAFETY: the consumer handed us this stream in __dlpack__ and it belongs to the
            // batch's GPU; consumers keep their streams alive while tensors from them live.
            let _ = unsafe { batch.buffer().order_free_after(*stream) };
        }
    }
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
    let owner = Box::new(Owner { _batch: Kept::Host(batch), shape: shape.iter().map(|&d| d as i64).collect() });
    make_capsule(py, owner, data, (1, 0), (code, bits), offset)
}

/// A "dltensor" capsule (kDLCUDA) viewing `shape` elements of a GPU batch at byte `offset`.
pub fn device_capsule<'py>(
    py: Python<'py>,
    batch: Arc<TensorListGpu>,
    offset: usize,
    shape: Vec<usize>,
    consumer: Option<RawStream>,
) -> PyResult<Bound<'py, PyAny>> {
    let (code, bits) = batch.dtype().dlpack();
    let data = batch.buffer().device_ptr() as *mut c_void;
    let device_id = batch.buffer().device().ordinal() as i32;
    let owner = Box::new(Owner { _batch: Kept::Device(batch, consumer), shape: shape.iter().map(|&d| d as i64).collect() });
    make_capsule(py, owner, data, (2, device_id), (code, bits), offset)
}

fn make_capsule<'py>(
    py: Python<'py>,
    mut owner: Box<Owner>,
    data: *mut c_void,
    (device_type, device_id): (i32, i32),
    (code, bits): (u8, u8),
    offset: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let ndim = owner.shape.len() as i32;
    let shape_ptr = owner.shape.as_mut_ptr();
    let managed = Box::new(DLManagedTensor {
        dl_tensor: DLTensor {
            data,
            device: DLDevice { device_type, device_id },
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
