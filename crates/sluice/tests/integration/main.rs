//! Engine-level tests of the `sluice` crate, one module per operator or engine part.
//!
//! One test binary, not one per file: each binary links the whole crate with the release
//! profile's thin LTO, which cost minutes of CI per file.

mod common;

mod arithmetic;
mod cast;
mod crop;
mod decoders_crop;
mod executor;
mod file_reader;
mod flip;
mod fusion;
mod normalize;
mod pad;
mod random_more;
mod random_resized_crop;
mod resize;
mod rotate;
mod slice;
mod transpose;
