//! Any bytes through the GPU JPEG path's host side: the scan preparation (`prepare_scan`:
//! markers, Huffman tables, byte unstuffing into the device buffer) and the parallel entropy
//! decoder it feeds (`decode_parallel`, the kernel's CPU twin), over a coefficient window the
//! first input byte picks. Errors are fine; panics, overflows and hangs are findings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_codecs::scan::{decode_parallel, prepare_scan, scan_room};
use sluice_codecs::{coefficient_layout, read_info, Roi};

fuzz_target!(|input: &[u8]| {
    let Some((&knobs, bytes)) = input.split_first() else { return };
    let mut data = vec![0u8; scan_room(bytes.len())];
    let Some(scan) = prepare_scan(bytes, &mut data) else { return };
    let Ok(info) = read_info(bytes) else { return };
    let window = if knobs & 1 == 0 {
        Roi { x: 0, y: 0, width: info.width, height: info.height }
    } else {
        Roi { x: info.width / 3, y: info.height / 4, width: (info.width / 2).max(1), height: (info.height / 2).max(1) }
    };
    let Some(layout) = coefficient_layout(bytes, &info, window) else { return };
    // The decoder writes into a buffer the caller sized from the layout (bounded by the
    // decoders' image limits through read_info).
    let mut out = vec![0i16; layout.coefficients];
    let chunk = [u64::MAX / 2, 8192, 1024, 100][usize::from((knobs >> 1) & 3)];
    let _ = decode_parallel(&scan.header, &data, &layout, chunk, &mut out);
});
