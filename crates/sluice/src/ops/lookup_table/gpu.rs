//! GPU backend of `fn.lookup_table`: the table the cpu twin built is uploaded once (at the
//! first batch) and kept; per batch, one descriptor per sample and one launch of
//! `lookup_table.cu`.

use std::sync::Arc;

use sluice_cuda::DeviceBuffer;

use super::{LookupTable, TABLE_SIZE};
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::{DType, TensorListGpu};

pub(super) const SRC: &str = include_str!("lookup_table.cu");

cuda_struct! {
    /// One sample (`struct LutSample` in lookup_table.cu).
    pub(super) struct LutSample {
        r#in: u64,
        out: u64,
        numel: i64,
        table: u64,
        fallback: u64,
    }
}

/// The kernel's name for integer input type `t` and output elements of `size` bytes.
pub(super) fn kernel_name(t: DType, size: usize) -> String {
    let name = match t {
        DType::U8 => "u8",
        DType::I8 => "i8",
        DType::U16 => "u16",
        DType::I16 => "i16",
        DType::U32 => "u32",
        DType::I32 => "i32",
        DType::U64 => "u64",
        DType::I64 => "i64",
        _ => unreachable!("refused by the plan"),
    };
    format!("lut_{name}_{size}")
}

pub(super) struct LookupTableGpu {
    lut: LookupTable,
    table: Option<Arc<DeviceBuffer>>,
    params: ParamUpload,
    desc: Vec<LutSample>,
}

impl LookupTableGpu {
    pub(super) fn new(lut: LookupTable) -> LookupTableGpu {
        LookupTableGpu { lut, table: None, params: ParamUpload::default(), desc: Vec::new() }
    }
}

