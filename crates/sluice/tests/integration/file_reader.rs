//! `readers.file` against real files in temporary folders. The expected orders, labels and
//! `reader_meta` numbers are what DALI 2.4 produced for the same settings.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use sluice::exec::Executor;
use sluice::graph::{Edge, OpSpec, PipelineSpec};
use sluice::ops::{ArgValue, ReaderMeta};
use sluice::tensor::DType;

fn write(root: &Path, rel: &str, data: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, data).unwrap();
}

fn s(v: &str) -> ArgValue {
    ArgValue::Str(v.to_string())
}

fn spec(args: Vec<(&str, ArgValue)>, batch_size: usize, threads: usize, exec_async: bool) -> PipelineSpec {
    PipelineSpec {
        batch_size,
        num_threads: threads,
        device_id: None,
        seed: 1234,
        prefetch_queue_depth: 2,
        exec_async,
        exec_pipelined: exec_async, exec_dynamic: true,
        errors: Default::default(),
        ops: vec![OpSpec {
            schema: "readers__File".into(),
            device: None,
            name: "Reader".into(),
            inputs: vec![],
            arg_inputs: vec![],
            args: args.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        }],
        outputs: vec![Edge { op: 0, output: 0 }, Edge { op: 0, output: 1 }],
    }
}

fn build(args: Vec<(&str, ArgValue)>, batch_size: usize) -> Executor {
    Executor::new(&spec(args, batch_size, 1, false)).unwrap()
}

fn build_err(args: Vec<(&str, ArgValue)>) -> String {
    match Executor::new(&spec(args, 2, 1, false)) {
        Ok(_) => panic!("expected a build error"),
        Err(e) => e.to_string(),
    }
}

/// One batch as (source info, label, bytes) per sample.
fn batch(ex: &mut Executor) -> Vec<(String, i32, Vec<u8>)> {
    let out = ex.next_cpu_batch().unwrap();
    let (data, labels) = (&out[0], &out[1]);
    assert_eq!(data.dtype(), DType::U8);
    assert_eq!(data.ndim(), 1);
    assert!(data.layout().is_empty());
    assert_eq!(labels.dtype(), DType::I32);
    (0..data.len())
        .map(|i| {
            assert_eq!(labels.shape(i), &[1]);
            assert_eq!(data.shape(i), &[data.bytes(i).len()]);
            assert_eq!(labels.source_info(i), data.source_info(i));
            (data.source_info(i).to_string(), labels.sample::<i32>(i)[0], data.bytes(i).to_vec())
        })
        .collect()
}

/// Labels of the next `n` batches.
fn labels(ex: &mut Executor, n: usize) -> Vec<Vec<i32>> {
    (0..n).map(|_| batch(ex).into_iter().map(|(_, l, _)| l).collect()).collect()
}

/// A dataset of `n` files `000.jpg`.. listed with `files`, so label == index; the content of
/// file `i` is `i + 1` bytes of value `i`.
fn numbered(n: usize) -> (tempfile::TempDir, Vec<(&'static str, ArgValue)>) {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for i in 0..n {
        let name = format!("{i:03}.jpg");
        write(dir.path(), &name, &vec![i as u8; i + 1]);
        files.push(name);
    }
    let args = vec![("file_root", s(dir.path().to_str().unwrap())), ("files", ArgValue::StrList(files))];
    (dir, args)
}

fn with(mut base: Vec<(&'static str, ArgValue)>, more: Vec<(&'static str, ArgValue)>) -> Vec<(&'static str, ArgValue)> {
    base.extend(more);
    base
}

fn meta(ex: &Executor) -> ReaderMeta {
    assert_eq!(ex.readers().len(), 1);
    assert_eq!(ex.readers()[0].0, "Reader");
    ex.readers()[0].1.clone()
}

