//! Convolution filters: `fn.gaussian_blur` ([`gaussian_blur`]), on the separable engine
//! ([`separable`] on the cpu, `separable.cu` on the GPU) both backends share, `fn.laplacian`
//! ([`laplacian`]: a sum of separable passes), and `fn.filter` ([`filter`]: any 2-D kernel).
//!
//! Layouts follow DALI's `ParseAndValidateDim`: with no layout, every dimension (at most 3)
//! is spatial; otherwise the leading run of `F`/`C` letters (at most 2) are independent
//! slices, a trailing `C` holds channels, and the 1 to 3 letters between are spatial (so
//! `HWC`, `CHW`, `FHWC`, `DHWC`, `FCHW`, `CFHW`, `FDHWC` all work). Channels are never mixed.

pub mod filter;
pub mod gaussian_blur;
mod gpu;
pub mod laplacian;
pub mod separable;

pub use filter::{EXPERIMENTAL_FILTER, FILTER};
pub use gaussian_blur::GAUSSIAN_BLUR;
pub use laplacian::LAPLACIAN;

use crate::error::{Error, Result};
use crate::ops::{OpDef, SequenceRules};

/// gaussian_blur and laplacian with per-frame arguments unfold channel-first sequences
/// (`CF...`) into single-channel frames, as DALI's do.
pub fn sequence_rules(def: &OpDef) -> Option<SequenceRules> {
    (def.is(&GAUSSIAN_BLUR) || def.is(&LAPLACIAN)).then_some(SequenceRules { expand_channels: true, ..SequenceRules::default() })
}

/// How a sample's dimensions divide: `lead` slice dimensions, then `spatial` ones, then a
/// channel dimension when `channels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    pub lead: usize,
    pub spatial: usize,
    pub channels: bool,
}

impl Dims {
    /// DALI's `ParseAndValidateDim` for a batch of `ndim`-dimensional samples of `layout`.
    pub fn parse(op: &str, layout: &str, ndim: usize) -> Result<Dims> {
        let bad = |m: String| Err(Error::type_mismatch(op, m));
        if layout.is_empty() {
            if ndim == 0 || ndim > 3 {
                return bad(format!("input data with an empty layout must have 1 to 3 (spatial) dimensions, got {ndim}"));
            }
            return Ok(Dims { lead: 0, spatial: ndim, channels: false });
        }
        let b = layout.as_bytes();
        let lead = b.iter().take_while(|&&c| c == b'F' || c == b'C').count();
        let channels = b.len() > lead && b[b.len() - 1] == b'C';
        let spatial = b.len() - lead - channels as usize;
        let middle = &layout[lead..lead + spatial];
        if spatial == 0 {
            return bad(format!("no spatial axes found in the layout: {layout}"));
        }
        if middle.contains('C') {
            return bad(format!("only channel-first or channel-last layouts are supported, got: {layout}"));
        }
        if middle.contains('F') {
            return bad(format!("for sequences, the layout should begin with 'F' or 'C', got: {layout}"));
        }
        if lead > 2 {
            return bad(format!("found more than one occurrence of 'F' or 'C' axes in layout: {layout}"));
        }
        if spatial > 3 {
            return bad(format!("too many dimensions, found {spatial} data axes; at most 3 are supported"));
        }
        Ok(Dims { lead, spatial, channels })
    }

    /// The spatial extents of a sample of `shape` and the elements after each spatial axis
    /// (what one step along it skips) as `(extents, channels)`.
    pub fn split(self, shape: &[usize]) -> (usize, &[usize], usize) {
        let outer = shape[..self.lead].iter().product();
        let spatial = &shape[self.lead..self.lead + self.spatial];
        let c = if self.channels { shape[shape.len() - 1] } else { 1 };
        (outer, spatial, c)
    }
}
