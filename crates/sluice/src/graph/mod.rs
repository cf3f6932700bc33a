//! The pipeline graph: operator specs as the user wrote them, checked (known operators,
//! arguments, stage order cpu -> mixed -> gpu, argument inputs on the CPU) and pruned of
//! every operator that no output needs.

mod dot;

pub use dot::to_dot;

use crate::error::{Error, Result};
use crate::ops::{self, Args, ArgValue, Device, OpDef};

/// Output `output` of operator `op` (an index into [`PipelineSpec::ops`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Edge {
    pub op: usize,
    pub output: usize,
}

/// One operator as the user wrote it.
#[derive(Debug, Clone)]
pub struct OpSpec {
    /// Schema name (`decoders__Image`) or legacy class name (`ImageDecoder`).
    pub schema: String,
    /// Requested device as the user wrote it (`"cpu"`, `"mixed"`, `"gpu"`); `None` means
    /// "where the inputs are" (or what a legacy class name implies).
    pub device: Option<String>,
    /// Instance name (`name=`), unique in the pipeline.
    pub name: String,
    pub inputs: Vec<Edge>,
    pub arg_inputs: Vec<(String, Edge)>,
    pub args: Vec<(String, ArgValue)>,
}

/// A whole pipeline: its parameters, operators in creation order, and outputs.
#[derive(Debug, Clone)]
pub struct PipelineSpec {
    pub batch_size: usize,
    pub num_threads: usize,
    /// `None` runs CPU-only.
    pub device_id: Option<i32>,
    /// Pipeline seed; operators derive theirs from it.
    pub seed: u64,
    /// Batches prepared ahead of the consumer.
    pub prefetch_queue_depth: usize,
    /// Run iterations on a background thread (ahead of `run()` calls).
    pub exec_async: bool,
    /// Overlap stages of consecutive iterations.
    pub exec_pipelined: bool,
    /// DALI's dynamic executor (its default since 2.0 for asynchronous pipelined
    /// pipelines): GPU data may come back to the CPU through `.cpu()`. Sluice's one executor
    /// runs the graph in topological order either way; this flag only decides whether such
    /// a transition is allowed, as in DALI.
    pub exec_dynamic: bool,
    /// What to do with a sample an operator cannot read or decode (`on_error`,
    /// `max_bad_samples`).
    pub errors: crate::exec::ErrorPolicy,
    pub ops: Vec<OpSpec>,
    pub outputs: Vec<Edge>,
}

/// A checked operator, ready to be instantiated.
#[derive(Debug, Clone)]
pub struct Node {
    /// Index in the original spec (kept for errors and DOT).
    pub spec_index: usize,
    pub def: &'static OpDef,
    pub device: Device,
    pub name: String,
    /// Inputs as indices into [`Graph::nodes`].
    pub inputs: Vec<Edge>,
    pub arg_inputs: Vec<(String, Edge)>,
    pub args: Args,
    /// For a node that runs several of the user's operators as one pass: those operators,
    /// in data order (their own edges are those of the unfused graph; the node's `inputs`
    /// and `arg_inputs` are what runs). `def` and `args` are then the last one's, whose
    /// output the node produces. Empty for an ordinary node.
    pub fused: Vec<Node>,
}

impl Node {
    /// The name users know the operator by (`resize + crop_mirror_normalize` when fused).
    pub fn display_name(&self) -> String {
        if self.fused.is_empty() {
            self.def.schema.fn_name()
        } else {
            self.fused.iter().map(|n| n.def.schema.fn_name()).collect::<Vec<_>>().join(" + ")
        }
    }
}

/// A checked and pruned graph in execution order.
#[derive(Debug, Clone)]
pub struct Graph {
    pub nodes: Vec<Node>,
    /// Pipeline outputs as edges into `nodes`.
    pub outputs: Vec<Edge>,
}

impl std::fmt::Debug for OpDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.schema.name)
    }
}