#[test]
fn labels_come_from_sorted_class_folders_and_bytes_from_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    fs::create_dir_all(r.join("0empty")).unwrap(); // an empty class still takes label 0
    write(r, "b/1.jpg", b"b-one");
    write(r, "b/0.JPG", b"b-zero"); // filters are case-insensitive by default
    write(r, "a/z.png", b"a-z");
    write(r, "a/A.jpg", b"a-A");
    write(r, "a/notes.txt", b"filtered out");
    write(r, "a/sub/nested.jpg", b"nested folders are not read");
    write(r, "top.jpg", b"files at the top are not read");
    write(r, "c/q.wav", b"");
    let mut ex = build(vec![("file_root", s(r.to_str().unwrap()))], 3);
    let m = meta(&ex);
    assert_eq!((m.epoch_size, m.epoch_size_padded, m.number_of_shards, m.shard_id), (5, 5, 1, 0));
    let mut got = batch(&mut ex);
    got.extend(batch(&mut ex));
    let expect: Vec<(String, i32, Vec<u8>)> = vec![
        ("a/A.jpg".into(), 1, b"a-A".to_vec()),
        ("a/z.png".into(), 1, b"a-z".to_vec()),
        ("b/0.JPG".into(), 2, b"b-zero".to_vec()),
        ("b/1.jpg".into(), 2, b"b-one".to_vec()),
        ("c/q.wav".into(), 3, vec![]),
        ("a/A.jpg".into(), 1, b"a-A".to_vec()), // the epoch wraps inside the batch
    ];
    assert_eq!(got, expect);

    // Case-sensitive filters drop 0.JPG; explicit filters replace the default set.
    let ex = build(vec![("file_root", s(r.to_str().unwrap())), ("case_sensitive_filter", ArgValue::Bool(true))], 1);
    assert_eq!(meta(&ex).epoch_size, 4);
    let mut ex = build(vec![("file_root", s(r.to_str().unwrap())), ("file_filters", ArgValue::StrList(vec!["*.txt".into()]))], 1);
    assert_eq!(batch(&mut ex)[0].0, "a/notes.txt");
    // dir_filters pick class folders; labels count the kept folders only.
    let mut ex = build(vec![("file_root", s(r.to_str().unwrap())), ("dir_filters", ArgValue::StrList(vec!["B*".into()]))], 2);
    assert_eq!(labels(&mut ex, 1), vec![vec![0, 0]]);
}

#[test]
fn file_list_lines_are_name_then_label_relative_to_the_list() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "lists/x.bin", b"xx");
    write(r, "lists/with space.bin", b"spaced");
    write(r, "data/a.jpg", b"aaa");
    write(r, "lists/l.txt", b"x.bin 5\n\n../data/a.jpg\t7\r\n   \nwith space.bin   3\n");
    let list = r.join("lists/l.txt");
    let mut ex = build(vec![("file_list", s(list.to_str().unwrap()))], 4);
    assert_eq!(meta(&ex).epoch_size, 3);
    let got = batch(&mut ex);
    assert_eq!(
        got,
        vec![
            ("x.bin".to_string(), 5, b"xx".to_vec()),
            ("../data/a.jpg".to_string(), 7, b"aaa".to_vec()),
            ("with space.bin".to_string(), 3, b"spaced".to_vec()),
            ("x.bin".to_string(), 5, b"xx".to_vec()),
        ]
    );
    // With file_root, names are relative to it instead.
    write(r, "l2.txt", b"data/a.jpg 1\n");
    let mut ex = build(vec![("file_list", s(r.join("l2.txt").to_str().unwrap())), ("file_root", s(r.to_str().unwrap()))], 1);
    assert_eq!(batch(&mut ex)[0], ("data/a.jpg".to_string(), 1, b"aaa".to_vec()));

    // A line without a valid label is an error naming the operator, the list and the line.
    for bad in ["data/a.jpg 1\n\ndata/a.jpg x\n", "data/a.jpg 1\n\ndata/a.jpg\n", "data/a.jpg 1\n\ndata/a.jpg -3\n"] {
        write(r, "bad.txt", bad.as_bytes());
        let err = build_err(vec![("file_list", s(r.join("bad.txt").to_str().unwrap())), ("file_root", s(r.to_str().unwrap()))]);
        assert!(err.contains("readers.file") && err.contains("bad.txt") && err.contains("line 3"), "{err}");
    }
    let err = build_err(vec![("file_list", s(r.join("nope.txt").to_str().unwrap()))]);
    assert!(err.contains("readers.file") && err.contains("nope.txt"), "{err}");
    write(r, "empty.txt", b"\n\n");
    let err = build_err(vec![("file_list", s(r.join("empty.txt").to_str().unwrap()))]);
    assert!(err.contains("readers.file") && err.contains("no files"), "{err}");
}

