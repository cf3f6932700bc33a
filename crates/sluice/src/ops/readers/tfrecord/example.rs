//! The TFRecord framing and the `tf.train.Example` message, read without a protobuf library:
//! a record is `u64 length, u32 masked CRC-32C of the length, data, u32 masked CRC-32C of
//! the data`; the data is `Example { Features features = 1 }`, `Features { map<string,
//! Feature> feature = 1 }`, `Feature { oneof { BytesList bytes_list = 1; FloatList
//! float_list = 2; Int64List int64_list = 3 } }`, each list `repeated <T> value = 1` (floats
//! and integers packed or not). Every length is checked against what is left of the
//! record, so a damaged record is an error, never a read past its end.

use crate::ops::readers::protobuf::{self, Fields, I32, LEN, VARINT};

/// TFRecord's CRC mask (crc32c rotated right by 15 plus a constant), so a CRC of data
/// holding CRCs does not degenerate.
pub fn masked_crc(data: &[u8]) -> u32 {
    let c = crc32c::crc32c(data);
    (c.rotate_right(15)).wrapping_add(0xa282_ead8)
}

/// The Example bytes of one framed record, its CRCs checked.
pub fn record_payload(record: &[u8]) -> Result<&[u8], String> {
    if record.len() < 16 {
        return Err(format!("truncated record: {} bytes, a record takes at least 16", record.len()));
    }
    let len = u64::from_le_bytes(record[..8].try_into().expect("8 bytes"));
    let len_crc = u32::from_le_bytes(record[8..12].try_into().expect("4 bytes"));
    if masked_crc(&record[..8]) != len_crc {
        return Err("corrupted record: the CRC of its length does not match".into());
    }
    let len = usize::try_from(len).ok().filter(|&l| l <= record.len() - 16).ok_or_else(|| {
        format!("truncated record: its header announces {len} bytes of data, the index gives the record {} bytes in all", record.len())
    })?;
    let data = &record[12..12 + len];
    let data_crc = u32::from_le_bytes(record[12 + len..16 + len].try_into().expect("4 bytes"));
    if masked_crc(data) != data_crc {
        return Err("corrupted record: the CRC of its data does not match".into());
    }
    Ok(data)
}

