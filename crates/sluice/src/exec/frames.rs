//! Per-frame argument inputs (DALI's `fn.per_frame`), for every operator at once.
//!
//! An argument input whose layout starts with `F` gives a value per frame of a sequence:
//! `fn.rotate(video, angle=fn.per_frame(angles))`. When an operator gets one for an argument
//! its schema marks `per_frame`, the executor runs the operator on the batch's frames instead
//! of its sequences:
//! - each sequence input (layout `F...`) is cut into its frames, without a copy;
//! - every other input and per-sample argument is repeated for each frame of its sample;
//! - per-frame arguments are cut into their frames, or repeated where a sample gives one;
//! - each output's frames are joined back into sequences (`F` + the frames' layout), without
//!   a copy: the frames of one sequence must come out with one shape.
//!
//! Operators see a batch of images and never know. An operator without positional inputs
//! (`transforms.*`), or whose `ops::SequenceRules` say so, takes its frames from the
//! per-frame argument and returns sequences of its outputs, one per frame; operators whose
//! rules say so also unfold sequence inputs without per-frame arguments (a matrix per
//! frame), or channel-first sequences (`CF...`) channel by channel. As in DALI, nothing is
//! unfolded when the operator has inputs and none has frames (each argument sample is then
//! its sample's value), and an `F` layout on an argument the schema does not mark is ignored.

use std::collections::HashMap;
use std::sync::Arc;

use rayon::ThreadPool;

use crate::error::{Error, Result};
use crate::ops::{gather_samples, SequenceRules};
use crate::tensor::{Batch, BatchMeta, Layout, TensorList, TensorListGpu};

/// True for a batch of sequences: its layout starts with `F`.
fn is_sequence(meta: &BatchMeta) -> bool {
    meta.layout().as_str().starts_with('F') && meta.ndim() > 0
}

/// True for a batch of channel-first sequences (`CF...`), which operators whose rules
/// `expand_channels` unfold into single-channel frames.
fn is_channel_sequence(meta: &BatchMeta, rules: SequenceRules) -> bool {
    rules.expand_channels && meta.layout().as_str().starts_with("CF") && meta.ndim() > 1
}

/// How a batch of sequences unfolds: the frames of each sample.
pub(super) struct Frames {
    /// Frames of sample i.
    counts: Vec<usize>,
    /// Channels of sample i unfolded with its frames (`CF...` inputs: each channel of each
    /// frame is a sample of its own, channel by channel); empty when only frames unfold.
    channels: Vec<usize>,
    /// For frame k of the unfolded batch: its sample and its frame's index in that sample.
    owners: Vec<(usize, usize)>,
}

