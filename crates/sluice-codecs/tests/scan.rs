//! The parallel entropy decoder's promise (`scan::decode_parallel`, the GPU kernel's
//! algorithm run thread by thread): whatever the number of chunks, the coefficients equal
//! libjpeg-turbo's (`read_coefficients`) for every window, sampling and quality; files it
//! cannot take are refused by `prepare_scan`, never decoded wrongly.

mod common;

use common::{photo, Enc};
use sluice_codecs::scan::{decode_parallel, prepare_scan, scan_room, ScanError};
use sluice_codecs::*;
use turbojpeg_sys as tj;

fn jpeg(w: usize, h: usize, samp: tj::TJSAMP, quality: i32, restart_blocks: i32, seed: u32) -> (Vec<u8>, usize) {
    let ch = if samp == tj::TJSAMP_TJSAMP_GRAY { 1 } else { 3 };
    let mut px = photo(w, h, seed);
    if ch == 1 {
        px = px.chunks(3).map(|p| p[1]).collect();
    }
    (common::jpeg(&px, w, h, ch, Enc { subsamp: samp, progressive: false, restart_blocks, quality }), ch)
}

fn libjpeg_coefficients(bytes: &[u8], window: Roi) -> (Vec<i16>, CoefLayout, [[u16; 64]; 3]) {
    let info = read_info(bytes).unwrap();
    let layout = coefficient_layout(bytes, &info, window).unwrap();
    let mut dst = vec![0i16; layout.coefficients];
    let mut quant = [[0u16; 64]; 3];
    assert!(read_coefficients(bytes, &info, &layout, &mut dst, &mut quant));
    (dst, layout, quant)
}

const SAMPLINGS: [tj::TJSAMP; 5] =
    [tj::TJSAMP_TJSAMP_420, tj::TJSAMP_TJSAMP_422, tj::TJSAMP_TJSAMP_444, tj::TJSAMP_TJSAMP_440, tj::TJSAMP_TJSAMP_GRAY];

#[test]
fn parallel_decode_equals_libjpeg_for_any_chunking() {
    let mut rounds_seen = Vec::new();
    for (si, &samp) in SAMPLINGS.iter().enumerate() {
        for (w, h, q) in [(333, 217, 90), (64, 48, 75), (801, 611, 97), (17, 9, 50)] {
            let (bytes, _) = jpeg(w, h, samp, q, 0, (si * 7 + w) as u32);
            let mut data = vec![0u8; scan_room(bytes.len())];
            let scan = prepare_scan(&bytes, &mut data).expect("a baseline file is taken");
            let windows = [
                Roi { x: 0, y: 0, width: w, height: h },
                Roi { x: w / 3, y: h / 4, width: (w / 2).max(1), height: (h / 2).max(1) },
                Roi { x: w - 1, y: h - 1, width: 1, height: 1 },
            ];
            for window in windows {
                let (want, layout, quant) = libjpeg_coefficients(&bytes, window);
                let what = format!("{w}x{h} q{q} sampling #{si} window {window:?}");
                for (c, q) in quant.iter().enumerate().take(layout.components) {
                    assert_eq!(&scan.quant[c], q, "{what}: quantization table {c}");
                }
                for chunk in [u64::MAX / 2, 40_000, 8192, 1024, 100] {
                    let mut got = vec![0x5555i16; layout.coefficients];
                    let rounds = decode_parallel(&scan.header, &data, &layout, chunk, &mut got).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                    rounds_seen.push((chunk, rounds));
                    assert!(got == want, "{what}, chunks of {chunk} bits: coefficients differ at {:?}", got.iter().zip(&want).position(|(a, b)| a != b));
                }
            }
        }
    }
    // With chunks of the kernel's size the guesses are right: a round to check them, at
    // most another to mend one (the bound is the chunk count).
    assert!(rounds_seen.iter().filter(|r| r.0 >= 8192).all(|r| r.1 <= 2), "rounds: {rounds_seen:?}");
}

#[test]
fn files_outside_the_scheme_are_refused() {
    let (plain, _) = jpeg(64, 48, tj::TJSAMP_TJSAMP_420, 90, 0, 1);
    let mut data = vec![0u8; scan_room(plain.len())];
    assert!(prepare_scan(&plain, &mut data).is_some());
    // Restart markers, progressive files, arithmetic coding's absence aside: refused.
    let (restarts, _) = jpeg(64, 48, tj::TJSAMP_TJSAMP_420, 90, 4, 1);
    assert!(prepare_scan(&restarts, &mut data).is_none(), "restart intervals");
    // ... and known beforehand from the markers.
    assert!(sluice_codecs::scan::has_restart_interval(&restarts));
    assert!(!sluice_codecs::scan::has_restart_interval(&plain));
    let px = photo(64, 48, 2);
    let progressive = common::jpeg(&px, 64, 48, 3, Enc { subsamp: tj::TJSAMP_TJSAMP_420, progressive: true, restart_blocks: 0, quality: 90 });
    assert!(prepare_scan(&progressive, &mut data).is_none(), "progressive");
    // Cut off inside the scan (no EOI): refused.
    assert!(prepare_scan(&plain[..plain.len() / 2], &mut data).is_none(), "truncated");
    assert!(prepare_scan(b"\x89PNG\r\n\x1a\n", &mut data).is_none(), "not a JPEG");
    // Too little room: refused, not a panic.
    let mut small = vec![0u8; 10];
    assert!(prepare_scan(&plain, &mut small).is_none(), "no room");
}

