//! COCO's masks as `readers.coco(pixelwise_masks=True)` draws them, pixel for pixel as DALI
//! 2.4 does: cocoapi's run-length encoding (column-major runs of 0s and 1s, starting with 0s)
//! of each polygon (`rleFrPoly`: a pixel is inside when its centre is), polygons of one label
//! united (`rleMerge`), then the labels merged in ascending order, run by run, by DALI's own
//! rule (the larger label wins where masks overlap, except in the first label's very last
//! run), and the runs written out column-major.
//!
//! One deliberate difference: DALI starts the merge from the smallest label even when that
//! label has no mask, and then returns an all-zero mask; here the merge starts from the
//! smallest label that has one.

use crate::ops::readers::c_int;

/// Most boundary points one polygon may upsample to, whatever its image: a polygon far
/// outside its image (a hostile or broken file) is refused instead of allocating without
/// bound.
const MAX_BOUNDARY_POINTS: u64 = 1 << 27;

/// Most boundary points one edge may upsample to, per pixel of the image's larger side: an
/// edge between vertices within one image size of the image (at most 3 sides long) at the
/// rasteriser's 5x scale. A vertex millions of pixels away (found by fuzzing: seconds of
/// rasterising for an 8x6 image) is refused.
const EDGE_POINTS_PER_PIXEL: u64 = 15;

/// `rleFrPoly`: the runs of polygon `xy` (`x0, y0, x1, y1, ...`) in an `h` x `w` image.
pub fn rle_from_polygon(xy: &[f64], h: usize, w: usize) -> Result<Vec<u32>, String> {
    let k = xy.len() / 2;
    let hw = (h * w) as u32;
    if k == 0 {
        return Ok(vec![hw]);
    }
    let scale = 5.0;
    let mut x: Vec<i32> = (0..k).map(|j| c_int(scale * xy[2 * j] + 0.5)).collect();
    let mut y: Vec<i32> = (0..k).map(|j| c_int(scale * xy[2 * j + 1] + 0.5)).collect();
    x.push(x[0]);
    y.push(y[0]);
    let points: u64 = (0..k).map(|j| (x[j] as i64 - x[j + 1] as i64).unsigned_abs().max((y[j] as i64 - y[j + 1] as i64).unsigned_abs()) + 1).sum();
    let limit = MAX_BOUNDARY_POINTS.min(k as u64 * (EDGE_POINTS_PER_PIXEL * h.max(w) as u64 + 16));
    if points > limit {
        return Err(format!(
            "polygon too large: its outline spans {points} points at 5x scale, more than the {limit} of a polygon whose vertices lie within one image size of its {w}x{h} image"
        ));
    }
    // Upsampled boundary points, densely along every edge.
    let (mut u, mut v) = (Vec::with_capacity(points as usize), Vec::with_capacity(points as usize));
    for j in 0..k {
        let (mut xs, mut xe, mut ys, mut ye) = (x[j], x[j + 1], y[j], y[j + 1]);
        let dx = (xe as i64 - xs as i64).unsigned_abs() as i64;
        let dy = (ys as i64 - ye as i64).unsigned_abs() as i64;
        let flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
        if flip {
            std::mem::swap(&mut xs, &mut xe);
            std::mem::swap(&mut ys, &mut ye);
        }
        if dx >= dy {
            let s = (ye as f64 - ys as f64) / dx as f64; // NaN for a zero-length edge, as in C
            for d in 0..=dx {
                let t = if flip { dx - d } else { d };
                u.push((t + xs as i64) as i32);
                v.push(c_int(ys as f64 + s * t as f64 + 0.5));
            }
        } else {
            let s = (xe as f64 - xs as f64) / dy as f64;
            for d in 0..=dy {
                let t = if flip { dy - d } else { d };
                v.push((t + ys as i64) as i32);
                u.push(c_int(xs as f64 + s * t as f64 + 0.5));
            }
        }
    }
    // The points where the boundary crosses a pixel column's centre, downsampled.
    let mut a: Vec<u32> = Vec::new();
    for j in 1..u.len() {
        if u[j] == u[j - 1] {
            continue;
        }
        let xd = (f64::from(if u[j] < u[j - 1] { u[j] } else { u[j].wrapping_sub(1) }) + 0.5) / scale - 0.5;
        if xd.floor() != xd || xd < 0.0 || xd > w as f64 - 1.0 {
            continue;
        }
        let yd = (f64::from(if v[j] < v[j - 1] { v[j] } else { v[j - 1] }) + 0.5) / scale - 0.5;
        let yd = yd.clamp(0.0, h as f64).ceil();
        a.push(((xd as i32).wrapping_mul(h as i32).wrapping_add(yd as i32)) as u32);
    }
    a.push(hw);
    a.sort_unstable();
    let mut prev = 0u32;
    for c in a.iter_mut() {
        let t = *c;
        *c = c.wrapping_sub(prev);
        prev = t;
    }
    // Zero-length runs merge their neighbours.
    let mut runs = vec![a[0]];
    let mut j = 1;
    while j < a.len() {
        if a[j] > 0 {
            runs.push(a[j]);
            j += 1;
        } else {
            j += 1;
            if j < a.len() {
                *runs.last_mut().expect("one run at least") += a[j];
                j += 1;
            }
        }
    }
    Ok(runs)
}

