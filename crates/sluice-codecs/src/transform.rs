//! Lossless orientation transforms (flips/transposes) from a strided source region into a
//! tightly packed output.

use crate::Orientation;

/// Copies the `sw` x `sh` region starting at pixel column `x0` of `src` (row stride `pitch`
/// bytes, `ch` bytes per pixel) into `dst`, applying `o`. `dst` is packed and holds the
/// oriented region (`sh` x `sw` when `o` swaps axes).
pub(crate) fn blit(
    src: &[u8],
    pitch: usize,
    x0: usize,
    sw: usize,
    sh: usize,
    ch: usize,
    o: Orientation,
    dst: &mut [u8],
) {
    let (ow, oh) = if o.swaps_axes() { (sh, sw) } else { (sw, sh) };
    let orow = ow * ch;
    debug_assert_eq!(dst.len(), orow * oh);
    match o {
        // Row-preserving cases are plain memcpys.
        Orientation::Normal | Orientation::FlipVertical => {
            for (oy, drow) in dst.chunks_exact_mut(orow).enumerate() {
                let sy = if o == Orientation::Normal { oy } else { sh - 1 - oy };
                let s = sy * pitch + x0 * ch;
                drow.copy_from_slice(&src[s..s + orow]);
            }
        }
        _ => {
            for (oy, drow) in dst.chunks_exact_mut(orow).enumerate() {
                for (ox, px) in drow.chunks_exact_mut(ch).enumerate() {
                    let (sx, sy) = o.to_stored(ox, oy, sw, sh);
                    let s = sy * pitch + (x0 + sx) * ch;
                    px.copy_from_slice(&src[s..s + ch]);
                }
            }
        }
    }
}
