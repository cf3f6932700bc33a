//! `fn.segmentation.select_masks` (cpu, as DALI 2.4): keeps the polygons of the selected mask
//! ids, in the order of `mask_ids`, with their vertices copied next to each other and the
//! polygons' vertex ranges renumbered (`dali/operators/segmentation/select_masks.cc`).
//!
//! Inputs: `mask_ids` (1-D INT32, no duplicates), `polygons` (INT32 `N x 3`: mask id, first
//! vertex, end vertex, as `readers.coco(polygon_masks=True)` gives them) and `vertices` (2-D,
//! any type and number of coordinates). As in DALI, a mask id stands for one polygon: when
//! several polygons carry the same id, the last one is the one selected. `reindex_masks`
//! replaces each output id by its position in `mask_ids`. Checked against DALI 2.4's cpu
//! operator by `tests/test_segmentation.py`, with DALI's messages for its errors.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backend.
pub static SELECT_MASKS: OpDef = OpDef {
    schema: OpSchema {
        name: "segmentation__SelectMasks",
        doc: "Selects a subset of polygons by their mask ids.

The operator expects three inputs describing multiple segmentation mask polygons belonging to different mask ids and a list of selected mask ids. Inputs: ``mask_ids`` (1D int32: the ids to select, no duplicates), ``polygons`` (2D int32 with 3 columns: mask_id, start_vertex_idx, end_vertex_idx) and ``vertices`` (2D, interleaved coordinates). Outputs the polygons and vertices of the selected masks, in the order of ``mask_ids``. The format of ``polygons`` and ``vertices`` is the same as produced by COCOReader.",
        devices: &[Device::Cpu],
        min_inputs: 3,
        max_inputs: 3,
        num_outputs: 2,
        host_inputs: &[],
        args: &[&[arg("reindex_masks", T::Bool, D::Bool(false), "If set to True, the output mask ids are replaced with the indices at which they appeared in ``mask_ids`` input.")]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(SelectMasks { ctx: ctx.clone(), reindex: ctx.args.bool("reindex_masks") }))),
    mixed: None,
    gpu: None,
};

struct SelectMasks {
    ctx: OpContext,
    reindex: bool,
}

/// A selected mask: its output id and the input vertex range of its (last) polygon.
#[derive(Clone, Copy)]
struct Selected {
    new_id: i32,
    range: Option<(i64, i64)>,
}

fn i32s(batch: &TensorList, i: usize) -> &[i32] {
    batch.sample::<i32>(i)
}