/// `rleMerge(..., intersect = 0)`: the union of masks of the same size.
pub fn rle_union(masks: &[Vec<u32>]) -> Vec<u32> {
    let mut cnts = masks[0].clone();
    for b in &masks[1..] {
        let a = std::mem::take(&mut cnts);
        if a.is_empty() || b.is_empty() {
            cnts = if a.is_empty() { b.clone() } else { a };
            continue;
        }
        let (mut ca, mut cb) = (a[0], b[0]);
        let (mut v, mut va, mut vb) = (false, false, false);
        let (mut ia, mut ib, mut cc, mut ct) = (1, 1, 0u32, 1u64);
        while ct > 0 {
            let c = ca.min(cb);
            cc += c;
            ca -= c;
            if ca == 0 && ia < a.len() {
                ca = a[ia];
                ia += 1;
                va = !va;
            }
            cb -= c;
            if cb == 0 && ib < b.len() {
                cb = b[ib];
                ib += 1;
                vb = !vb;
            }
            ct = u64::from(ca) + u64::from(cb);
            let vp = v;
            v = va || vb;
            if v != vp || ct == 0 {
                cnts.push(cc);
                cc = 0;
            }
        }
    }
    cnts
}

/// `rleFrString`: COCO's compressed RLE string (LEB128-like, 5 bits a character, counts after
/// the second stored as differences) to runs. A count of more than 7 characters (35 bits), or
/// one that does not come out as a u32, is corrupt: an error, where cocoapi's shifts and sums
/// would overflow.
pub fn rle_from_string(s: &[u8]) -> Result<Vec<u32>, String> {
    const MAX_CHARS: u32 = 7;
    let mut cnts: Vec<u32> = Vec::new();
    let mut p = 0;
    while p < s.len() {
        let (mut x, mut k, mut more) = (0i64, 0u32, true);
        while more && p < s.len() {
            if k == MAX_CHARS {
                return Err(format!("corrupt RLE ``counts``: count {} is longer than {MAX_CHARS} characters", cnts.len()));
            }
            let c = i64::from(s[p]) - 48;
            x |= (c & 0x1f) << (5 * k);
            more = c & 0x20 != 0;
            p += 1;
            k += 1;
            if !more && c & 0x10 != 0 {
                x |= -1i64 << (5 * k);
            }
        }
        if cnts.len() > 2 {
            x += i64::from(cnts[cnts.len() - 2]);
        }
        let run = u32::try_from(x).map_err(|_| format!("corrupt RLE ``counts``: count {} is {x}", cnts.len()))?;
        cnts.push(run);
    }
    Ok(cnts)
}

/// One label's mask for the merge: runs alternating off/on, starting off.
pub struct LabelMask<'a> {
    pub label: i32,
    pub runs: &'a [u32],
}

