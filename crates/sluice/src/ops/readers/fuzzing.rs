//! The readers' record parsers as the fuzz targets (`fuzz/`) call them: each takes untrusted
//! bytes and must return, with a value or an error, never panic, hang or allocate beyond what
//! the input's own size justifies. Built with the `fuzzing` feature only.

use super::tfrecord::example::{self, Values};

/// A TFRecord record (framing and CRCs), then its Example's features and every value.
pub fn tfrecord_record(data: &[u8]) {
    let payload = example::record_payload(data).unwrap_or(data);
    let (mut ints, mut floats) = (Vec::new(), Vec::new());
    let _ = example::for_each_feature(payload, |_, values| match values {
        Values::Bytes(list) => example::bytes_items(list).for_each(drop),
        Values::Floats(list) => drop(example::floats(list, &mut floats)),
        Values::Ints(list) => drop(example::ints(list, &mut ints)),
    });
}

/// A .npy preamble and header.
pub fn numpy_header(data: &[u8]) {
    if let Ok((start, len)) = super::numpy::header::header_extent(data) {
        let end = start.saturating_add(len).min(data.len());
        let _ = super::numpy::header::parse(&data[start.min(end)..end], start);
    }
}

/// An MXNet RecordIO record (one part or several) and its label header.
pub fn recordio_record(data: &[u8]) {
    let mut joined = Vec::new();
    if let Ok(payload) = super::mxnet::record_payload(data, &mut joined) {
        let _ = super::mxnet::split_payload(payload);
    }
}

/// A Caffe `Datum` and a Caffe2 `TensorProtos` (its layout chosen by the first byte).
pub fn caffe_records(data: &[u8]) {
    let _ = super::caffe::datum::parse(data, super::caffe::datum::Outputs::all());
    if let Some((&b, rest)) = data.split_first() {
        let _ = super::caffe::tensor_protos::parse(
            rest,
            &super::caffe::tensor_protos::Layout::from_byte(b),
        );
    }
}
