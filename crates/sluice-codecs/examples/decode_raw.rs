//! Decodes images to raw HWC u8 files, for cross-checking against other decoders by hand.
//!
//!     decode_raw [--color rgb|bgr|gray|ycbcr|any] OUT_DIR FILE...
//!
//! Writes OUT_DIR/<index>.raw per input and prints "<index> <h> <w> <c> <path>" (or
//! "<index> ERR <message> <path>") per line on stdout.

use sluice_codecs::{decode, ColorSpace, DecodeParams};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut color = ColorSpace::Rgb;
    if args.first().map(String::as_str) == Some("--color") {
        color = match args[1].as_str() {
            "rgb" => ColorSpace::Rgb,
            "bgr" => ColorSpace::Bgr,
            "gray" => ColorSpace::Gray,
            "ycbcr" => ColorSpace::YCbCr,
            "any" => ColorSpace::AnyData,
            other => panic!("unknown colour {other}"),
        };
        args.drain(..2);
    }
    let out_dir = std::path::PathBuf::from(&args[0]);
    let p = DecodeParams { color, ..DecodeParams::default() };
    for (i, f) in args[1..].iter().enumerate() {
        let bytes = std::fs::read(f).expect("read input");
        match decode(&bytes, &p) {
            Ok((px, (h, w, c))) => {
                std::fs::write(out_dir.join(format!("{i}.raw")), px).expect("write output");
                println!("{i} {h} {w} {c} {f}");
            }
            Err(e) => println!("{i} ERR {e} {f}"),
        }
    }
}
