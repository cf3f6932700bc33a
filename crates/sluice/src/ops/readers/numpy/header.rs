//! The `.npy` header: magic, version, then a Python dict literal with `descr`,
//! `fortran_order` and `shape`, padded so the data starts at a multiple of 16 (NumPy writes
//! 64). Versions 1 (u16 header length), 2 and 3 (u32) are read, keys in any order (NumPy
//! itself accepts that). What DALI 2.4 refuses, we refuse with its words: big-endian data
//! ("Big Endian files are not supported."), types outside DALI's (complex, strings, objects,
//! structured arrays: "Unknown Numpy type string"). Hostile headers (a header length past
//! the file, extents whose product overflows) are errors before anything is allocated.

use crate::tensor::DType;

/// Longest header accepted (NumPy writes a few hundred bytes; a version 2 header may in
/// principle claim 4 GiB).
pub const MAX_HEADER_LEN: usize = 1 << 20;

/// The bytes to read first: the magic, the version and the header length.
pub const PREAMBLE: usize = 12;

/// A parsed header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub dtype: DType,
    /// The array's shape as NumPy reports it (C order, whatever the storage order).
    pub shape: Vec<usize>,
    /// The data is stored in Fortran (column-major) order.
    pub fortran_order: bool,
    /// Where the data starts in the file.
    pub data_offset: usize,
    /// Bytes of data: the shape's volume times the element size.
    pub data_len: usize,
}

/// From the preamble: the header's length and where it starts.
pub fn header_extent(pre: &[u8]) -> Result<(usize, usize), String> {
    if pre.len() < 10 || &pre[..6] != b"\x93NUMPY" {
        return Err("File is not a numpy file.".into());
    }
    let (start, len) = match pre[6] {
        1 => (10, u16::from_le_bytes([pre[8], pre[9]]) as usize),
        2 | 3 if pre.len() >= 12 => (12, u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as usize),
        v => return Err(format!("unsupported NPY format version {v}")),
    };
    if len > MAX_HEADER_LEN {
        return Err(format!("Error extracting header length: {len} bytes is more than {MAX_HEADER_LEN}"));
    }
    Ok((start, len))
}

