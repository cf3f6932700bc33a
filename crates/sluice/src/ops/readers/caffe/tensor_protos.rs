//! Caffe2's `TensorProtos { repeated TensorProto protos = 1 }` (proto2), `TensorProto`:
//! `dims = 1` (int64), `data_type = 2` (default FLOAT), `float_data = 3`, `int32_data = 4`,
//! `byte_data = 5`, `string_data = 6`, `int64_data = 10`, `segment = 11` (whose required
//! `begin = 1` and `end = 2` must both be there); repeated numbers packed or not.
//!
//! The record's tensors fill the outputs in DALI 2.4's order, its quirks included, so that
//! data sets DALI reads read the same:
//! * the image (`image_available`): a STRING tensor's first string (encoded, 1-D), or a BYTE
//!   tensor's bytes shaped `(dims[0], dims[1], dims[2] or 1)`;
//! * the label (`label_type` 0-3), read from the FLOAT or INT32 values of the next tensor:
//!   0 one value `(1,)`; 1 indices made one-hot `(num_labels,)`; 2 the values as they are;
//!   3 indices with the weights of the tensor after, FLOAT `(num_labels,)`;
//! * `additional_inputs` tensors (FLOAT, INT32 or INT64 values), starting one tensor further
//!   for label type 1 (DALI skips a tensor there, and for type 3 does not skip the weights);
//! * a bounding box (INT32, 4 values) when exactly one tensor follows: it fills the next
//!   output whatever `bbox` says. Label types 1 and 3 declare a second label output, which
//!   only such a box fills.
//!
//! Where DALI reads past the record's tensors (and crashes) or leaves a declared output
//! empty, this is an error naming the record.

use super::Piece;
use crate::ops::readers::protobuf::{self, varint, Fields, I32, I64, LEN, VARINT};
use crate::ops::readers::c_int;
use crate::ops::Args;
use crate::tensor::DType;

const FLOAT: i32 = 1;
const INT32: i32 = 2;
const BYTE: i32 = 3;
const STRING: i32 = 4;
const INT64: i32 = 10;

/// The arguments that lay a record out.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    pub image: bool,
    label_type: i64,
    num_labels: i64,
    additional: usize,
    bbox: bool,
}

impl Layout {
    /// A layout chosen by one byte (the fuzz target's): label type, label count, extra
    /// inputs, box.
    #[cfg(feature = "fuzzing")]
    pub fn from_byte(b: u8) -> Layout {
        Layout { image: b & 1 != 0, label_type: i64::from((b >> 1) % 5), num_labels: i64::from((b >> 4) & 3) + 1, additional: usize::from((b >> 6) & 1), bbox: b & 0x80 != 0 }
    }

    pub fn from_args(args: &Args) -> Layout {
        Layout {
            image: args.bool("image_available"),
            label_type: args.int("label_type"),
            num_labels: args.int("num_labels"),
            additional: args.int("additional_inputs").max(0) as usize,
            bbox: args.bool("bbox"),
        }
    }

    /// Outputs declared: image, label(s), additional tensors, box.
    pub fn count(&self) -> usize {
        self.image as usize + (self.label_type != 4) as usize + matches!(self.label_type, 1 | 3) as usize + self.additional + self.bbox as usize
    }
}

/// Outputs of a `readers.caffe2` instance.
pub fn num_outputs(args: &Args) -> usize {
    Layout::from_args(args).count()
}

/// One tensor of a record.
#[derive(Default)]
struct Tensor<'a> {
    dims: Vec<i64>,
    data_type: Option<i32>,
    floats: Vec<f32>,
    int32s: Vec<i32>,
    int64s: Vec<i64>,
    bytes: &'a [u8],
    strings: Vec<&'a [u8]>,
}

impl Tensor<'_> {
    fn data_type(&self) -> i32 {
        self.data_type.unwrap_or(FLOAT)
    }
}

fn parse_error(e: String) -> String {
    format!("parse: {e}")
}

fn tensor(b: &[u8]) -> Result<Tensor<'_>, String> {
    let mut t = Tensor::default();
    for field in Fields::new(b) {
        let (num, wire, p) = field.map_err(parse_error)?;
        match (num, wire) {
            (1, VARINT | LEN) => protobuf::varints(wire, p, |v| t.dims.push(v as i64)).map_err(parse_error)?,
            (2, VARINT) => t.data_type = Some(varint(p).map_err(parse_error)?.0 as u32 as i32),
            (3, LEN | I32) => protobuf::floats(p, &mut t.floats).map_err(parse_error)?,
            (4, VARINT | LEN) => protobuf::varints(wire, p, |v| t.int32s.push(v as u32 as i32)).map_err(parse_error)?,
            (5, LEN) => t.bytes = p,
            (6, LEN) => t.strings.push(p),
            (10, VARINT | LEN) => protobuf::varints(wire, p, |v| t.int64s.push(v as i64)).map_err(parse_error)?,
            (11, LEN) => {
                let (mut begin, mut end) = (false, false);
                for f in Fields::new(p) {
                    match f.map_err(parse_error)? {
                        (1, VARINT, _) => begin = true,
                        (2, VARINT, _) => end = true,
                        _ => {}
                    }
                }
                if !(begin && end) {
                    return Err(parse_error("a segment misses its required begin or end".into()));
                }
            }
            (9, LEN | I64) | (7, LEN) => {}
            _ => {}
        }
    }
    Ok(t)
}

