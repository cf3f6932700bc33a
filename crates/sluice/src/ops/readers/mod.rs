//! Readers: operators with no inputs that produce an endless stream of batches from a
//! dataset. The order of samples (shards, epochs, padding, shuffling) is format-independent
//! and lives in [`loader`]; the loader thread, read-ahead and stop in [`core`]; each format
//! only lists its samples and reads a batch of them.

pub mod core;
mod caffe;
mod coco;
mod file;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod list_shuffle;
pub mod loader;
mod lmdb;
pub(crate) mod protobuf;
mod mxnet;
pub(crate) mod numpy;
mod sequence;
pub mod skip;
pub mod tfrecord;
pub mod webdataset;

pub use caffe::{CAFFE, CAFFE2};
pub use coco::COCO;
pub use file::FILE;
pub use mxnet::MXNET;
pub use numpy::NUMPY;
pub use sequence::SEQUENCE;
pub use tfrecord::TFRECORD;
pub use webdataset::WEBDATASET;

use crate::ops::{arg, ArgDefault as D, ArgSchema, ArgType as T};

/// C's `(int)` of a double on x86, as the parsers DALI reads with compute it (cocoapi's
/// polygons, Caffe2's float label indices): truncation toward zero, and `INT_MIN` for NaN or
/// out of range (Rust's `as` would saturate and map NaN to 0).
pub(crate) fn c_int(v: f64) -> i32 {
    if v.is_nan() || !(-2147483648.0..2147483648.0).contains(&v) {
        i32::MIN
    } else {
        v as i32
    }
}

/// How many outputs a reader whose count depends on its arguments has (`None`: the schema's).
pub fn num_outputs(schema: &str, args: &crate::ops::Args) -> Option<usize> {
    match schema {
        "readers__COCO" | "COCOReader" => Some(coco::num_outputs(args)),
        "readers__Caffe" | "CaffeReader" => Some(caffe::caffe_num_outputs(args)),
        "readers__Caffe2" | "Caffe2Reader" => Some(caffe::caffe2_num_outputs(args)),
        _ => None,
    }
}

/// `shuffle_after_epoch`, for the readers that have it (DALI's file-list readers).
pub const SHUFFLE_AFTER_EPOCH_ARGS: &[ArgSchema] = &[
    arg("shuffle_after_epoch", T::Bool, D::Bool(false), "Shuffle the whole dataset before every epoch (the first included). Not with `random_shuffle` or `stick_to_shard`."),
    arg("shuffle_after_epoch_seed", T::Int, D::Optional, "Seed of the `shuffle_after_epoch` permutations; a fixed default keeps every shard and run in step."),
];

/// Arguments every reader accepts (DALI's common reader arguments, same names and defaults).
pub const READER_ARGS: &[ArgSchema] = &[
    arg("shard_id", T::Int, D::Int(0), "Index of the shard to read."),
    arg("num_shards", T::Int, D::Int(1), "Partitions the data into the specified number of parts (shards)."),
    arg("random_shuffle", T::Bool, D::Bool(false), "Shuffle the data with a buffer of `initial_fill` samples, picking each output at random from it."),
    arg("global_shuffle", T::Bool, D::Bool(false), "Sluice's: read every epoch in a fresh permutation of the whole dataset, keyed by the epoch and the reader's own `seed` (not the pipeline's, so ranks seeded differently still agree; a fixed default without one); each shard reads its slice, so the shards together read the same order whatever their number. Not with `random_shuffle`, `shuffle_after_epoch` or `stick_to_shard`."),
    arg("initial_fill", T::Int, D::Int(1024), "Size of the buffer used for `random_shuffle`; ignored otherwise."),
    arg("stick_to_shard", T::Bool, D::Bool(false), "Keep reading the same shard instead of moving to the next one after each epoch."),
    arg("pad_last_batch", T::Bool, D::Bool(false), "Pad every shard's epoch to whole batches of the largest shard by repeating the last sample."),
    arg("read_ahead", T::Bool, D::Bool(false), "Accepted for DALI compatibility; Sluice always reads ahead on a loader thread."),
    arg("dont_use_mmap", T::Bool, D::Bool(false), "Accepted for DALI compatibility; Sluice reads files with plain I/O."),
    arg("prefetch_queue_depth", T::Int, D::Int(1), "Batches the loader thread prepares ahead of the pipeline."),
    arg("lazy_init", T::Bool, D::Bool(false), "List the data set (and open its files) when the reader is first used, not when the pipeline is built."),
    arg("skip_cached_images", T::Bool, D::Bool(false), "Accepted for DALI compatibility; Sluice has no decoder cache."),
    arg("tensor_init_bytes", T::Int, D::Int(1048576), "Accepted for DALI compatibility; buffers are sized from the data."),
    arg("storage_options", T::StrList, D::Optional, "Sluice's: settings of the object store beyond the environment, a dictionary (e.g. {\"endpoint\": \"http://127.0.0.1:9000\", \"region\": \"us-east-1\", \"access_key_id\": ..., \"allow_http\": \"true\"}; the keys object_store knows for the scheme)."),
    arg("cache_dir", T::Str, D::Optional, "Sluice's: a local folder keeping what the reader fetched from object storage (whole objects and ranges), read from there in later epochs and by other processes sharing the folder; default: the `SLUICE_STORAGE_CACHE_DIR` variable, else no cache. Objects are assumed unchanged once written."),
    arg("cache_dir_limit", T::Int, D::Optional, "Sluice's: most bytes `cache_dir` holds (least recently used entries go first); default: the `SLUICE_STORAGE_CACHE_LIMIT` variable, else half the free space of its file system when the reader is built."),
    arg("_omit_padding", T::Bool, D::Bool(false), "Set by a framework iterator that cuts every epoch's last batch to its real samples (PARTIAL): the epoch's last batch then holds only its real samples, and the pipeline does no work on padding nobody sees."),
];
