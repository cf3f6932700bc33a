//! What `readers.coco` keeps of a COCO annotations file, in reading order, as DALI 2.4 keeps
//! it (and writes it to, and reads it back from, its "preprocessed annotations" files):
//!
//! * Samples: the images sorted by `id` (or the `images` argument's names, in its order, names
//!   not in the file skipped); `skip_empty` drops those left without annotations.
//! * A sample's annotations: those of its image id in file order, less crowds (unless
//!   `include_iscrowd`) and boxes narrower or lower than `size_threshold` (the JSON's w, h).
//!   Boxes become `[l, t, r, b]` with `ltrb`, and are divided by the image's JSON size with
//!   `ratio` (float32 arithmetic throughout, as DALI).
//! * Labels: the category's 1-based position in `categories` (the first of a repeated id
//!   wins; an unknown id is 0), or the raw id with `avoid_class_remapping`.
//! * Polygons `[mask index, first vertex, end vertex)` and vertices (relative with `ratio`);
//!   RLE masks (with `pixelwise_masks`), their runs decoded.
//!
//! The JSON is parsed into typed records (only the fields used; anything else is skipped);
//! any syntax or type error is an error naming the file, where DALI sometimes stops parsing
//! silently.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::masks::rle_from_string;

/// Which outputs need what of the annotations.
#[derive(Debug, Clone, Copy, Default)]
pub struct Wanted {
    pub polygons: bool,
    pub pixelwise: bool,
    pub image_ids: bool,
}

/// The annotations options that shape what is kept.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub ltrb: bool,
    pub ratio: bool,
    pub skip_empty: bool,
    pub size_threshold: f32,
    pub include_iscrowd: bool,
    pub avoid_class_remapping: bool,
    pub images: Option<Vec<String>>,
    pub wanted: Wanted,
}

/// One RLE mask of a sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Rle {
    /// The JSON's `size` of the mask (kept for the files; drawing uses the image's size).
    pub h: u64,
    pub w: u64,
    pub runs: Vec<u32>,
    /// The annotation (within the sample) the mask belongs to.
    pub mask_idx: i32,
}

/// Everything kept, per sample and flattened per annotation / polygon / vertex / mask, the
/// layout of DALI's files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Annotations {
    pub file_names: Vec<String>,
    /// Per sample: first annotation and count.
    pub ann_offset: Vec<i32>,
    pub ann_count: Vec<i32>,
    pub boxes: Vec<[f32; 4]>,
    pub labels: Vec<i32>,
    /// Per polygon: mask index, first and end vertex (within the sample).
    pub polygons: Vec<[i32; 3]>,
    pub poly_offset: Vec<i64>,
    pub poly_count: Vec<i64>,
    pub vertices: Vec<[f32; 2]>,
    pub vert_offset: Vec<i64>,
    pub vert_count: Vec<i64>,
    pub rles: Vec<Rle>,
    pub rle_offset: Vec<i64>,
    pub rle_count: Vec<i64>,
    pub heights: Vec<i32>,
    pub widths: Vec<i32>,
    pub ids: Vec<i32>,
}

impl Annotations {
    pub fn len(&self) -> usize {
        self.file_names.len()
    }

    fn range(offset: &[impl Copy + Into<i64>], count: &[impl Copy + Into<i64>], k: usize) -> std::ops::Range<usize> {
        let (o, c) = (offset[k].into() as usize, count[k].into() as usize);
        o..o + c
    }

    pub fn annotations_of(&self, k: usize) -> std::ops::Range<usize> {
        Self::range(&self.ann_offset, &self.ann_count, k)
    }

    pub fn polygons_of(&self, k: usize) -> std::ops::Range<usize> {
        if self.poly_offset.is_empty() { 0..0 } else { Self::range(&self.poly_offset, &self.poly_count, k) }
    }

    pub fn vertices_of(&self, k: usize) -> std::ops::Range<usize> {
        if self.vert_offset.is_empty() { 0..0 } else { Self::range(&self.vert_offset, &self.vert_count, k) }
    }

    pub fn rles_of(&self, k: usize) -> std::ops::Range<usize> {
        if self.rle_offset.is_empty() { 0..0 } else { Self::range(&self.rle_offset, &self.rle_count, k) }
    }
}

