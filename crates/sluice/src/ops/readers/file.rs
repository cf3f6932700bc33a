//! `readers.file`: raw file contents and integer labels, from a folder per class
//! (`file_root`), a list file (`file_list`) or explicit lists (`files`, `labels`).
//!
//! Listing rules, checked against DALI 2.4:
//! * `file_root` alone: every sub-folder of `file_root` (hidden ones and symlinks included,
//!   filtered by `dir_filters`) is a class; labels are the folders' positions in byte order,
//!   empty folders included. Files directly inside each class folder (not in nested folders)
//!   whose names match one of `file_filters` are listed, in byte order. Files at the top of
//!   `file_root` are ignored. Filters are case-insensitive unless `case_sensitive_filter`.
//! * `file_list`: one `name label` pair per line; the label is the last whitespace-separated
//!   token and must be a non-negative integer; the name is the rest, without trailing
//!   whitespace (it may contain spaces). Blank lines are skipped. Names are relative to
//!   `file_root` when given, else to the list file's folder.
//! * `files`: relative to `file_root` when given; labels are `labels`, or the positions in
//!   `files`.
//! * Each sample's source info is the name as listed (relative to the root), as in DALI.
//!
//! Files are read on a loader thread, `prefetch_queue_depth` batches ahead of the pipeline;
//! each batch's contents go into one allocation. A batch of large files is copied by several
//! threads at once (up to the pipeline's `num_threads`, at most [`super::core::MAX_READ_THREADS`]): one
//! thread copying 256 photos of a megabyte each out of the page cache takes longer than the
//! GPU takes to decode them. A file that cannot be read fails its batch only: the next batch
//! reads on.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::core::{lazily, read_in_parallel, BatchSource, ReaderCore};
use super::{READER_ARGS, SHUFFLE_AFTER_EPOCH_ARGS};
use crate::error::{Error, Location, Result};
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema};
use crate::storage;
use crate::tensor::{BatchMeta, DType, TensorList};

/// DALI 2.4's default `file_filters`.
pub const DEFAULT_FILE_FILTERS: &[&str] = &[
    "*.jpg", "*.jpeg", "*.png", "*.bmp", "*.tif", "*.tiff", "*.pnm", "*.ppm", "*.pgm", "*.pbm", "*.jp2", "*.webp",
    "*.flac", "*.ogg", "*.wav",
];

const OWN_ARGS: &[crate::ops::ArgSchema] = &[
    arg("file_root", T::Str, D::Optional, "Folder with one sub-folder per class; or the root that `files` and `file_list` names are relative to."),
    arg("file_list", T::Str, D::Optional, "Text file with one whitespace-separated `filename label` pair per line; names are relative to that file's folder or to `file_root`."),
    arg("files", T::StrList, D::Optional, "File paths to read (relative to `file_root` when given). Mutually exclusive with `file_list`."),
    arg("labels", T::IntList, D::Optional, "Labels of `files`; by default the positions of the files in `files`."),
    arg("file_filters", T::StrList, D::StrList(DEFAULT_FILE_FILTERS), "Glob patterns a file name in a sub-folder of `file_root` must match (one of). Ignored with `files` or `file_list`."),
    arg("dir_filters", T::StrList, D::Optional, "Glob patterns the sub-folders of `file_root` must match (one of). Ignored with `files` or `file_list`."),
    arg("case_sensitive_filter", T::Bool, D::Bool(false), "Match `file_filters` and `dir_filters` case-sensitively."),
];

/// Schema and backends.
pub static FILE: OpDef = OpDef {
    schema: OpSchema {
        name: "readers__File",
        doc: "Reads file contents and returns file-label pairs: the raw bytes (1-D uint8) and an int32 label of shape (1,).",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 0,
        num_outputs: 2,
        host_inputs: &[],
        args: &[OWN_ARGS, SHUFFLE_AFTER_EPOCH_ARGS, READER_ARGS],
        arg_aliases: &[],
        legacy_names: &[("FileReader", None)],
        is_reader: true,
        is_random: true,
    },
    cpu: Some(|ctx| lazily(ctx, |ctx| Ok(Box::new(file_reader(ctx)?)))),
    mixed: None,
    gpu: None,
};

