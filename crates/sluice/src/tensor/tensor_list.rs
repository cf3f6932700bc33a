//! TensorList: a batch of samples sharing one dtype, layout and number of dimensions, each
//! with its own shape, stored in one host allocation.

use std::sync::Arc;

use super::buffer::HostBuffer;
use super::{DType, Element, Layout};

/// A batch. Samples live back to back in one [`HostBuffer`], each starting at an aligned
/// offset; when every sample has the same shape and no padding separates them the batch is a
/// dense tensor and can be handed out as one array without a copy.
#[derive(Debug, Clone)]
pub struct TensorList {
    dtype: DType,
    layout: Layout,
    ndim: usize,
    /// `len * ndim` extents, sample after sample (flat, so a batch allocates once).
    shapes: Vec<usize>,
    /// Byte offset of each sample in `data`, plus the end.
    offsets: Vec<usize>,
    data: Arc<HostBuffer>,
    /// Where each sample came from (file path, record key); empty when unknown.
    source_info: Vec<Arc<str>>,
}

impl TensorList {
    /// Allocates a zeroed batch with the given per-sample shapes (each of length `ndim`).
    /// Samples are packed without padding when their byte sizes keep `dtype` alignment, which
    /// holds for every element type, so same-shape batches come out dense.
    pub fn new<'a, I>(dtype: DType, ndim: usize, shapes: I) -> TensorList
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
        let total = *offsets.last().unwrap();
        TensorList {
            dtype,
            layout: Layout::empty(),
            ndim,
            shapes: flat,
            offsets,
            data: Arc::new(HostBuffer::zeroed(total)),
            source_info: Vec::new(),
        }
    }

    /// A batch of `len` samples of the same shape.
    pub fn uniform(dtype: DType, shape: &[usize], len: usize) -> TensorList {
        TensorList::new(dtype, shape.len(), std::iter::repeat_n(shape, len))
    }

    /// A batch built from owned sample data (tests and small helpers; copies).
    pub fn from_samples<T: Element>(shapes: &[Vec<usize>], samples: &[Vec<T>]) -> TensorList {
        let ndim = shapes.first().map_or(0, |s| s.len());
        let mut tl = TensorList::new(T::DTYPE, ndim, shapes.iter().map(|s| s.as_slice()));
        for (i, s) in samples.iter().enumerate() {
            tl.sample_mut::<T>(i).copy_from_slice(s);
        }
        tl
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

    /// Builder form of [`set_layout`](Self::set_layout).
    pub fn with_layout(mut self, layout: &str) -> TensorList {
        self.set_layout(Layout::from(layout));
        self
    }

    /// Shape of sample `i`.
    pub fn shape(&self, i: usize) -> &[usize] {
        &self.shapes[i * self.ndim..(i + 1) * self.ndim]
    }

    /// Number of elements of sample `i`.
    pub fn numel(&self, i: usize) -> usize {
        self.shape(i).iter().product()
    }

    /// Bytes of sample `i`.
    pub fn bytes(&self, i: usize) -> &[u8] {
        &self.data.as_slice()[self.offsets[i]..self.offsets[i + 1]]
    }

    /// Typed elements of sample `i`. Panics when `T` is not the batch's dtype.
    pub fn sample<T: Element>(&self, i: usize) -> &[T] {
        assert_eq!(T::DTYPE, self.dtype, "sample read with the wrong element type");
        bytemuck::cast_slice(self.bytes(i))
    }

    /// Typed elements of sample `i`, mutably. Panics when the data is shared.
    pub fn sample_mut<T: Element>(&mut self, i: usize) -> &mut [T] {
        assert_eq!(T::DTYPE, self.dtype, "sample written with the wrong element type");
        let (a, b) = (self.offsets[i], self.offsets[i + 1]);
        bytemuck::cast_slice_mut(&mut self.data_mut()[a..b])
    }

    /// Every sample's bytes as disjoint mutable slices, for filling a batch in parallel.
    pub fn samples_mut(&mut self) -> Vec<&mut [u8]> {
        let offsets = self.offsets.clone();
        let mut rest: &mut [u8] = Arc::get_mut(&mut self.data)
            .expect("a batch being filled is not shared")
            .as_mut_slice();
        let mut out = Vec::with_capacity(offsets.len() - 1);
        let mut pos = 0;
        for w in offsets.windows(2) {
            let (_, tail) = rest.split_at_mut(w[0] - pos);
            let (sample, tail) = tail.split_at_mut(w[1] - w[0]);
            out.push(sample);
            rest = tail;
            pos = w[1];
        }
        out
    }

    fn data_mut(&mut self) -> &mut [u8] {
        Arc::get_mut(&mut self.data).expect("a batch being filled is not shared").as_mut_slice()
    }

    /// The whole backing buffer (shared; keeps the data alive for zero-copy views).
    pub fn buffer(&self) -> &Arc<HostBuffer> {
        &self.data
    }

    /// Byte offset of sample `i` in [`buffer`](Self::buffer).
    pub fn offset(&self, i: usize) -> usize {
        self.offsets[i]
    }

    /// True when all samples have the same shape and lie back to back, so the batch is one
    /// `(len, *shape)` array.
    pub fn is_dense_tensor(&self) -> bool {
        if self.is_empty() {
            return true;
        }
        let first = self.shape(0);
        (1..self.len()).all(|i| self.shape(i) == first)
            && self.offsets.windows(2).all(|w| w[1] - w[0] == self.numel(0) * self.dtype.size())
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

    /// Copies the source info of another batch of the same length (1:1 operators).
    pub fn inherit_source_info(&mut self, from: &TensorList) {
        if from.len() == self.len() {
            self.source_info = from.source_info.clone();
        }
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ragged_batch_keeps_each_shape_and_bytes_apart() {
        let mut tl = TensorList::new(DType::U8, 3, [&[2, 3, 3][..], &[1, 1, 3][..]]);
        assert_eq!(tl.len(), 2);
        assert_eq!(tl.shape(0), &[2, 3, 3]);
        assert_eq!(tl.shape(1), &[1, 1, 3]);
        assert!(!tl.is_dense_tensor());
        {
            let mut s = tl.samples_mut();
            s[0].fill(7);
            s[1].fill(9);
        }
        assert!(tl.sample::<u8>(0).iter().all(|&v| v == 7));
        assert_eq!(tl.sample::<u8>(1), &[9, 9, 9]);
    }

    #[test]
    fn uniform_batch_is_dense() {
        let tl = TensorList::uniform(DType::F32, &[4, 5], 3);
        assert!(tl.is_dense_tensor());
        assert_eq!(tl.buffer().len(), 3 * 4 * 5 * 4);
        assert_eq!(tl.buffer().as_ptr() as usize % crate::tensor::ALIGN, 0);
    }

    #[test]
    fn from_samples_round_trips() {
        let tl = TensorList::from_samples::<i32>(&[vec![1], vec![1]], &[vec![3], vec![-4]]);
        assert_eq!(tl.sample::<i32>(1), &[-4]);
        assert_eq!(tl.dtype(), DType::I32);
    }
}