#[derive(Deserialize)]
struct Json<'a> {
    #[serde(default, borrow)]
    images: Option<Vec<&'a RawValue>>,
    #[serde(default, borrow)]
    annotations: Option<Vec<&'a RawValue>>,
    #[serde(default, borrow)]
    categories: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize)]
struct JImage<'a> {
    id: i32,
    width: i32,
    height: i32,
    #[serde(borrow)]
    file_name: &'a RawValue,
}

#[derive(Deserialize)]
struct JCategory {
    id: Option<i32>,
}

#[derive(Deserialize)]
struct JAnnotation<'a> {
    image_id: i32,
    category_id: i32,
    #[serde(default)]
    iscrowd: i32,
    #[serde(borrow)]
    bbox: Option<&'a RawValue>,
    #[serde(default, borrow)]
    segmentation: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Counts {
    Runs(Vec<u32>),
    Text(String),
}

#[derive(Deserialize)]
struct JRle {
    size: Option<Vec<i64>>,
    counts: Option<Counts>,
}

/// What went wrong, and whether DALI raises it as a `ValueError` (a malformed field) rather
/// than a `RuntimeError`.
#[derive(Debug)]
pub struct ParseError {
    pub message: String,
    pub value_error: bool,
}

fn runtime(message: impl Into<String>) -> ParseError {
    ParseError { message: message.into(), value_error: false }
}

fn parsed<'a, T: Deserialize<'a>>(raw: &'a RawValue, what: &str) -> Result<T, ParseError> {
    serde_json::from_str(raw.get()).map_err(|e| runtime(format!("Error parsing JSON file: {what}: {e}")))
}

fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// The four numbers of a `bbox`, as DALI 2.4 checks them.
fn bbox(raw: Option<&RawValue>) -> Result<[f32; 4], ParseError> {
    let bad = |got: String| ParseError { message: format!("Invalid COCO annotation: `bbox` must contain exactly 4 values, got {got}."), value_error: true };
    let Some(raw) = raw else { return Err(bad("0".into())) };
    let v: serde_json::Value = parsed(raw, "bbox")?;
    let items = match &v {
        serde_json::Value::Array(a) => a.as_slice(),
        _ => return Err(bad("0".into())),
    };
    let numbers: Vec<f64> = items.iter().map_while(|x| x.as_f64()).collect();
    if items.len() > 4 {
        return Err(bad("at least 5".into()));
    }
    if numbers.len() != 4 {
        return Err(bad(numbers.len().to_string()));
    }
    Ok([numbers[0] as f32, numbers[1] as f32, numbers[2] as f32, numbers[3] as f32])
}

enum Segmentation {
    None,
    Polygons(Vec<Vec<f32>>),
    Rle(Rle),
}

fn segmentation(raw: Option<&RawValue>, opts: &Options) -> Result<Segmentation, ParseError> {
    let Some(raw) = raw else { return Ok(Segmentation::None) };
    let text = raw.get().trim_start();
    if text.starts_with('[') {
        if !(opts.wanted.polygons || opts.wanted.pixelwise) {
            return Ok(Segmentation::None);
        }
        let polys: Vec<Vec<serde_json::Value>> =
            serde_json::from_str(text).map_err(|e| runtime(format!("invalid polygon segmentation (a list of lists of numbers expected): {e}")))?;
        let mut out = Vec::with_capacity(polys.len());
        for p in polys {
            if p.len() % 2 != 0 {
                return Err(runtime(format!("invalid polygon segmentation: {} coordinates, not (x, y) pairs", p.len())));
            }
            let coords = p
                .iter()
                .map(|c| c.as_f64().map(|v| v as f32).ok_or_else(|| runtime(format!("invalid polygon segmentation: the coordinate {c} is not a number"))))
                .collect::<Result<Vec<f32>, _>>()?;
            out.push(coords);
        }
        return Ok(Segmentation::Polygons(out));
    }
    if text.starts_with('{') && opts.wanted.pixelwise {
        let rle: JRle = serde_json::from_str(text).map_err(|e| runtime(format!("Missing or invalid ``counts`` attribute. ({e})")))?;
        let size = rle.size.filter(|s| s.len() == 2 && s[0] > 0 && s[1] > 0).ok_or_else(|| runtime("Invalid or missing mask sizes"))?;
        let runs = match rle.counts {
            Some(Counts::Runs(r)) if !r.is_empty() => r,
            Some(Counts::Text(s)) if !s.is_empty() => rle_from_string(s.as_bytes()).map_err(runtime)?,
            _ => return Err(runtime("Missing or invalid ``counts`` attribute.")),
        };
        return Ok(Segmentation::Rle(Rle { h: size[0] as u64, w: size[1] as u64, runs, mask_idx: 0 }));
    }
    Ok(Segmentation::None)
}

