//! `readers.webdataset`: samples of tar archives (WebDataset), one output per extension set
//! of `ext`. As DALI 2.4:
//! * A sample is a run of consecutive regular files with the same name up to the first dot
//!   of the file name (`dir/000001.jpg`, `dir/000001.cls`); its components' extensions are
//!   what follows that dot. Files whose name starts with a dot, and entries that are not
//!   regular files, are left out.
//! * Output `k` is the first component whose extension is one of `ext[k]` (`"jpg;png"`),
//!   compared case-insensitively unless `case_sensitive_extensions`; its bytes as UINT8, or
//!   reinterpreted as `dtypes[k]` (the size must divide).
//! * A sample without a component for some output: `missing_component_behavior` "empty"
//!   (the default: an empty output), "skip" (the sample is left out when the archives are
//!   listed) or "error".
//! * Index files (`python -m sluice.tools.wds2idx`): `v1.2 <samples>` then one line per
//!   sample of `ext offset size filename` per component (`v1.1`: no filename), offsets of the
//!   data; without `index_paths` the archives' headers are read at build.
//! * Source info: `archive:offset:filename` of the component.
//!
//! Components are read with positioned reads straight into their output's batch allocation;
//! a member cut short (an index that does not match its archive, a truncated archive) fails
//! its batch with an error naming the archive and the sample; the next batch reads on.

pub mod tar;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::core::{lazily, BatchSource, ReaderCore};
use super::READER_ARGS;
use crate::storage::{self, Source};
use crate::error::{Error, Location, Result};
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema};
use crate::tensor::{BatchMeta, DType, TensorList};

const OWN_ARGS: &[crate::ops::ArgSchema] = &[
    arg("paths", T::StrList, D::Required, "The WebDataset archives (tar files)."),
    arg("index_paths", T::StrList, D::Optional, "Their index files, one per archive (`python -m sluice.tools.wds2idx`); without them the archives are listed at build."),
    arg("ext", T::StrList, D::Required, "One extension set per output: extensions separated by ';' (they may contain dots), e.g. \"jpg;png\"."),
    arg("case_sensitive_extensions", T::Bool, D::Bool(true), "Compare extensions case-sensitively."),
    arg("missing_component_behavior", T::Str, D::Str(""), "A sample without a component for an output: \"empty\" (default), \"skip\" or \"error\"."),
    arg("dtypes", T::IntList, D::Optional, "The type of each output (UINT8 by default); a component's size must be a multiple of the type's."),
];

/// Schema and backend.
pub static WEBDATASET: OpDef = OpDef {
    schema: OpSchema {
        name: "readers__Webdataset",
        doc: "A reader for the WebDataset format: samples of tar archives, one output per extension set of `ext`.",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 0,
        // The real count is the number of extension sets (`CheckedOp::num_outputs`).
        num_outputs: 1,
        host_inputs: &[],
        args: &[OWN_ARGS, READER_ARGS],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: true,
        is_random: true,
    },
    cpu: Some(|ctx| lazily(ctx, |ctx| Ok(Box::new(webdataset_reader(ctx)?)))),
    mixed: None,
    gpu: None,
};

/// One member of an archive: its data's place and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub ext: String,
    pub offset: u64,
    pub size: u64,
    pub filename: String,
}