#[test]
fn corrupt_data_is_reported_not_decoded() {
    let (bytes, _) = jpeg(200, 120, tj::TJSAMP_TJSAMP_420, 90, 0, 5);
    let mut data = vec![0u8; scan_room(bytes.len())];
    let scan = prepare_scan(&bytes, &mut data).unwrap();
    let info = read_info(&bytes).unwrap();
    let layout = coefficient_layout(&bytes, &info, Roi { x: 0, y: 0, width: 200, height: 120 }).unwrap();
    let mut out = vec![0i16; layout.coefficients];
    // Half the scan gone (the header still says the whole): too few blocks, or broken.
    let mut header = *scan.header;
    header.data_bytes /= 2;
    let err = decode_parallel(&header, &data, &layout, 2048, &mut out).unwrap_err();
    assert!(matches!(err, ScanError::Corrupt | ScanError::BlockCount { .. }), "{err:?}");
    // Ones overwritten into the middle (no code is all ones): reported.
    let mut bad = data.clone();
    let mid = scan.header.data_bytes as usize / 2;
    bad[mid..mid + 8].fill(0xFF);
    let err = decode_parallel(&scan.header, &bad, &layout, 2048, &mut out).unwrap_err();
    assert!(matches!(err, ScanError::Corrupt | ScanError::BlockCount { .. }), "{err:?}");
}

/// The GPU kernel itself (jpeg_entropy.cu), compiled for the CPU with a few lines of CUDA
/// emulation (tools/cuda_shim/shim.h: one block, its threads as OS threads, barriers for
/// __syncthreads) and run on scans of every sampling, whole images and windows, up to the
/// kernel's full 1,024 chunks: its coefficients equal libjpeg-turbo's. This checks the
/// kernel's logic and its ScanHeader layout where there is no GPU (CI); the GPU tests run
/// it on the device.
#[test]
fn gpu_kernel_source_equals_libjpeg_when_emulated_on_the_cpu() {
    use std::io::Write;
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let kernel = here.join("../sluice/src/ops/decoders/mixed/jpeg_entropy.cu").canonicalize().expect("the kernel source");
    let dir = std::env::temp_dir().join(format!("sluice-kernel-emulation-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cases = Vec::new();
    for (si, &samp) in SAMPLINGS[..4].iter().enumerate() {
        for (w, h, q) in [(333, 217, 90), (2400, 1603, 95), (64, 48, 75)] {
            let (bytes, _) = jpeg(w, h, samp, q, 0, (si * 7 + w) as u32);
            let mut data = vec![0u8; scan_room(bytes.len())];
            let scan = prepare_scan(&bytes, &mut data).unwrap();
            for window in [Roi { x: 0, y: 0, width: w, height: h }, Roi { x: w / 3, y: h / 4, width: w / 2, height: h / 2 }] {
                let (want, layout, _) = libjpeg_coefficients(&bytes, window);
                let path = dir.join(format!("case{}.bin", cases.len()));
                // The layout entropy_harness.cpp reads: lengths and numbers as u64.
                let mut out = Vec::new();
                let u64s = |out: &mut Vec<u8>, vs: &[usize]| vs.iter().for_each(|&v| out.extend_from_slice(&(v as u64).to_le_bytes()));
                u64s(&mut out, &[scan.header.as_bytes().len()]);
                out.extend_from_slice(scan.header.as_bytes());
                u64s(&mut out, &[scan.written]);
                out.extend_from_slice(&data[..scan.written]);
                u64s(&mut out, &[layout.components]);
                for c in 0..3 {
                    let g = &layout.comp[c.min(layout.components - 1)];
                    u64s(&mut out, &[g.bx0, g.by0, g.bw, g.bh, g.offset]);
                }
                u64s(&mut out, &[want.len()]);
                want.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
                std::fs::File::create(&path).and_then(|mut f| f.write_all(&out)).unwrap();
                cases.push(path);
            }
        }
    }
    let exe = dir.join("entropy_harness");
    let built = std::process::Command::new(std::env::var("CXX").unwrap_or_else(|_| "c++".into()))
        .args(["-std=c++20", "-O2", "-w", "-pthread", "-o"])
        .arg(&exe)
        .arg(format!("-DKERNEL_SOURCE=\"{}\"", kernel.display()))
        .arg(format!("-I{}", here.join("../../tools/cuda_shim").display()))
        .arg(here.join("tests/kernel_emulation/entropy_harness.cpp"))
        .output()
        .expect("a C++20 compiler (c++) to build the kernel's CPU emulation");
    assert!(built.status.success(), "building the emulation failed:\n{}", String::from_utf8_lossy(&built.stderr));
    let run = std::process::Command::new(&exe).args(&cases).output().unwrap();
    let report = String::from_utf8_lossy(&run.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(run.status.success() && report.lines().count() == cases.len(), "{report}");
    // The large scans really ran on all of the kernel's threads.
    assert!(report.contains(" 1024 chunks, 1024 threads, equal"), "{report}");
}