/// Reads and filters the annotations file `path`.
pub fn parse(path: &Path, storage: &crate::storage::Options, opts: &Options) -> Result<Annotations, ParseError> {
    let text = crate::storage::read(&path.to_string_lossy(), storage).map_err(|e| runtime(format!("Could not open JSON annotations file: \"{}\" ({e})", path.display())))?;
    let doc: Json = serde_json::from_slice(&text).map_err(|e| runtime(format!("Error parsing JSON file. {}: {e}", path.display())))?;

    // Category id -> 1-based position in the list (the first of a repeated id wins).
    let mut remap: HashMap<i32, i32> = HashMap::new();
    for (pos, raw) in doc.categories.unwrap_or_default().into_iter().enumerate() {
        let c: JCategory = parsed(raw, "categories")?;
        let id = c.id.ok_or_else(|| runtime("Missing category ID in the JSON annotations file"))?;
        remap.entry(id).or_insert(pos as i32 + 1);
    }

    struct Image {
        id: i32,
        width: i32,
        height: i32,
        file_name: String,
    }
    let mut images = Vec::new();
    for raw in doc.images.unwrap_or_default() {
        let im: JImage = parsed(raw, "images")?;
        let name: serde_json::Value = parsed(im.file_name, "images")?;
        let file_name = match name {
            serde_json::Value::String(s) => s,
            other => {
                return Err(ParseError { message: format!("Invalid COCO annotation: `file_name` must be a string, got {}.", json_type(&other)), value_error: true })
            }
        };
        images.push(Image { id: im.id, width: im.width, height: im.height, file_name });
    }

    // Kept annotations of each image id, in file order.
    struct Kept {
        label: i32,
        bbox: [f32; 4],
        seg: Segmentation,
    }
    let mut by_image: HashMap<i32, Vec<Kept>> = HashMap::new();
    for raw in doc.annotations.unwrap_or_default() {
        let a: JAnnotation = parsed(raw, "annotations")?;
        if a.iscrowd != 0 && !opts.include_iscrowd {
            continue;
        }
        let mut b = bbox(a.bbox)?;
        if !(b[2] >= opts.size_threshold && b[3] >= opts.size_threshold) {
            continue;
        }
        if opts.ltrb {
            b[2] += b[0];
            b[3] += b[1];
        }
        let label = if opts.avoid_class_remapping { a.category_id } else { remap.get(&a.category_id).copied().unwrap_or(0) };
        let seg = segmentation(a.segmentation, opts)?;
        by_image.entry(a.image_id).or_default().push(Kept { label, bbox: b, seg });
    }

    // The samples: images by id, or the names asked for.
    let order: Vec<&Image> = match &opts.images {
        None => {
            let mut sorted: Vec<&Image> = images.iter().collect();
            sorted.sort_by_key(|im| im.id);
            sorted
        }
        Some(names) => {
            let by_name: HashMap<&str, &Image> = images.iter().map(|im| (im.file_name.as_str(), im)).collect();
            names.iter().filter_map(|n| by_name.get(n.as_str()).copied()).collect()
        }
    };

    let mut out = Annotations::default();
    let masks = opts.wanted.polygons || opts.wanted.pixelwise;
    let empty = Vec::new();
    for im in order {
        let anns = by_image.get(&im.id).unwrap_or(&empty);
        if opts.skip_empty && anns.is_empty() {
            continue;
        }
        let (w, h) = (im.width as f32, im.height as f32);
        out.file_names.push(im.file_name.clone());
        out.ann_offset.push(out.labels.len() as i32);
        out.ann_count.push(anns.len() as i32);
        let (poly0, vert0, rle0) = (out.polygons.len(), out.vertices.len(), out.rles.len());
        for (mask_idx, a) in anns.iter().enumerate() {
            out.labels.push(a.label);
            out.boxes.push(if opts.ratio { [a.bbox[0] / w, a.bbox[1] / h, a.bbox[2] / w, a.bbox[3] / h] } else { a.bbox });
            match &a.seg {
                Segmentation::Polygons(polys) if masks => {
                    for p in polys {
                        let start = (out.vertices.len() - vert0) as i32;
                        for xy in p.chunks_exact(2) {
                            out.vertices.push(if opts.ratio { [xy[0] / w, xy[1] / h] } else { [xy[0], xy[1]] });
                        }
                        out.polygons.push([mask_idx as i32, start, (out.vertices.len() - vert0) as i32]);
                    }
                }
                Segmentation::Rle(r) => out.rles.push(Rle { mask_idx: mask_idx as i32, ..r.clone() }),
                _ => {}
            }
        }
        if masks {
            out.poly_offset.push(poly0 as i64);
            out.poly_count.push((out.polygons.len() - poly0) as i64);
            out.vert_offset.push(vert0 as i64);
            out.vert_count.push((out.vertices.len() - vert0) as i64);
        }
        if opts.wanted.pixelwise {
            out.rle_offset.push(rle0 as i64);
            out.rle_count.push((out.rles.len() - rle0) as i64);
            out.heights.push(im.height);
            out.widths.push(im.width);
        }
        if opts.wanted.image_ids {
            out.ids.push(im.id);
        }
    }
    Ok(out)
}