/// What the engine decides about one operator as the user wrote it: which operator it is
/// (legacy names resolved), where it runs, and its checked arguments.
#[derive(Debug, Clone)]
pub struct CheckedOp {
    pub def: &'static OpDef,
    pub device: Device,
    pub args: Args,
    /// The argument inputs' names as the schema spells them (aliases resolved), in the
    /// spec's order.
    pub arg_input_names: Vec<&'static str>,
    /// Positional inputs given (some operators have one more output per optional input).
    pub num_inputs: usize,
}

/// List arguments whose length is the operator's number of outputs.
const OUTPUT_LISTS: &[&str] = &["_feature_names", "ext", "element_map"];

impl CheckedOp {
    /// How many outputs this instance has: its `num_outputs` argument for operators that
    /// take one (python_function), the count operators with optional outputs compute from their
    /// arguments or inputs (`ops::num_outputs`: coco, caffe2, random_object_bbox,
    /// random_bbox_crop's labels), one per entry of the list argument operators have one
    /// output per (tfrecord's `_feature_names`, webdataset's `ext`, element_extract's
    /// `element_map`), else the schema's count.
    pub fn num_outputs(&self) -> usize {
        if self.def.schema.find_arg("num_outputs").is_some() {
            return self.args.int("num_outputs").max(0) as usize;
        }
        if let Some(n) = crate::ops::num_outputs(self.def.schema.name, &self.args, self.num_inputs) {
            return n;
        }
        match OUTPUT_LISTS.iter().find(|name| self.def.schema.find_arg(name).is_some()) {
            Some(name) => match self.args.value(name) {
                Some(crate::ops::ArgValue::IntList(l)) => l.len(),
                Some(_) => self.args.strs(name).len(),
                None => self.def.schema.num_outputs,
            },
            None => self.def.schema.num_outputs,
        }
    }

    /// Where the outputs live: `cpu` operators on the host, the rest on the GPU.
    pub fn outputs_on_gpu(&self) -> bool {
        self.device.output_on_gpu()
    }
}

/// Checks one operator: known name, device and backend, input count, stage order (data
/// flows cpu -> mixed -> gpu; argument inputs live on the host), argument names, types and
/// required arguments. `inputs_on_gpu` / `arg_inputs_on_gpu` say where each input's
/// producer put its output. `exec_dynamic`: GPU data may come back to the CPU, into the
/// operators [`takes_gpu_data_on_cpu`] names (the executor downloads it). The Python front
/// end calls this as each operator is created (so errors point at the user's line, as
/// DALI's do) and [`Graph::build`] calls it again for the whole pipeline: one home for
/// these rules.
pub fn check_op(op: &OpSpec, inputs_on_gpu: &[bool], arg_inputs_on_gpu: &[bool], exec_dynamic: bool) -> Result<CheckedOp> {
    let (def, legacy_device) = ops::lookup(&op.schema).ok_or_else(|| ops::unknown_operator(&op.schema))?;
    let schema = &def.schema;
    let display = schema.fn_name();
    let device = match &op.device {
        Some(d) => Device::parse(d).ok_or_else(|| Error::Graph(format!("{display}: device must be 'cpu', 'mixed' or 'gpu', got '{d}'")))?,
        None => legacy_device.unwrap_or(if inputs_on_gpu.iter().any(|&g| g) { Device::Gpu } else { Device::Cpu }),
    };
    if !def.has_backend(device) {
        let have: Vec<&str> = schema.devices.iter().map(|d| d.name()).collect();
        return Err(Error::Graph(format!("{display}: no '{}' backend; available: {}", device.name(), have.join(", "))));
    }
    if inputs_on_gpu.len() < schema.min_inputs || inputs_on_gpu.len() > schema.max_inputs {
        let want = if schema.min_inputs == schema.max_inputs {
            schema.min_inputs.to_string()
        } else {
            format!("{} to {}", schema.min_inputs, schema.max_inputs)
        };
        return Err(Error::Graph(format!("{display}: expects {want} input(s), got {}", inputs_on_gpu.len())));
    }
    let gpu_to_cpu = device == Device::Cpu && takes_gpu_data_on_cpu(def);
    for (k, &on_gpu) in inputs_on_gpu.iter().enumerate() {
        if on_gpu && gpu_to_cpu && !exec_dynamic {
            return Err(Error::Graph(format!(
                "{display}: this pipeline doesn't support transition from GPU to CPU (input {k} is on the GPU). \
                 GPU->CPU transitions need the dynamic executor: exec_dynamic=True, the default unless \
                 exec_async or exec_pipelined is False or prefetch_queue_depth is split per stage"
            )));
        }
        let ok = match device {
            Device::Cpu => !on_gpu || gpu_to_cpu,
            Device::Mixed => !on_gpu,
            Device::Gpu => on_gpu != schema.host_inputs.contains(&k) || (on_gpu && ops::gpu_or_host_inputs(def).contains(&k)),
        };
        if !ok {
            let hint = if device == Device::Gpu && schema.host_inputs.contains(&k) {
                "this input is read on the host: give it a cpu operator's output (`.cpu()` brings GPU data back)"
            } else if device == Device::Gpu {
                "move it to the GPU first with `.gpu()` or run this operator on the cpu"
            } else {
                "bring it back with `.cpu()` first, or run this operator with device='gpu'"
            };
            return Err(Error::Graph(format!(
                "{display} (device='{}'): input {k} is on the {}; {hint}",
                device.name(),
                if on_gpu { "GPU" } else { "CPU" }
            )));
        }
    }
    for ((name, _), &on_gpu) in op.arg_inputs.iter().zip(arg_inputs_on_gpu) {
        if on_gpu {
            return Err(Error::Graph(format!("{display}: argument input '{name}' must be a CPU DataNode; it is on the GPU (`.cpu()` brings it back)")));
        }
    }
    let per_sample: Vec<String> = op.arg_inputs.iter().map(|(k, _)| k.clone()).collect();
    let args = Args::check(schema, &display, op.args.clone(), &per_sample)?;
    let arg_input_names = per_sample.iter().map(|k| schema.find_arg(k).expect("checked by Args::check").name).collect();
    Ok(CheckedOp { def, device, args, arg_input_names, num_inputs: inputs_on_gpu.len() })
}

