//! Listing a WebDataset archive: from its index file, or from the tar headers themselves
//! (POSIX ustar, with GNU long names and pax `path` records). Members are grouped into
//! samples as DALI groups them: consecutive regular files sharing the name up to the first
//! dot of the file name; files whose name starts with a dot are left out.

use std::path::Path;

use crate::storage::{self, Source};

use super::{Listed, Member};

const BLOCK: u64 = 512;

/// Splits `dir/000001.seg.png` into (`dir/000001`, `seg.png`).
pub fn split_name(path: &str) -> (&str, &str) {
    let start = path.rfind('/').map_or(0, |p| p + 1);
    match path[start..].find('.') {
        Some(dot) => (&path[..start + dot], &path[start + dot + 1..]),
        None => (path, ""),
    }
}

/// Reads an index file (`v1.1` or `v1.2`).
pub fn read_index(path: &str, opts: &storage::Options) -> Result<Vec<Listed>, String> {
    let text = storage::read(path, opts).map_err(|e| format!("cannot read the index file: {e}"))?;
    let text = String::from_utf8_lossy(&text);
    let mut lines = text.lines();
    let bad = |line: usize, m: &str| format!("Malformed index file at \"{path}\" line {line} - {m}");
    let head = lines.next().unwrap_or("");
    let mut fields = head.split_whitespace();
    let version = fields.next().ok_or_else(|| bad(0, "no version signature found"))?;
    let with_names = match version {
        "v1.1" => false,
        "v1.2" => true,
        v => return Err(bad(0, &format!("Unsupported version of the index file ({v})."))),
    };
    let count: usize = fields.next().and_then(|c| c.parse().ok()).filter(|&c| c > 0).ok_or_else(|| bad(0, "no sample count found"))?;
    let mut samples = Vec::with_capacity(count);
    for line_no in 1..=count {
        let line = lines.next().ok_or_else(|| bad(line_no, "the index lists fewer samples than its header says"))?;
        let mut it = line.split_whitespace();
        let mut members = Vec::new();
        while let Some(ext) = it.next() {
            let mut num = |what: &str| -> Result<u64, String> {
                it.next().and_then(|v| v.parse().ok()).ok_or_else(|| bad(line_no, &format!("Could not find all necessary component parameters ({what})")))
            };
            let (offset, size) = (num("offset")?, num("size")?);
            let filename = if with_names { it.next().ok_or_else(|| bad(line_no, "Could not find all necessary component parameters (filename)"))?.to_string() } else { String::new() };
            if offset % BLOCK != 0 {
                return Err(bad(line_no, "tar offset is not a multiple of tar block size (512), perhaps the size value is exported before offset?"));
            }
            members.push(Member { ext: ext.to_string(), offset, size, filename });
        }
        if members.is_empty() {
            return Err(bad(line_no, "no extensions provided for the sample"));
        }
        samples.push(Listed { members, origin: format!("index file at \"{path}\" line {line_no}") });
    }
    Ok(samples)
}

