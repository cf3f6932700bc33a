//! Element types, numbered as DALI numbers them (`DALIDataType`) so Python enums pass through.

use std::fmt;

/// The element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum DType {
    U8 = 0,
    U16 = 1,
    U32 = 2,
    U64 = 3,
    I8 = 4,
    I16 = 5,
    I32 = 6,
    I64 = 7,
    F16 = 8,
    F32 = 9,
    F64 = 10,
    Bool = 11,
}

impl DType {
    /// All types, in DALI's order.
    pub const ALL: [DType; 12] = [
        DType::U8, DType::U16, DType::U32, DType::U64, DType::I8, DType::I16,
        DType::I32, DType::I64, DType::F16, DType::F32, DType::F64, DType::Bool,
    ];

    /// The type with DALI's numeric id, if it is one we support.
    pub fn from_id(id: i64) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| *d as i64 == id)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 | DType::Bool => 1,
            DType::U16 | DType::I16 | DType::F16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    /// DALI's name for the type (`UINT8`, `FLOAT`, ...).
    pub fn dali_name(self) -> &'static str {
        match self {
            DType::U8 => "UINT8",
            DType::U16 => "UINT16",
            DType::U32 => "UINT32",
            DType::U64 => "UINT64",
            DType::I8 => "INT8",
            DType::I16 => "INT16",
            DType::I32 => "INT32",
            DType::I64 => "INT64",
            DType::F16 => "FLOAT16",
            DType::F32 => "FLOAT",
            DType::F64 => "FLOAT64",
            DType::Bool => "BOOL",
        }
    }

    /// The name DALI's C++ messages give the type (`uint8`, `float`, `double`, ...), for
    /// errors whose text users match against DALI's.
    pub fn cpp_name(self) -> &'static str {
        match self {
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::F32 => "float",
            DType::F64 => "double",
            DType::Bool => "bool",
        }
    }

    /// The NumPy/array-interface type string (`|u1`, `<f4`, ...).
    pub fn typestr(self) -> &'static str {
        match self {
            DType::U8 => "|u1",
            DType::U16 => "<u2",
            DType::U32 => "<u4",
            DType::U64 => "<u8",
            DType::I8 => "|i1",
            DType::I16 => "<i2",
            DType::I32 => "<i4",
            DType::I64 => "<i8",
            DType::F16 => "<f2",
            DType::F32 => "<f4",
            DType::F64 => "<f8",
            DType::Bool => "|b1",
        }
    }

    /// The type of a NumPy/array-interface type string (`<f4`, `|u1`, `=i8`; native or
    /// little-endian only).
    pub fn from_typestr(s: &str) -> Option<DType> {
        let body = s.strip_prefix(['<', '|', '=']).unwrap_or(s);
        DType::ALL.iter().copied().find(|d| &d.typestr()[1..] == body)
    }

    /// DLPack (code, bits): kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBool = 6.
    pub fn dlpack(self) -> (u8, u8) {
        let bits = (self.size() * 8) as u8;
        match self {
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => (1, bits),
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => (0, bits),
            DType::F16 | DType::F32 | DType::F64 => (2, bits),
            DType::Bool => (6, 8),
        }
    }

    /// True for floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::F32 | DType::F64)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.dali_name())
    }
}

/// Rust element types that can live in a tensor.
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// The tag of this element type.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => { $(impl Element for $t { const DTYPE: DType = DType::$d; })* };
}
element!(u8 => U8, u16 => U16, u32 => U32, u64 => U64, i8 => I8, i16 => I16, i32 => I32,
         i64 => I64, f32 => F32, f64 => F64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_match_dali() {
        for d in DType::ALL {
            assert_eq!(DType::from_id(d as i64), Some(d));
        }
        assert_eq!(DType::from_id(9), Some(DType::F32));
        assert_eq!(DType::from_id(-1), None);
        assert_eq!(DType::F32.size(), 4);
        assert_eq!(DType::I32.dlpack(), (0, 32));
    }
}
