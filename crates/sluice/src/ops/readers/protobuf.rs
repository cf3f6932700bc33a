//! The protobuf wire format, read without a protobuf library (TFRecord's `tf.train.Example`,
//! Caffe's `Datum`, Caffe2's `TensorProtos`): a message is a run of fields, each a varint key
//! (`field number << 3 | wire type`) and a payload. Every length is checked against what is
//! left of the message, so a damaged record is an error, never a read past its end.

/// Wire types.
pub const VARINT: u8 = 0;
pub const I64: u8 = 1;
pub const LEN: u8 = 2;
pub const START_GROUP: u8 = 3;
pub const END_GROUP: u8 = 4;
pub const I32: u8 = 5;

pub fn varint(b: &[u8]) -> Result<(u64, usize), String> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((v, i + 1));
        }
    }
    Err("corrupted record: a varint runs past its end".into())
}

/// The fields of a message: (field number, wire type, payload). A varint field's payload is
/// its encoded bytes; fixed fields their 4 or 8 bytes.
pub struct Fields<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Fields<'a> {
    pub fn new(b: &'a [u8]) -> Fields<'a> {
        Fields { rest: b, failed: false }
    }

    fn next_field(&mut self) -> Result<(u32, u8, &'a [u8]), String> {
        self.next_field_in(0)
    }

    /// The next field, inside `depth` groups: groups nest by recursion, so their depth is
    /// bounded (protobuf's own limit) rather than the stack.
    fn next_field_in(&mut self, depth: u32) -> Result<(u32, u8, &'a [u8]), String> {
        const MAX_GROUP_DEPTH: u32 = 100;
        let (key, n) = varint(self.rest)?;
        self.rest = &self.rest[n..];
        let (num, wire) = ((key >> 3) as u32, (key & 7) as u8);
        if num == 0 {
            return Err("corrupted record: field number 0".into());
        }
        let len = match wire {
            VARINT => varint(self.rest)?.1,
            I64 => 8,
            LEN => {
                let (len, n) = varint(self.rest)?;
                self.rest = &self.rest[n..];
                usize::try_from(len).map_err(|_| "corrupted record: a length is too large".to_string())?
            }
            I32 => 4,
            START_GROUP => {
                // A (deprecated) group: fields up to the matching end-group tag, returned whole.
                let body = self.rest;
                let mut inner = Fields::new(body);
                loop {
                    if inner.rest.is_empty() {
                        return Err("corrupted record: a group has no end".into());
                    }
                    let before = inner.rest.len();
                    let (key, n) = varint(inner.rest)?;
                    if key & 7 == u64::from(END_GROUP) {
                        if key >> 3 != u64::from(num) {
                            return Err("corrupted record: a group ends with another group's tag".into());
                        }
                        let len = body.len() - before;
                        self.rest = &body[len + n..];
                        return Ok((num, START_GROUP, &body[..len]));
                    }
                    if depth == MAX_GROUP_DEPTH {
                        return Err(format!("corrupted record: groups nested deeper than {MAX_GROUP_DEPTH}"));
                    }
                    inner.next_field_in(depth + 1)?;
                }
            }
            w => return Err(format!("corrupted record: unknown wire type {w}")),
        };
        if len > self.rest.len() {
            return Err(format!("corrupted record: a field of {len} bytes runs past the end ({} left)", self.rest.len()));
        }
        let (payload, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok((num, wire, payload))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, u8, &'a [u8]), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let r = self.next_field();
        self.failed = r.is_err();
        Some(r)
    }
}


/// Calls `value` with each value of a repeated varint field's payload `b` (packed: `wire ==
/// LEN`, or one value).
pub fn varints(wire: u8, mut b: &[u8], mut value: impl FnMut(u64)) -> Result<(), String> {
    if wire == VARINT {
        value(varint(b)?.0);
        return Ok(());
    }
    while !b.is_empty() {
        let (v, n) = varint(b)?;
        value(v);
        b = &b[n..];
    }
    Ok(())
}

/// Appends the values of a repeated `float` field's payload `b` (packed or one value) to `out`.
pub fn floats(b: &[u8], out: &mut Vec<f32>) -> Result<(), String> {
    if b.len() % 4 != 0 {
        return Err("corrupted record: a float list is not a whole number of floats".into());
    }
    out.extend(b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Groups nest by recursion: a record of 50,000 group starts (fuzzing found it
    /// overflowing the stack) is an error; a shallow group still parses.
    #[test]
    fn deeply_nested_groups_are_an_error_not_a_stack_overflow() {
        let deep = vec![0x0bu8; 50_000];
        assert!(Fields::new(&deep).any(|f| f.is_err()));
        // field 1 group { field 2 varint 5 } end group 1
        let shallow = [0x0b, 0x10, 0x05, 0x0c];
        let fields: Vec<_> = Fields::new(&shallow).collect::<Result<_, _>>().unwrap();
        assert_eq!(fields, vec![(1, START_GROUP, &[0x10, 0x05][..])]);
    }
}