/// DALI's merge of the labels' masks (ascending labels, each with a non-empty mask) into runs
/// of label values, then written column-major into `out` (`h * w` values, row-major HW).
pub fn draw_labels(masks: &[LabelMask<'_>], h: usize, w: usize, out: &mut [i32]) {
    out.fill(0);
    let Some(first) = masks.first() else { return };
    let mut counts: Vec<u32> = first.runs.to_vec();
    let mut values: Vec<i32> = (0..counts.len()).map(|i| if i % 2 == 1 { first.label } else { 0 }).collect();
    let (mut next_counts, mut next_values) = (Vec::new(), Vec::new());
    for m in &masks[1..] {
        let b = m.runs;
        let (mut cnt_a, mut cnt_b) = (counts.first().copied().unwrap_or(0), b[0]);
        let mut val_a = values.first().copied().unwrap_or(0);
        let mut next_a = val_a;
        let (mut on_b, mut next_b) = (false, false);
        let (mut na, mut nb) = (1, 1);
        next_counts.clear();
        next_values.clear();
        loop {
            let c = cnt_a.min(cnt_b);
            cnt_a -= c;
            if cnt_a == 0 && na < counts.len() {
                cnt_a = counts[na];
                next_a = values[na];
                na += 1;
            }
            cnt_b -= c;
            if cnt_b == 0 && nb < b.len() {
                cnt_b = b[nb];
                nb += 1;
                next_b = !next_b;
            }
            let value = if val_a != 0 && on_b {
                // Overlap: the larger label, except in A's very last run (DALI's rule).
                if cnt_a == 0 { val_a } else { m.label }
            } else if val_a != 0 {
                val_a
            } else if on_b {
                m.label
            } else {
                0
            };
            next_counts.push(c);
            next_values.push(value);
            val_a = next_a;
            on_b = next_b;
            if cnt_a == 0 || u64::from(cnt_a) + u64::from(cnt_b) == 0 {
                break;
            }
        }
        std::mem::swap(&mut counts, &mut next_counts);
        std::mem::swap(&mut values, &mut next_values);
    }
    // Run k covers positions x * h + y, y fastest.
    let mut pos = 0usize;
    for (&c, &value) in counts.iter().zip(&values) {
        let end = (pos + c as usize).min(h * w);
        if value != 0 {
            for p in pos..end {
                let (x, y) = (p / h, p % h);
                out[y * w + x] = value;
            }
        }
        pos = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(runs: &[u32], h: usize, w: usize) -> Vec<u8> {
        let mut m = vec![0u8; h * w];
        let (mut pos, mut on) = (0usize, false);
        for &c in runs {
            for p in pos..pos + c as usize {
                if on {
                    m[(p % h) * w + p / h] = 1;
                }
            }
            pos += c as usize;
            on = !on;
        }
        m
    }

    #[test]
    fn a_square_covers_the_pixels_whose_centres_it_holds() {
        // Square from (1,1) to (3,3) in a 5x5 image: pixel centres (1.5..2.5) -> pixels 1..2.
        let runs = rle_from_polygon(&[1.0, 1.0, 3.0, 1.0, 3.0, 3.0, 1.0, 3.0], 5, 5).unwrap();
        assert_eq!(runs.iter().sum::<u32>(), 25);
        let m = decode(&runs, 5, 5);
        for y in 0..5 {
            for x in 0..5 {
                let inside = (1..3).contains(&x) && (1..3).contains(&y);
                assert_eq!(m[y * 5 + x] == 1, inside, "({x}, {y})");
            }
        }
        assert_eq!(rle_from_polygon(&[], 4, 3).unwrap(), vec![12]);
        assert!(rle_from_polygon(&[0.0, 0.0, 1e9, 0.0, 0.0, 1.0], 5, 5).is_err());
    }

    #[test]
    fn polygons_far_outside_their_image_are_refused_at_once() {
        // tests/bad/reader_records/coco-polygon-vertex-millions-of-pixels-away: a vertex at
        // y = 5555551 in an 8x6 image took seconds to rasterise (a fuzzing timeout).
        let t = std::time::Instant::now();
        let err = rle_from_polygon(&[2.0, 5555551.0, 5.0, 1.0, 2.0, 4.0, 1.0, 3.0], 6, 8).unwrap_err();
        assert!(err.contains("polygon too large") && err.contains("8x6"), "{err}");
        assert!(t.elapsed().as_millis() < 100);
        // Vertices within one image size of the image still rasterise (clipped to it).
        let runs = rle_from_polygon(&[-7.0, -5.0, 15.0, -5.0, 15.0, 11.0, -7.0, 11.0], 6, 8).unwrap();
        assert_eq!(runs, vec![0, 48]);
    }

    #[test]
    fn union_strings_and_label_merge() {
        let a = vec![2, 3, 20]; // positions 2..5 on
        let b = vec![4, 3, 18]; // 4..7 on
        let u = rle_union(&[a.clone(), b.clone()]);
        assert_eq!(u, vec![2, 5, 18]);
        // cocoapi's string form of [2, 5, 18] round-trips.
        assert_eq!(rle_from_string(b"25b0"), Ok(vec![2, 5, 18]));
        // Counts past 7 characters or outside u32 (fuzzing found these overflowing).
        for bad in [&b"PPPPPPPPPPPPPP"[..], b"PPPPPPPPPPPP@", b"111oooooooooooo7", b"@"] {
            assert!(rle_from_string(bad).is_err(), "{bad:?}");
        }
        let mut out = vec![0i32; 25];
        draw_labels(&[LabelMask { label: 1, runs: &a }, LabelMask { label: 7, runs: &b }], 5, 5, &mut out);
        let column_major: Vec<i32> = (0..25).map(|p| out[(p % 5) * 5 + p / 5]).collect();
        assert_eq!(&column_major[..8], &[0, 0, 1, 1, 7, 7, 7, 0]);
    }
}
