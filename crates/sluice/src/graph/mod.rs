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
    /// Requested device; `None` means "where the inputs are".
    pub device: Option<Device>,
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
}

impl Node {
    /// The name users know the operator by, with its device when not cpu.
    pub fn display_name(&self) -> String {
        self.def.schema.fn_name()
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

impl Graph {
    /// Checks `spec` and keeps only what the outputs (and `preserve=True` operators) need.
    pub fn build(spec: &PipelineSpec) -> Result<Graph> {
        if spec.batch_size == 0 {
            return Err(Error::Graph("batch_size must be at least 1".into()));
        }
        if spec.outputs.is_empty() {
            return Err(Error::Graph("the pipeline has no outputs: call set_outputs() or return DataNodes from the pipeline function".into()));
        }
        let n = spec.ops.len();
        let mut devices: Vec<Device> = Vec::with_capacity(n);
        let mut defs: Vec<&'static OpDef> = Vec::with_capacity(n);
        for (i, op) in spec.ops.iter().enumerate() {
            let (def, legacy_device) = ops::lookup(&op.schema).ok_or_else(|| ops::unknown_operator(&op.schema))?;
            let schema = &def.schema;
            let display = schema.fn_name();
            for e in op.inputs.iter().chain(op.arg_inputs.iter().map(|(_, e)| e)) {
                if e.op >= i {
                    return Err(Error::Graph(format!("{display}: input refers to an operator defined later")));
                }
                if e.output >= defs[e.op].schema.num_outputs {
                    return Err(Error::Graph(format!("{display}: input refers to a missing output")));
                }
            }
            let input_on_gpu = op.inputs.iter().any(|e| devices[e.op].output_on_gpu());
            let device = op.device.or(legacy_device).unwrap_or(if input_on_gpu { Device::Gpu } else { Device::Cpu });
            if device != Device::Cpu && spec.device_id.is_none() {
                return Err(Error::Graph(format!(
                    "{display} runs on the GPU (device='{}'{}), but the pipeline is CPU-only (device_id=None); pass device_id=0 to use a GPU",
                    device.name(),
                    if def.schema.name == "MakeContiguous" { ", from `.gpu()`" } else { "" }
                )));
            }
            if !def.has_backend(device) {
                let have: Vec<&str> = schema.devices.iter().map(|d| d.name()).collect();
                return Err(Error::Graph(format!(
                    "{display}: no '{}' backend; available: {}",
                    device.name(),
                    have.join(", ")
                )));
            }
            if op.inputs.len() < schema.min_inputs || op.inputs.len() > schema.max_inputs {
                return Err(Error::Graph(format!(
                    "{display}: expects {} input(s), got {}",
                    if schema.min_inputs == schema.max_inputs { schema.min_inputs.to_string() } else { format!("{} to {}", schema.min_inputs, schema.max_inputs) },
                    op.inputs.len()
                )));
            }
            for (k, e) in op.inputs.iter().enumerate() {
                let producer = devices[e.op];
                let ok = match device {
                    Device::Cpu | Device::Mixed => !producer.output_on_gpu(),
                    Device::Gpu => producer.output_on_gpu(),
                };
                if !ok {
                    let hint = if device == Device::Gpu {
                        "move it to the GPU first with `.gpu()` or run this operator on the cpu"
                    } else {
                        "data flows cpu -> mixed -> gpu only; run this operator with device='gpu'"
                    };
                    return Err(Error::Graph(format!(
                        "{display} (device='{}'): input {k} is on the {} ({} output); {hint}",
                        device.name(),
                        if producer.output_on_gpu() { "GPU" } else { "CPU" },
                        spec.ops[e.op].schema
                    )));
                }
            }
            for (name, e) in &op.arg_inputs {
                if devices[e.op].output_on_gpu() {
                    return Err(Error::Graph(format!(
                        "{display}: argument input '{name}' must be a CPU DataNode; it is on the GPU"
                    )));
                }
            }
            devices.push(device);
            defs.push(def);
        }
        for e in &spec.outputs {
            if e.op >= n || e.output >= defs[e.op].schema.num_outputs {
                return Err(Error::Graph("pipeline output refers to a missing operator output".into()));
            }
        }

        // Keep what the outputs need, plus operators marked `preserve`.
        let mut keep = vec![false; n];
        let mut stack: Vec<usize> = spec.outputs.iter().map(|e| e.op).collect();
        for (i, op) in spec.ops.iter().enumerate() {
            if op.args.iter().any(|(k, v)| k == "preserve" && *v == ArgValue::Bool(true)) {
                stack.push(i);
            }
        }
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
            let def = defs[i];
            let display = def.schema.fn_name();
            let per_sample: Vec<String> = op.arg_inputs.iter().map(|(k, _)| k.clone()).collect();
            let args = Args::check(&def.schema, &display, op.args.clone(), &per_sample)?;
            new_index[i] = nodes.len();
            let remap = |e: &Edge| Edge { op: new_index[e.op], output: e.output };
            nodes.push(Node {
                spec_index: i,
                def,
                device: devices[i],
                name: op.name.clone(),
                inputs: op.inputs.iter().map(remap).collect(),
                arg_inputs: op.arg_inputs.iter().map(|(k, e)| (k.clone(), remap(e))).collect(),
                args,
            });
        }
        let outputs = spec.outputs.iter().map(|e| Edge { op: new_index[e.op], output: e.output }).collect();
        let mut graph = Graph { nodes, outputs };
        graph.fuse_random_crop_decode_with_resize();
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
            if n.def.schema.name != "decoders__ImageRandomCrop" {
                continue;
            }
            let edge = Edge { op: i, output: 0 };
            let consumers: Vec<usize> = (0..self.nodes.len())
                .filter(|&k| self.nodes[k].inputs.contains(&edge) || self.nodes[k].arg_inputs.iter().any(|(_, e)| *e == edge))
                .collect();
            if consumers.len() != 1 || self.outputs.contains(&edge) {
                continue;
            }
            let r = &self.nodes[consumers[0]];
            let fixed = |name: &str| r.args.has(name) && !r.arg_inputs.iter().any(|(a, _)| a == name);
            let target = if r.def.schema.name != "Resize" || r.device != resize_device || r.args.has("roi_start") {
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
}

