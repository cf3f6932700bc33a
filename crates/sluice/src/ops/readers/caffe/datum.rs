//! Caffe's `Datum` (proto2): `channels = 1`, `height = 2`, `width = 3` (int32), `data = 4`
//! (bytes), `label = 5` (int32), `float_data = 6` (ignored, as DALI does), `encoded = 7`
//! (bool). As protobuf reads it: the last of a repeated field wins, unknown fields and known
//! ones of the wrong wire type are skipped, int32s keep a varint's low 32 bits.
//!
//! Outputs (DALI 2.4): the image, unless `image_available=False`: the `data` bytes, 1-D, or
//! raw pixels `(height, width, channels)` when `encoded` is written and false (their product
//! must be the data's size); then the label, unless `label_available=False`: INT32 `(1,)`, or
//! `(0,)` when the record has none.

use super::Piece;
use crate::ops::readers::protobuf::{varint, Fields, LEN, VARINT};
use crate::ops::Args;
use crate::tensor::DType;

/// Which outputs the reader has.
#[derive(Debug, Clone, Copy)]
pub struct Outputs {
    pub image: bool,
    label: bool,
}

impl Outputs {
    /// Every output (the fuzz target's layout).
    #[cfg(feature = "fuzzing")]
    pub fn all() -> Outputs {
        Outputs { image: true, label: true }
    }

    pub fn from_args(args: &Args) -> Outputs {
        Outputs { image: args.bool("image_available"), label: args.bool("label_available") }
    }

    pub fn count(&self) -> usize {
        self.image as usize + self.label as usize
    }
}

/// The outputs of one record, or what is wrong with it ("parse: ..." when it is not a Datum).
pub fn parse(value: &[u8], out: Outputs) -> Result<Vec<Piece<'_>>, String> {
    let (mut dims, mut data, mut label, mut encoded) = ([None::<i32>; 3], None, None, None);
    for field in Fields::new(value) {
        let (num, wire, payload) = field.map_err(|e| format!("parse: {e}"))?;
        let int = || varint(payload).map(|(v, _)| v as u32 as i32).map_err(|e| format!("parse: {e}"));
        match (num, wire) {
            (1..=3, VARINT) => dims[num as usize - 1] = Some(int()?),
            (4, LEN) => data = Some(payload),
            (5, VARINT) => label = Some(int()?),
            (7, VARINT) => encoded = Some(int()? != 0),
            _ => {}
        }
    }
    let mut pieces = Vec::with_capacity(out.count());
    if out.image {
        let data = data.unwrap_or(&[]);
        if encoded == Some(false) {
            let [c, h, w] = dims.map(|d| d.unwrap_or(0));
            if c < 0 || h < 0 || w < 0 {
                return Err(format!("negative dimensions of a raw image: height {h}, width {w}, channels {c}"));
            }
            let (h, w, c) = (h as usize, w as usize, c as usize);
            if h.checked_mul(w).and_then(|n| n.checked_mul(c)) != Some(data.len()) {
                return Err(format!(
                    "The content size of the raw image in LMDB caffe entry doesn't match its dimensions: {h}x{w}x{c} pixels, {} bytes",
                    data.len()
                ));
            }
            pieces.push(Piece::record(data, vec![h, w, c]));
        } else {
            pieces.push(Piece::record(data, vec![data.len()]));
        }
    }
    if out.label {
        let values: &[i32] = match &label {
            Some(l) => std::slice::from_ref(l),
            None => &[],
        };
        pieces.push(Piece::values(DType::I32, values));
    }
    Ok(pieces)
}
