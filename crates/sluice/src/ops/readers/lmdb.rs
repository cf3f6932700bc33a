//! A read-only view of an LMDB database (Caffe's and Caffe2's datasets), through the C
//! library (`lmdb-master-sys`, the binding `heed` maintains).
//!
//! LMDB maps the database file into memory, and a read transaction sees a fixed snapshot of
//! it for as long as it lives. [`Lmdb::open`] opens one transaction for the reader's lifetime
//! and walks the keys once, keeping where every key and value lies in the map: reading
//! sample `i` is then a copy from memory, on any thread, without calling into LMDB. The
//! environment is opened `MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS` (as DALI opens it): nothing is
//! written, not even the lock file, so read-only dataset directories work, and the
//! transaction is not tied to the thread that opened it.

use std::ffi::CString;
use std::path::Path;
use std::ptr;

use lmdb_master_sys as ffi;

/// An open database: its entries in key order.
pub struct Lmdb {
    env: *mut ffi::MDB_env,
    txn: *mut ffi::MDB_txn,
    /// Per entry: the key's and the value's place in the map.
    entries: Vec<[(*const u8, usize); 2]>,
}

// The entries point into the read-only map of a transaction that lives as long as `Lmdb`;
// nothing mutates it, and with MDB_NOTLS the transaction may be used and ended on any thread.
unsafe impl Send for Lmdb {}
unsafe impl Sync for Lmdb {}

impl std::fmt::Debug for Lmdb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lmdb({} entries)", self.entries.len())
    }
}

fn error_text(rc: i32) -> String {
    // SAFETY: mdb_strerror returns a static NUL-terminated string for any code.
    let text = unsafe { std::ffi::CStr::from_ptr(ffi::mdb_strerror(rc)) };
    text.to_string_lossy().into_owned()
}

fn check(rc: i32, what: &str) -> Result<(), String> {
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("{what}: {}", error_text(rc)))
    }
}