impl Frames {
    /// The unfolding an invocation needs: `None` unless an argument in `per_frame_args` comes
    /// as an argument input with an `F` layout, or `rules` unfold an input that is a sequence.
    /// `op` names the operator in errors.
    pub(super) fn plan(op: &str, per_frame_args: &[&str], rules: SequenceRules, inputs: &[&BatchMeta], args: &HashMap<&str, &TensorList>) -> Result<Option<Frames>> {
        let mut per_frame: Vec<(&str, &TensorList)> =
            args.iter().filter(|(n, t)| per_frame_args.contains(n) && is_sequence(t.meta())).map(|(n, t)| (*n, *t)).collect();
        if per_frame.is_empty() && !(rules.unfold_inputs && inputs.iter().any(|m| is_sequence(m))) {
            return Ok(None);
        }
        per_frame.sort_by_key(|(n, _)| *n);
        let unfolds = |m: &BatchMeta| is_sequence(m) || is_channel_sequence(m, rules);
        let (reference, ref_meta) = match inputs.iter().position(|m| unfolds(m)) {
            Some(k) => (format!("input {k}"), inputs[k]),
            None if inputs.is_empty() || rules.frames_from_arguments => (format!("argument `{}`", per_frame[0].0), per_frame[0].1.meta()),
            // Channels without frames: DALI refuses per-frame values there.
            None if rules.expand_channels && inputs[0].layout().as_str().starts_with('C') => {
                let (name, arg) = per_frame[0];
                return Err(Error::type_mismatch(
                    op,
                    format!(
                        "Tensor input for argument {name} is specified per frame (got {} layout). In that case, samples in the input 0 must contain frames too. Got layout `{}` that does not contain frames.",
                        arg.layout(),
                        inputs[0].layout()
                    ),
                ));
            }
            // No input has frames: nothing to unfold, each argument sample is the sample's
            // value (DALI does the same).
            None => return Ok(None),
        };
        let channel_first = is_channel_sequence(ref_meta, rules);
        let frame_axis = channel_first as usize;
        let counts: Vec<usize> = (0..ref_meta.len()).map(|i| ref_meta.shape(i)[frame_axis]).collect();
        let channels: Vec<usize> = if channel_first { (0..ref_meta.len()).map(|i| ref_meta.shape(i)[0]).collect() } else { Vec::new() };
        for (k, m) in inputs.iter().enumerate().filter(|(_, m)| unfolds(m)) {
            if is_channel_sequence(m, rules) != channel_first {
                return Err(Error::type_mismatch(
                    op,
                    format!("Failed to match expanding of sequence-like input. The {reference} has layout {} and the input {k} has layout {}: both must start with the same frame and channel extents.", ref_meta.layout(), m.layout()),
                ));
            }
            for (i, &f) in counts.iter().enumerate() {
                if m.len() != counts.len() || m.shape(i)[frame_axis] != f || (channel_first && m.shape(i)[0] != channels[i]) {
                    let got = if m.len() == counts.len() { m.shape(i)[frame_axis] } else { 0 };
                    return Err(Error::type_mismatch(
                        op,
                        format!("The {reference} and the input {k} have different number of frames for sample {i}, respectively: {f} and {got}"),
                    ));
                }
            }
        }
        for (name, arg) in &per_frame {
            if arg.len() != counts.len() {
                return Err(Error::arg(
                    op,
                    name,
                    format!("Number of samples passed for argument {name} (got {}) does not match the number of samples in the {reference} (got {}).", arg.len(), counts.len()),
                ));
            }
            for (i, &f) in counts.iter().enumerate() {
                let given = arg.shape(i)[0];
                if given != 1 && given != f {
                    return Err(Error::arg(
                        op,
                        name,
                        format!("The sample {i} of tensor argument `{name}` contains {given} per-frame parameters, but there are {f} frames in the corresponding sample of {reference}. The numbers should match."),
                    ));
                }
            }
        }
        let mut owners = Vec::new();
        for (i, &f) in counts.iter().enumerate() {
            for _ in 0..channels.get(i).copied().unwrap_or(1) {
                owners.extend((0..f).map(|j| (i, j)));
            }
        }
        Ok(Some(Frames { counts, channels, owners }))
    }

    /// Frames of each sequence (what `Workspace::frames` says); `None` when channels unfold
    /// too (the batch's samples are then not one per frame).
    pub(super) fn counts(&self) -> Option<&[usize]> {
        self.channels.is_empty().then_some(&self.counts[..])
    }

    /// Samples in the unfolded batch.
    pub(super) fn total(&self) -> usize {
        self.owners.len()
    }

    /// The samples to pick from a batch with one sample per sequence so that each frame has
    /// its sample's.
    fn repeats(&self) -> Vec<usize> {
        self.owners.iter().map(|&(i, _)| i).collect()
    }

    /// Metadata of `meta`'s sequences cut into their frames (shapes without the `lead` leading
    /// extents: `F`, or `C` and `F`), each frame with its sequence's source info.
    fn unfolded_meta(meta: &BatchMeta, lead: usize) -> BatchMeta {
        let frames = |i: usize| std::iter::repeat_n(i, meta.shape(i)[..lead].iter().product());
        let mut out = BatchMeta::new(meta.dtype(), meta.ndim() - lead, (0..meta.len()).flat_map(frames).map(|i| &meta.shape(i)[lead..]));
        out.set_layout(Layout::from(&meta.layout().as_str()[lead..]));
        if !meta.source_infos().is_empty() {
            out.set_source_info((0..meta.len()).flat_map(frames).map(|i| meta.source_infos()[i].clone()).collect());
        }
        out
    }