/// The listed samples: names as DALI reports them, full paths and labels.
#[derive(Debug, Default)]
struct Dataset {
    names: Vec<Arc<str>>,
    paths: Vec<PathBuf>,
    labels: Vec<i32>,
}

impl Dataset {
    fn push(&mut self, base: Option<&Path>, name: String, label: i32) {
        let path = match base {
            Some(b) => b.join(&name),
            None => PathBuf::from(&name),
        };
        self.names.push(Arc::from(name));
        self.paths.push(path);
        self.labels.push(label);
    }

    fn len(&self) -> usize {
        self.names.len()
    }
}

/// `fnmatch`-style glob: `*`, `?`, `[abc]`, `[a-z]`, `[!abc]`; `\` escapes.
pub fn glob_match(pattern: &str, name: &str, case_sensitive: bool) -> bool {
    let fold = |c: char| if case_sensitive { c } else { c.to_lowercase().next().unwrap_or(c) };
    let p: Vec<char> = pattern.chars().map(fold).collect();
    let s: Vec<char> = name.chars().map(fold).collect();
    // Iterative matcher with backtracking to the last `*`.
    let (mut pi, mut si) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = match_class(&p, pi, s[si]) {
                        if matched {
                            pi = next;
                            si += 1;
                            continue;
                        }
                    } else if s[si] == '[' {
                        // No closing bracket: a literal '['.
                        pi += 1;
                        si += 1;
                        continue;
                    }
                }
                '\\' if pi + 1 < p.len() => {
                    if p[pi + 1] == s[si] {
                        pi += 2;
                        si += 1;
                        continue;
                    }
                }
                c => {
                    if c == s[si] {
                        pi += 1;
                        si += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, ss)) => {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Matches `c` against the bracket expression starting at `p[start] == '['`; returns
/// (matched, index after `]`), or `None` when the bracket is not closed.
fn match_class(p: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = i < p.len() && (p[i] == '!' || p[i] == '^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            if p[i] <= c && c <= p[i + 2] {
                matched = true;
            }
            i += 3;
        } else {
            if p[i] == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

fn matches_any(patterns: &[String], name: &str, case_sensitive: bool) -> bool {
    patterns.iter().any(|p| glob_match(p, name, case_sensitive))
}

/// Lists `file_root`: one class per sub-folder.
fn list_root(op: &str, opts: &storage::Options, root: &Path, file_filters: &[String], dir_filters: Option<&[String]>, case_sensitive: bool) -> Result<Dataset> {
    // Symbolic links are followed, as DALI does; a dangling one is skipped.
    let list = |dir: &Path| storage::list(&dir.to_string_lossy(), opts).map_err(|e| Error::io(op, dir.display(), format!("cannot open folder: {e}")));
    let mut classes = list(root)?.dirs;
    if let Some(df) = dir_filters {
        classes.retain(|d| matches_any(df, d, case_sensitive));
    }
    let mut ds = Dataset::default();
    for (label, class) in classes.iter().enumerate() {
        let label = i32::try_from(label).map_err(|_| Error::io(op, root.display(), "too many class folders"))?;
        for (name, _) in list(&root.join(class))?.files {
            if matches_any(file_filters, &name, case_sensitive) {
                ds.push(Some(root), format!("{class}/{name}"), label);
            }
        }
    }
    Ok(ds)
}

/// Parses a `file_list`. `base` is where names are relative to.
fn parse_file_list(op: &str, opts: &storage::Options, list: &Path, base: &Path) -> Result<Dataset> {
    let text = storage::read(&list.to_string_lossy(), opts).map_err(|e| Error::io(op, list.display(), format!("cannot open file_list: {e}")))?;
    let text = String::from_utf8_lossy(&text);
    let mut ds = Dataset::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.trim_start().is_empty() {
            continue;
        }
        let bad = |why: &str| {
            Error::arg(op, "file_list", format!(
                "{}, line {}: {why}; expected 'file_name label' with a non-negative integer label, got '{line}'",
                list.display(),
                n + 1
            ))
        };
        let Some(split) = line.rfind(|c: char| c.is_whitespace()) else {
            return Err(bad("no label"));
        };
        let label_str = &line[split + 1..];
        let name = line[..split].trim_end();
        if name.is_empty() {
            return Err(bad("no file name"));
        }
        if !label_str.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("the label is not a non-negative integer"));
        }
        let label: i32 = label_str.parse().map_err(|_| bad("the label does not fit in int32"))?;
        ds.push(Some(base), name.to_string(), label);
    }
    Ok(ds)
}