/// The regular files of a tar archive: (name, data offset, size). Headers are read with
/// positioned reads (ranged requests for an archive in object storage).
pub fn tar_members(path: &Path, opts: &storage::Options) -> Result<Vec<(String, u64, u64)>, String> {
    let f = Source::open(&path.to_string_lossy(), opts).map_err(|e| format!("cannot open the archive: {e}"))?;
    let len = f.len();
    let mut out = Vec::new();
    let mut at = 0u64;
    let mut long_name: Option<String> = None;
    let mut header = [0u8; BLOCK as usize];
    while at + BLOCK <= len {
        f.read_exact_at(&mut header, at, "the tar header").map_err(|e| format!("cannot read the tar header at {at}: {e}"))?;
        if header.iter().all(|&b| b == 0) {
            break; // the end-of-archive blocks
        }
        let field = |from: usize, n: usize| {
            let raw = &header[from..from + n];
            let end = raw.iter().position(|&b| b == 0).unwrap_or(n);
            String::from_utf8_lossy(&raw[..end]).into_owned()
        };
        let size = octal(&header[124..136]).ok_or_else(|| format!("not a tar archive, or damaged at byte {at} (bad size field)"))?;
        let typeflag = header[156];
        let data = at + BLOCK;
        if data.checked_add(size).is_none_or(|end| end > len) {
            return Err(format!("the archive is truncated: the member at byte {at} needs {size} bytes, the file ends at {len}"));
        }
        let mut name = match &header[257..262] {
            b"ustar" => {
                let prefix = field(345, 155);
                let n = field(0, 100);
                if prefix.is_empty() { n } else { format!("{prefix}/{n}") }
            }
            _ => field(0, 100),
        };
        match typeflag {
            b'L' => {
                let mut buf = vec![0u8; size as usize];
                f.read_exact_at(&mut buf, data, "a long name")?;
                let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                long_name = Some(String::from_utf8_lossy(&buf[..end]).into_owned());
            }
            b'x' => {
                let mut buf = vec![0u8; size as usize];
                f.read_exact_at(&mut buf, data, "a pax record")?;
                long_name = pax_path(&buf).or(long_name);
            }
            b'0' | 0 => {
                if let Some(n) = long_name.take() {
                    name = n;
                }
                out.push((name, data, size));
            }
            _ => long_name = None, // directories, links, devices: not samples
        }
        at = data + size.div_ceil(BLOCK) * BLOCK;
    }
    if at < len && at + BLOCK > len {
        // Less than a block left: end-of-archive padding, or a header cut short.
        let mut rest = vec![0u8; (len - at) as usize];
        f.read_exact_at(&mut rest, at, "the archive's end")?;
        if rest.iter().any(|&b| b != 0) {
            return Err(format!("the archive is truncated: the tar header at byte {at} is cut short ({} of 512 bytes)", rest.len()));
        }
    }
    Ok(out)
}

/// The archive's samples, from its headers.
pub fn list_archive(path: &Path, opts: &storage::Options) -> Result<Vec<Listed>, String> {
    let mut samples: Vec<Listed> = Vec::new();
    let mut last_key: Option<String> = None;
    for (name, offset, size) in tar_members(path, opts)? {
        let file = name.rsplit('/').next().unwrap_or(&name);
        if file.starts_with('.') {
            continue;
        }
        let (key, ext) = split_name(&name);
        let member = Member { ext: ext.to_string(), offset, size, filename: name.clone() };
        if last_key.as_deref() == Some(key) {
            samples.last_mut().expect("a sample was started").members.push(member);
        } else {
            last_key = Some(key.to_string());
            samples.push(Listed { members: vec![member], origin: format!("tar file at \"{}\"", path.display()) });
        }
    }
    Ok(samples)
}

/// A tar numeric field: octal digits (spaces and NULs around them), or GNU's base-256.
fn octal(raw: &[u8]) -> Option<u64> {
    if raw[0] & 0x80 != 0 {
        return raw[1..].iter().try_fold(0u64, |v, &b| v.checked_mul(256).map(|v| v + u64::from(b)));
    }
    let s = std::str::from_utf8(raw).ok()?.trim_matches(|c: char| c == '\0' || c == ' ');
    if s.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(s, 8).ok()
}

/// The `path` record of a pax extended header.
fn pax_path(buf: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(buf);
    text.lines().find_map(|l| l.split_once(' ').and_then(|(_, kv)| kv.strip_prefix("path=")).map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_at_the_first_dot_of_the_file_name() {
        assert_eq!(split_name("a.b/000001.seg.png"), ("a.b/000001", "seg.png"));
        assert_eq!(split_name("x"), ("x", ""));
    }

    #[test]
    fn index_files_parse_and_malformed_ones_are_errors() {
        let dir = std::env::temp_dir().join(format!("sluice-wds-index-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.idx");
        std::fs::write(&p, "v1.2 2\njpg 512 10 s0.jpg cls 1536 2 s0.cls\njpg 2560 7 s1.jpg\n").unwrap();
        let s = read_index(p.to_str().unwrap(), &Default::default()).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].members[1], Member { ext: "cls".into(), offset: 1536, size: 2, filename: "s0.cls".into() });
        std::fs::write(&p, "v1.2 2\njpg 500 10 s0.jpg\n").unwrap();
        assert!(read_index(p.to_str().unwrap(), &Default::default()).unwrap_err().contains("block size"));
        std::fs::write(&p, "v9.9 1\n").unwrap();
        assert!(read_index(p.to_str().unwrap(), &Default::default()).unwrap_err().contains("Unsupported version"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