// ------------------------------------------------------------------ preprocessed files
// Every file but filenames.dat is a vector: u32 count, then the elements, little-endian. An
// empty vector's file is not written, and a missing file reads as empty (as DALI does).

fn put_vec<T: Copy>(dir: &Path, name: &str, items: &[T], bytes: impl Fn(&T, &mut Vec<u8>)) -> Result<(), String> {
    if items.is_empty() {
        return Ok(());
    }
    let mut out = Vec::with_capacity(4 + items.len() * std::mem::size_of::<T>());
    out.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for it in items {
        bytes(it, &mut out);
    }
    let path = dir.join(name);
    std::fs::write(&path, out).map_err(|e| format!("CocoReader meta file error while saving: {}: {e}", path.display()))
}

macro_rules! le {
    ($($v:expr),*) => { |x: &_, out: &mut Vec<u8>| { let _ = x; $( out.extend_from_slice(&$v(x).to_le_bytes()); )* } };
}

/// Writes DALI's preprocessed-annotation files into `dir` (which must exist).
pub fn save(a: &Annotations, dir: &Path) -> Result<(), String> {
    put_vec(dir, "offsets.dat", &a.ann_offset, le!(|x: &i32| *x))?;
    put_vec(dir, "counts.dat", &a.ann_count, le!(|x: &i32| *x))?;
    // boxes.dat counts floats, not boxes.
    let floats: Vec<f32> = a.boxes.iter().flatten().copied().collect();
    put_vec(dir, "boxes.dat", &floats, le!(|x: &f32| *x))?;
    put_vec(dir, "labels.dat", &a.labels, le!(|x: &i32| *x))?;
    let names: String = a.file_names.iter().map(|n| format!("{n}\n")).collect();
    let path = dir.join("filenames.dat");
    std::fs::write(&path, names).map_err(|e| format!("CocoReader meta file error while saving: {}: {e}", path.display()))?;
    put_vec(dir, "polygon_data.dat", &a.polygons, le!(|x: &[i32; 3]| x[0], |x: &[i32; 3]| x[1], |x: &[i32; 3]| x[2]))?;
    put_vec(dir, "polygon_offset.dat", &a.poly_offset, le!(|x: &i64| *x))?;
    put_vec(dir, "polygons_count.dat", &a.poly_count, le!(|x: &i64| *x))?;
    put_vec(dir, "vertices.dat", &a.vertices, le!(|x: &[f32; 2]| x[0], |x: &[f32; 2]| x[1]))?;
    put_vec(dir, "vertices_offset.dat", &a.vert_offset, le!(|x: &i64| *x))?;
    put_vec(dir, "vertices_count.dat", &a.vert_count, le!(|x: &i64| *x))?;
    if !a.rles.is_empty() {
        let mut out = (a.rles.len() as u32).to_le_bytes().to_vec();
        for r in &a.rles {
            for v in [r.h, r.w, r.runs.len() as u64] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            for c in &r.runs {
                out.extend_from_slice(&c.to_le_bytes());
            }
        }
        let path = dir.join("masks_rles.dat");
        std::fs::write(&path, out).map_err(|e| format!("CocoReader meta file error while saving: {}: {e}", path.display()))?;
    }
    let idx: Vec<i32> = a.rles.iter().map(|r| r.mask_idx).collect();
    put_vec(dir, "masks_rles_idx.dat", &idx, le!(|x: &i32| *x))?;
    put_vec(dir, "masks_offset.dat", &a.rle_offset, le!(|x: &i64| *x))?;
    put_vec(dir, "mask_count.dat", &a.rle_count, le!(|x: &i64| *x))?;
    put_vec(dir, "heights.dat", &a.heights, le!(|x: &i32| *x))?;
    put_vec(dir, "widths.dat", &a.widths, le!(|x: &i32| *x))?;
    put_vec(dir, "original_ids.dat", &a.ids, le!(|x: &i32| *x))?;
    Ok(())
}

