//! Decoders: `decoders.numpy` (`.npy` bytes to arrays), `decoders.inflate` (LZ4 blocks to
//! tensors, cpu and gpu: `inflate/`) and the image decoders: `decoders.image`, `image_crop`, `image_slice` and `image_random_crop`, on
//! the cpu (libjpeg-turbo for JPEG, image-rs codecs for PNG, BMP, TIFF, WebP, PNM) and mixed
//! (nvJPEG's hardware engine, Sluice's GPU entropy decoder and IDCT, the workers for the rest).
//!
//! The modules form layers, each importing only those below it:
//! - the operators: `image`, `image_crop`, `image_slice`, `image_random_crop` (schemas, and
//!   for the ROI decoders where their window goes), and `peek_image_shape` (headers only);
//! - `window`: the ROI decoders' cpu and mixed backends, shared by the three;
//! - `mixed/`: the mixed decoder, one batch at a time over the engine, the GPU and the workers;
//! - `common`, `random_crop_window`: arguments, headers, windows and DCT scales both
//!   backends share.

pub(crate) mod common;
mod image;
mod image_crop;
mod image_random_crop;
mod image_slice;
pub mod inflate;
mod mixed;
mod numpy;
mod peek_image_shape;
pub mod random_crop_window;
mod window;

pub use self::image::IMAGE;
pub use self::image_crop::IMAGE_CROP;
pub use self::image_random_crop::IMAGE_RANDOM_CROP;
pub use self::image_slice::IMAGE_SLICE;
pub use self::numpy::NUMPY;
pub use self::peek_image_shape::{EXPERIMENTAL_PEEK_IMAGE_SHAPE, PEEK_IMAGE_SHAPE};
