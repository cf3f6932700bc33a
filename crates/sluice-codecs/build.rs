//! Builds csrc/coefficients.c (entropy decoding to DCT coefficients through libjpeg's own
//! API) against the libjpeg-turbo that turbojpeg-sys vendors and links.

fn main() {
    println!("cargo:rerun-if-changed=csrc/coefficients.c");
    // turbojpeg-sys (`links = "turbojpeg"`) exports its install's include folder, which holds
    // jpeglib.h, jconfig.h and jmorecfg.h.
    let include = std::env::var("DEP_TURBOJPEG_INCLUDE").expect("turbojpeg-sys exports its include path");
    let mut build = cc::Build::new();
    for dir in include.split(',') {
        build.include(dir);
    }
    build.file("csrc/coefficients.c").warnings(true).compile("sluice_coefficients");
}