/// A vector file's elements of `size` bytes each (`None` when the file is absent).
fn get_vec(dir: &Path, name: &str, size: usize) -> Result<Option<Vec<u8>>, String> {
    let path = dir.join(name);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let n = bytes.get(..4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize).ok_or_else(|| format!("{}: truncated file", path.display()))?;
    let body = &bytes[4..];
    if n.checked_mul(size) != Some(body.len()) {
        return Err(format!("{}: the file announces {n} elements of {size} bytes, it holds {} bytes", path.display(), body.len()));
    }
    Ok(Some(body.to_vec()))
}

fn i32s(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes"))).collect()
}
fn i64s(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
}
fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect()
}

/// Reads DALI's preprocessed-annotation files from `dir`. Files an output needs must be
/// there (DALI reads garbage without them), and per-sample tables must cover every sample.
pub fn load(dir: &Path, wanted: Wanted) -> Result<Annotations, String> {
    let mut a = Annotations::default();
    let names = match std::fs::read(dir.join("filenames.dat")) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(_) => String::new(),
    };
    a.file_names = names.split_whitespace().map(str::to_string).collect();
    let n = a.file_names.len();
    if n == 0 {
        return Ok(a);
    }
    let opt = |name: &str, size: usize| get_vec(dir, name, size).map(Option::unwrap_or_default);
    let required = |name: &str, size: usize| -> Result<Vec<u8>, String> {
        get_vec(dir, name, size)?.ok_or_else(|| format!("{}: missing, and the outputs asked for need it", dir.join(name).display()))
    };
    let per_sample = |name: &str, len: usize| -> Result<(), String> {
        if len < n {
            return Err(format!("{}: {len} entries for {n} samples", dir.join(name).display()));
        }
        Ok(())
    };
    a.ann_offset = i32s(&opt("offsets.dat", 4)?);
    a.ann_count = i32s(&opt("counts.dat", 4)?);
    per_sample("offsets.dat", a.ann_offset.len())?;
    per_sample("counts.dat", a.ann_count.len())?;
    a.boxes = f32s(&opt("boxes.dat", 4)?).chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]).collect();
    a.labels = i32s(&opt("labels.dat", 4)?);
    if wanted.polygons || wanted.pixelwise {
        a.polygons = i32s(&opt("polygon_data.dat", 12)?).chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
        a.vertices = f32s(&opt("vertices.dat", 8)?).chunks_exact(2).map(|c| [c[0], c[1]]).collect();
        a.poly_offset = i64s(&opt("polygon_offset.dat", 8)?);
        a.poly_count = i64s(&opt("polygons_count.dat", 8)?);
        a.vert_offset = i64s(&opt("vertices_offset.dat", 8)?);
        a.vert_count = i64s(&opt("vertices_count.dat", 8)?);
        // Absent polygon files (saved without masks) leave every sample without polygons.
        for v in [&mut a.poly_offset, &mut a.poly_count, &mut a.vert_offset, &mut a.vert_count] {
            if v.is_empty() {
                v.resize(n, 0);
            }
        }
        per_sample("polygon_offset.dat", a.poly_offset.len())?;
        per_sample("vertices_offset.dat", a.vert_offset.len())?;
    }
    if wanted.pixelwise {
        a.heights = i32s(&required("heights.dat", 4)?);
        a.widths = i32s(&required("widths.dat", 4)?);
        per_sample("heights.dat", a.heights.len())?;
        per_sample("widths.dat", a.widths.len())?;
        a.rle_offset = i64s(&opt("masks_offset.dat", 8)?);
        a.rle_count = i64s(&opt("mask_count.dat", 8)?);
        let idx = i32s(&opt("masks_rles_idx.dat", 4)?);
        let path = dir.join("masks_rles.dat");
        if let Ok(bytes) = std::fs::read(&path) {
            let bad = || format!("{}: truncated or damaged file", path.display());
            let mut at = 4usize;
            let take = |at: &mut usize, k: usize| -> Result<&[u8], String> {
                let s = bytes.get(*at..*at + k).ok_or_else(bad)?;
                *at += k;
                Ok(s)
            };
            let count = u32::from_le_bytes(bytes.get(..4).ok_or_else(bad)?.try_into().expect("4 bytes")) as usize;
            for r in 0..count {
                let h = u64::from_le_bytes(take(&mut at, 8)?.try_into().expect("8 bytes"));
                let w = u64::from_le_bytes(take(&mut at, 8)?.try_into().expect("8 bytes"));
                let m = u64::from_le_bytes(take(&mut at, 8)?.try_into().expect("8 bytes"));
                let m = usize::try_from(m).ok().filter(|&m| m <= bytes.len() / 4).ok_or_else(bad)?;
                let runs = take(&mut at, 4 * m)?.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
                a.rles.push(Rle { h, w, runs, mask_idx: idx.get(r).copied().ok_or_else(bad)? });
            }
        }
        for v in [&mut a.rle_offset, &mut a.rle_count] {
            if v.is_empty() {
                v.resize(n, 0);
            }
        }
    }
    if wanted.image_ids {
        a.ids = i32s(&required("original_ids.dat", 4)?);
        per_sample("original_ids.dat", a.ids.len())?;
    }
    a.check().map_err(|m| format!("{}: {m}", dir.display()))?;
    Ok(a)
}