impl Operator for SelectMasks {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let op = self.ctx.display_name.as_str();
        let (ids, polygons, vertices) = (ws.inputs[0], ws.inputs[1], ws.inputs[2]);
        let fail = |i: usize, msg: String| Error::data(self.ctx.at(ws.iteration, i, polygons.source_info(i)), msg);
        if ids.dtype() != DType::I32 {
            return Err(Error::type_mismatch(op, "``mask_ids`` input is expected to be int32"));
        }
        if ids.ndim() != 1 {
            return Err(Error::type_mismatch(op, "``mask_ids`` input is expected to be 1D"));
        }
        if polygons.dtype() != DType::I32 {
            return Err(Error::type_mismatch(op, "``polygons`` input is expected to be int32"));
        }
        if polygons.ndim() != 2 {
            return Err(Error::type_mismatch(op, format!("``polygons`` input is expected to be 2D. Got {}D", polygons.ndim())));
        }
        if vertices.ndim() != 2 {
            return Err(Error::type_mismatch(op, format!("``vertices`` input is expected to be 2D. Got {}D", vertices.ndim())));
        }
        let n = polygons.len();
        if ids.len() != n || vertices.len() != n {
            return Err(Error::type_mismatch(op, format!("All the inputs should have the same number of samples. Got: {}, {n}, {}", ids.len(), vertices.len())));
        }
        for i in 0..n {
            let cols = polygons.shape(i)[1];
            if cols != 3 {
                return Err(fail(i, format!("``polygons`` is expected to contain 2D tensors with 3 columns: ``mask_id, start_idx, end_idx``. Got {cols} columns.")));
            }
        }
        // Plan every sample: the selected masks in order, their ranges, the output sizes.
        let mut plans: Vec<Vec<Selected>> = Vec::with_capacity(n);
        let mut poly_shapes = Vec::with_capacity(n);
        let mut vert_shapes = Vec::with_capacity(n);
        let mut by_id: HashMap<i32, usize> = HashMap::new();
        for i in 0..n {
            let selected_ids = i32s(ids, i);
            let mut selected: Vec<Selected> = Vec::with_capacity(selected_ids.len());
            by_id.clear();
            for (k, &id) in selected_ids.iter().enumerate() {
                if by_id.insert(id, k).is_some() {
                    return Err(fail(i, format!("mask_ids should not have duplicated values. Got {id} repeated.")));
                }
                selected.push(Selected { new_id: if self.reindex { k as i32 } else { id }, range: None });
            }
            let nverts = vertices.shape(i)[0] as i64;
            for p in i32s(polygons, i).chunks_exact(3) {
                let Some(&k) = by_id.get(&p[0]) else { continue };
                let (start, end) = (p[1] as i64, p[2] as i64);
                if start < 0 || end > nverts {
                    return Err(fail(i, format!(
                        "Vertex index range for mask id {} [{start}, {end}) is out of bounds. Expected to be within the range of available vertices [0, {nverts}).",
                        p[0]
                    )));
                }
                if end < start {
                    return Err(fail(i, format!("Vertex start index can't be after end index. Got [{start}, {end})")));
                }
                selected[k].range = Some((start, end));
            }
            let mut total = 0usize;
            for (s, &id) in selected.iter().zip(selected_ids) {
                let Some((start, end)) = s.range else {
                    return Err(fail(i, format!("Selected mask_id {id} is not present in the input.")));
                };
                total += (end - start) as usize;
            }
            poly_shapes.push([selected.len(), 3]);
            vert_shapes.push([total, vertices.shape(i)[1]]);
            plans.push(selected);
        }
        let mut poly_meta = BatchMeta::new(DType::I32, 2, poly_shapes.iter().map(|s| &s[..]));
        poly_meta.set_layout(polygons.layout().clone());
        poly_meta.inherit_source_info(polygons.meta());
        let mut vert_meta = BatchMeta::new(vertices.dtype(), 2, vert_shapes.iter().map(|s| &s[..]));
        vert_meta.set_layout(vertices.layout().clone());
        vert_meta.inherit_source_info(vertices.meta());
        let mut out_polygons = TensorList::for_overwrite(poly_meta);
        let mut out_vertices = TensorList::for_overwrite(vert_meta);
        // A few dozen polygons per sample: copied on this thread (no worker wake-up).
        for (i, (dst_p, dst_v)) in out_polygons.samples_mut().into_iter().zip(out_vertices.samples_mut()).enumerate() {
            let row = vertices.shape(i)[1] * vertices.dtype().size();
            let src = vertices.bytes(i);
            let (mut at, mut first) = (0usize, 0i64);
            for (k, s) in plans[i].iter().enumerate() {
                let (start, end) = s.range.expect("checked above");
                let count = end - start;
                for (j, v) in [s.new_id, first as i32, (first + count) as i32].into_iter().enumerate() {
                    dst_p[(3 * k + j) * 4..(3 * k + j + 1) * 4].copy_from_slice(&v.to_le_bytes());
                }
                let bytes = count as usize * row;
                dst_v[at..at + bytes].copy_from_slice(&src[start as usize * row..start as usize * row + bytes]);
                at += bytes;
                first += count;
            }
        }
        Ok(vec![out_polygons, out_vertices])
    }
}