/// The cpu operators that take GPU data in a dynamic pipeline: `MakeContiguous` (what
/// `DataNode.cpu()` records) and the two that read only metadata (`shapes`, `get_property`:
/// DALI takes them on the cpu for GPU data too). The executor downloads their GPU inputs.
/// Any other cpu operator takes GPU data through `.cpu()`, as in DALI.
pub fn takes_gpu_data_on_cpu(def: &OpDef) -> bool {
    def.is(&ops::transfer::MAKE_CONTIGUOUS) || def.is(&ops::shapes::SHAPES) || def.is(&ops::get_property::GET_PROPERTY)
}

/// A pipeline's own parameters as the user gives them, DALI's way: `None` or -1 asks for
/// the default (`batch_size`: none, for pipelines fed only by their inputs; `num_threads`:
/// every core; `device_id` -1: GPU 0 if there is one, `None`: CPU only; `seed`: random).
/// [`ParamsGiven::resolve`] is the one place they are checked; [`PipelineSpec::check_params`]
/// runs the same checks on resolved values.
#[derive(Debug, Clone, Copy)]
pub struct ParamsGiven {
    pub batch_size: Option<i64>,
    pub num_threads: Option<i64>,
    pub device_id: Option<i64>,
    pub seed: Option<i64>,
    pub prefetch_queue_depth: i64,
}

/// Resolved pipeline parameters (see [`ParamsGiven`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    pub batch_size: Option<usize>,
    pub num_threads: usize,
    pub device_id: Option<i32>,
    pub seed: u64,
    pub prefetch_queue_depth: usize,
}

fn positive(what: &str, v: i64) -> Result<usize> {
    usize::try_from(v).ok().filter(|&n| n >= 1).ok_or_else(|| Error::Graph(format!("{what} must be a positive integer, got {v}")))
}

fn queue_depth(v: i64) -> Result<usize> {
    usize::try_from(v).ok().filter(|&n| n >= 1).ok_or_else(|| Error::Graph(format!("prefetch_queue_depth must be at least 1, got {v}")))
}