impl Annotations {
    /// Every per-sample range lies inside its table (files from elsewhere are not trusted).
    fn check(&self) -> Result<(), String> {
        for k in 0..self.len() {
            let inside = |r: std::ops::Range<usize>, len: usize, what: &str| {
                if r.start > r.end || r.end > len {
                    Err(format!("sample {k}'s {what} {r:?} lie outside the {len} stored"))
                } else {
                    Ok(())
                }
            };
            let (o, c) = (self.ann_offset[k], self.ann_count[k]);
            if o < 0 || c < 0 {
                return Err(format!("sample {k} has a negative annotation offset or count"));
            }
            inside(self.annotations_of(k), self.labels.len().min(self.boxes.len()), "annotations")?;
            if !self.poly_offset.is_empty() {
                inside(self.polygons_of(k), self.polygons.len(), "polygons")?;
                let nv = self.vertices_of(k).len() as i32;
                inside(self.vertices_of(k), self.vertices.len(), "vertices")?;
                for p in &self.polygons[self.polygons_of(k)] {
                    if p[1] < 0 || p[1] > p[2] || p[2] > nv {
                        return Err(format!("sample {k} has a polygon {p:?} outside its {nv} vertices"));
                    }
                }
            }
            if !self.rle_offset.is_empty() {
                inside(self.rles_of(k), self.rles.len(), "masks")?;
            }
        }
        Ok(())
    }
}