/// Lists the dataset the arguments describe.
fn list_dataset(ctx: &OpContext, opts: &storage::Options) -> Result<Dataset> {
    let op = ctx.display_name.as_str();
    let a = &ctx.args;
    let root = a.opt_str("file_root").map(PathBuf::from);
    let has_files = a.has("files");
    let has_list = a.has("file_list");
    if has_files && has_list {
        return Err(Error::arg(op, "files", "file paths can be given through `files` or `file_list`, not both"));
    }
    if a.has("labels") && !has_files {
        return Err(Error::arg(op, "labels", "is valid only when file paths are given with `files`"));
    }
    let (ds, source) = if has_files {
        let files = a.strs("files");
        if files.is_empty() {
            return Err(Error::arg(op, "files", "is an empty list"));
        }
        let labels: Vec<i32> = if a.has("labels") {
            let l = a.ints("labels");
            if l.len() != files.len() {
                return Err(Error::arg(op, "labels", format!("has {} labels for {} files", l.len(), files.len())));
            }
            l.iter()
                .map(|&v| i32::try_from(v).map_err(|_| Error::arg(op, "labels", format!("label {v} does not fit in int32"))))
                .collect::<Result<_>>()?
        } else {
            (0..files.len())
                .map(|i| i32::try_from(i).map_err(|_| Error::arg(op, "files", "too many files for int32 labels")))
                .collect::<Result<_>>()?
        };
        let mut ds = Dataset::default();
        for (f, l) in files.iter().zip(labels) {
            ds.push(root.as_deref(), f.clone(), l);
        }
        (ds, "files".to_string())
    } else if has_list {
        let list = PathBuf::from(a.str("file_list"));
        let base = match &root {
            Some(r) => r.clone(),
            None => list.parent().map(Path::to_path_buf).unwrap_or_default(),
        };
        (parse_file_list(op, &opts, &list, &base)?, list.display().to_string())
    } else {
        let Some(root) = root else {
            return Err(Error::arg(op, "file_root", "is required when neither `files` nor `file_list` is given"));
        };
        let filters = a.strs("file_filters");
        let dir_filters = a.has("dir_filters").then(|| a.strs("dir_filters"));
        let ds = list_root(op, &opts, &root, filters, dir_filters, a.bool("case_sensitive_filter"))?;
        if ds.len() == 0 {
            return Err(Error::io(op, root.display(), format!("no files found (file_filters {filters:?})")));
        }
        (ds, root.display().to_string())
    };
    if ds.len() == 0 {
        return Err(Error::io(op, source, "no files found"));
    }
    Ok(ds)
}

/// The operator: the reader core over the listed files.
fn file_reader(ctx: &OpContext) -> Result<ReaderCore<Vec<TensorList>>> {
    let opts = storage_options(ctx)?;
    let ds = list_dataset(ctx, &opts)?;
    let n = ds.len();
    let source = FileSource { op: ctx.display_name.clone(), ds, read_threads: ctx.num_threads, sizes: Vec::new(), opts };
    ReaderCore::start(ctx, n, source)
}

