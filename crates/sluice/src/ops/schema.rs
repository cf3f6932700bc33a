//! Operator schemas: the single description of an operator's name, inputs, outputs and
//! arguments. Python builds `fn.*` and `ops.*` (names, signatures, docstrings) from these.

/// Where an operator runs. Data only flows cpu -> mixed -> gpu.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// Host in, host out.
    Cpu,
    /// Host in, device out (decoders, transfers).
    Mixed,
    /// Device in, device out.
    Gpu,
}

impl Device {
    /// Parses DALI's device strings.
    pub fn parse(s: &str) -> Option<Device> {
        match s {
            "cpu" => Some(Device::Cpu),
            "mixed" => Some(Device::Mixed),
            "gpu" => Some(Device::Gpu),
            _ => None,
        }
    }

    /// DALI's name for the device.
    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Mixed => "mixed",
            Device::Gpu => "gpu",
        }
    }

    /// Where this device's outputs live: `cpu` on the host, the rest on the GPU.
    pub fn output_on_gpu(self) -> bool {
        self != Device::Cpu
    }
}

/// The type of an argument's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgType {
    Bool,
    Int,
    Float,
    Str,
    IntList,
    FloatList,
    StrList,
    /// A `types.DALIDataType` value.
    DType,
    /// A `types.DALIImageType` value.
    ImageType,
    /// A `types.DALIInterpType` value.
    InterpType,
}

impl ArgType {
    /// Name shown in docs and error messages.
    pub fn name(self) -> &'static str {
        match self {
            ArgType::Bool => "bool",
            ArgType::Int => "int",
            ArgType::Float => "float",
            ArgType::Str => "str",
            ArgType::IntList => "list of int",
            ArgType::FloatList => "list of float",
            ArgType::StrList => "list of str",
            ArgType::DType => "DALIDataType",
            ArgType::ImageType => "DALIImageType",
            ArgType::InterpType => "DALIInterpType",
        }
    }
}

/// An argument's default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArgDefault {
    /// The user must give it.
    Required,
    /// May be left out; the operator then decides (e.g. derives it from other arguments).
    Optional,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'static str),
    IntList(&'static [i64]),
    FloatList(&'static [f64]),
    StrList(&'static [&'static str]),
}

/// One argument of an operator.
#[derive(Debug, Clone, Copy)]
pub struct ArgSchema {
    pub name: &'static str,
    pub ty: ArgType,
    pub default: ArgDefault,
    /// True when the argument may be a per-sample argument input (a CPU DataNode).
    pub per_sample: bool,
    pub doc: &'static str,
    /// Accepted for old programs, with a deprecation warning, and ignored (DALI's removed
    /// arguments, e.g. crop_mirror_normalize's `image_type`).
    pub removed: bool,
    /// Still working, but DALI warns on use with this message (coco's `masks`).
    pub deprecated: Option<&'static str>,
    /// True when an argument input may give a value per frame of a sequence input
    /// (`fn.per_frame`, an `F` layout): the executor then runs the operator frame by frame
    /// (see `exec::frames`).
    pub per_frame: bool,
}

impl ArgSchema {
    /// This argument, also accepting per-frame values (see [`ArgSchema::per_frame`]).
    pub const fn per_frame(self) -> ArgSchema {
        ArgSchema { per_frame: true, ..self }
    }
}

/// Shorthand constructor for schema tables.
pub const fn arg(name: &'static str, ty: ArgType, default: ArgDefault, doc: &'static str) -> ArgSchema {
    ArgSchema { name, ty, default, per_sample: false, doc, removed: false, deprecated: None, per_frame: false }
}

/// Like [`arg`], for arguments that also accept a per-sample argument input.
pub const fn tensor_arg(name: &'static str, ty: ArgType, default: ArgDefault, doc: &'static str) -> ArgSchema {
    ArgSchema { name, ty, default, per_sample: true, doc, removed: false, deprecated: None, per_frame: false }
}

/// An argument DALI no longer uses but still accepts, with a deprecation warning: checked
/// for its type, then ignored.
pub const fn removed_arg(name: &'static str, ty: ArgType) -> ArgSchema {
    ArgSchema { name, ty, default: ArgDefault::Optional, per_sample: false, doc: "No longer used; accepted with a deprecation warning, as in DALI.", removed: true, deprecated: None, per_frame: false }
}

