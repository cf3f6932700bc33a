//! `readers.mxnet`: MXNet RecordIO (`.rec` files and one `.idx` for all of them). As DALI 2.4:
//! * The index is whitespace-separated `key offset` pairs; keys are ignored, offsets are into
//!   the files as if concatenated in `path` order, sorted and deduplicated. Sample i is the
//!   first record at the i-th offset (the bytes up to the next offset).
//! * A record is parts of `u32 magic 0xced7230a, u32 lrecord (cflag << 29 | length), data,
//!   padding to 4 bytes`: one part (cflag 0), or parts 1, 2..., 3 joined with the magic
//!   re-inserted between them (the writer splits where the magic occurs in the data).
//! * The payload starts with `IRHeader { u32 flag, f32 label, u64 id, u64 id2 }`; with
//!   `flag > 0`, `flag` float labels follow. Outputs: the rest of the payload (UINT8, the
//!   encoded image) and the labels (FLOAT, `(1,)` or `(flag,)`).
//! * Source info `<path> at index <offset in that file>` on the data.
//!
//! A damaged record fails its batch with an error naming the file and the offset; the next
//! batch reads on (DALI's pipeline stops for good).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::core::{lazily, read_ahead_spans, read_in_parallel, read_spans, BatchSource, ReaderCore};
use super::{READER_ARGS, SHUFFLE_AFTER_EPOCH_ARGS};
use crate::storage::{self, Source};
use crate::error::{Error, Location, Result};
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema};
use crate::tensor::{BatchMeta, DType, TensorList};

const OWN_ARGS: &[crate::ops::ArgSchema] = &[
    arg("path", T::StrList, D::Required, "Paths of the RecordIO (.rec) files."),
    arg("index_path", T::StrList, D::Required, "The index (.idx) of the files: one file, `key offset` per record, offsets into the files concatenated."),
];

/// Schema and backend.
pub static MXNET: OpDef = OpDef {
    schema: OpSchema {
        name: "readers__MXNet",
        doc: "Reads MXNet RecordIO files: the encoded data (UINT8) and the labels (FLOAT) of every record.",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 0,
        num_outputs: 2,
        host_inputs: &[],
        args: &[OWN_ARGS, SHUFFLE_AFTER_EPOCH_ARGS, READER_ARGS],
        arg_aliases: &[],
        legacy_names: &[("MXNetReader", None)],
        is_reader: true,
        is_random: true,
    },
    cpu: Some(|ctx| lazily(ctx, |ctx| Ok(Box::new(mxnet_reader(ctx)?)))),
    mixed: None,
    gpu: None,
};

const MAGIC: u32 = 0xced7_230a;
const HEADER: usize = 24;

/// Where each sample lies: (file, offset in it, bytes up to the next sample or the file's end).
struct Index {
    paths: Vec<PathBuf>,
    spans: Vec<(u32, u64, u64)>,
}

fn read_index(ctx: &OpContext, opts: &storage::Options) -> Result<Index> {
    let op = ctx.display_name.as_str();
    let paths: Vec<PathBuf> = ctx.args.strs("path").iter().map(PathBuf::from).collect();
    let indexes = ctx.args.strs("index_path");
    if indexes.len() != 1 {
        return Err(Error::arg(op, "index_path", "RecordIOReader supports only a single index file"));
    }
    if paths.is_empty() {
        return Err(Error::arg(op, "path", "no RecordIO files given"));
    }
    let sizes = paths.iter().map(|p| storage::size(&p.to_string_lossy(), &opts).map_err(|e| Error::io(op, p.display(), e))).collect::<Result<Vec<_>>>()?;
    let text = storage::read(&indexes[0], &opts).map_err(|e| Error::io(op, &indexes[0], e))?;
    let text = String::from_utf8_lossy(&text);
    // `key offset` pairs, up to the first pair that is not two numbers (as DALI reads them).
    let mut offsets = Vec::new();
    let mut tokens = text.split_whitespace();
    while let (Some(key), Some(off)) = (tokens.next(), tokens.next()) {
        match (key.parse::<u64>(), off.parse::<u64>()) {
            (Ok(_), Ok(off)) => offsets.push(off),
            _ => break,
        }
    }
    if offsets.is_empty() {
        return Err(Error::io(op, &indexes[0], format!("RecordIO index file doesn't contain any indices. Provided path: \"{}\"", indexes[0])));
    }
    offsets.sort_unstable();
    offsets.dedup();
    let total: u64 = sizes.iter().sum();
    if let Some(&last) = offsets.last().filter(|&&o| o >= total) {
        let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(Error::io(op, &indexes[0], format!(
            "Incomplete or corrupted record files: offset {last} lies past the end of {} ({total} bytes together); the index does not match them",
            files.join(", ")
        )));
    }
    let starts: Vec<u64> = sizes.iter().scan(0, |at, &n| { let s = *at; *at += n; Some(s) }).collect();
    let mut spans = Vec::with_capacity(offsets.len());
    let mut f = 0;
    for (i, &off) in offsets.iter().enumerate() {
        while off >= starts[f] + sizes[f] {
            f += 1;
        }
        let end = offsets.get(i + 1).copied().unwrap_or(total).min(starts[f] + sizes[f]);
        spans.push((f as u32, off - starts[f], end - off));
    }
    Ok(Index { paths, spans })
}