/// One feature's values as they lie in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Values<'a> {
    /// `bytes_list`: the encoded list (iterate with [`bytes_items`]).
    Bytes(&'a [u8]),
    /// `float_list`: the encoded list (packed or not).
    Floats(&'a [u8]),
    /// `int64_list`: the encoded list (packed or not).
    Ints(&'a [u8]),
}

/// Calls `found(name, values)` for every feature of the Example `data`.
pub fn for_each_feature<'a>(data: &'a [u8], mut found: impl FnMut(&'a [u8], Values<'a>)) -> Result<(), String> {
    for field in Fields::new(data) {
        let (num, wire, features) = field?;
        if num != 1 || wire != LEN {
            continue; // unknown fields are skipped, as protobuf does
        }
        for entry in Fields::new(features) {
            let (num, wire, entry) = entry?;
            if num != 1 || wire != LEN {
                continue;
            }
            // A map entry: key = 1 (string), value = 2 (Feature).
            let (mut key, mut value) = (&[][..], None);
            for part in Fields::new(entry) {
                let (num, wire, bytes) = part?;
                match (num, wire) {
                    (1, LEN) => key = bytes,
                    (2, LEN) => value = Some(bytes),
                    _ => {}
                }
            }
            let mut values = None;
            for kind in Fields::new(value.unwrap_or(&[])) {
                let (num, wire, list) = kind?;
                values = match (num, wire) {
                    (1, LEN) => Some(Values::Bytes(list)),
                    (2, LEN) => Some(Values::Floats(list)),
                    (3, LEN) => Some(Values::Ints(list)),
                    _ => values,
                };
            }
            if let Some(v) = values {
                found(key, v);
            }
        }
    }
    Ok(())
}

/// The items of a `BytesList`.
pub fn bytes_items(list: &[u8]) -> impl Iterator<Item = Result<&[u8], String>> {
    Fields::new(list).filter_map(|f| match f {
        Ok((1, LEN, b)) => Some(Ok(b)),
        Ok(_) => None,
        Err(e) => Some(Err(e)),
    })
}

/// The values of a `FloatList`, appended to `out`.
pub fn floats(list: &[u8], out: &mut Vec<f32>) -> Result<(), String> {
    for f in Fields::new(list) {
        if let (1, LEN | I32, values) = f? {
            protobuf::floats(values, out)?;
        }
    }
    Ok(())
}

/// The values of an `Int64List`, appended to `out`.
pub fn ints(list: &[u8], out: &mut Vec<i64>) -> Result<(), String> {
    for f in Fields::new(list) {
        if let (1, wire @ (LEN | VARINT), values) = f? {
            protobuf::varints(wire, values, |v| out.push(v as i64))?;
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn put_len(out: &mut Vec<u8>, num: u32, payload: &[u8]) {
        put_varint(out, (u64::from(num) << 3) | 2);
        put_varint(out, payload.len() as u64);
        out.extend_from_slice(payload);
    }

    /// An Example with `ints` (packed), `floats` (unpacked) and `bytes` features.
    pub(crate) fn example(ints: &[i64], floats: &[f32], bytes: &[&[u8]]) -> Vec<u8> {
        let mut features = Vec::new();
        let mut entry = |key: &str, kind: u32, list: Vec<u8>| {
            let mut feature = Vec::new();
            put_len(&mut feature, kind, &list);
            let mut e = Vec::new();
            put_len(&mut e, 1, key.as_bytes());
            put_len(&mut e, 2, &feature);
            put_len(&mut features, 1, &e);
        };
        let mut packed = Vec::new();
        for &v in ints {
            put_varint(&mut packed, v as u64);
        }
        let mut l = Vec::new();
        put_len(&mut l, 1, &packed);
        entry("ints", 3, l);
        let mut l = Vec::new();
        for &f in floats {
            l.push((1 << 3) | 5);
            l.extend_from_slice(&f.to_le_bytes());
        }
        entry("floats", 2, l);
        let mut l = Vec::new();
        for b in bytes {
            put_len(&mut l, 1, b);
        }
        entry("bytes", 1, l);
        let mut ex = Vec::new();
        put_len(&mut ex, 1, &features);
        ex
    }

    pub(crate) fn frame(data: &[u8]) -> Vec<u8> {
        let mut r = (data.len() as u64).to_le_bytes().to_vec();
        r.extend_from_slice(&masked_crc(&r[..8]).to_le_bytes());
        r.extend_from_slice(data);
        r.extend_from_slice(&masked_crc(data).to_le_bytes());
        r
    }

    #[test]
    fn examples_decode_and_damage_is_an_error() {
        let ex = example(&[1, -2, 300], &[0.5, -1.25], &[b"abc", b""]);
        let rec = frame(&ex);
        let data = record_payload(&rec).unwrap();
        let (mut i, mut f, mut b) = (Vec::new(), Vec::new(), Vec::new());
        for_each_feature(data, |name, v| match (name, v) {
            (b"ints", Values::Ints(l)) => ints(l, &mut i).unwrap(),
            (b"floats", Values::Floats(l)) => floats(l, &mut f).unwrap(),
            (b"bytes", Values::Bytes(l)) => b.extend(bytes_items(l).map(|x| x.unwrap().to_vec())),
            _ => panic!("unexpected feature"),
        })
        .unwrap();
        assert_eq!((i, f, b), (vec![1, -2, 300], vec![0.5, -1.25], vec![b"abc".to_vec(), vec![]]));
        let mut bad = rec.clone();
        bad[20] ^= 1;
        assert!(record_payload(&bad).unwrap_err().contains("CRC"));
        assert!(record_payload(&rec[..rec.len() - 5]).unwrap_err().contains("truncated"));
        // A length field claiming more than the message holds.
        let mut lying = ex.clone();
        lying[1] = 0x7f;
        assert!(for_each_feature(&lying, |_, _| {}).is_err());
        // The standard CRC-32C check value, masked.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }
}