/// An argument that still works but is deprecated: DALI warns with `message` when it is given.
pub const fn deprecated_arg(name: &'static str, ty: ArgType, default: ArgDefault, doc: &'static str, message: &'static str) -> ArgSchema {
    ArgSchema { name, ty, default, per_sample: false, doc, removed: false, deprecated: Some(message), per_frame: false }
}

/// Operators DALI deprecated but still runs: (schema name, the `fn` name of its
/// replacement or "", DALI's explanation or ""). Using one warns.
const DEPRECATED_OPERATORS: &[(&str, &str, &str)] = &[
    (
        "readers__Sequence",
        "",
        "This operator may be removed in future releases. fn.external_source can be used to implement custom reading patterns.",
    ),
    ("Shapes", "", "Use :meth:`nvidia.dali.pipeline.DataNode.shape` instead."),
    ("SSDRandomCrop", "random_bbox_crop", ""),
    ("FastResizeCropMirror", "resize_crop_mirror", ""),
    ("experimental__Equalize", "equalize", MOVED_OUT_OF_EXPERIMENTAL),
    ("experimental__Filter", "filter", MOVED_OUT_OF_EXPERIMENTAL),
    ("experimental__Inflate", "decoders.inflate", ""),
    (
        "experimental__PeekImageShape",
        "peek_image_shape",
        "Experimental features of the decoders have been moved to the main module, this is\njust an alias maintained for backward compatibility.",
    ),
];

/// DALI's explanation for the operators that left `experimental`.
const MOVED_OUT_OF_EXPERIMENTAL: &str =
    "This operator was moved out from the experimental phase, and is now a regular DALI operator. This is just a deprecated alias kept for backward compatibility.";

/// Arguments every operator accepts (DALI's common arguments).
pub const COMMON_ARGS: &[ArgSchema] = &[
    arg("seed", ArgType::Int, ArgDefault::Int(-1), "Random seed; -1 derives one from the pipeline seed and the operator's position."),
    arg("preserve", ArgType::Bool, ArgDefault::Bool(false), "Keep the operator even when none of its outputs is used."),
    arg("on_error", ArgType::Str, ArgDefault::Optional, "Sluice's: \"raise\", \"skip\" or \"replace\" for a sample this operator (or, on a reader, anything reading from it) cannot read or decode; unset: the pipeline's `on_error`."),
    arg("bytes_per_sample_hint", ArgType::IntList, ArgDefault::IntList(&[0]), "Accepted for DALI compatibility; Sluice sizes buffers from the data."),
];

/// The full description of an operator.
#[derive(Debug, Clone, Copy)]
pub struct OpSchema {
    /// DALI's schema name: submodules separated by `__`, e.g. `decoders__Image`.
    pub name: &'static str,
    /// One paragraph for `help(fn.x)`.
    pub doc: &'static str,
    /// Devices with a backend.
    pub devices: &'static [Device],
    pub min_inputs: usize,
    pub max_inputs: usize,
    pub num_outputs: usize,
    /// Positional inputs that the gpu backend reads on the host, as DALI's CPU inputs of GPU
    /// operators (a shape, indices): they come from cpu operators, everything else from GPU
    /// ones. The backend finds them in `GpuWorkspace::cpu_inputs`, in this order.
    pub host_inputs: &'static [usize],
    /// Groups of arguments (own arguments first, then shared groups such as reader args).
    pub args: &'static [&'static [ArgSchema]],
    /// Old argument names still accepted: (old, new).
    pub arg_aliases: &'static [(&'static str, &'static str)],
    /// Legacy `ops.*` class names that map to this operator, with the device they imply.
    pub legacy_names: &'static [(&'static str, Option<Device>)],
    /// True for readers: they produce batches with no inputs and have an epoch.
    pub is_reader: bool,
    /// True when outputs depend on the random seed.
    pub is_random: bool,
}

impl OpSchema {
    /// The name users write: `decoders.image` for `decoders__Image`.
    pub fn fn_name(&self) -> String {
        let mut parts: Vec<String> = self.name.split("__").map(str::to_string).collect();
        let last = parts.pop().unwrap_or_default();
        parts.push(snake_case(&last));
        parts.join(".")
    }

