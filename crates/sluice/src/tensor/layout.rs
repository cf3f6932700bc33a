//! Layout strings ("HWC", "CHW", "FHWC"): one letter per dimension.

use std::fmt;

/// A tensor layout: one ASCII letter per dimension, or empty when unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Layout(String);

impl Layout {
    /// A layout from its letters. Letters must be ASCII and unique, but for `*` (a
    /// dimension without a name: `fn.per_frame` of a 3-D input without layout is "F**").
    pub fn new(s: &str) -> Result<Layout, String> {
        if !s.is_ascii() {
            return Err(format!("layout '{s}' must be ASCII letters"));
        }
        let mut seen = [false; 128];
        for b in s.bytes() {
            if seen[b as usize] && b != b'*' {
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

impl Layout {
    /// The layout an image operator works with: `layout` when set, else DALI's guess from
    /// the dimension count (3-D is HWC, 4-D FHWC). Errors (as a message) when there is no
    /// guess or the layout names no H and W dimensions.
    pub fn spatial(layout: &Layout, ndim: usize) -> Result<Layout, String> {
        let l = if layout.is_empty() {
            match ndim {
                3 => Layout::from("HWC"),
                4 => Layout::from("FHWC"),
                n => return Err(format!("a {n}-D input needs a layout naming its H and W dimensions (e.g. HWC, CHW, FHWC, DHWC)")),
            }
        } else {
            layout.clone()
        };
        if l.find('H').is_none() || l.find('W').is_none() {
            return Err(format!("layout '{l}' has no H and W dimensions; expected one of HWC, CHW, FHWC, DHWC, CDHW, FCHW, FDHWC, FCDHW"));
        }
        Ok(l)
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