/// The outputs of one record, or what is wrong with it ("parse: ..." when it is not a
/// TensorProtos message).
pub fn parse<'a>(value: &'a [u8], l: &Layout) -> Result<Vec<Piece<'a>>, String> {
    let mut protos = Vec::new();
    for field in Fields::new(value) {
        let (num, wire, p) = field.map_err(parse_error)?;
        if (num, wire) == (1, LEN) {
            protos.push(tensor(p)?);
        }
    }
    let n = protos.len();
    let get = |i: usize, what: &str| protos.get(i).ok_or_else(|| format!("the record has {n} tensors; the {what} would be tensor {i}"));
    let mut out: Vec<Option<Piece<'a>>> = (0..l.count()).map(|_| None).collect();
    let mut c = 0;
    if l.image {
        let t = get(0, "image")?;
        match t.data_type() {
            STRING => {
                let s = t.strings.first().ok_or("the image tensor (STRING) holds no string")?;
                out[0] = Some(Piece::record(s, vec![s.len()]));
            }
            BYTE => {
                if t.dims.len() < 2 || t.dims.iter().any(|&d| d < 0) {
                    return Err(format!("the image tensor (BYTE) has dims {:?}; (height, width[, channels]) expected", t.dims));
                }
                let (h, w) = (t.dims[0] as usize, t.dims[1] as usize);
                let ch = if t.dims.len() == 3 { t.dims[2] as usize } else { 1 };
                let want = h.checked_mul(w).and_then(|v| v.checked_mul(ch));
                if want != Some(t.bytes.len()) {
                    return Err(format!("Image data size mismatch: {} (expected: {})", t.bytes.len(), want.map_or("overflow".into(), |v| v.to_string())));
                }
                out[0] = Some(Piece::record(t.bytes, vec![h, w, ch]));
            }
            other => return Err(format!("the image tensor has data type {other}; STRING (encoded) or BYTE (raw) expected")),
        }
        c = 1;
    }
    if l.label_type != 4 {
        let t = get(c, "label")?;
        let float = match t.data_type() {
            FLOAT => true,
            INT32 => false,
            _ => return Err("Unsupported label data type".into()),
        };
        let count = if float { t.floats.len() } else { t.int32s.len() };
        let index = |k: usize| -> Result<usize, String> {
            let i = if float { c_int(f64::from(t.floats[k])) } else { t.int32s[k] };
            usize::try_from(i).ok().filter(|&i| (i as i64) < l.num_labels).ok_or_else(|| format!("Label index out of bounds: {i} (num_labels: {})", l.num_labels))
        };
        let zeros = || vec![0u8; l.num_labels.max(0) as usize * 4];
        let piece = match l.label_type {
            0 => {
                if count != 1 {
                    return Err(format!("a single label must be one value, the label tensor holds {count}"));
                }
                if float { Piece::values(DType::F32, &t.floats) } else { Piece::values(DType::I32, &t.int32s) }
            }
            1 => {
                let mut v = zeros();
                let one: [u8; 4] = if float { 1f32.to_le_bytes() } else { 1i32.to_le_bytes() };
                for k in 0..count {
                    let i = index(k)?;
                    v[4 * i..4 * i + 4].copy_from_slice(&one);
                }
                Piece { dtype: if float { DType::F32 } else { DType::I32 }, shape: vec![l.num_labels as usize], bytes: super::Bytes::Made(v) }
            }
            2 => {
                if float { Piece::values(DType::F32, &t.floats) } else { Piece::values(DType::I32, &t.int32s) }
            }
            3 => {
                let weights = &get(c + 1, "label weights")?.floats;
                if weights.len() < count {
                    return Err(format!("{count} label indices, {} weights", weights.len()));
                }
                let mut v = zeros();
                for (k, w) in weights.iter().enumerate().take(count) {
                    let i = index(k)?;
                    v[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
                }
                Piece { dtype: DType::F32, shape: vec![l.num_labels as usize], bytes: super::Bytes::Made(v) }
            }
            _ => return Err("Unsupported label type".into()),
        };
        out[c] = Some(piece);
        c += 1;
    }
    // DALI skips one tensor after sparse labels (meaning to skip the weights of type 3 too).
    let start = c + (l.label_type == 1) as usize;
    let end = start + l.additional;
    for i in start..end {
        let t = get(i, "additional input")?;
        let piece = match t.data_type() {
            FLOAT => Piece::values(DType::F32, &t.floats),
            INT32 => Piece::values(DType::I32, &t.int32s),
            INT64 => Piece::values(DType::I64, &t.int64s),
            _ => return Err("Unsupported data type in additional proto".into()),
        };
        *out.get_mut(c).ok_or("more tensors than outputs")? = Some(piece);
        c += 1;
    }
    if n == end + 1 {
        let t = &protos[end];
        if t.data_type() != INT32 || t.int32s.len() != 4 {
            return Err(format!("the bbox tensor must be INT32 with 4 values; it has data type {} and {} INT32 values", t.data_type(), t.int32s.len()));
        }
        let slot = out.get_mut(c).ok_or_else(|| format!("the record ends with a bounding box (tensor {end}), but the reader has no output left for it (bbox=False)"))?;
        *slot = Some(Piece::values(DType::I32, &t.int32s));
    }
    out.into_iter()
        .enumerate()
        .map(|(o, p)| p.ok_or_else(|| format!("output {o} is not filled by this record ({n} tensors): check bbox, label_type and additional_inputs")))
        .collect()
}
