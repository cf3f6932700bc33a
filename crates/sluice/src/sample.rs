//! The built-in sample dataset: procedurally drawn, JPEG-encoded images in one folder per
//! class, so the demo and the tests run on any machine with nothing to download.

use std::path::Path;

use crate::error::{Error, Result};
use crate::rng::SampleRng;

/// Writes `count` JPEGs into `root/class_XXX/NNNNNN.jpg` (`classes` folders) and returns the
/// total bytes written. Each image depends only on (seed, index): the same call makes the
/// same files. Sizes and aspect ratios vary like ImageNet's (short side 256-480).
pub fn write_sample_dataset(root: &Path, count: usize, classes: usize, seed: u64) -> Result<u64> {
    let classes = classes.max(1);
    let mut total = 0u64;
    for i in 0..count {
        let class = i % classes;
        let dir = root.join(format!("class_{class:03}"));
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("sample dataset", dir.display(), e))?;
        let mut rng = SampleRng::new(seed, class as u64, 0, i as u64);
        let short = 256 + rng.below(225) as usize;
        let aspect = rng.uniform(0.75, 1.5);
        let (w, h) = if rng.bernoulli(0.7) { ((short as f64 * aspect) as usize, short) } else { (short, (short as f64 * aspect) as usize) };
        let pixels = draw(&mut rng, class, w, h);
        let jpeg = sluice_codecs::encode_jpeg(&pixels, w, h, 3, 90).map_err(|e| Error::Unsupported(e.to_string()))?;
        let path = dir.join(format!("{i:06}.jpg"));
        std::fs::write(&path, &jpeg).map_err(|e| Error::io("sample dataset", path.display(), e))?;
        total += jpeg.len() as u64;
    }
    Ok(total)
}

/// One picture: a class-specific pattern (rings, stripes, checks, blobs) in a class hue over
/// a gradient, with sensor-like noise so it compresses like a photo.
fn draw(rng: &mut SampleRng, class: usize, w: usize, h: usize) -> Vec<u8> {
    let hue = (class as f64 * 0.618_034).fract();
    let base = hsv(hue, 0.65, 0.95);
    let back = hsv((hue + 0.5).fract(), 0.35, 0.35);
    let (cx, cy) = (rng.uniform(0.3, 0.7) * w as f64, rng.uniform(0.3, 0.7) * h as f64);
    let scale = rng.uniform(12.0, 40.0);
    let angle = rng.uniform(0.0, std::f64::consts::PI);
    let (sa, ca) = angle.sin_cos();
    let pattern = class % 4;
    let mut px = vec![0u8; w * h * 3];
    for y in 0..h {
        for x in 0..w {
            let (dx, dy) = (x as f64 - cx, y as f64 - cy);
            let u = (dx * ca + dy * sa) / scale;
            let v = (-dx * sa + dy * ca) / scale;
            let t = match pattern {
                0 => ((dx * dx + dy * dy).sqrt() / scale).sin(),
                1 => (u * 2.0).sin(),
                2 => ((u.floor() + v.floor()) as i64 & 1) as f64 * 2.0 - 1.0,
                _ => (u.sin() * v.cos() * 2.0).tanh(),
            };
            let m = 0.5 + 0.5 * t;
            let g = y as f64 / h as f64;
            let k = (y * w + x) * 3;
            for c in 0..3 {
                let bg = back[c] * (0.6 + 0.4 * g);
                let val = bg + (base[c] - bg) * m;
                let noise = (rng.next_u32() & 15) as f64 - 7.5;
                px[k + c] = (val * 255.0 + noise).clamp(0.0, 255.0) as u8;
            }
        }
    }
    px
}

fn hsv(h: f64, s: f64, v: f64) -> [f64; 3] {
    let i = (h * 6.0).floor();
    let f = h * 6.0 - i;
    let (p, q, t) = (v * (1.0 - s), v * (1.0 - f * s), v * (1.0 - (1.0 - f) * s));
    match i as i64 % 6 {
        0 => [v, t, p],
        1 => [q, v, p],
        2 => [p, v, t],
        3 => [p, q, v],
        4 => [t, p, v],
        _ => [v, p, q],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_dataset_is_deterministic_decodable_and_labelled_by_folder() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let bytes = write_sample_dataset(a.path(), 6, 3, 7).unwrap();
        write_sample_dataset(b.path(), 6, 3, 7).unwrap();
        assert!(bytes > 6 * 5_000);
        for i in 0..6 {
            let rel = format!("class_{:03}/{i:06}.jpg", i % 3);
            let x = std::fs::read(a.path().join(&rel)).unwrap();
            assert_eq!(x, std::fs::read(b.path().join(&rel)).unwrap(), "{rel} differs between runs");
            let (_, (h, w, c)) = sluice_codecs::decode(&x, &Default::default()).unwrap();
            assert!(h.min(w) >= 256 && c == 3);
        }
    }
}