fn gpu_index(v: i64) -> Result<i32> {
    i32::try_from(v).ok().filter(|&d| d >= 0).ok_or_else(|| Error::Graph(format!("device_id must be None (CPU only) or a GPU index, got {v}")))
}

impl ParamsGiven {
    pub fn resolve(&self) -> Result<Params> {
        Ok(Params {
            batch_size: self.batch_size.filter(|&b| b != -1).map(|b| positive("batch_size", b)).transpose()?,
            num_threads: match self.num_threads {
                None | Some(-1) => std::thread::available_parallelism().map_or(1, |n| n.get()),
                Some(n) => positive("num_threads", n)?,
            },
            device_id: match self.device_id {
                Some(-1) => (crate::gpu_device_count() > 0).then_some(0),
                d => d.map(gpu_index).transpose()?,
            },
            seed: match self.seed {
                None | Some(-1) => random_seed(),
                Some(s) => s as u64,
            },
            prefetch_queue_depth: queue_depth(self.prefetch_queue_depth)?,
        })
    }
}

/// A seed nobody chose: from the OS's randomness via std's hasher keys, kept to 63 bits as
/// DALI's seeds are non-negative.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish() >> 1
}

impl PipelineSpec {
    /// The pipeline's own parameters, checked once for the engine (as [`ParamsGiven::resolve`]
    /// checks them: a spec built in Rust gets the same messages).
    pub fn check_params(&self) -> Result<()> {
        positive("batch_size", self.batch_size as i64)?;
        positive("num_threads", self.num_threads as i64)?;
        queue_depth(self.prefetch_queue_depth as i64)?;
        self.device_id.map(|d| gpu_index(d.into())).transpose()?;
        Ok(())
    }
}

