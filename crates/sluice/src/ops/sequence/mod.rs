//! Operators on sequences (samples whose outermost dimension is frames, layout `F...`):
//! `fn.element_extract` (element_extract.rs) and `fn.sequence_rearrange`
//! (sequence_rearrange.rs). Both make outputs whose samples are whole frames of the input
//! sample in another order, so they share one plan, [`FrameGather`]: for every output
//! sample, the input frames it is made of. The cpu backend copies those frames on the
//! worker pool; the gpu backend (gpu.rs) queues every frame copy of every output in one
//! batched copy launch (`strided_copy_gpu::StridedCopy::copy_samples`).

mod element_extract;
mod gpu;
mod sequence_rearrange;

pub use element_extract::ELEMENT_EXTRACT;
pub use sequence_rearrange::SEQUENCE_REARRANGE;

use crate::error::{Error, Result};
use crate::ops::{for_each_sample, Workspace};
use crate::tensor::{BatchMeta, Layout, TensorList};

/// One output batch made of whole frames of the input's samples: output sample i is input
/// sample i's frames `frames(i)`, in order.
pub(crate) struct FrameGather {
    pub meta: BatchMeta,
    /// Input frame indices of every output sample, back to back.
    frames: Vec<usize>,
    /// Where each sample's frames start in `frames`, plus the end.
    starts: Vec<usize>,
}

impl FrameGather {
    /// Starts a plan for `samples` output samples.
    fn with_capacity(samples: usize, frames: usize) -> FrameGather {
        let mut starts = Vec::with_capacity(samples + 1);
        starts.push(0);
        FrameGather { meta: BatchMeta::new(crate::tensor::DType::U8, 0, std::iter::empty()), frames: Vec::with_capacity(frames), starts }
    }

    /// Adds the next output sample: input frames `frames`.
    fn push_sample(&mut self, frames: impl IntoIterator<Item = usize>) {
        self.frames.extend(frames);
        self.starts.push(self.frames.len());
    }

    /// The input frames output sample `i` is made of.
    pub fn frames(&self, i: usize) -> &[usize] {
        &self.frames[self.starts[i]..self.starts[i + 1]]
    }

    /// Finishes the plan: output shapes are the input's with the frame count replaced
    /// (`keep_frame_dim`) or the frame dimension dropped.
    fn finish(mut self, input: &BatchMeta, keep_frame_dim: bool, layout: Layout) -> FrameGather {
        let ndim = input.ndim() - (!keep_frame_dim) as usize;
        let mut shapes = Vec::with_capacity(input.len() * ndim);
        for i in 0..input.len() {
            if keep_frame_dim {
                shapes.push(self.frames(i).len());
            }
            shapes.extend_from_slice(&input.shape(i)[1..]);
        }
        let mut meta = BatchMeta::new(input.dtype(), ndim, (0..input.len()).map(|i| &shapes[i * ndim..(i + 1) * ndim]));
        meta.set_layout(layout);
        meta.inherit_source_info(input);
        self.meta = meta;
        self
    }

    /// Runs the plan on the host.
    fn run_cpu(&self, ws: &Workspace<'_>, input: &TensorList) -> Result<TensorList> {
        let mut out = TensorList::for_overwrite(self.meta.clone());
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let src = input.bytes(i);
            let frame = frame_bytes(input.meta(), i);
            for (k, &f) in self.frames(i).iter().enumerate() {
                dst[k * frame..(k + 1) * frame].copy_from_slice(&src[f * frame..(f + 1) * frame]);
            }
            Ok(())
        })?;
        Ok(out)
    }
}

/// Bytes of one frame of sample `i`.
fn frame_bytes(input: &BatchMeta, i: usize) -> usize {
    input.shape(i)[1..].iter().product::<usize>() * input.dtype().size()
}

/// The checks both sequence operators make of their input: at least 2 dimensions (frames,
/// then at least one for the frame) and a layout, if any, starting with `F`.
fn check_sequence(op: &str, input: &BatchMeta) -> Result<()> {
    let layout = input.layout();
    if !layout.is_empty() && !layout.as_str().starts_with('F') {
        return Err(Error::type_mismatch(op, format!("the input must be a sequence: its layout must start with 'F' (frames), got '{layout}'")));
    }
    if input.ndim() < 2 {
        return Err(Error::type_mismatch(op, format!(
            "the input must be a sequence of at least 2 dimensions (frames, then the frame's), got {} dimension(s)",
            input.ndim()
        )));
    }
    Ok(())
}
