//! Per-image CPU cost of the two ways a window can leave the CPU: libjpeg-turbo decoding it
//! to RGB (`decode_into` with a ROI) or only entropy-decoding the blocks it needs
//! (`read_coefficients`, the GPU finishing the rest).
//!
//!     coef_speed [--threads N] [--window full|crop] FILE...
//!
//! `crop` uses a centred window of half the area, like an average random-resized crop.

use std::time::Instant;

use sluice_codecs::*;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut crop = false;
    let mut threads = 1usize;
    if args.first().map(String::as_str) == Some("--threads") {
        threads = args[1].parse().expect("thread count");
        args.drain(..2);
    }
    if args.first().map(String::as_str) == Some("--window") {
        crop = args[1] == "crop";
        args.drain(..2);
    }
    let files: Vec<Vec<u8>> = args.iter().map(|f| std::fs::read(f).expect("read input")).collect();
    let infos: Vec<ImageInfo> = files.iter().map(|b| read_info(b).expect("header")).collect();
    let windows: Vec<Roi> = infos
        .iter()
        .map(|i| {
            if !crop {
                return Roi { x: 0, y: 0, width: i.width, height: i.height };
            }
            let (w, h) = ((i.width as f64 * 0.707) as usize, (i.height as f64 * 0.707) as usize);
            Roi { x: (i.width - w) / 2, y: (i.height - h) / 2, width: w.max(1), height: h.max(1) }
        })
        .collect();
    let n = files.len();
    let chunk = n.div_ceil(threads);
    // Each thread decodes its own slice of the files, all at once, like a loader's workers.
    let timed = |coefficients: bool| -> (f64, usize) {
        let t = Instant::now();
        let read: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|k| {
                    let (files, infos, windows) = (&files, &infos, &windows);
                    s.spawn(move || {
                        let (mut out, mut coefs, mut quant) = (Vec::new(), Vec::new(), [[0u16; 64]; 3]);
                        let mut read = 0;
                        for i in (k * chunk).min(n)..((k + 1) * chunk).min(n) {
                            let (b, info, r) = (&files[i], &infos[i], windows[i]);
                            if coefficients {
                                if let Some(l) = coefficient_layout(b, info, r) {
                                    coefs.resize(l.coefficients, 0);
                                    read += read_coefficients(b, info, &l, &mut coefs, &mut quant) as usize;
                                }
                            } else {
                                out.resize(r.width * r.height * 3, 0);
                                let p = DecodeParams { roi: Some(r), ..DecodeParams::default() };
                                decode_into(b, info, &p, &mut out).expect("decode");
                            }
                        }
                        read
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        (t.elapsed().as_secs_f64(), read)
    };
    for round in 0..3 {
        let (pixels, _) = timed(false);
        let (coef, read) = timed(true);
        println!(
            "round {round}, {threads} threads: decode to RGB {:.0} img/s, coefficients only {:.0} img/s ({read} of {n} read), ratio {:.2}x",
            n as f64 / pixels,
            n as f64 / coef,
            pixels / coef
        );
    }
}
