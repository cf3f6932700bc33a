//! The local cache of objects read from storage (`cache_dir`): a folder on local disk that
//! keeps what readers fetched (whole objects and ranges), so that later epochs, and other
//! processes on the machine (one per GPU), read it from disk instead of over the link.
//!
//! Safe to share between processes without a server: an entry is written to a temporary
//! file and renamed into place (readers see a whole entry or none), and each entry starts
//! with the request it answers and its length, checked on every read (a hash collision or a damaged entry
//! is a miss, never wrong bytes). The size is bounded: every `limit / 16` bytes a process
//! writes (and at its first write), it lists the folder and deletes the least recently used
//! entries (reads refresh an entry's modification time) until the folder holds at most 90% of
//! the limit; a lock file keeps two processes from trimming at once. Entries are at most
//! `limit / 16` bytes (larger objects are not kept), so between trims the folder exceeds the
//! limit by less than 1/8 of it (per process writing). An entry deleted while another process
//! reads it stays readable through that process's open file.
//!
//! Objects are assumed not to change once written (training data sets); after rewriting a
//! data set in place, empty the cache folder.

use std::fs::File;
use std::io::{Read, Write};
use std::ops::Range;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// Where entries live under the cache folder (a version, so a later layout never reads this one).
const LAYOUT: &str = "sluice-cache-v1";

/// Temporary files older than this were left by a process that died while writing.
const STALE_TMP: Duration = Duration::from_secs(3600);

/// A cache folder, shared by every reader of this process that names it.
pub struct Cache {
    root: PathBuf,
    limit: u64,
    /// Bytes written since the last trim.
    written: AtomicU64,
    /// Names temporary files uniquely within the process.
    counter: AtomicU64,
    trimming: Mutex<()>,
}

