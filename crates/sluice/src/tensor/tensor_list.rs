//! TensorList: a batch of samples sharing one dtype, layout and number of dimensions, each
//! with its own shape, stored in one host allocation.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::buffer::HostBuffer;
use super::{BatchMeta, DType, Element, Layout};

/// A batch on the host. Samples live back to back in one [`HostBuffer`]; when every sample
/// has the same shape the batch is a dense tensor and can be handed out as one array
/// without a copy. Shape, dtype, layout and source-info queries come from [`BatchMeta`]
/// (through `Deref`), shared with the GPU batch type.
#[derive(Debug, Clone)]
pub struct TensorList {
    meta: BatchMeta,
    data: Arc<HostBuffer>,
}

impl Deref for TensorList {
    type Target = BatchMeta;
    fn deref(&self) -> &BatchMeta {
        &self.meta
    }
}

impl DerefMut for TensorList {
    fn deref_mut(&mut self) -> &mut BatchMeta {
        &mut self.meta
    }
}

impl TensorList {
    /// Allocates a zeroed batch with the given per-sample shapes (each of length `ndim`).
    pub fn new<'a, I>(dtype: DType, ndim: usize, shapes: I) -> TensorList
    where
        I: IntoIterator<Item = &'a [usize]>,
    {
        let meta = BatchMeta::new(dtype, ndim, shapes);
        let data = Arc::new(HostBuffer::zeroed(meta.total_bytes()));
        TensorList { meta, data }
    }

    /// A zeroed batch laid out as `meta` says (shapes, layout, source info).
    pub fn from_meta(meta: BatchMeta) -> TensorList {
        let data = Arc::new(HostBuffer::zeroed(meta.total_bytes()));
        TensorList { meta, data }
    }

    /// A batch laid out as `meta` whose bytes the caller overwrites entirely (decoders,
    /// resamplers): the memory may hold an earlier batch's data, so no time goes into zeroing
    /// a recycled block.
    pub fn for_overwrite(meta: BatchMeta) -> TensorList {
        let data = Arc::new(HostBuffer::for_overwrite(meta.total_bytes()));
        TensorList { meta, data }
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

    /// Host batch with the given metadata over existing data (a download from the GPU).
    pub fn from_parts(meta: BatchMeta, data: HostBuffer) -> TensorList {
        assert!(data.len() >= meta.total_bytes(), "buffer smaller than the batch");
        TensorList { meta, data: Arc::new(data) }
    }

    /// The same bytes under other metadata (a reshape): no copy. `meta` must describe
    /// samples of the same byte sizes, in the same order.
    pub fn reinterpreted(&self, meta: BatchMeta) -> TensorList {
        assert!((0..self.len()).all(|i| self.meta.byte_range(i) == meta.byte_range(i)) && meta.len() == self.len(), "a reinterpretation keeps every sample's bytes");
        TensorList { meta, data: self.data.clone() }
    }

    /// The same bytes cut into other samples (a batch of sequences as a batch of their
    /// frames, and back): no copy. `meta` must cover exactly this batch's bytes.
    pub fn resliced(&self, meta: BatchMeta) -> TensorList {
        assert_eq!(meta.total_bytes(), self.meta.total_bytes(), "a reslicing keeps the batch's bytes");
        TensorList { meta, data: self.data.clone() }
    }

    /// The batch's metadata.
    pub fn meta(&self) -> &BatchMeta {
        &self.meta
    }

    /// Builder form of [`BatchMeta::set_layout`].
    pub fn with_layout(mut self, layout: &str) -> TensorList {
        self.set_layout(Layout::from(layout));
        self
    }

    /// Bytes of sample `i`.
    pub fn bytes(&self, i: usize) -> &[u8] {
        &self.data.as_slice()[self.meta.byte_range(i)]
    }

    /// Typed elements of sample `i`. Panics when `T` is not the batch's dtype.
    pub fn sample<T: Element>(&self, i: usize) -> &[T] {
        assert_eq!(T::DTYPE, self.dtype(), "sample read with the wrong element type");
        bytemuck::cast_slice(self.bytes(i))
    }

    /// Typed elements of sample `i`, mutably. Panics when the data is shared.
    pub fn sample_mut<T: Element>(&mut self, i: usize) -> &mut [T] {
        assert_eq!(T::DTYPE, self.dtype(), "sample written with the wrong element type");
        let r = self.meta.byte_range(i);
        bytemuck::cast_slice_mut(&mut self.data_mut()[r])
    }

    /// Every sample's bytes as disjoint mutable slices, for filling a batch in parallel.
    pub fn samples_mut(&mut self) -> Vec<&mut [u8]> {
        let n = self.meta.len();
        let ranges: Vec<std::ops::Range<usize>> = (0..n).map(|i| self.meta.byte_range(i)).collect();
        let mut rest: &mut [u8] = self.data_mut();
        let mut out = Vec::with_capacity(n);
        let mut pos = 0;
        for r in ranges {
            let (_, tail) = rest.split_at_mut(r.start - pos);
            let (sample, tail) = tail.split_at_mut(r.end - r.start);
            out.push(sample);
            rest = tail;
            pos = r.end;
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