impl Graph {
    /// Checks `spec` and keeps only what the outputs (and `preserve=True` operators) need.
    pub fn build(spec: &PipelineSpec) -> Result<Graph> {
        spec.check_params()?;
        if spec.outputs.is_empty() {
            return Err(Error::Graph("the pipeline has no outputs: call set_outputs() or return DataNodes from the pipeline function".into()));
        }
        let n = spec.ops.len();
        let mut checked: Vec<CheckedOp> = Vec::with_capacity(n);
        for (i, op) in spec.ops.iter().enumerate() {
            for e in op.inputs.iter().chain(op.arg_inputs.iter().map(|(_, e)| e)) {
                if e.op >= i {
                    return Err(Error::Graph(format!("{}: input refers to an operator defined later", op.schema)));
                }
                if e.output >= checked[e.op].num_outputs() {
                    return Err(Error::Graph(format!("{}: input refers to a missing output", op.schema)));
                }
            }
            let on_gpu = |e: &Edge| checked[e.op].outputs_on_gpu();
            let inputs_on_gpu: Vec<bool> = op.inputs.iter().map(on_gpu).collect();
            let arg_inputs_on_gpu: Vec<bool> = op.arg_inputs.iter().map(|(_, e)| on_gpu(e)).collect();
            let c = check_op(op, &inputs_on_gpu, &arg_inputs_on_gpu, spec.exec_dynamic)?;
            if c.device != Device::Cpu && spec.device_id.is_none() {
                return Err(Error::Graph(format!(
                    "{} runs on the GPU (device='{}'{}), but the pipeline is CPU-only (device_id=None); pass device_id=0 to use a GPU",
                    c.def.schema.fn_name(),
                    c.device.name(),
                    if c.def.is(&ops::transfer::MAKE_CONTIGUOUS) { ", from `.gpu()`" } else { "" }
                )));
            }
            checked.push(c);
        }
        for e in &spec.outputs {
            if e.op >= n || e.output >= checked[e.op].num_outputs() {
                return Err(Error::Graph("pipeline output refers to a missing operator output".into()));
            }
        }

        // Keep what the outputs need, plus operators marked `preserve`.
        let mut keep = vec![false; n];
        let mut stack: Vec<usize> = spec.outputs.iter().map(|e| e.op).collect();
        stack.extend((0..n).filter(|&i| checked[i].args.bool("preserve")));
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut keep[i], true) {
                continue;
            }
            stack.extend(spec.ops[i].inputs.iter().map(|e| e.op));
            stack.extend(spec.ops[i].arg_inputs.iter().map(|(_, e)| e.op));
        }
        let mut new_index = vec![usize::MAX; n];
        let mut nodes = Vec::new();
        let mut names = std::collections::HashSet::new();
        for (i, op) in spec.ops.iter().enumerate() {
            if !keep[i] {
                continue;
            }
            if !names.insert(op.name.clone()) {
                return Err(Error::Graph(format!("two operators are named '{}'", op.name)));
            }
            let CheckedOp { def, device, args, arg_input_names, .. } = checked[i].clone();
            new_index[i] = nodes.len();
            let remap = |e: &Edge| Edge { op: new_index[e.op], output: e.output };
            nodes.push(Node {
                spec_index: i,
                def,
                device,
                name: op.name.clone(),
                inputs: op.inputs.iter().map(remap).collect(),
                arg_inputs: arg_input_names.iter().zip(&op.arg_inputs).map(|(k, (_, e))| (k.to_string(), remap(e))).collect(),
                args,
                fused: Vec::new(),
            });
        }
        let outputs = spec.outputs.iter().map(|e| Edge { op: new_index[e.op], output: e.output }).collect();
        let mut graph = Graph { nodes, outputs };
        // The decoder hint reads the resize's arguments: it runs before the resize is fused.
        graph.fuse_random_crop_decode_with_resize();
        graph.fuse_resize_into_crop_mirror_normalize();
        graph.fuse_color_chains();
        Ok(graph)
    }

    /// A `decoders.image_random_crop` whose only consumer is a `resize` to a fixed size (cpu
    /// after cpu, gpu after mixed) gets that size as a hint, so large windows decode at a
    /// DCT-domain scale (1/2, 1/4, 1/8) no smaller than the resize output: the ResNet-50
    /// training pipeline then decodes a fraction of the pixels (the mixed decoder does so for
    /// its CPU share; the hardware engine decodes at full scale). Pixels differ from decoding at full scale by what
    /// the DCT downscale does instead of the resize filter (a fraction of a grey level on
    /// photos); the output shape does not change.
    fn fuse_random_crop_decode_with_resize(&mut self) {
        for i in 0..self.nodes.len() {
            let n = &self.nodes[i];
            let resize_device = match n.device {
                Device::Cpu => Device::Cpu,
                Device::Mixed => Device::Gpu,
                Device::Gpu => continue,
            };
            if !n.def.is(&ops::decoders::IMAGE_RANDOM_CROP) {
                continue;
            }
            let Some(consumer) = self.only_consumer(i) else { continue };
            let r = &self.nodes[consumer];
            let fixed = |name: &str| r.args.has(name) && !r.arg_inputs.iter().any(|(a, _)| a == name);
            let target = if !r.def.is(&ops::resize::RESIZE) || r.device != resize_device || r.args.has("roi_start") {
                None
            } else if fixed("resize_x") && fixed("resize_y") {
                Some([r.args.float("resize_y"), r.args.float("resize_x")])
            } else if fixed("size") {
                let s = r.args.floats("size");
                Some(if s.len() == 2 { [s[0], s[1]] } else { [s[0], s[0]] })
            } else {
                None
            };
            if let Some([h, w]) = target.filter(|t| t.iter().all(|&v| v >= 1.0)) {
                let schema = self.nodes[i].def.schema;
                self.nodes[i].args.set(&schema, "_downscale_to", ArgValue::IntList(vec![h.ceil() as i64, w.ceil() as i64]));
            }
        }
    }

    /// The node that reads output 0 of node `i`, when it is the only reader (one input,
    /// no argument input) and the output is not a pipeline output.
    fn only_consumer(&self, i: usize) -> Option<usize> {
        let edge = Edge { op: i, output: 0 };
        if self.outputs.contains(&edge) {
            return None;
        }
        let uses = |n: &Node| n.inputs.iter().filter(|e| **e == edge).count() + n.arg_inputs.iter().filter(|(_, e)| *e == edge).count();
        let mut readers = self.nodes.iter().enumerate().filter(|(_, n)| uses(n) > 0);
        match (readers.next(), readers.next()) {
            (Some((k, n)), None) if uses(n) == 1 && n.inputs.first() == Some(&edge) => Some(k),
            _ => None,
        }
    }

    /// A cpu `resize` whose only consumer is a cpu `crop_mirror_normalize` becomes part of
    /// it: one node runs both (`ops::fused`), computing only the resized pixels inside the
    /// crop window and normalizing them on the way out, with the unfused result bit for
    /// bit. The node is named `<resize name>+<cmn name>` in statistics and DOT; errors still
    /// name the user's operator that raised them. A resize that is also a pipeline output,
    /// or read by anything else, is left alone.
    fn fuse_resize_into_crop_mirror_normalize(&mut self) {
        let mut i = 0;
        while i < self.nodes.len() {
            let r = &self.nodes[i];
            let target = (r.def.is(&ops::resize::RESIZE) && r.device == Device::Cpu && r.fused.is_empty())
                .then(|| self.only_consumer(i))
                .flatten()
                .filter(|&k| {
                    let c = &self.nodes[k];
                    // The fused node takes both operators' argument inputs by name.
                    let clash = c.arg_inputs.iter().any(|(a, _)| r.arg_inputs.iter().any(|(b, _)| a == b));
                    c.def.is(&ops::crop::CROP_MIRROR_NORMALIZE) && c.device == Device::Cpu && c.fused.is_empty() && !clash
                });
            let Some(k) = target else {
                i += 1;
                continue;
            };
            self.fuse_pair(i, k);
        }
    }

    /// Two operators in a row on the GPU of the colour family's affine maps (`hsv`,
    /// `brightness_contrast`, `color_twist`...; `ops::color::affine_kind`), the first read only
    /// by the second, become one node running both in one pass (`ops::color`'s chain kernel,
    /// the unfused pair's bits): detection pipelines' `hsv -> brightness_contrast` reads and
    /// writes the image once instead of twice. Named `<first>+<second>`.
    fn fuse_color_chains(&mut self) {
        let mut i = 0;
        while i < self.nodes.len() {
            let a = &self.nodes[i];
            let affine_gpu = |n: &Node| n.device == Device::Gpu && n.fused.is_empty() && ops::color::affine_kind(n.def).is_some();
            let target = affine_gpu(a).then(|| self.only_consumer(i)).flatten().filter(|&k| {
                let b = &self.nodes[k];
                // The fused node takes both operators' argument inputs by name.
                affine_gpu(b) && !b.arg_inputs.iter().any(|(x, _)| a.arg_inputs.iter().any(|(y, _)| x == y))
            });
            match target {
                Some(k) => self.fuse_pair(i, k),
                None => i += 1,
            }
        }
    }

    /// Replaces node `k`, the only consumer of node `i`, with one node standing for both
    /// (named `<i>+<k>`, `fused` holding the two, in data order) reading `i`'s inputs, and
    /// drops node `i`.
    fn fuse_pair(&mut self, i: usize, k: usize) {
        let (first, second) = (self.nodes[i].clone(), self.nodes[k].clone());
        self.nodes[k] = Node {
            spec_index: second.spec_index,
            def: second.def,
            device: second.device,
            name: format!("{}+{}", first.name, second.name),
            inputs: first.inputs.clone(),
            arg_inputs: first.arg_inputs.iter().chain(&second.arg_inputs).cloned().collect(),
            args: second.args.clone(),
            fused: vec![first, second],
        };
        // Nothing reads node i any more: drop it and shift the later indices down.
        self.nodes.remove(i);
        let shift = |e: &mut Edge| {
            if e.op > i {
                e.op -= 1;
            }
        };
        for n in &mut self.nodes {
            n.inputs.iter_mut().for_each(shift);
            n.arg_inputs.iter_mut().for_each(|(_, e)| shift(e));
        }
        self.outputs.iter_mut().for_each(shift);
    }
}