/// A sample as listed: its archive, its components, and where it was described (for errors).
#[derive(Debug, Clone)]
pub struct Listed {
    pub members: Vec<Member>,
    /// "index file at "x" line n" or "tar file at "x"".
    pub origin: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missing {
    Empty,
    Skip,
    Error,
}

/// The samples the reader serves: per (sample, output) the component, if any.
struct Samples {
    archives: Vec<PathBuf>,
    /// Per sample: its archive.
    archive: Vec<u32>,
    /// `slots[s * outputs + k]`: (offset, size) of output k's component of sample s.
    slots: Vec<Option<(u64, u64)>>,
    /// Source info per slot ("" for none).
    info: Vec<Arc<str>>,
    origin: Vec<String>,
}

fn list_samples(ctx: &OpContext, opts: &storage::Options, ext: &[Vec<String>], sizes: &[usize]) -> Result<Samples> {
    let op = ctx.display_name.as_str();
    let a = &ctx.args;
    let archives: Vec<PathBuf> = a.strs("paths").iter().map(PathBuf::from).collect();
    if archives.is_empty() {
        return Err(Error::arg(op, "paths", "No webdataset archives provided"));
    }
    let indexes = a.has("index_paths").then(|| a.strs("index_paths").to_vec()).filter(|v| !v.is_empty());
    if let Some(ix) = &indexes {
        if ix.len() != archives.len() {
            return Err(Error::arg(op, "index_paths", format!("{} index files for {} archives: give one per archive", ix.len(), archives.len())));
        }
    }
    let missing = match a.str("missing_component_behavior").to_ascii_lowercase().as_str() {
        "" | "empty" => Missing::Empty,
        "skip" => Missing::Skip,
        "error" => Missing::Error,
        other => {
            return Err(Error::arg(op, "missing_component_behavior", format!("Invalid value for missing_component_behavior: '{other}' possible values are: skip, error, empty")))
        }
    };
    let case_sensitive = a.bool("case_sensitive_extensions");
    let outputs = ext.len();
    let mut s = Samples { archives: archives.clone(), archive: Vec::new(), slots: Vec::new(), info: Vec::new(), origin: Vec::new() };
    for (k, path) in archives.iter().enumerate() {
        let len = storage::size(&path.to_string_lossy(), opts).map_err(|e| Error::io(op, path.display(), e))?;
        let listed = match &indexes {
            Some(ix) => tar::read_index(&ix[k], opts).map_err(|m| Error::io(op, &ix[k], m))?,
            None => tar::list_archive(path, opts).map_err(|m| Error::io(op, path.display(), m))?,
        };
        for sample in listed {
            let mut slots = vec![None; outputs];
            let mut infos: Vec<Arc<str>> = vec![Arc::from(""); outputs];
            for m in &sample.members {
                if m.offset.checked_add(m.size).is_none_or(|end| end > len) {
                    return Err(Error::io(op, path.display(), format!("{}: the component '{}' at {} ({} bytes) lies past the end of the archive", sample.origin, m.ext, m.offset, m.size)));
                }
                let e = if case_sensitive { m.ext.clone() } else { m.ext.to_lowercase() };
                for (o, set) in ext.iter().enumerate() {
                    if slots[o].is_none() && set.iter().any(|x| *x == e) {
                        if m.size % sizes[o] as u64 != 0 {
                            return Err(Error::io(op, path.display(), format!("Error in index file at {} - component size and dtype incompatible", sample.origin)));
                        }
                        slots[o] = Some((m.offset, m.size));
                        infos[o] = Arc::from(format!("{}:{}:{}", path.display(), m.offset, m.filename).as_str());
                    }
                }
            }
            if slots.iter().any(Option::is_none) {
                match missing {
                    Missing::Empty => {}
                    Missing::Skip => continue,
                    Missing::Error => return Err(Error::io(op, path.display(), format!("Underful sample detected at {}", sample.origin))),
                }
            }
            s.archive.push(k as u32);
            s.slots.extend(slots);
            s.info.extend(infos);
            s.origin.push(sample.origin);
        }
    }
    if s.archive.is_empty() {
        return Err(Error::io(op, archives[0].display(), "the archives hold no samples with the requested components"));
    }
    Ok(s)
}

struct WdsSource {
    op: String,
    samples: Samples,
    files: Vec<Source>,
    dtypes: Vec<DType>,
    read_threads: usize,
}

impl WdsSource {
    fn loc(&self, batch_no: u64, i: usize, k: usize) -> Location {
        Location {
            operator: self.op.clone(),
            sample: Some(i),
            iteration: Some(batch_no),
            source: Some(self.samples.origin[k].clone()),
        }
    }

    /// Where sample `k`'s output `o` lies: its archive, the offset and the bytes read (whole
    /// elements of the output's type); `None` when the sample has none. What `read` reads and
    /// what `read_ahead` requests, both.
    fn component(&self, k: usize, o: usize) -> Option<(&Source, u64, usize)> {
        let (offset, n) = self.samples.slots[k * self.dtypes.len() + o]?;
        let size = self.dtypes[o].size();
        let len = n as usize / size * size;
        (len > 0).then(|| (&self.files[self.samples.archive[k] as usize], offset, len))
    }
}

impl BatchSource for WdsSource {
    type Batch = Vec<TensorList>;