/// The payload of the first record of `span` (its parts joined), or what is wrong with it.
pub(super) fn record_payload<'a>(span: &'a [u8], joined: &'a mut Vec<u8>) -> std::result::Result<&'a [u8], String> {
    let mut at = 0;
    let mut parts: Vec<(usize, usize)> = Vec::new();
    loop {
        let need = |what: &str, n: usize, at: usize| {
            if at + n > span.len() { Err(format!("{what} requires {n} bytes, but only {} bytes are available", span.len().saturating_sub(at))) } else { Ok(()) }
        };
        need("segment magic number", 4, at)?;
        let magic = u32::from_le_bytes(span[at..at + 4].try_into().expect("4 bytes"));
        if magic != MAGIC {
            return Err("Invalid RecordIO: wrong magic number".into());
        }
        need("segment length flag", 4, at + 4)?;
        let lrecord = u32::from_le_bytes(span[at + 4..at + 8].try_into().expect("4 bytes"));
        let (cflag, len) = (lrecord >> 29, (lrecord & ((1 << 29) - 1)) as usize);
        need("segment payload", len, at + 8)?;
        parts.push((at + 8, len));
        at += 8 + len.div_ceil(4) * 4;
        // 0: a whole record; 3: the last part (or a record of one such part); 1, 2: more follow.
        if cflag == 0 || cflag == 3 {
            break;
        }
        if at >= span.len() {
            return Err("segment magic number requires 4 bytes, but only 0 bytes are available".into());
        }
    }
    if parts.len() == 1 {
        let (from, len) = parts[0];
        return Ok(&span[from..from + len]);
    }
    joined.clear();
    for (k, &(from, len)) in parts.iter().enumerate() {
        if k > 0 {
            joined.extend_from_slice(&MAGIC.to_le_bytes());
        }
        joined.extend_from_slice(&span[from..from + len]);
    }
    Ok(joined)
}

/// Splits a payload into its labels and its data.
pub(super) fn split_payload(payload: &[u8]) -> std::result::Result<(Vec<f32>, std::ops::Range<usize>), String> {
    if payload.len() < HEADER {
        return Err(format!("record payload length: {} bytes, minimum is {HEADER} bytes", payload.len()));
    }
    let flag = u32::from_le_bytes(payload[..4].try_into().expect("4 bytes")) as usize;
    if flag == 0 {
        return Ok((vec![f32::from_le_bytes(payload[4..8].try_into().expect("4 bytes"))], HEADER..payload.len()));
    }
    let end = flag.checked_mul(4).and_then(|n| n.checked_add(HEADER)).filter(|&e| e <= payload.len()).ok_or_else(|| {
        format!("label size: {} bytes, available data: {} bytes", flag.saturating_mul(4), payload.len() - HEADER)
    })?;
    let labels = payload[HEADER..end].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
    Ok((labels, end..payload.len()))
}

struct RecSource {
    op: String,
    index: Index,
    files: Vec<Source>,
    read_threads: usize,
    scratch: Vec<u8>,
}

impl RecSource {
    fn loc(&self, batch_no: u64, i: usize, k: usize) -> Location {
        let (f, off, _) = self.index.spans[k];
        Location {
            operator: self.op.clone(),
            sample: Some(i),
            iteration: Some(batch_no),
            source: Some(format!("{} at index {off}", self.index.paths[f as usize].display())),
        }
    }
}

impl BatchSource for RecSource {
    type Batch = Vec<TensorList>;

    fn read_ahead(&mut self, idx: &[usize]) {
        read_ahead_spans(&self.files, idx, |k| self.index.spans[k]);
    }