#[test]
fn files_take_labels_or_their_positions() {
    let (_dir, args) = numbered(3);
    let mut ex = build(args.clone(), 3);
    let got = batch(&mut ex);
    assert_eq!(got.iter().map(|g| g.1).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert_eq!(got[2], ("002.jpg".to_string(), 2, vec![2, 2, 2]));
    let mut ex = build(with(args.clone(), vec![("labels", ArgValue::IntList(vec![9, 8, 7]))]), 3);
    assert_eq!(labels(&mut ex, 1), vec![vec![9, 8, 7]]);
    let err = build_err(with(args.clone(), vec![("labels", ArgValue::IntList(vec![9]))]));
    assert!(err.contains("readers.file") && err.contains("labels"), "{err}");
    let err = build_err(with(args, vec![("file_list", s("/x.txt"))]));
    assert!(err.contains("readers.file") && err.contains("file_list"), "{err}");
}

#[test]
fn bad_arguments_fail_at_build_naming_the_operator() {
    let (dir, args) = numbered(4);
    let missing = dir.path().join("no-such-folder");
    let err = build_err(vec![("file_root", s(missing.to_str().unwrap()))]);
    assert!(err.contains("readers.file") && err.contains("no-such-folder"), "{err}");
    let err = build_err(vec![]);
    assert!(err.contains("readers.file") && err.contains("file_root"), "{err}");
    let err = build_err(vec![("file_root", s(dir.path().to_str().unwrap()))]); // no class folders
    assert!(err.contains("readers.file") && err.contains("no files"), "{err}");
    let err = build_err(with(args.clone(), vec![("shard_id", ArgValue::Int(2)), ("num_shards", ArgValue::Int(2))]));
    assert!(err.contains("readers.file") && err.contains("shard_id"), "{err}");
    let err = build_err(with(args.clone(), vec![("num_shards", ArgValue::Int(5))]));
    assert!(err.contains("readers.file") && err.contains("num_shards"), "{err}");
    let err = build_err(with(args.clone(), vec![("random_shuffle", ArgValue::Bool(true)), ("shuffle_after_epoch", ArgValue::Bool(true))]));
    assert!(err.contains("readers.file") && err.contains("shuffle_after_epoch") && err.contains("random_shuffle"), "{err}");
    let err = build_err(with(args.clone(), vec![("stick_to_shard", ArgValue::Bool(true)), ("shuffle_after_epoch", ArgValue::Bool(true))]));
    assert!(err.contains("stick_to_shard"), "{err}");
    let err = build_err(with(args, vec![("random_shuffle", ArgValue::Bool(true)), ("initial_fill", ArgValue::Int(0))]));
    assert!(err.contains("initial_fill"), "{err}");
}

#[test]
fn shards_cover_the_dataset_exactly_once() {
    for (n, shards) in [(10usize, 3usize), (10, 4), (7, 7), (11, 2)] {
        let (_dir, args) = numbered(n);
        let mut seen = Vec::new();
        for sid in 0..shards {
            let size = (n * (sid + 1)) / shards - (n * sid) / shards;
            let mut ex = build(
                with(args.clone(), vec![("num_shards", ArgValue::Int(shards as i64)), ("shard_id", ArgValue::Int(sid as i64)), ("stick_to_shard", ArgValue::Bool(true))]),
                size,
            );
            let m = meta(&ex);
            assert_eq!((m.epoch_size, m.number_of_shards, m.shard_id, m.stick_to_shard), (n, shards, sid, true));
            let b = labels(&mut ex, 2);
            assert_eq!(b[0], b[1], "stick_to_shard rereads the same shard");
            seen.extend(b[0].iter().copied());
        }
        seen.sort();
        assert_eq!(seen, (0..n as i32).collect::<Vec<_>>(), "n={n} shards={shards}");
    }
}

#[test]
fn pad_last_batch_repeats_the_last_sample_and_pads_epoch_size() {
    let (_dir, args) = numbered(10);
    let shard = |sid: i64, pad: bool| {
        with(args.clone(), vec![("num_shards", ArgValue::Int(3)), ("shard_id", ArgValue::Int(sid)), ("pad_last_batch", ArgValue::Bool(pad))])
    };
    let mut ex = build(shard(0, true), 3);
    let m = meta(&ex);
    assert_eq!((m.epoch_size, m.epoch_size_padded, m.pad_last_batch), (10, 12, true));
    // Every shard yields ceil(ceil(10/3)/3) = 2 batches per epoch, then moves to the next shard.
    assert_eq!(labels(&mut ex, 7), vec![vec![0, 1, 2], vec![2, 2, 2], vec![3, 4, 5], vec![5, 5, 5], vec![6, 7, 8], vec![9, 9, 9], vec![0, 1, 2]]);
    let mut ex = build(shard(1, true), 4);
    assert_eq!(meta(&ex).epoch_size_padded, 12);
    assert_eq!(labels(&mut ex, 3), vec![vec![3, 4, 5, 5], vec![6, 7, 8, 9], vec![0, 1, 2, 2]]);
    let ex = build(shard(1, false), 4);
    assert_eq!(meta(&ex).epoch_size_padded, 10);
    let ex = build(with(args.clone(), vec![("num_shards", ArgValue::Int(4)), ("pad_last_batch", ArgValue::Bool(true))]), 3);
    assert_eq!(meta(&ex).epoch_size_padded, 12);
    // Without padding, batches straddle the epoch boundary.
    let mut ex = build(args, 4);
    assert_eq!(labels(&mut ex, 3), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9, 0, 1]]);
}