    /// A positional input as the operator sees it: a sequence input cut into frames, any
    /// other repeated for each frame of its sample.
    pub(super) fn input(&self, pool: &ThreadPool, b: &Batch) -> Result<Batch> {
        Ok(match b {
            Batch::Cpu(t) => Batch::Cpu(self.host_input(pool, t)?),
            Batch::Gpu(t) if self.lead(t.meta()) > 0 => Batch::Gpu(self.unfold_gpu(t)),
            Batch::Gpu(t) => Batch::Gpu(t.picked(&self.repeats())),
        })
    }

    /// A host input (mixed operators, a gpu operator's host inputs), as [`input`](Self::input).
    pub(super) fn host_input(&self, pool: &ThreadPool, t: &TensorList) -> Result<TensorList> {
        if self.lead(t.meta()) > 0 {
            Ok(t.resliced(Self::unfolded_meta(t.meta(), self.lead(t.meta()))))
        } else {
            gather_samples(pool, t, &self.repeats())
        }
    }

    fn unfold_gpu(&self, t: &TensorListGpu) -> TensorListGpu {
        let lead = self.lead(t.meta());
        let meta = Self::unfolded_meta(t.meta(), lead);
        let starts: Arc<[usize]> = (0..t.len())
            .flat_map(|i| {
                let n: usize = t.shape(i)[..lead].iter().product();
                let frame = t.meta().byte_range(i).len() / n.max(1);
                (0..n).map(move |j| t.data_offset(i) + j * frame)
            })
            .collect();
        t.view(meta, starts)
    }

    /// The leading extents an input unfolds: 2 for a channel-first sequence (when channels
    /// unfold), 1 for a sequence, 0 for an input repeated per frame.
    fn lead(&self, meta: &BatchMeta) -> usize {
        if !self.channels.is_empty() && meta.layout().as_str().starts_with("CF") && meta.ndim() > 1 {
            2
        } else {
            is_sequence(meta) as usize
        }
    }

    /// An argument input as the operator sees it: a per-frame one (`per_frame` and an `F`
    /// layout) cut into frames, a sample of one frame repeated for every frame; any other
    /// repeated for each frame of its sample.
    pub(super) fn argument(&self, pool: &ThreadPool, t: &TensorList, per_frame: bool) -> Result<TensorList> {
        if !(per_frame && is_sequence(t.meta())) {
            return gather_samples(pool, t, &self.repeats());
        }
        let frames = t.resliced(Self::unfolded_meta(t.meta(), 1));
        let mut first = 0;
        let mut firsts = Vec::with_capacity(self.counts.len());
        for i in 0..t.len() {
            firsts.push(first);
            first += t.shape(i)[0];
        }
        let picks: Vec<usize> = self.owners.iter().map(|&(i, j)| firsts[i] + if t.shape(i)[0] == 1 { 0 } else { j }).collect();
        gather_samples(pool, &frames, &picks)
    }

    /// The metadata of an output of the unfolded batch joined back into sequences.
    fn folded_meta(&self, op: &str, meta: &BatchMeta) -> Result<BatchMeta> {
        if meta.len() != self.total() {
            return Err(Error::Unsupported(format!("{op}: per-frame arguments: the operator returned {} samples for {} frames", meta.len(), self.total())));
        }
        // Each sample's unfolded outputs: its frames, or its channels' frames (channel-major).
        let lead = |i: usize| -> Vec<usize> { self.channels.get(i).map_or(vec![self.counts[i]], |&c| vec![c, self.counts[i]]) };
        let mut shapes: Vec<Vec<usize>> = Vec::with_capacity(self.counts.len());
        let mut firsts = Vec::with_capacity(self.counts.len());
        let mut first = 0;
        for i in 0..self.counts.len() {
            let n: usize = lead(i).iter().product();
            let frame = if n == 0 { vec![0; meta.ndim()] } else { meta.shape(first).to_vec() };
            if let Some(k) = (first..first + n).find(|&k| meta.shape(k) != frame.as_slice()) {
                return Err(Error::type_mismatch(
                    op,
                    format!("sample {i}: frames of a sequence must come out with one shape; frame 0 is {:?}, frame {} is {:?}", frame, k - first, meta.shape(k)),
                ));
            }
            shapes.push(lead(i).into_iter().chain(frame).collect());
            firsts.push((first, n));
            first += n;
        }
        let prefix = if self.channels.is_empty() { "F" } else { "CF" };
        let mut out = BatchMeta::new(meta.dtype(), meta.ndim() + prefix.len(), shapes.iter().map(Vec::as_slice));
        if !meta.layout().is_empty() {
            out.set_layout(Layout::from(format!("{prefix}{}", meta.layout()).as_str()));
        }
        if !meta.source_infos().is_empty() {
            out.set_source_info(firsts.iter().map(|&(k, n)| if n == 0 { Arc::from("") } else { meta.source_infos()[k].clone() }).collect());
        }
        Ok(out)
    }