    fn read(&mut self, idx: &[usize], batch_no: u64, stop: &AtomicBool) -> Result<Vec<TensorList>> {
        let total: usize = idx.iter().map(|&k| self.index.spans[k].2 as usize).sum();
        let mut scratch = std::mem::take(&mut self.scratch);
        let result = (|| {
            let loc = |i, k, m| Error::data(self.loc(batch_no, i, k), m);
            let read = read_spans(&self.files, idx, |k| self.index.spans[k], &mut scratch, self.read_threads, stop, loc, |_| Ok(()))?;
            let starts: Vec<usize> = read.into_iter().map(|(at, ())| at).collect();
            // Each sample's labels and data: a range of the records read, or (for the rare
            // record of several parts) of its joined copy.
            let mut joined = Vec::new();
            let (mut labels, mut data_shapes, mut data) = (Vec::new(), Vec::with_capacity(idx.len()), Vec::with_capacity(idx.len()));
            let mut owned: Vec<Vec<u8>> = Vec::new();
            let mut label_shapes = Vec::with_capacity(idx.len());
            for (i, &k) in idx.iter().enumerate() {
                let span = &scratch[starts[i]..starts[i] + self.index.spans[k].2 as usize];
                let bad = |m: String| Error::data(self.loc(batch_no, i, k), format!("Invalid RecordIO file ({m})"));
                let payload = record_payload(span, &mut joined).map_err(bad)?;
                let (l, range) = split_payload(payload).map_err(bad)?;
                label_shapes.push(l.len());
                labels.extend(l);
                data_shapes.push(range.len());
                let base = payload.as_ptr() as usize;
                if (scratch.as_ptr() as usize..scratch.as_ptr() as usize + scratch.len()).contains(&base) {
                    let at = base - scratch.as_ptr() as usize;
                    data.push((usize::MAX, at + range.start..at + range.end));
                } else {
                    owned.push(payload[range.clone()].to_vec());
                    data.push((owned.len() - 1, 0..range.len()));
                }
            }
            let mut label_out = TensorList::for_overwrite(BatchMeta::new(DType::F32, 1, label_shapes.chunks(1)));
            let mut at = 0;
            for dst in label_out.samples_mut() {
                for (d, v) in dst.chunks_exact_mut(4).zip(&labels[at..]) {
                    d.copy_from_slice(&v.to_le_bytes());
                }
                at += dst.len() / 4;
            }
            let mut data_out = TensorList::for_overwrite(BatchMeta::new(DType::U8, 1, data_shapes.chunks(1)));
            let mut copies: Vec<(&mut [u8], &(usize, std::ops::Range<usize>))> = data_out.samples_mut().into_iter().zip(&data).collect();
            read_in_parallel(&mut copies, self.read_threads, total, |c| c.0.len(), |(dst, (from, range))| {
                let src = if *from == usize::MAX { &scratch[range.clone()] } else { &owned[*from][range.clone()] };
                dst.copy_from_slice(src);
                Ok(())
            })?;
            data_out.set_source_info(idx.iter().map(|&k| {
                let (f, off, _) = self.index.spans[k];
                Arc::from(format!("{} at index {off}", self.index.paths[f as usize].display()).as_str())
            }).collect());
            Ok(vec![data_out, label_out])
        })();
        self.scratch = scratch;
        result
    }
}

/// The operator: the reader core over the indexed records.
fn mxnet_reader(ctx: &OpContext) -> Result<ReaderCore<Vec<TensorList>>> {
    let op = ctx.display_name.as_str();
    let opts = super::file::storage_options(ctx)?;
    let index = read_index(ctx, &opts)?;
    let files = index.paths.iter().map(|p| Source::open(&p.to_string_lossy(), &opts).map_err(|e| Error::io(op, p.display(), e))).collect::<Result<Vec<_>>>()?;
    let n = index.spans.len();
    let source = RecSource { op: op.to_string(), index, files, read_threads: ctx.num_threads, scratch: Vec::new() };
    ReaderCore::start(ctx, n, source)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(cflag: u32, data: &[u8]) -> Vec<u8> {
        let mut v = MAGIC.to_le_bytes().to_vec();
        v.extend_from_slice(&((cflag << 29) | data.len() as u32).to_le_bytes());
        v.extend_from_slice(data);
        v.resize(v.len().div_ceil(4) * 4, 0);
        v
    }

    #[test]
    fn records_and_multipart_records_decode() {
        let mut payload = vec![2u32.to_le_bytes(), 0f32.to_le_bytes()].concat();
        payload.extend_from_slice(&[0u8; 16]);
        payload.extend_from_slice(&1.5f32.to_le_bytes());
        payload.extend_from_slice(&(-2f32).to_le_bytes());
        payload.extend_from_slice(b"jpeg");
        let mut joined = Vec::new();
        let one = part(0, &payload);
        let p = record_payload(&one, &mut joined).unwrap().to_vec();
        let (labels, range) = split_payload(&p).unwrap();
        assert_eq!((labels, &p[range]), (vec![1.5, -2.0], &b"jpeg"[..]));
        // The same payload split where the writer would put the magic.
        let (a, b) = payload.split_at(10);
        let multi = [part(1, a), part(3, b)].concat();
        let got = record_payload(&multi, &mut joined).unwrap().to_vec();
        assert_eq!(got, [a, &MAGIC.to_le_bytes()[..], b].concat());
        let mut bad = one.clone();
        bad[0] ^= 1;
        assert!(record_payload(&bad, &mut joined).unwrap_err().contains("magic"));
        assert!(record_payload(&one[..20], &mut joined).unwrap_err().contains("requires"));
        assert!(split_payload(&payload[..10]).unwrap_err().contains("minimum is 24"));
    }
}
