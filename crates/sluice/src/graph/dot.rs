//! Graphviz export of a built graph (`save_graph_to_dot_file`).

use super::Graph;

/// The graph in DOT: one box per operator (name, schema, device), one edge per data flow,
/// dashed for argument inputs.
pub fn to_dot(graph: &Graph) -> String {
    let mut s = String::from("digraph pipeline {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n");
    for (i, n) in graph.nodes.iter().enumerate() {
        let color = match n.device {
            crate::ops::Device::Cpu => "lightblue",
            crate::ops::Device::Mixed => "orchid",
            crate::ops::Device::Gpu => "palegreen",
        };
        s += &format!(
            "  n{i} [label=\"{}\\n{} ({})\", style=filled, fillcolor={color}];\n",
            n.name.replace('"', "'"),
            n.def.schema.fn_name(),
            n.device.name()
        );
        for e in &n.inputs {
            s += &format!("  n{} -> n{i} [label=\"{}\"];\n", e.op, e.output);
        }
        for (arg, e) in &n.arg_inputs {
            s += &format!("  n{} -> n{i} [style=dashed, label=\"{arg}\"];\n", e.op);
        }
    }
    for (k, e) in graph.outputs.iter().enumerate() {
        s += &format!("  out{k} [shape=ellipse, label=\"output {k}\"];\n  n{} -> out{k} [label=\"{}\"];\n", e.op, e.output);
    }
    s + "}\n"
}