    /// Looks an argument up by name (aliases resolved), including the common arguments.
    pub fn find_arg(&self, name: &str) -> Option<&'static ArgSchema> {
        let name = self.arg_aliases.iter().find(|(old, _)| *old == name).map_or(name, |(_, new)| new);
        self.all_args().find(|a| a.name == name)
    }

    /// The deprecation warnings DALI gives for using this operator (if DALI deprecated it)
    /// with these argument names: old aliases and arguments no longer used (accepted, ignored).
    pub fn deprecations<'a>(&self, given: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let operator = DEPRECATED_OPERATORS
            .iter()
            .find(|(name, ..)| *name == self.name)
            .map(|(_, instead, why)| {
                // DALI's wording (`_handle_op_deprecation`): the replacement, then the explanation.
                let mut m = format!("WARNING: `nvidia.dali.fn.{}` is now deprecated.", self.fn_name());
                if !instead.is_empty() {
                    m += &format!(" Use `nvidia.dali.fn.{instead}` instead.");
                }
                if !why.is_empty() {
                    m += &format!("\n{why}");
                }
                m
            });
        operator
            .into_iter()
            .chain(given.into_iter()
            .filter_map(|name| {
                if let Some((old, new)) = self.arg_aliases.iter().find(|(old, _)| *old == name) {
                    return Some(format!("The argument `{old}` is a deprecated alias for `{new}`. Use `{new}` instead."));
                }
                let a = self.find_arg(name)?;
                if let Some(message) = a.deprecated {
                    return Some(message.to_string());
                }
                a.removed.then(|| format!("The argument `{}` is no longer used and will be removed in a future release.", a.name))
            }))
            .collect()
    }

    /// Every argument, own and common.
    pub fn all_args(&self) -> impl Iterator<Item = &'static ArgSchema> + '_ {
        self.args.iter().flat_map(|g| g.iter()).chain(COMMON_ARGS.iter())
    }
}

/// `CropMirrorNormalize` -> `crop_mirror_normalize`, keeping acronym runs together.
pub fn snake_case(camel: &str) -> String {
    let chars: Vec<char> = camel.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev_lower = i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if i > 0 && (prev_lower || (next_lower && chars[i - 1].is_uppercase())) {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    // DALI's exceptions to the rule: a few names are words of their own.
    for (split, word) in [("b_box", "bbox"), ("mx_net", "mxnet"), ("tf_record", "tfrecord")] {
        out = out.replace(split, word);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_matches_dali_function_names() {
        assert_eq!(snake_case("CropMirrorNormalize"), "crop_mirror_normalize");
        assert_eq!(snake_case("Image"), "image");
        assert_eq!(snake_case("CoinFlip"), "coin_flip");
        assert_eq!(snake_case("ImageRandomCrop"), "image_random_crop");
        assert_eq!(snake_case("HSV"), "hsv");
        assert_eq!(snake_case("MFCC"), "mfcc");
        assert_eq!(snake_case("TFRecord"), "tfrecord");
        assert_eq!(snake_case("TFRecordReader"), "tfrecord_reader");
        assert_eq!(snake_case("MXNetReader"), "mxnet_reader");
        assert_eq!(snake_case("BBoxPaste"), "bbox_paste");
        assert_eq!(snake_case("SSDRandomCrop"), "ssd_random_crop");
    }

    #[test]
    fn deprecated_operators_warn_in_dali_words() {
        let ssd = crate::ops::bbox::SSD_RANDOM_CROP.schema.deprecations([]);
        assert_eq!(ssd, ["WARNING: `nvidia.dali.fn.ssd_random_crop` is now deprecated. Use `nvidia.dali.fn.random_bbox_crop` instead."]);
        let fast = crate::ops::resize::FAST_RESIZE_CROP_MIRROR.schema.deprecations([]);
        assert_eq!(fast, ["WARNING: `nvidia.dali.fn.fast_resize_crop_mirror` is now deprecated. Use `nvidia.dali.fn.resize_crop_mirror` instead."]);
        let shapes = crate::ops::shapes::SHAPES.schema.deprecations([]);
        assert_eq!(shapes, ["WARNING: `nvidia.dali.fn.shapes` is now deprecated.\nUse :meth:`nvidia.dali.pipeline.DataNode.shape` instead."]);
    }
}