impl Lmdb {
    /// Opens the database at `path` (an LMDB directory holding `data.mdb`) and lists its
    /// entries. Errors say what LMDB found wrong.
    pub fn open(path: &Path) -> Result<Lmdb, String> {
        let meta = std::fs::metadata(path).map_err(|e| format!("cannot open the LMDB database: {e}"))?;
        if !meta.is_dir() {
            return Err("Not a directory: an LMDB database is a directory holding data.mdb".into());
        }
        if !path.join("data.mdb").is_file() {
            return Err("No such file or directory: the directory has no data.mdb, it is not an LMDB database".into());
        }
        let flags = ffi::MDB_RDONLY | ffi::MDB_NOLOCK | ffi::MDB_NOTLS;
        let c_path = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| "the path holds a NUL byte".to_string())?;
        let mut db = Lmdb { env: ptr::null_mut(), txn: ptr::null_mut(), entries: Vec::new() };
        // SAFETY: the handles are created, used and (in Drop) freed in LMDB's documented
        // order; every returned code is checked before a handle is used.
        unsafe {
            check(ffi::mdb_env_create(&mut db.env), "cannot create an LMDB environment")?;
            check(ffi::mdb_env_open(db.env, c_path.as_ptr(), flags, 0o664), "not an LMDB database, or a damaged one")?;
            check(ffi::mdb_txn_begin(db.env, ptr::null_mut(), ffi::MDB_RDONLY, &mut db.txn), "cannot begin a read transaction")?;
            let mut dbi: ffi::MDB_dbi = 0;
            check(ffi::mdb_dbi_open(db.txn, ptr::null(), 0, &mut dbi), "cannot open the database")?;
            let mut cursor = ptr::null_mut();
            check(ffi::mdb_cursor_open(db.txn, dbi, &mut cursor), "cannot open a cursor")?;
            let mut key = ffi::MDB_val { mv_size: 0, mv_data: ptr::null_mut() };
            let mut value = ffi::MDB_val { mv_size: 0, mv_data: ptr::null_mut() };
            let mut op = ffi::MDB_FIRST;
            let walked = loop {
                match ffi::mdb_cursor_get(cursor, &mut key, &mut value, op) {
                    0 => db.entries.push([(key.mv_data as *const u8, key.mv_size), (value.mv_data as *const u8, value.mv_size)]),
                    ffi::MDB_NOTFOUND => break Ok(()),
                    rc => break check(rc, "the database is damaged"),
                }
                op = ffi::MDB_NEXT;
            };
            ffi::mdb_cursor_close(cursor);
            walked?;
        }
        Ok(db)
    }

    /// Entries in the database.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The key of entry `i`.
    pub fn key(&self, i: usize) -> &[u8] {
        let (p, n) = self.entries[i][0];
        // SAFETY: a place in the transaction's map, valid while `self` lives.
        unsafe { std::slice::from_raw_parts(p, n) }
    }

    /// The value of entry `i`.
    pub fn value(&self, i: usize) -> &[u8] {
        let (p, n) = self.entries[i][1];
        // SAFETY: as in `key`.
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

impl Drop for Lmdb {
    fn drop(&mut self) {
        // SAFETY: each handle is freed once, the transaction before its environment.
        unsafe {
            if !self.txn.is_null() {
                ffi::mdb_txn_abort(self.txn);
            }
            if !self.env.is_null() {
                ffi::mdb_env_close(self.env);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes `entries` into a new LMDB database in the directory `dir` (as Caffe's tools do).
    pub(crate) fn write(dir: &Path, entries: &[(&[u8], &[u8])]) {
        let c_path = CString::new(dir.to_str().unwrap()).unwrap();
        unsafe {
            let mut env = ptr::null_mut();
            assert_eq!(ffi::mdb_env_create(&mut env), 0);
            assert_eq!(ffi::mdb_env_set_mapsize(env, 64 << 20), 0);
            assert_eq!(ffi::mdb_env_open(env, c_path.as_ptr(), 0, 0o664), 0);
            let mut txn = ptr::null_mut();
            assert_eq!(ffi::mdb_txn_begin(env, ptr::null_mut(), 0, &mut txn), 0);
            let mut dbi = 0;
            assert_eq!(ffi::mdb_dbi_open(txn, ptr::null(), 0, &mut dbi), 0);
            for (k, v) in entries {
                let mut key = ffi::MDB_val { mv_size: k.len(), mv_data: k.as_ptr() as *mut _ };
                let mut val = ffi::MDB_val { mv_size: v.len(), mv_data: v.as_ptr() as *mut _ };
                assert_eq!(ffi::mdb_put(txn, dbi, &mut key, &mut val, 0), 0);
            }
            assert_eq!(ffi::mdb_txn_commit(txn), 0);
            ffi::mdb_env_close(env);
        }
    }

    #[test]
    fn entries_come_in_key_order_from_any_thread() {
        let dir = tempfile::tempdir().unwrap();
        let big = vec![7u8; 100_000]; // an overflow page
        write(dir.path(), &[(b"b", b"two"), (b"a", b"one"), (b"c", &big)]);
        let db = Lmdb::open(dir.path()).unwrap();
        assert_eq!(db.len(), 3);
        let db = std::sync::Arc::new(db);
        let d = db.clone();
        std::thread::spawn(move || {
            assert_eq!((d.key(0), d.value(0)), (&b"a"[..], &b"one"[..]));
            assert_eq!((d.key(1), d.value(1)), (&b"b"[..], &b"two"[..]));
            assert_eq!(d.value(2), &big[..]);
        })
        .join()
        .unwrap();
        assert!(Lmdb::open(&dir.path().join("data.mdb")).unwrap_err().contains("Not a directory"));
    }

    #[test]
    fn what_is_not_a_database_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Lmdb::open(&dir.path().join("missing")).unwrap_err().contains("cannot open"));
        assert!(Lmdb::open(dir.path()).unwrap_err().contains("no data.mdb"));
        std::fs::write(dir.path().join("data.mdb"), vec![0x5au8; 8192]).unwrap();
        assert!(Lmdb::open(dir.path()).unwrap_err().contains("not an LMDB database"));
    }
}