/// Reads whole files, one batch allocation for their contents and one for their labels.
struct FileSource {
    opts: storage::Options,
    op: String,
    ds: Dataset,
    read_threads: usize,
    sizes: Vec<usize>,
}

impl BatchSource for FileSource {
    type Batch = Vec<TensorList>;

    /// `random_shuffle` shuffles the whole list first, as DALI's file reader does.
    fn shuffles_whole_list(&self) -> bool {
        true
    }

    fn read_ahead(&mut self, idx: &[usize]) {
        read_ahead_files(idx.iter().map(|&k| self.ds.paths[k].as_path()), &self.opts);
    }

    fn read(&mut self, idx: &[usize], batch_no: u64, stop: &AtomicBool) -> Result<Vec<TensorList>> {
        let (op, ds) = (self.op.as_str(), &self.ds);
        let loc = |i: usize, k: usize| Location {
            operator: op.to_string(),
            sample: Some(i),
            iteration: Some(batch_no),
            source: Some(ds.paths[k].display().to_string()),
        };
        let paths: Vec<&Path> = idx.iter().map(|&k| ds.paths[k].as_path()).collect();
        let mut data = read_whole_files(&paths, &self.opts, &mut self.sizes, self.read_threads, stop, |i, m| Error::data(loc(i, idx[i]), m))?;
        let mut labels = TensorList::uniform(DType::I32, &[1], idx.len());
        for (i, &k) in idx.iter().enumerate() {
            labels.sample_mut::<i32>(i)[0] = ds.labels[k];
        }
        let info: Vec<Arc<str>> = idx.iter().map(|&k| ds.names[k].clone()).collect();
        labels.set_source_info(info.clone());
        data.set_source_info(info);
        Ok(vec![data, labels])
    }
}

/// Reads whole files into one batch (sample `i`: `paths[i]`), on several threads for large
/// batches (`sizes` is scratch). A file that cannot be read fails the batch with the error of
/// its first failing sample, made by `failed(i, message)`.
pub(super) fn read_whole_files(
    paths: &[&Path],
    opts: &storage::Options,
    sizes: &mut Vec<usize>,
    threads: usize,
    stop: &AtomicBool,
    failed: impl Fn(usize, String) -> Error + Sync,
) -> Result<TensorList> {
    if paths.iter().any(|p| storage::is_object_uri(&p.to_string_lossy())) {
        return fetch_whole_files(paths, opts, sizes, failed);
    }
    sizes.clear();
    for (i, path) in paths.iter().enumerate() {
        let meta = std::fs::metadata(path).map_err(|e| failed(i, format!("cannot read file: {e}")))?;
        if !meta.is_file() {
            return Err(failed(i, "not a regular file".into()));
        }
        sizes.push(usize::try_from(meta.len()).map_err(|_| failed(i, "file too large".into()))?);
    }
    let total: usize = sizes.iter().sum();
    let mut data = TensorList::for_overwrite(BatchMeta::new(DType::U8, 1, sizes.chunks(1)));
    let mut slots: Vec<(usize, &mut [u8])> = data.samples_mut().into_iter().enumerate().collect();
    read_in_parallel(&mut slots, threads, total, |s| s.1.len(), |(i, dst)| {
        if stop.load(Ordering::Relaxed) {
            return Err(Error::Unsupported("the reader stopped".into()));
        }
        read_into(paths[*i], dst).map_err(|m| failed(*i, m))
    })?;
    Ok(data)
}