    fn read_ahead(&mut self, idx: &[usize]) {
        let this = &*self;
        let reads: Vec<(&Source, u64, u64)> = idx
            .iter()
            .flat_map(|&k| (0..this.dtypes.len()).filter_map(move |o| this.component(k, o)))
            .filter(|c| c.0.is_remote())
            .map(|(src, offset, len)| (src, offset, len as u64))
            .collect();
        if !reads.is_empty() {
            storage::read_ahead_ranges(&reads);
        }
    }

    fn read(&mut self, idx: &[usize], batch_no: u64, stop: &AtomicBool) -> Result<Vec<TensorList>> {
        let outputs = self.dtypes.len();
        let mut outs: Vec<TensorList> = (0..outputs)
            .map(|o| {
                let size = self.dtypes[o].size();
                let shapes: Vec<usize> = idx.iter().map(|&k| self.component(k, o).map_or(0, |c| c.2 / size)).collect();
                let mut t = TensorList::for_overwrite(BatchMeta::new(self.dtypes[o], 1, shapes.chunks(1)));
                t.set_source_info(idx.iter().map(|&k| self.samples.info[k * outputs + o].clone()).collect());
                t
            })
            .collect();
        {
            // Every (sample, output) with data: read its component into its place.
            let mut jobs: Vec<(usize, usize, &mut [u8])> = Vec::with_capacity(idx.len() * outputs);
            for (o, t) in outs.iter_mut().enumerate() {
                for (i, dst) in t.samples_mut().into_iter().enumerate() {
                    if !dst.is_empty() {
                        jobs.push((i, o, dst));
                    }
                }
            }
            if stop.load(Ordering::Relaxed) {
                return Err(Error::Unsupported(format!("{}: stopped", self.op)));
            }
            let this = &*self;
            let who: Vec<usize> = jobs.iter().map(|j| j.0).collect();
            let mut reads: Vec<(&Source, u64, &mut [u8])> = jobs
                .into_iter()
                .map(|(i, o, dst)| {
                    let (src, offset, _) = this.component(idx[i], o).expect("jobs have data");
                    (src, offset, dst)
                })
                .collect();
            storage::read_many(&mut reads, self.read_threads, |j, m| {
                let (i, k) = (who[j], idx[who[j]]);
                Error::data(this.loc(batch_no, i, k), format!("{m} (archive {})", this.samples.archives[this.samples.archive[k] as usize].display()))
            })?;
        }
        Ok(outs)
    }
}

/// The operator: the reader core over the listed samples.
fn webdataset_reader(ctx: &OpContext) -> Result<ReaderCore<Vec<TensorList>>> {
    let op = ctx.display_name.as_str();
    let a = &ctx.args;
    let case_sensitive = a.bool("case_sensitive_extensions");
    let ext: Vec<Vec<String>> = a
        .strs("ext")
        .iter()
        .map(|set| set.split(';').map(|e| if case_sensitive { e.to_string() } else { e.to_lowercase() }).collect())
        .collect();
    if ext.is_empty() {
        return Err(Error::arg(op, "ext", "give at least one extension set"));
    }
    let dtypes: Vec<DType> = if a.has("dtypes") && !a.ints("dtypes").is_empty() {
        let ids = a.ints("dtypes");
        if ids.len() != ext.len() {
            return Err(Error::arg(op, "dtypes", format!("Number of extensions does not match the number of provided types: {} extension sets, {} types", ext.len(), ids.len())));
        }
        ids.iter().map(|&id| DType::from_id(id).ok_or_else(|| Error::arg(op, "dtypes", format!("unsupported type id {id}")))).collect::<Result<_>>()?
    } else {
        vec![DType::U8; ext.len()]
    };
    let sizes: Vec<usize> = dtypes.iter().map(|d| d.size()).collect();
    let opts = super::file::storage_options(ctx)?;
    let samples = list_samples(ctx, &opts, &ext, &sizes)?;
    let files = samples.archives.iter().map(|p| Source::open(&p.to_string_lossy(), &opts).map_err(|e| Error::io(op, p.display(), e))).collect::<Result<Vec<_>>>()?;
    let n = samples.archive.len();
    let source = WdsSource { op: op.to_string(), samples, files, dtypes, read_threads: ctx.num_threads };
    ReaderCore::start(ctx, n, source)
}
