//! `fn.decoders.numpy` (cpu, as DALI 2.4): each input sample holds the bytes of a `.npy` file
//! (what `np.save` writes); the output is the array, with its shape and type
//! (`dali/operators/decoder/numpy.cc`). The header parser is the numpy reader's
//! (`readers/numpy/header.rs`: versions 1 to 3, where DALI reads only 1), Fortran-order
//! arrays come out in C order, and `dtype` converts every sample with DALI's `ConvertSat`
//! (fn.cast's conversions).
//!
//! As in DALI, the output type and the number of dimensions are fixed by the first batch
//! decoded: later samples of another type (without `dtype`) or dimensionality are errors,
//! and so is a file whose size is not its header plus the data it describes. Checked against
//! DALI 2.4 by `tests/test_decoders_numpy.py` (DALI's decoder/test_numpy.py, ported).

use crate::error::{Error, Result};
use crate::ops::cast::convert_slice;
use crate::ops::readers::numpy::header::{header_extent, parse, Header, PREAMBLE};
use crate::ops::transpose::{transpose_bytes, MAX_NDIM};
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backend.
pub static NUMPY: OpDef = OpDef {
    schema: OpSchema {
        name: "decoders__Numpy",
        doc: "Decodes NumPy arrays from a serialized npy file.

The input should be a 1D uint8 tensor containing the binary data of the NumPy file. All samples in the batch must have the same number of dimensions and data type (unless `dtype` is specified which casts all samples in the batch to this dtype). The output will be a tensor with the same shape and data type as the original NumPy array. If the `dtype` argument is not specified, it will be inferred from the input data. The operator supports both C-style (C-contiguous) and Fortran-style (Fortran-contiguous) arrays.",
        devices: &[Device::Cpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[arg("dtype", T::DType, D::Optional, "Data type of the output tensor. If not specified, it will be inferred from the input data.")]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(NumpyDecoder { ctx: ctx.clone(), dtype: ctx.args.has("dtype").then(|| ctx.args.dtype("dtype")), first: None }))),
    mixed: None,
    gpu: None,
};

struct NumpyDecoder {
    ctx: OpContext,
    /// The `dtype` argument.
    dtype: Option<DType>,
    /// The type (without `dtype`) and dimensionality of the first batch decoded.
    first: Option<(DType, usize)>,
}

/// The header of one `.npy` file held in `bytes`, checked against its size.
fn header(bytes: &[u8]) -> std::result::Result<Header, String> {
    if bytes.is_empty() {
        return Err("Input sample is empty. Expected a non-empty NPY file.".into());
    }
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        let hex: String = bytes[..bytes.len().min(6)].iter().map(|b| format!("{b:02x}")).collect();
        return Err(format!("Got bad magic string for numpy header 0x{hex}, expected 0x934e554d5059"));
    }
    let (start, len) = header_extent(&bytes[..bytes.len().min(PREAMBLE)])?;
    if start + len > bytes.len() {
        return Err("Header length exceeds input size.".into());
    }
    let h = parse(&bytes[start..start + len], start)?;
    let expected = h.data_offset + h.data_len;
    if expected != bytes.len() {
        return Err(format!("Expected data numpy size {expected} bytes does not match the actual size {} bytes.", bytes.len()));
    }
    Ok(h)
}

impl Operator for NumpyDecoder {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let ctx = &self.ctx;
        let input = ws.inputs[0];
        let n = input.len();
        let at = |i: usize| ctx.at(ws.iteration, i, input.source_info(i));
        let mut headers = Vec::with_capacity(n);
        for i in 0..n {
            headers.push(header(input.bytes(i)).map_err(|e| Error::data(at(i), e))?);
        }
        let Some(h0) = headers.first() else {
            return Ok(vec![TensorList::for_overwrite(BatchMeta::new(self.dtype.unwrap_or(DType::U8), 0, std::iter::empty::<&[usize]>()))]);
        };
        let (stored_type, ndim) = *self.first.get_or_insert((h0.dtype, h0.shape.len()));
        let out_type = self.dtype.unwrap_or(stored_type);
        for (i, h) in headers.iter().enumerate() {
            if self.dtype.is_none() && h.dtype != stored_type {
                return Err(Error::data(at(i), format!("All samples in the dataset must have the same data type, but got differing types: {} and {}", stored_type.dali_name(), h.dtype.dali_name())));
            }
            if h.shape.len() != ndim {
                return Err(Error::data(at(i), format!("All samples in the dataset must have the same number of dimensions, but got differing sample dimensions: {ndim} and {}", h.shape.len())));
            }
            if h.fortran_order && ndim > MAX_NDIM {
                return Err(Error::data(at(i), format!("Fortran-order arrays of at most {MAX_NDIM} dimensions are supported, got {ndim}")));
            }
        }
        let mut meta = BatchMeta::new(out_type, ndim, headers.iter().map(|h| &h.shape[..]));
        meta.inherit_source_info(input.meta());
        let mut out = TensorList::for_overwrite(meta);
        let reversed: Vec<usize> = (0..ndim).rev().collect();
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let h = &headers[i];
            let src = &input.bytes(i)[h.data_offset..];
            match (h.fortran_order, h.dtype == out_type) {
                (false, true) => dst.copy_from_slice(src),
                (false, false) => convert_slice(h.dtype, src, out_type, dst),
                (true, same) => {
                    // Column-major data is the C-order array of the reversed shape: reverse its axes.
                    let stored: Vec<usize> = h.shape.iter().rev().copied().collect();
                    if same {
                        transpose_bytes(dst, src, &stored, &reversed, h.dtype.size());
                    } else {
                        let mut c_order = vec![0u8; src.len()];
                        transpose_bytes(&mut c_order, src, &stored, &reversed, h.dtype.size());
                        convert_slice(h.dtype, &c_order, out_type, dst);
                    }
                }
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}
