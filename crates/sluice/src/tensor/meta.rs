//! What a batch is, apart from where its bytes live: element type, layout, a shape per
//! sample, byte offsets and where each sample came from. Host and GPU batches share it.

use std::sync::Arc;

use super::{DType, Layout};

/// Shapes and bookkeeping of a batch. Shapes are stored flat (`len * ndim` extents) so a
/// batch allocates a constant number of times, not once per sample.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchMeta {
    dtype: DType,
    layout: Layout,
    ndim: usize,
    shapes: Vec<usize>,
    /// Byte offset of each sample, plus the end.
    offsets: Vec<usize>,
    /// Where each sample came from (file path, record key); empty when unknown.
    source_info: Vec<Arc<str>>,
}

impl BatchMeta {
    /// Metadata of samples with the given shapes (each of length `ndim`), packed back to
    /// back: every element type's size divides every offset, so typed views stay aligned.
    pub fn new<'a, I>(dtype: DType, ndim: usize, shapes: I) -> BatchMeta
    where
        I: IntoIterator<Item = &'a [usize]>,
    {
        let mut flat = Vec::new();
        let mut offsets = vec![0usize];
        for shape in shapes {
            assert_eq!(shape.len(), ndim, "every sample must have {ndim} dimensions");
            flat.extend_from_slice(shape);
            let bytes = shape.iter().product::<usize>() * dtype.size();
            offsets.push(offsets.last().unwrap() + bytes);
        }
        BatchMeta { dtype, layout: Layout::empty(), ndim, shapes: flat, offsets, source_info: Vec::new() }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True for a batch of no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of dimensions of every sample.
    pub fn ndim(&self) -> usize {
        self.ndim
    }

    /// Layout of every sample.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Sets the layout; it must name `ndim` dimensions (or be empty).
    pub fn set_layout(&mut self, layout: Layout) {
        assert!(
            layout.is_empty() || layout.ndim() == self.ndim,
            "layout {layout} does not have {} dimensions",
            self.ndim
        );
        self.layout = layout;
    }

    /// Names the layout an image operator works with on its output, as DALI's do (rotate,
    /// resize, flip, jpeg_compression_distortion): where it is empty, DALI's guess from the
    /// dimension count ([`Layout::spatial`]: 3-D HWC, 4-D FHWC); otherwise unchanged.
    pub fn name_guessed_layout(&mut self) {
        if self.layout.is_empty() {
            if let Ok(guess) = Layout::spatial(&self.layout, self.ndim) {
                self.layout = guess;
            }
        }
    }

    /// Shape of sample `i`.
    pub fn shape(&self, i: usize) -> &[usize] {
        &self.shapes[i * self.ndim..(i + 1) * self.ndim]
    }

    /// Number of elements of sample `i`.
    pub fn numel(&self, i: usize) -> usize {
        self.shape(i).iter().product()
    }

    /// Byte offset of sample `i` from the start of the batch's memory.
    pub fn offset(&self, i: usize) -> usize {
        self.offsets[i]
    }

    /// Byte range of sample `i`.
    pub fn byte_range(&self, i: usize) -> std::ops::Range<usize> {
        self.offsets[i]..self.offsets[i + 1]
    }

    /// Bytes of all samples together.
    pub fn total_bytes(&self) -> usize {
        *self.offsets.last().unwrap()
    }

    /// True when all samples have the same shape and lie back to back, so the batch is one
    /// `(len, *shape)` array.
    pub fn is_dense_tensor(&self) -> bool {
        if self.is_empty() {
            return true;
        }
        let first = self.shape(0);
        (1..self.len()).all(|i| self.shape(i) == first)
    }

    /// Where sample `i` came from ("" when unknown).
    pub fn source_info(&self, i: usize) -> &str {
        self.source_info.get(i).map_or("", |s| s)
    }

    /// All source infos (empty when none were set).
    pub fn source_infos(&self) -> &[Arc<str>] {
        &self.source_info
    }

    /// Sets where each sample came from.
    pub fn set_source_info(&mut self, info: Vec<Arc<str>>) {
        assert!(info.is_empty() || info.len() == self.len());
        self.source_info = info;
    }

    /// The metadata of samples `picks` of this batch, in that order (repeats allowed): their
    /// shapes and source infos, this batch's type and layout, packed anew.
    pub fn picked(&self, picks: &[usize]) -> BatchMeta {
        let mut meta = BatchMeta::new(self.dtype, self.ndim, picks.iter().map(|&i| self.shape(i)));
        meta.layout = self.layout.clone();
        if !self.source_info.is_empty() {
            meta.source_info = picks.iter().map(|&i| self.source_info[i].clone()).collect();
        }
        meta
    }

    /// Copies the source info of another batch of the same length (1:1 operators).
    pub fn inherit_source_info(&mut self, from: &BatchMeta) {
        if from.len() == self.len() {
            self.source_info = from.source_info.clone();
        }
    }
}