/// [`read_whole_files`] for files of which some are in object storage: every object
/// requested at once (up to the storage's limit in flight), then copied into the batch.
fn fetch_whole_files(paths: &[&Path], opts: &storage::Options, sizes: &mut Vec<usize>, failed: impl Fn(usize, String) -> Error) -> Result<TensorList> {
    let names: Vec<String> = paths.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let mut got: Vec<Option<bytes::Bytes>> = vec![None; paths.len()];
    let remote: Vec<usize> = (0..paths.len()).filter(|&i| storage::is_object_uri(&names[i])).collect();
    let uris: Vec<&str> = remote.iter().map(|&i| names[i].as_str()).collect();
    storage::fetch(&uris, opts, |j, b| got[remote[j]] = Some(b)).map_err(|(j, m)| failed(remote[j], m))?;
    for (i, slot) in got.iter_mut().enumerate() {
        if slot.is_none() {
            *slot = Some(std::fs::read(paths[i]).map_err(|e| failed(i, format!("cannot read file: {e}")))?.into());
        }
    }
    sizes.clear();
    sizes.extend(got.iter().map(|b| b.as_ref().map_or(0, |b| b.len())));
    let mut data = TensorList::for_overwrite(BatchMeta::new(DType::U8, 1, sizes.chunks(1)));
    for (dst, b) in data.samples_mut().into_iter().zip(&got) {
        dst.copy_from_slice(b.as_deref().unwrap_or(&[]));
    }
    Ok(data)
}

/// The reader's `storage_options` and `cache_dir`, checked.
pub(super) fn storage_options(ctx: &OpContext) -> Result<storage::Options> {
    storage::Options::from_args(&ctx.args).map_err(|(arg, m)| Error::arg(&ctx.display_name, arg, m))
}

/// [`BatchSource::read_ahead`] for formats that read whole files ([`read_whole_files`]):
/// nothing is allocated for local files.
pub(super) fn read_ahead_files<'a>(paths: impl Iterator<Item = &'a Path>, opts: &storage::Options) {
    let uris: Vec<std::borrow::Cow<str>> = paths.map(Path::to_string_lossy).filter(|p| storage::is_object_uri(p)).collect();
    if !uris.is_empty() {
        storage::read_ahead_objects(&uris.iter().map(|u| u.as_ref()).collect::<Vec<_>>(), opts);
    }
}

/// Reads exactly `dst.len()` bytes (the size the file had when listed for this batch).
fn read_into(path: &Path, dst: &mut [u8]) -> std::result::Result<(), String> {
    let mut f = File::open(path).map_err(|e| format!("cannot open file: {e}"))?;
    let mut got = 0;
    while got < dst.len() {
        match f.read(&mut dst[got..]) {
            Ok(0) => return Err(format!("file changed while reading: {got} bytes instead of {}", dst.len())),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("cannot read file: {e}")),
        }
    }
    let mut extra = [0u8; 1];
    match f.read(&mut extra) {
        Ok(0) => Ok(()),
        Ok(_) => Err(format!("file changed while reading: longer than the {} bytes it had", dst.len())),
        Err(e) => Err(format!("cannot read file: {e}")),
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_follows_fnmatch() {
        assert!(glob_match("*.jpg", "a.jpg", true));
        assert!(!glob_match("*.jpg", "a.JPG", true));
        assert!(glob_match("*.jpg", "a.JPG", false));
        assert!(glob_match("?.jpeg", "q.jpeg", true));
        assert!(!glob_match("?.jpeg", "qq.jpeg", true));
        assert!(glob_match("[[]1*", "[1].jpg", true));
        assert!(glob_match("[a-c]*", "b.x", true));
        assert!(!glob_match("[!a-c]*", "b.x", true));
        assert!(glob_match("*", "", true));
        assert!(glob_match("a*b*c", "aXXbYYc", true));
        assert!(!glob_match("a*b*c", "aXXbYY", true));
    }

    #[test]
    fn a_file_of_another_size_than_listed_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.bin");
        std::fs::write(&p, b"abcd").unwrap();
        let mut buf = [0u8; 4];
        read_into(&p, &mut buf).unwrap();
        assert_eq!(&buf, b"abcd");
        let mut short = [0u8; 2];
        assert!(read_into(&p, &mut short).unwrap_err().contains("changed"));
        let mut long = [0u8; 6];
        assert!(read_into(&p, &mut long).unwrap_err().contains("changed"));
        assert!(read_into(&dir.path().join("nope"), &mut long).unwrap_err().contains("cannot open"));
    }
}
