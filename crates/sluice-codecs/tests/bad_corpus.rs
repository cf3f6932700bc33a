//! Inputs that once broke a fuzz target (`fuzz/`), kept in `tests/bad/<target>/` as image-rs
//! keeps its regressions: each goes through what its target runs and must be refused or
//! decoded, never panic. A file's first byte is the target's parameter byte.

use std::path::PathBuf;

use sluice_codecs::scan::{decode_parallel, prepare_scan, scan_room};
use sluice_codecs::{coefficient_layout, decode, read_info, DecodeParams, Roi};

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/bad").join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut files: Vec<(String, Vec<u8>)> =
        entries.flatten().map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())).collect();
    files.sort();
    files
}

#[test]
fn jpeg_scan_regressions() {
    let files = corpus("jpeg_scan");
    assert!(!files.is_empty(), "tests/bad/jpeg_scan holds the scan preparation's regressions");
    for (name, input) in files {
        let bytes = &input[1..];
        let mut data = vec![0u8; scan_room(bytes.len())];
        let Some(scan) = prepare_scan(bytes, &mut data) else { continue };
        let Ok(info) = read_info(bytes) else { continue };
        let Some(layout) = coefficient_layout(bytes, &info, Roi { x: 0, y: 0, width: info.width, height: info.height }) else { continue };
        let mut out = vec![0i16; layout.coefficients];
        let _ = decode_parallel(&scan.header, &data, &layout, 1024, &mut out);
        let _ = decode(bytes, &DecodeParams::default()).map_err(|e| eprintln!("{name}: {e}"));
    }
}

#[test]
fn a_huffman_table_with_more_codes_than_fit_is_refused() {
    // A DHT declaring more codes of one length than that many bits can hold: the scan
    // preparation indexed past its lookup table (found by the jpeg_scan target).
    let input = corpus("jpeg_scan").into_iter().find(|(n, _)| n == "dht-more-codes-than-fit").expect("the regression file").1;
    let mut data = vec![0u8; scan_room(input.len())];
    assert!(prepare_scan(&input[1..], &mut data).is_none());
}
