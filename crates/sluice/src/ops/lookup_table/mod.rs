//! `fn.lookup_table`: every input element (an integer key) replaced by its entry in a table
//! made of `keys` and `values` (`default_value` for keys not in it), as `dtype` (checked
//! against DALI 2.4's cpu operator and its test_lookup_table.py, tests/test_lookup_table.py).
//!
//! As DALI: the table has 65536 entries (keys 0..=65535; a key outside is an error naming
//! `keys`); a key given twice takes its last value; `values` and `default_value` are f32
//! converted to `dtype` with DALI's `ConvertSat` (rounded half away from zero, saturated:
//! `tensor::element::store`); an input key outside 0..=65535 (negative included) gives
//! `default_value`. Inputs are the integer types (not BOOL); another input type is an
//! error naming the type. Outputs: the integer types, FLOAT16, FLOAT, FLOAT64 and BOOL.
//! The layout is the input's.

mod gpu;

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::element::{store_f64, load, Num};
use crate::tensor::{BatchMeta, DType, TensorList};

pub static LOOKUP_TABLE: OpDef = OpDef {
    schema: OpSchema {
        name: "LookupTable",
        doc: "Maps the input to output by using a lookup table that is specified by `keys` and `values`, and a `default_value` for \
              unspecified keys: Output[i] = lut[Input[i]] if 0 <= Input[i] <= 65535 and it is a key, default_value otherwise. \
              Only integer types can be used as inputs for this operator.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("dtype", T::DType, D::Int(DType::F32 as i64), "Output data type."),
            arg("default_value", T::Float, D::Float(0.0), "Default output value for keys that are not present in the table."),
            arg("keys", T::IntList, D::IntList(&[]), "A list of input values (keys) in the lookup table, in the [0, 65535] range; as long as `values`."),
            arg("values", T::FloatList, D::FloatList(&[]), "A list of mapped output `values` for each `keys` entry; as long as `keys`."),
        ]],
        arg_aliases: &[("output_dtype", "dtype")],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(LookupTable::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::LookupTableGpu::new(LookupTable::new(ctx)?)))),
};

/// Entries of the table: keys 0..=65535.
pub(crate) const TABLE_SIZE: usize = 0x10000;

struct LookupTable {
    op: String,
    dtype: DType,
    /// TABLE_SIZE elements of `dtype`.
    table: Vec<u8>,
    /// `default_value` as an element of `dtype`.
    default: [u8; 8],
}

impl LookupTable {
    fn new(ctx: &OpContext) -> Result<LookupTable> {
        let op = ctx.display_name.as_str();
        let dtype = ctx.args.dtype("dtype");
        let (keys, values) = (ctx.args.ints("keys"), ctx.args.floats("values"));
        if keys.len() != values.len() {
            return Err(Error::arg(op, "values", format!("{} values for {} keys: `keys` and `values` must be as long", values.len(), keys.len())));
        }
        if let Some(k) = keys.iter().find(|&&k| !(0..TABLE_SIZE as i64).contains(&k)) {
            return Err(Error::arg(op, "keys", format!("{k} is outside the table's range [0, {}]", TABLE_SIZE - 1)));
        }
        // DALI reads the values as f32, then converts them to the output type.
        let as_f32 = |v: f64| v as f32 as f64;
        let size = dtype.size();
        let mut default = [0u8; 8];
        store_f64(dtype, &mut default, 0, as_f32(ctx.args.float("default_value")));
        let mut table = Vec::with_capacity(TABLE_SIZE * size);
        for _ in 0..TABLE_SIZE {
            table.extend_from_slice(&default[..size]);
        }
        for (&k, &v) in keys.iter().zip(values) {
            store_f64(dtype, &mut table, k as usize, as_f32(v));
        }
        Ok(LookupTable { op: op.to_string(), dtype, table, default })
    }

    /// The output metadata: the input's shapes and layout, the table's type.
    fn plan(&self, input: &BatchMeta) -> Result<BatchMeta> {
        if input.dtype().is_float() || input.dtype() == DType::Bool {
            return Err(Error::type_mismatch(&self.op, format!(
                "unsupported input type {}: only integer types can be used as keys",
                input.dtype().dali_name()
            )));
        }
        let mut meta = BatchMeta::new(self.dtype, input.ndim(), (0..input.len()).map(|i| input.shape(i)));
        meta.set_layout(input.layout().clone());
        meta.inherit_source_info(input);
        Ok(meta)
    }
}

impl Operator for LookupTable {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let mut out = TensorList::for_overwrite(self.plan(input.meta())?);
        let (t, size) = (input.dtype(), self.dtype.size());
        let default = &self.default[..size];
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let src = input.bytes(i);
            for (k, e) in dst.chunks_exact_mut(size).enumerate() {
                let Num::Int(key) = load(t, src, k) else { unreachable!("integer inputs only") };
                e.copy_from_slice(if (0..TABLE_SIZE as i128).contains(&key) { &self.table[key as usize * size..(key as usize + 1) * size] } else { default });
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{testing, ArgValue};

    pub(super) fn op(args: Vec<(&str, ArgValue)>) -> Result<LookupTable> {
        LookupTable::new(&testing::context(&LOOKUP_TABLE, args, &[])?)
    }

    pub(super) fn run(o: &mut LookupTable, x: &TensorList) -> Result<TensorList> {
        Ok(testing::run(o, &[x], &[])?.remove(0))
    }

    #[test]
    fn keys_map_the_last_value_given_and_the_rest_the_default() {
        let mut o = op(vec![
            ("keys", ArgValue::IntList(vec![0, 2, 3, 4, 5, 3])),
            ("values", ArgValue::FloatList(vec![0.2, 0.4, 0.5, 0.6, 0.7, 0.10])),
            ("default_value", ArgValue::Float(0.99)),
        ])
        .unwrap();
        let x = TensorList::from_samples(&[vec![9]], &[vec![1i32, 4, 1, 0, 100, 2, 3, 4, -5]]);
        let y = run(&mut o, &x).unwrap();
        assert_eq!(y.sample::<f32>(0), &[0.99f32, 0.6, 0.99, 0.2, 0.99, 0.4, 0.10, 0.6, 0.99]);
    }
}
