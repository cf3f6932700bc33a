//! Any bytes through the readers' record parsers, the first input byte picking which: a
//! TFRecord record and its Example, a .npy header, an MXNet RecordIO record, a Caffe Datum and
//! a Caffe2 TensorProtos, a tar archive's headers (WebDataset), a COCO annotations file. Errors are fine; panics, overflows, hangs and allocations the input
//! does not justify are findings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::ops::readers::fuzzing;

fuzz_target!(|input: &[u8]| {
    let Some((&which, data)) = input.split_first() else { return };
    match which % 6 {
        0 => fuzzing::tfrecord_record(data),
        1 => fuzzing::numpy_header(data),
        2 => fuzzing::recordio_record(data),
        3 => fuzzing::caffe_records(data),
        4 => fuzzing::tar_archive(data),
        _ => fuzzing::coco_annotations(data),
    }
});
