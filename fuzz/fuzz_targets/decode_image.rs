//! Any bytes through the CPU decoders: the header (format sniffing, dimensions, EXIF), then a
//! decode whose parameters the first input byte picks (colour space, EXIF orientation, DCT
//! scaling, a region of interest, the fast IDCT). Errors are fine; panics, overflows, hangs
//! and allocations beyond the limits are findings. Images over 4 megapixels are left out
//! (see below).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_codecs::{decode, read_info, ColorSpace, DecodeParams, Roi};

fuzz_target!(|input: &[u8]| {
    let Some((&knobs, data)) = input.split_first() else { return };
    let Ok(info) = read_info(data) else { return };
    // Large images that are valid take their time to decode (a 100-byte lossless WebP may
    // declare 16380 x 16157 pixels and fill them): not what this target looks for. Sizes
    // past the limits are refused by read_info above.
    if info.width * info.height > 1 << 22 {
        return;
    }
    let color = [ColorSpace::Rgb, ColorSpace::Bgr, ColorSpace::Gray, ColorSpace::YCbCr, ColorSpace::AnyData][usize::from(knobs % 5)];
    let mut p = DecodeParams { color, adjust_orientation: knobs & 8 != 0, scale_denom: 1 << ((knobs >> 4) & 3), fast_idct: knobs & 64 != 0, roi: None };
    if knobs & 128 != 0 {
        // A window in the middle of the (oriented, scaled) output.
        let (h, w, _) = info.output_shape(&p);
        p.roi = Some(Roi { x: w / 4, y: h / 3, width: (w / 2).max(1), height: (h / 3).max(1) });
    }
    let _ = decode(data, &p);
});
