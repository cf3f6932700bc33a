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
        let _ = super::caffe::tensor_protos::parse(rest, &super::caffe::tensor_protos::Layout::from_byte(b));
    }
}

/// A tar archive's headers, as the WebDataset reader lists them: sizes (octal and base-256),
/// long names, pax records, truncation. (The parser reads through storage: from a scratch
/// file.)
pub fn tar_archive(data: &[u8]) {
    with_scratch_file(data, |path| {
        let _ = super::webdataset::tar::list_archive(path, &crate::storage::Options::default());
    });
}

/// A COCO annotations file: the JSON, its records and RLE strings, then the polygons of its
/// first images rasterised (images the input declares small enough to draw: the reader holds
/// larger ones to the decoders' limits before drawing).
pub fn coco_annotations(data: &[u8]) {
    use super::coco::annotations::{parse, Options, Wanted};
    with_scratch_file(data, |path| {
        let wanted = Wanted {
            polygons: true,
            pixelwise: true,
            image_ids: true,
        };
        let opts = Options {
            wanted,
            include_iscrowd: true,
            ..Options::default()
        };
        let Ok(a) = parse(path, &crate::storage::Options::default(), &opts) else {
            return;
        };
        for k in 0..a.len().min(4) {
            let (h, w) = (a.heights[k].max(0) as usize, a.widths[k].max(0) as usize);
            if h * w > 1 << 16 {
                continue;
            }
            let vertices = &a.vertices[a.vertices_of(k)];
            for p in &a.polygons[a.polygons_of(k)] {
                let Some(vs) = vertices.get(p[1] as usize..p[2] as usize) else {
                    continue;
                };
                let xy: Vec<f64> = vs
                    .iter()
                    .flat_map(|v| [f64::from(v[0]), f64::from(v[1])])
                    .collect();
                let _ = super::coco::masks::rle_from_polygon(&xy, h, w);
            }
        }
    });
}

/// Runs `f` on a file holding `data` (one per thread, rewritten each call).
fn with_scratch_file(data: &[u8], f: impl FnOnce(&std::path::Path)) {
    thread_local! {
        static PATH: std::path::PathBuf = std::env::temp_dir().join(format!(
            "sluice-fuzz-{}-{:?}", std::process::id(), std::thread::current().id()
        ));
    }
    PATH.with(|path| {
        if std::fs::write(path, data).is_ok() {
            f(path);
        }
    });
}