/// Parses the header text that starts at `start` (from [`header_extent`]).
pub fn parse(text: &[u8], start: usize) -> Result<Header, String> {
    let text = std::str::from_utf8(text).map_err(|_| "Header is corrupted.".to_string())?;
    let body = text.trim_end_matches(['\n', ' ', '\0']).trim();
    let inner = body.strip_prefix('{').and_then(|b| b.strip_suffix('}')).ok_or("Header is corrupted.")?;
    let mut p = Parser { s: inner.as_bytes(), at: 0 };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        p.skip_ws();
        if p.done() {
            break;
        }
        let key = p.string()?;
        p.expect(b':')?;
        match key.as_str() {
            "descr" => descr = Some(p.descr()?),
            "fortran_order" => fortran = Some(p.boolean()?),
            "shape" => shape = Some(p.tuple()?),
            other => return Err(format!("unexpected key '{other}' in the header")),
        }
        p.skip_ws();
        if !p.done() {
            p.expect(b',')?;
        }
    }
    let dtype = descr.ok_or("Expected \"descr\" in the header")?;
    let fortran_order = fortran.ok_or("Failed to parse fortran_order field.")?;
    let shape = shape.ok_or("Expected \"shape\" in the header")?;
    let volume = shape.iter().try_fold(1usize, |v, &e| v.checked_mul(e)).ok_or("the array's shape overflows")?;
    let data_len = volume.checked_mul(dtype.size()).ok_or("the array's shape overflows")?;
    Ok(Header { dtype, shape, fortran_order, data_offset: start + text.len(), data_len })
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn done(&self) -> bool {
        self.at >= self.s.len()
    }

    fn skip_ws(&mut self) {
        while self.at < self.s.len() && self.s[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        self.skip_ws();
        if self.s.get(self.at) != Some(&c) {
            return Err(format!("Header is corrupted: expected '{}' at byte {}", c as char, self.at));
        }
        self.at += 1;
        Ok(())
    }

    fn string(&mut self) -> Result<String, String> {
        self.skip_ws();
        let q = *self.s.get(self.at).ok_or("Header is corrupted.")?;
        if q != b'\'' && q != b'"' {
            return Err("Expected ''' (a quoted string) in the header".into());
        }
        let rest = &self.s[self.at + 1..];
        let end = rest.iter().position(|&c| c == q).ok_or("Header is corrupted: unterminated string")?;
        self.at += end + 2;
        Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
    }

    fn descr(&mut self) -> Result<DType, String> {
        self.skip_ws();
        if self.s.get(self.at) == Some(&b'[') {
            return Err("Expected ''': structured arrays are not supported".into());
        }
        let d = self.string()?;
        let (order, code) = match d.as_bytes().first() {
            Some(b'<' | b'|' | b'=') => (true, &d[1..]),
            _ => (false, d.as_str()),
        };
        if !order {
            return Err("Big Endian files are not supported.".into());
        }
        Ok(match code {
            "b1" => DType::Bool,
            "u1" => DType::U8,
            "u2" => DType::U16,
            "u4" => DType::U32,
            "u8" => DType::U64,
            "i1" => DType::I8,
            "i2" => DType::I16,
            "i4" => DType::I32,
            "i8" => DType::I64,
            "f2" => DType::F16,
            "f4" => DType::F32,
            "f8" => DType::F64,
            other => return Err(format!("Unknown Numpy type string: {other}")),
        })
    }

    fn boolean(&mut self) -> Result<bool, String> {
        self.skip_ws();
        for (word, v) in [(&b"True"[..], true), (&b"False"[..], false)] {
            if self.s[self.at..].starts_with(word) {
                self.at += word.len();
                return Ok(v);
            }
        }
        Err("Failed to parse fortran_order field.".into())
    }

    fn tuple(&mut self) -> Result<Vec<usize>, String> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        loop {
            self.skip_ws();
            match self.s.get(self.at) {
                Some(b')') => {
                    self.at += 1;
                    break;
                }
                Some(b'-') => return Err("Numpy array dimensions must be non-negative.".into()),
                Some(c) if c.is_ascii_digit() => {
                    let start = self.at;
                    while self.s.get(self.at).is_some_and(u8::is_ascii_digit) {
                        self.at += 1;
                    }
                    let digits = std::str::from_utf8(&self.s[start..self.at]).expect("digits");
                    dims.push(digits.parse::<usize>().map_err(|_| format!("dimension {digits} is too large"))?);
                    self.skip_ws();
                    match self.s.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b')') if dims.len() > 1 => {}
                        _ => return Err("The first number in a tuple must be followed by a comma.".into()),
                    }
                }
                _ => return Err("Header is corrupted: bad shape tuple".into()),
            }
        }
        Ok(dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(header: &str, version: u8) -> Vec<u8> {
        let mut h = header.to_string();
        let pre = if version == 1 { 10 } else { 12 };
        while (pre + h.len() + 1) % 64 != 0 {
            h.push(' ');
        }
        h.push('\n');
        let mut v = b"\x93NUMPY".to_vec();
        v.push(version);
        v.push(0);
        if version == 1 {
            v.extend_from_slice(&(h.len() as u16).to_le_bytes());
        } else {
            v.extend_from_slice(&(h.len() as u32).to_le_bytes());
        }
        v.extend_from_slice(h.as_bytes());
        v
    }

    fn read(bytes: &[u8]) -> Result<Header, String> {
        let (start, len) = header_extent(&bytes[..PREAMBLE])?;
        parse(&bytes[start..start + len], start)
    }

    #[test]
    fn numpys_headers_parse() {
        let file = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 1);
        let h = read(&file).unwrap();
        assert_eq!((h.dtype, h.shape.as_slice(), h.fortran_order, h.data_offset, h.data_len), (DType::F32, &[3, 4][..], false, file.len(), 48));
        let file = npy("{'descr': '|u1', 'fortran_order': True, 'shape': (7,), }", 2);
        let h = read(&file).unwrap();
        assert_eq!((h.dtype, h.shape.as_slice(), h.fortran_order, h.data_offset), (DType::U8, &[7][..], true, file.len()));
        let h = read(&npy("{'shape': (), 'fortran_order': False, 'descr': '<i8'}", 1)).unwrap();
        assert!(h.shape.is_empty() && h.data_len == 8);
    }

    #[test]
    fn what_dali_refuses_is_refused_and_hostile_headers_too() {
        for (header, msg) in [
            ("{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", "Big Endian"),
            ("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", "Unknown Numpy type string: c8"),
            ("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (3,), }", "structured"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", "followed by a comma"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }", "non-negative"),
            ("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (3,), }", "fortran_order"),
            ("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", "overflows"),
        ] {
            let e = read(&npy(header, 1)).unwrap_err();
            assert!(e.contains(msg), "{header}: {e}");
        }
        assert!(header_extent(b"GIF89a......").unwrap_err().contains("not a numpy file"));
        let mut huge = npy("{}", 2);
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(header_extent(&huge[..PREAMBLE]).unwrap_err().contains("header length"));
    }
}