    /// An output of the unfolded batch, its frames joined back into sequences.
    pub(super) fn output(&self, op: &str, b: Batch) -> Result<Batch> {
        let meta = self.folded_meta(op, b.meta())?;
        Ok(match b {
            Batch::Cpu(t) => Batch::Cpu(t.resliced(meta)),
            Batch::Gpu(t) => {
                let t = if t.packed_start().is_some() { t } else { t.packed()? };
                let base = t.packed_start().expect("packed");
                let starts: Arc<[usize]> = (0..meta.len()).map(|i| base + meta.offset(i)).collect();
                Batch::Gpu(t.view(meta, starts))
            }
        })
    }

    /// An error the operator raised about a frame, told of the sample and frame it is.
    pub(super) fn locate(&self, e: Error) -> Error {
        match e {
            Error::Data { mut location, message } => {
                let frame = location.sample.and_then(|k| self.owners.get(k).copied());
                match frame {
                    Some((i, j)) => {
                        location.sample = Some(i);
                        Error::Data { location, message: format!("frame {j}: {message}") }
                    }
                    None => Error::Data { location, message },
                }
            }
            Error::InvalidArgument { operator, argument, message } => {
                let message = self.name_frames(message);
                Error::InvalidArgument { operator, argument, message }
            }
            Error::TypeMismatch { operator, message } => Error::TypeMismatch { operator, message: self.name_frames(message) },
            e => e,
        }
    }

