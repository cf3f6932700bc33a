//! Crop operators: `fn.crop` and `fn.crop_mirror_normalize`, sharing the window math of
//! [`window`] (DALI 2.4 placement, sizes and out-of-bounds policies).

pub mod crop;
pub mod crop_mirror_normalize;
mod crop_mirror_normalize_gpu;
pub mod window;

pub use crop::CROP;
pub use crop_mirror_normalize::CROP_MIRROR_NORMALIZE;

use crate::tensor::Layout;

/// The layout to use for a batch: its own, or HWC / FHWC for 3-D / 4-D inputs without one.
/// It must name H and W.
pub fn spatial_layout(layout: &Layout, ndim: usize) -> std::result::Result<Layout, String> {
    let l = if layout.is_empty() {
        match ndim {
            3 => Layout::from("HWC"),
            4 => Layout::from("FHWC"),
            n => return Err(format!("a {n}-D input needs a layout naming its H and W dimensions (e.g. HWC, CHW, FHWC)")),
        }
    } else {
        layout.clone()
    };
    if l.find('H').is_none() || l.find('W').is_none() {
        return Err(format!("layout '{l}' has no H and W dimensions; expected HWC, CHW, FHWC, DHWC or similar"));
    }
    Ok(l)
}

/// f32 -> IEEE half, round to nearest even.
pub fn f32_to_f16(v: f32) -> u16 {
    let x = v.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let mut r = m >> shift;
        let rem = m & ((1 << shift) - 1);
        if rem > half || (rem == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && r & 1 == 1) {
        r += 1;
    }
    sign | r as u16
}

#[cfg(test)]
mod tests {
    #[test]
    fn half_conversion_rounds_to_nearest_even() {
        assert_eq!(super::f32_to_f16(1.0), 0x3c00);
        assert_eq!(super::f32_to_f16(-2.0), 0xc000);
        assert_eq!(super::f32_to_f16(65504.0), 0x7bff);
        assert_eq!(super::f32_to_f16(1e6), 0x7c00);
        // DALI 2.4 cmn FLOAT16: 0 - 0.3 -> -0.300048828125, 99.7 -> 99.6875.
        assert_eq!(super::f32_to_f16(-0.3), 0xb4cd);
        assert_eq!(super::f32_to_f16(99.7), 0x563b);
    }
}
