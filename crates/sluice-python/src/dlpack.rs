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
            // The offset goes into the address, byte_offset stays 0: PyTorch refuses CUDA
            // tensors with a byte_offset, and NumPy and CuPy produce them this way too.
            data: (data as usize + offset) as *mut c_void,
            device: DLDevice { device_type, device_id },
            ndim,
            dtype: DLDataType { code, bits, lanes: 1 },
            shape: shape_ptr,
            strides: std::ptr::null_mut(), // compact row-major
            byte_offset: 0,
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

/// A DLPack tensor someone else made, read without taking it: the capsule stays
/// unconsumed, so its producer's destructor frees the tensor when the capsule goes, and the
/// caller keeps the capsule alive while it reads the memory.
pub struct Borrowed {
    pub address: usize,
    pub shape: Vec<usize>,
    /// NumPy's type string (`<f4`, `|u1`, ...).
    pub typestr: String,
    /// DLPack's (device type, device id): (1, 0) for host memory, (2, n) for CUDA device n.
    pub device: (i32, i32),
}

/// Reads the tensor of `capsule` (a legacy "dltensor" capsule, as `__dlpack__()` returns
/// without `max_version`): compact row-major data of a numeric type only.
pub fn borrow(capsule: &Bound<'_, PyAny>) -> PyResult<Borrowed> {
    use pyo3::exceptions::PyTypeError;
    // SAFETY: PyCapsule_GetPointer checks the object is a capsule of this name (and sets a
    // Python error otherwise); a "dltensor" capsule holds a DLManagedTensor that lives at
    // least as long as the capsule, which the caller holds.
    let t = unsafe {
        let ptr = ffi::PyCapsule_GetPointer(capsule.as_ptr(), NAME.as_ptr());
        if ptr.is_null() {
            ffi::PyErr_Clear();
            return Err(PyTypeError::new_err("not an unused DLPack capsule (\"dltensor\"): it was consumed already, or is not one"));
        }
        &(*(ptr as *const DLManagedTensor)).dl_tensor
    };
    let ndim = usize::try_from(t.ndim).map_err(|_| PyTypeError::new_err("DLPack tensor with a negative number of dimensions"))?;
    // SAFETY: `shape` (and `strides` when not null) point to `ndim` integers (DLPack).
    let shape: Vec<i64> = if ndim == 0 { Vec::new() } else { unsafe { std::slice::from_raw_parts(t.shape, ndim) }.to_vec() };
    if shape.iter().any(|&d| d < 0) {
        return Err(PyTypeError::new_err("DLPack tensor with a negative extent"));
    }
    let shape: Vec<usize> = shape.into_iter().map(|d| d as usize).collect();
    if t.dtype.lanes != 1 || t.dtype.bits % 8 != 0 {
        return Err(PyTypeError::new_err(format!("DLPack type (code {}, {} bits, {} lanes) is not supported", t.dtype.code, t.dtype.bits, t.dtype.lanes)));
    }
    let bytes = t.dtype.bits / 8;
    let kind = match (t.dtype.code, bytes) {
        (0, _) => format!("<i{bytes}"),
        (1, 1) => "|u1".to_string(),
        (1, _) => format!("<u{bytes}"),
        (2, _) => format!("<f{bytes}"),
        (6, 1) => "|b1".to_string(),
        (code, _) => return Err(PyTypeError::new_err(format!("DLPack type code {code} ({} bits) is not supported", t.dtype.bits))),
    };
    if !t.strides.is_null() && ndim > 0 {
        // SAFETY: as above.
        let strides = unsafe { std::slice::from_raw_parts(t.strides, ndim) };
        let mut expected = 1i64;
        for k in (0..ndim).rev() {
            // Extents of 1 may carry any stride (PyTorch gives them odd ones).
            if shape[k] != 1 && strides[k] != expected {
                return Err(PyTypeError::new_err("DLPack tensor is not C-contiguous: make it so first (.contiguous(), jnp.asarray)"));
            }
            expected *= shape[k] as i64;
        }
    }
    Ok(Borrowed {
        address: t.data as usize + t.byte_offset as usize,
        shape,
        typestr: kind,
        device: (t.device.device_type, t.device.device_id),
    })
}