impl Cache {
    /// The cache in `dir` holding at most `limit` bytes (0: half the free space of `dir`'s
    /// file system now). One per folder and limit in a process.
    pub fn open(dir: &str, limit: u64) -> Result<Arc<Cache>, String> {
        static OPEN: OnceLock<Mutex<Vec<Arc<Cache>>>> = OnceLock::new();
        let root = Path::new(dir).join(LAYOUT);
        std::fs::create_dir_all(root.join("tmp")).map_err(|e| format!("cannot create the cache folder {dir}: {e}"))?;
        let limit = if limit > 0 { limit } else { free_bytes(&root)? / 2 };
        let mut open = OPEN.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = open.iter().find(|c| c.root == root && c.limit == limit) {
            return Ok(c.clone());
        }
        let cache = Arc::new(Cache { root, limit, written: AtomicU64::new(limit / 16), counter: AtomicU64::new(0), trimming: Mutex::new(()) });
        open.push(cache.clone());
        Ok(cache)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The entry's file: two levels of the key's hash (256 folders of files).
    fn entry_path(&self, key: &str) -> PathBuf {
        let h = hash128(key.as_bytes());
        self.root.join(format!("{:02x}", h as u8)).join(format!("{h:032x}"))
    }

    /// The cached bytes of `uri` (or its `range`) under the store `store`, if there.
    pub fn get(&self, store: &str, uri: &str, range: Option<&Range<u64>>) -> Option<bytes::Bytes> {
        let key = entry_key(store, uri, range);
        let path = self.entry_path(&key);
        let mut f = File::open(&path).ok()?;
        let mut data = Vec::new();
        f.read_to_end(&mut data).ok()?;
        let header = 4 + key.len() + 8;
        let field = |at: usize, n: usize| data.get(at..at + n);
        let key_len = u32::from_le_bytes(field(0, 4)?.try_into().ok()?) as usize;
        if key_len != key.len() || field(4, key_len) != Some(key.as_bytes()) {
            // Another key's entry under the same name (a collision): leave it.
            return None;
        }
        let data_len = field(4 + key_len, 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        if data_len != Some(data.len().saturating_sub(header) as u64) || range.is_some_and(|r| data_len != Some(r.end - r.start)) {
            // Damaged (cut short, or not what was asked for): drop it.
            let _ = std::fs::remove_file(&path);
            return None;
        }
        // Recently used: trimming deletes the oldest modification times first.
        let _ = f.set_modified(SystemTime::now());
        let mut bytes = bytes::Bytes::from(data);
        Some(bytes.split_off(header))
    }

    /// Keeps `data`, the bytes of `uri` (or its `range`) under the store `store`. Failures
    /// (a full disk, a read-only folder) only cost the entry.
    pub fn put(&self, store: &str, uri: &str, range: Option<&Range<u64>>, data: &[u8]) {
        let key = entry_key(store, uri, range);
        let entry_len = (4 + key.len() + 8 + data.len()) as u64;
        // Larger entries would let the folder overshoot its limit by more than 1/8 of it.
        if entry_len > self.limit / 16 {
            return;
        }
        let path = self.entry_path(&key);
        let tmp = self.root.join("tmp").join(format!("{}-{}", std::process::id(), self.counter.fetch_add(1, Ordering::Relaxed)));
        let written = (|| -> std::io::Result<()> {
            std::fs::create_dir_all(path.parent().expect("entries are in a folder"))?;
            let mut f = File::create(&tmp)?;
            f.write_all(&(key.len() as u32).to_le_bytes())?;
            f.write_all(key.as_bytes())?;
            f.write_all(&(data.len() as u64).to_le_bytes())?;
            f.write_all(data)?;
            drop(f);
            std::fs::rename(&tmp, &path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        let since = self.written.fetch_add(entry_len, Ordering::Relaxed) + entry_len;
        if since >= self.limit / 16 {
            self.trim();
        }
    }

    /// Deletes the least recently used entries until the folder holds at most 90% of the
    /// limit (skipped while another thread or process trims).
    pub fn trim(&self) {
        let Ok(_one_thread) = self.trimming.try_lock() else { return };
        let Ok(lock) = File::create(self.root.join("lock")) else { return };
        // SAFETY: flock on a descriptor this function owns; released when `lock` closes.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return;
        }
        self.written.store(0, Ordering::Relaxed);
        let now = SystemTime::now();
        let mut entries: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        let Ok(folders) = std::fs::read_dir(&self.root) else { return };
        for folder in folders.flatten() {
            let is_tmp = folder.file_name() == "tmp";
            let Ok(files) = std::fs::read_dir(folder.path()) else { continue };
            for file in files.flatten() {
                let Ok(meta) = file.metadata() else { continue };
                let modified = meta.modified().unwrap_or(now);
                if is_tmp {
                    if now.duration_since(modified).unwrap_or_default() > STALE_TMP {
                        let _ = std::fs::remove_file(file.path());
                    }
                } else if meta.is_file() {
                    entries.push((modified, meta.len(), file.path()));
                }
            }
        }
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        if total <= self.limit {
            return;
        }
        entries.sort();
        let target = self.limit / 10 * 9;
        for (_, size, path) in entries {
            if total <= target {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= size;
            }
        }
    }
}

/// What an entry answers: the store (its endpoint), the object and the range.
fn entry_key(store: &str, uri: &str, range: Option<&Range<u64>>) -> String {
    match range {
        Some(r) => format!("{store}\n{uri}\n{}-{}", r.start, r.end),
        None => format!("{store}\n{uri}\n"),
    }
}

/// FNV-1a, twice with different offsets: a stable 128-bit name (entries are checked against
/// their key, so this needs to spread names, not resist attacks).
fn hash128(data: &[u8]) -> u128 {
    let fnv = |mut h: u64| {
        for &b in data {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        h
    };
    (u128::from(fnv(0xcbf2_9ce4_8422_2325)) << 64) | u128::from(fnv(0x6c62_272e_07bb_0142))
}

/// Free bytes of the file system holding `dir`.
fn free_bytes(dir: &Path) -> Result<u64, String> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|_| "the cache folder's name holds a NUL".to_string())?;
    // SAFETY: statvfs fills the zeroed struct for a NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(format!("cannot read the free space of the cache folder: {}", std::io::Error::last_os_error()));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-cache-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn entries_round_trip_and_are_checked() {
        let d = folder("rt");
        let c = Cache::open(d.to_str().unwrap(), 1 << 20).unwrap();
        assert!(c.get("s", "s3://b/x", None).is_none());
        c.put("s", "s3://b/x", None, b"hello");
        c.put("s", "s3://b/x", Some(&(1..3)), b"el");
        assert_eq!(c.get("s", "s3://b/x", None).as_deref(), Some(&b"hello"[..]));
        assert_eq!(c.get("s", "s3://b/x", Some(&(1..3))).as_deref(), Some(&b"el"[..]));
        // Another store's object of the same name is another entry.
        assert!(c.get("other", "s3://b/x", None).is_none());
        // A damaged entry (cut short) is a miss and is removed.
        let p = c.entry_path(&entry_key("s", "s3://b/x", Some(&(1..3))));
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 1]).unwrap();
        assert!(c.get("s", "s3://b/x", Some(&(1..3))).is_none());
        assert!(!p.exists());
        // An entry of another key at the same name (a collision) is a miss and stays.
        let q = c.entry_path(&entry_key("s", "s3://b/x", None));
        let mut other = (9u32).to_le_bytes().to_vec();
        other.extend(b"other key");
        std::fs::write(&q, &other).unwrap();
        assert!(c.get("s", "s3://b/x", None).is_none());
        assert!(q.exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn trimming_keeps_the_most_recently_used() {
        let d = folder("trim");
        let c = Cache::open(d.to_str().unwrap(), 16 << 10).unwrap();
        let blob = vec![7u8; 900];
        for i in 0..40 {
            c.put("s", &format!("s3://b/{i}"), None, &blob);
            // Object 0 stays in use: read after every write.
            assert!(c.get("s", "s3://b/0", None).is_some(), "after {i}");
        }
        c.trim();
        let total: u64 = walk(&d.join(LAYOUT)).iter().sum();
        assert!(total <= 16 << 10, "{total}");
        assert!(c.get("s", "s3://b/39", None).is_some());
        assert!(c.get("s", "s3://b/1", None).is_none());
        let _ = std::fs::remove_dir_all(&d);
    }

    fn walk(root: &Path) -> Vec<u64> {
        let mut sizes = Vec::new();
        for e in std::fs::read_dir(root).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                if e.file_name() != "tmp" {
                    sizes.extend(walk(&e.path()));
                }
            } else if e.file_name() != "lock" {
                sizes.push(e.metadata().unwrap().len());
            }
        }
        sizes
    }
}