    /// `message` with the frames it calls samples named: "... sample 4 (frame 0 of sample 2
    /// of the batch)". The operator ran on the frames, so its sample numbers are frames.
    fn name_frames(&self, message: String) -> String {
        let mut out = String::with_capacity(message.len() + 32);
        let mut rest = message.as_str();
        while let Some(at) = rest.find("sample ") {
            let digits = rest[at + 7..].bytes().take_while(u8::is_ascii_digit).count();
            let end = at + 7 + digits;
            out.push_str(&rest[..end]);
            if let Some(&(i, j)) = rest[at + 7..end].parse::<usize>().ok().and_then(|k| self.owners.get(k)) {
                out.push_str(&format!(" (frame {j} of sample {i} of the batch)"));
            }
            rest = &rest[end..];
        }
        out.push_str(rest);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;

    fn pool() -> ThreadPool {
        rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap()
    }

    fn seq(frames: &[usize], hw: usize) -> TensorList {
        let shapes: Vec<Vec<usize>> = frames.iter().map(|&f| vec![f, hw, 1]).collect();
        let samples: Vec<Vec<u8>> = shapes.iter().enumerate().map(|(i, s)| (0..s.iter().product::<usize>()).map(|k| (i * 50 + k) as u8).collect()).collect();
        TensorList::from_samples(&shapes, &samples).with_layout("FHC")
    }

    fn per_frame(values: &[&[f32]]) -> TensorList {
        let shapes: Vec<Vec<usize>> = values.iter().map(|v| vec![v.len()]).collect();
        TensorList::from_samples(&shapes, &values.iter().map(|v| v.to_vec()).collect::<Vec<_>>()).with_layout("F")
    }

    #[test]
    fn unfolds_inputs_and_arguments_and_folds_outputs() {
        let video = seq(&[3, 1, 2], 2);
        let angle = per_frame(&[&[1.0, 2.0, 3.0], &[4.0], &[5.0]]);
        let args: HashMap<&str, &TensorList> = [("angle", &angle)].into_iter().collect();
        let f = Frames::plan("rotate", &["angle"], SequenceRules::default(), &[video.meta()], &args).unwrap().expect("expands");
        assert_eq!(f.total(), 6);
        let Batch::Cpu(frames) = f.input(&pool(), &Batch::Cpu(video.clone())).unwrap() else { unreachable!() };
        assert_eq!(frames.len(), 6);
        assert_eq!(frames.layout().as_str(), "HC");
        assert_eq!(frames.bytes(1), &video.bytes(0)[2..4]);
        assert_eq!(frames.bytes(4), &video.bytes(2)[0..2]);
        // Sample 2's one value stands for both its frames.
        let a = f.argument(&pool(), &angle, true).unwrap();
        assert_eq!((0..6).map(|k| a.sample::<f32>(k)[0]).collect::<Vec<_>>(), [1.0, 2.0, 3.0, 4.0, 5.0, 5.0]);
        // A per-sample argument repeats per frame.
        let scalar = TensorList::from_samples(&[vec![], vec![], vec![]], &[vec![7i32], vec![8], vec![9]]);
        let s = f.argument(&pool(), &scalar, false).unwrap();
        assert_eq!((0..6).map(|k| s.sample::<i32>(k)[0]).collect::<Vec<_>>(), [7, 7, 7, 8, 9, 9]);
        // Errors about a frame name its sample.
        let e = f.locate(Error::arg("rotate", "angle", "bad value for sample 4"));
        assert!(e.to_string().ends_with("bad value for sample 4 (frame 0 of sample 2 of the batch)"), "{e}");
        let Batch::Cpu(back) = f.output("rotate", Batch::Cpu(frames)).unwrap() else { unreachable!() };
        assert_eq!(back.layout().as_str(), "FHC");
        assert_eq!((0..3).map(|i| back.shape(i).to_vec()).collect::<Vec<_>>(), [vec![3, 2, 1], vec![1, 2, 1], vec![2, 2, 1]]);
        assert_eq!((0..3).map(|i| back.bytes(i).to_vec()).collect::<Vec<_>>(), (0..3).map(|i| video.bytes(i).to_vec()).collect::<Vec<_>>());
    }

    #[test]
    fn refuses_mismatched_frames_in_dali_words() {
        let video = seq(&[3, 2], 2);
        let angle = per_frame(&[&[1.0, 2.0], &[4.0, 5.0]]);
        let args: HashMap<&str, &TensorList> = [("angle", &angle)].into_iter().collect();
        let e = Frames::plan("rotate", &["angle"], SequenceRules::default(), &[video.meta()], &args).err().unwrap().to_string();
        assert!(e.contains("The sample 0 of tensor argument `angle` contains 2 per-frame parameters, but there are 3 frames in the corresponding sample of input 0"), "{e}");
        // An input without frames: nothing to unfold (each argument sample is per sample).
        let image = TensorList::uniform(DType::U8, &[2, 2, 1], 2).with_layout("HWC");
        assert!(Frames::plan("rotate", &["angle"], SequenceRules::default(), &[image.meta()], &args).unwrap().is_none());
        // An argument the schema does not mark per-frame: no unfolding.
        assert!(Frames::plan("rotate", &["size"], SequenceRules::default(), &[video.meta()], &args).unwrap().is_none());
    }

    #[test]
    fn frames_of_one_sequence_must_keep_one_shape() {
        let video = seq(&[2], 2);
        let angle = per_frame(&[&[1.0, 2.0]]);
        let args: HashMap<&str, &TensorList> = [("angle", &angle)].into_iter().collect();
        let f = Frames::plan("rotate", &["angle"], SequenceRules::default(), &[video.meta()], &args).unwrap().unwrap();
        let ragged = TensorList::new(DType::U8, 2, [&[2usize, 1][..], &[3, 1][..]]);
        let e = f.output("rotate", Batch::Cpu(ragged)).err().unwrap().to_string();
        assert!(e.contains("frames of a sequence must come out with one shape"), "{e}");
    }
}