impl GpuOperator for LookupTableGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let meta = self.lut.plan(input.meta())?;
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let max_numel = (0..out.len()).map(|i| out.numel(i)).max().unwrap_or(0);
        if max_numel == 0 {
            return Ok(vec![out]);
        }
        if self.table.is_none() {
            let buf = DeviceBuffer::alloc(ws.device, ws.stream, self.lut.table.len())?;
            debug_assert_eq!(self.lut.table.len(), TABLE_SIZE * self.lut.dtype.size());
            // SAFETY: the table lives as long as the operator and is never written again;
            // from pageable memory the driver stages the copy before returning.
            unsafe { buf.copy_from_host_async(0, &self.lut.table)? };
            self.table = Some(Arc::new(buf));
        }
        let table = self.table.as_ref().expect("uploaded above").device_ptr();
        let fallback = u64::from_le_bytes(self.lut.default);
        self.desc.clear();
        for i in 0..input.len() {
            self.desc.push(LutSample { r#in: input.sample_ptr(i), out: out.sample_ptr(i), numel: out.numel(i) as i64, table, fallback });
        }
        let base = self.params.upload(ws, bytemuck::cast_slice(&self.desc))?;
        let kernel = kernel_name(input.dtype(), self.lut.dtype.size());
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "lookup_table", SRC, &kernel)?;
        // SAFETY: each descriptor points into `input` and `out` (alive, ordered on this
        // stream), both of `numel` elements, and into the table, which this operator keeps.
        unsafe {
            launch_records::<LutSample>(&ws.stream, &f, base, self.desc.len(), max_numel)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use super::super::tests::{op, run};
    use super::*;
    use crate::ops::gpu_params::HostKernels;
    use crate::ops::ArgValue;
    use crate::tensor::TensorList;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_struct_matches() {
        crate::ops::gpu_params::check_cuda_source("lookup_table", SRC, &[("LutSample", &LutSample::LAYOUT)]);
    }

    /// Runs one launch of a lookup_table.cu kernel on the CPU (every thread of a small grid
    /// in turn) from a case file: name, sample count, descriptors (addresses as offsets;
    /// `table` an offset into the table bytes), input, table, output length.
    const HARNESS: &str = r#"#include <cstdlib>
#include <string>
#include <vector>
#include "@SHIM@"
#include "@SRC@"
typedef void (*Kernel)(const LutSample*);
static FILE* f;
static void rd(void* p, size_t n) { if (fread(p, 1, n, f) != n) { fprintf(stderr, "short case\n"); exit(2); } }
#define K(n) if (name == "lut_" #n "_1") k = lut_##n##_1; if (name == "lut_" #n "_2") k = lut_##n##_2; \
    if (name == "lut_" #n "_4") k = lut_##n##_4; if (name == "lut_" #n "_8") k = lut_##n##_8;
int main(int argc, char** argv) {
    if (argc != 2 || !(f = fopen(argv[1], "rb"))) return 2;
    unsigned len, n;
    rd(&len, 4); std::string name(len, '\0'); rd(&name[0], len); rd(&n, 4);
    std::vector<LutSample> s(n); rd(s.data(), n * sizeof(LutSample));
    unsigned long long in_len, table_len, out_len;
    rd(&in_len, 8); std::vector<unsigned long long> in(in_len / 8 + 1); rd(in.data(), in_len);
    rd(&table_len, 8); std::vector<unsigned long long> table(table_len / 8 + 1); rd(table.data(), table_len);
    rd(&out_len, 8); std::vector<unsigned long long> out(out_len / 8 + 1, 0xababababababababULL);
    for (auto& d : s) {
        d.in += (unsigned long long)in.data(); d.out += (unsigned long long)out.data(); d.table += (unsigned long long)table.data();
    }
    Kernel k = nullptr;
    K(u8) K(i8) K(u16) K(i16) K(u32) K(i32) K(u64) K(i64)
    if (!k) { fprintf(stderr, "no kernel %s\n", name.c_str()); return 3; }
    blockDim = {32, 1, 1}; gridDim = {3, n, 1};
    for (unsigned y = 0; y < n; y++) for (unsigned b = 0; b < 3; b++) for (unsigned t = 0; t < 32; t++) {
        blockIdx = {b, y, 0}; threadIdx = {t, 0, 0}; k(s.data());
    }
    fwrite(out.data(), 1, out_len, stdout);
    return 0;
}
"#;

    fn harness() -> &'static HostKernels {
        static KERNELS: OnceLock<HostKernels> = OnceLock::new();
        KERNELS.get_or_init(|| HostKernels::build("lookup_table", SRC, HARNESS))
    }

    #[test]
    fn the_kernel_run_on_the_host_equals_the_cpu_backend() {
        let keys: Vec<i64> = vec![0, 1, 2, 7, 255, 256, 1000, 65535, 2];
        let values: Vec<f64> = vec![0.5, -1.5, 2.5, 300.7, -70000.0, 1e10, 3.25, 42.0, 9.0];
        let raw: [i64; 16] = [0, 1, 2, 3, 7, -1, -128, 255, 256, 1000, 65535, 65536, -65536, 70000, i32::MAX as i64, 4_294_967_296 + 2];
        let in_types = [DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::I32, DType::U64, DType::I64];
        let out_types = [DType::U8, DType::I8, DType::U16, DType::I32, DType::U64, DType::F16, DType::F32, DType::F64, DType::Bool];
        for t in in_types {
            // Keys of every range, wrapped into the type as its bits.
            let shapes = [vec![5usize], vec![0], vec![37]];
            let mut x = TensorList::new(t, 1, shapes.iter().map(|s| &s[..]));
            for s in x.samples_mut() {
                for (k, e) in s.chunks_exact_mut(t.size()).enumerate() {
                    e.copy_from_slice(&raw[(k * 5 + 3) % raw.len()].to_le_bytes()[..t.size()]);
                }
            }
            for o in out_types {
                let mut g = op(vec![
                    ("keys", ArgValue::IntList(keys.clone())),
                    ("values", ArgValue::FloatList(values.clone())),
                    ("default_value", ArgValue::Float(-7.5)),
                    ("dtype", ArgValue::Int(o as i64)),
                ])
                .unwrap();
                let want = run(&mut g, &x).unwrap();
                let fallback = u64::from_le_bytes(g.default);
                let descs: Vec<LutSample> = (0..x.len())
                    .map(|i| LutSample { r#in: x.offset(i) as u64, out: want.offset(i) as u64, numel: want.numel(i) as i64, table: 0, fallback })
                    .collect();
                let name = kernel_name(t, o.size());
                let mut case = Vec::new();
                case.extend((name.len() as u32).to_le_bytes());
                case.extend(name.as_bytes());
                case.extend((descs.len() as u32).to_le_bytes());
                case.extend(bytemuck::cast_slice::<LutSample, u8>(&descs));
                case.extend((x.total_bytes() as u64).to_le_bytes());
                case.extend(&x.buffer().as_slice()[..x.total_bytes()]);
                case.extend((g.table.len() as u64).to_le_bytes());
                case.extend(&g.table);
                case.extend((want.total_bytes() as u64).to_le_bytes());
                let got = harness().run(&name, &case);
                for i in 0..x.len() {
                    assert_eq!(&got[want.byte_range(i)], want.bytes(i), "{t} -> {o}, sample {i}");
                }
            }
        }
    }
}
