//! Layout strings ("HWC", "CHW", "FHWC"): one letter per dimension.

use std::fmt;

/// A tensor layout: one ASCII letter per dimension, or empty when unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Layout(String);

impl Layout {
    /// A layout from its letters. Letters must be ASCII and unique.
    pub fn new(s: &str) -> Result<Layout, String> {
        if !s.is_ascii() {
            return Err(format!("layout '{s}' must be ASCII letters"));
        }
        let mut seen = [false; 128];
        for b in s.bytes() {
            if seen[b as usize] {
                return Err(format!("layout '{s}' names dimension '{}' twice", b as char));
            }
            seen[b as usize] = true;
        }
        Ok(Layout(s.to_string()))
    }

    /// The empty (unknown) layout.
    pub fn empty() -> Layout {
        Layout(String::new())
    }

    /// The layout's letters.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Number of dimensions the layout names (0 when unknown).
    pub fn ndim(&self) -> usize {
        self.0.len()
    }

    /// Index of a dimension letter.
    pub fn find(&self, dim: char) -> Option<usize> {
        self.0.find(dim)
    }

    /// True when no layout is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Layout {
    /// Builds a layout known to be valid; panics on a repeated letter (a programming error).
    fn from(s: &str) -> Layout {
        Layout::new(s).expect("valid layout literal")
    }
}