#[test]
fn shards_rotate_each_epoch_unless_stick_to_shard() {
    let (_dir, args) = numbered(10);
    let shard1 = with(args, vec![("num_shards", ArgValue::Int(3)), ("shard_id", ArgValue::Int(1))]);
    let mut ex = build(shard1.clone(), 3);
    assert_eq!(labels(&mut ex, 4), vec![vec![3, 4, 5], vec![6, 7, 8], vec![9, 0, 1], vec![2, 3, 4]]);
    let mut ex = build(with(shard1.clone(), vec![("stick_to_shard", ArgValue::Bool(true))]), 3);
    assert_eq!(labels(&mut ex, 3), vec![vec![3, 4, 5]; 3]);
    let mut ex = build(with(shard1, vec![("stick_to_shard", ArgValue::Bool(true)), ("pad_last_batch", ArgValue::Bool(true))]), 3);
    assert_eq!(labels(&mut ex, 4), vec![vec![3, 4, 5], vec![5, 5, 5], vec![3, 4, 5], vec![5, 5, 5]]);
}

#[test]
fn shuffle_after_epoch_gives_a_fresh_permutation_every_epoch() {
    let (_dir, args) = numbered(10);
    let mut ex = build(with(args.clone(), vec![("shuffle_after_epoch", ArgValue::Bool(true))]), 10);
    let epochs = labels(&mut ex, 3);
    for e in &epochs {
        let mut sorted = e.clone();
        sorted.sort();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
    }
    assert_ne!(epochs[0], (0..10).collect::<Vec<_>>(), "the first epoch is shuffled too");
    assert_ne!(epochs[0], epochs[1]);
    assert_ne!(epochs[1], epochs[2]);
    // Shards read their slice of the same global permutation.
    let shard = |sid| with(args.clone(), vec![("shuffle_after_epoch", ArgValue::Bool(true)), ("num_shards", ArgValue::Int(2)), ("shard_id", ArgValue::Int(sid))]);
    let s0 = labels(&mut build(shard(0), 5), 3);
    let s1 = labels(&mut build(shard(1), 5), 3);
    for k in 0..3 {
        assert_eq!([s0[k].clone(), s1[k].clone()].concat(), epochs[k]);
    }
}

fn shuffled(args: &[(&'static str, ArgValue)], seed: i64, threads: usize, exec_async: bool) -> Vec<Vec<i32>> {
    let a = with(args.to_vec(), vec![("random_shuffle", ArgValue::Bool(true)), ("initial_fill", ArgValue::Int(8)), ("seed", ArgValue::Int(seed))]);
    let mut ex = Executor::new(&spec(a, 4, threads, exec_async)).unwrap();
    labels(&mut ex, 15)
}

#[test]
fn random_shuffle_is_deterministic_and_permutes_each_epoch() {
    let (_dir, args) = numbered(20);
    let a = shuffled(&args, 42, 1, false);
    assert_eq!(a, shuffled(&args, 42, 3, true), "same seed, same order whatever the threads and mode");
    assert_eq!(a, shuffled(&args, 42, 2, false));
    assert_ne!(a, shuffled(&args, 43, 1, false), "another seed, another order");
    let flat: Vec<i32> = a.concat();
    assert_ne!(&flat[..20], &(0..20).collect::<Vec<_>>()[..]);
    for epoch in flat.chunks(20) {
        let mut e = epoch.to_vec();
        e.sort();
        assert_eq!(e, (0..20).collect::<Vec<_>>(), "every epoch-worth window is a permutation");
    }
    assert_ne!(&flat[..20], &flat[20..40]);
}

#[test]
fn a_missing_file_fails_its_batch_and_the_next_batch_reads_on() {
    let (dir, _) = numbered(4);
    let files = vec!["000.jpg", "001.jpg", "gone.jpg", "003.jpg"].into_iter().map(String::from).collect();
    let args = vec![("file_root", s(dir.path().to_str().unwrap())), ("files", ArgValue::StrList(files))];
    for exec_async in [false, true] {
        let mut ex = Executor::new(&spec(args.clone(), 2, 2, exec_async)).unwrap();
        assert_eq!(batch(&mut ex)[1].2, vec![1, 1]);
        let err = ex.next_cpu_batch().expect_err("batch with the missing file fails").to_string();
        assert!(err.contains("readers.file") && err.contains("gone.jpg"), "{err}");
        let next = batch(&mut ex);
        assert_eq!(next.iter().map(|g| g.1).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(next[0].2, vec![0]);
    }
}

#[test]
fn a_file_that_changes_size_after_listing_is_an_error_not_garbage() {
    let (dir, args) = numbered(2);
    let mut ex = build(args, 1);
    assert_eq!(batch(&mut ex)[0].2, vec![0]);
    // The loader may already have read a batch or two ahead; keep the file grown long enough
    // for a later read to see it and check that the batch is either right or an error.
    fs::write(dir.path().join("001.jpg"), vec![1u8; 50]).unwrap();
    for _ in 0..6 {
        match ex.next_cpu_batch() {
            Ok(out) => {
                let b = out[0].bytes(0);
                assert!(b == [0] || b == [1, 1] || b == vec![1u8; 50].as_slice(), "{b:?}");
            }
            Err(e) => assert!(e.to_string().contains("001.jpg"), "{e}"),
        }
    }
}

#[test]
fn dropping_the_reader_mid_epoch_returns_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for i in 0..300 {
        let name = format!("{i}.jpg");
        write(dir.path(), &name, &vec![7u8; 4096]);
        files.push(name);
    }
    let args = vec![
        ("file_root", s(dir.path().to_str().unwrap())),
        ("files", ArgValue::StrList(files)),
        ("prefetch_queue_depth", ArgValue::Int(3)),
    ];
    for exec_async in [false, true] {
        let mut ex = Executor::new(&spec(args.clone(), 8, 2, exec_async)).unwrap();
        batch(&mut ex);
        std::thread::sleep(Duration::from_millis(50)); // let the loader fill its queue and block
        let t = Instant::now();
        drop(ex);
        assert!(t.elapsed() < Duration::from_secs(2), "drop took {:?}", t.elapsed());
    }
    // Dropped right after build, before any batch was asked for.
    let ex = Executor::new(&spec(args, 8, 1, false)).unwrap();
    let t = Instant::now();
    drop(ex);
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn legacy_class_name_resolves() {
    let (def, dev) = sluice::ops::lookup("FileReader").unwrap();
    assert_eq!(def.schema.name, "readers__File");
    assert_eq!(dev, None);
    assert_eq!(def.schema.fn_name(), "readers.file");
    assert!(def.schema.find_arg("shuffle_after_epoch_seed").is_some());
    assert!(def.schema.find_arg("dir_filters").is_some());
    assert!(def.schema.is_reader);
}
