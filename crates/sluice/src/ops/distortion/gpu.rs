//! GPU backend of `fn.water` and `fn.sphere`: the cpu twin plans the batch (checks, masks,
//! the water offset tables); one block of descriptors and tables is uploaded and one launch
//! of `distortion.cu` writes every sample, with the cpu kernel's arithmetic, so both
//! backends give the same bits.

use super::sphere::SphereMap;
use super::{Distortion, Kind};
use crate::error::Result;
use crate::ops::erase::fill_word;
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::channel::short_name;
use crate::tensor::{DType, TensorListGpu};

pub(super) const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("../philox.cuh"), include_str!("distortion.cu"));

cuda_struct! {
    /// One sample (`struct DistortSample` in distortion.cu).
    pub(super) struct DistortSample {
        r#in: u64,
        out: u64,
        /// Water: device addresses of the row offsets (added to x) and column offsets.
        rows: u64,
        cols: u64,
        h: i32,
        w: i32,
        c: i32,
        /// 0: the sample's mask is 0, it is copied.
        apply: i32,
        linear: i32,
        /// `fill_value` as the element's bits, in the low bytes.
        fill: u32,
        /// Sphere: [`SphereMap`]'s centre and divisor.
        mid_x: f32,
        mid_y: f32,
        d: f32,
        /// Jitter: `nDegree`, the sample's Philox key and its stream words 1 and 2.
        n_degree: i32,
        key0: u32,
        key1: u32,
        ctr1: u32,
        ctr2: u32,
    }
}

pub(super) struct DistortionGpu {
    op: Distortion,
    params: ParamUpload,
}

impl DistortionGpu {
    pub(super) fn new(op: Distortion) -> DistortionGpu {
        DistortionGpu { op, params: ParamUpload::default() }
    }
}

/// The kernel of a filter and element type.
fn kernel_name(kind: Kind, dtype: DType) -> String {
    let op = match kind {
        Kind::Water(_) => "water",
        Kind::Sphere => "sphere",
        Kind::Jitter(_) => "jitter",
    };
    format!("{op}_{}", short_name(dtype).expect("UINT8 or FLOAT, checked by plan_batch"))
}

/// How many row and column offsets the planned batch reads (water: the largest image the
/// filter applies to; the tables hold at least as many).
fn table_lengths(d: &Distortion) -> (usize, usize) {
    match d.kind {
        Kind::Water(_) => d.samples.iter().filter(|s| s.apply).fold((0, 0), |(h, w), s| (h.max(s.h), w.max(s.w))),
        Kind::Sphere | Kind::Jitter(_) => (0, 0),
    }
}

/// Bytes of the planned batch's parameter block.
fn block_len(d: &Distortion) -> usize {
    let (rows, cols) = table_lengths(d);
    d.samples.len() * std::mem::size_of::<DistortSample>() + (rows + cols) * 4
}

/// Writes the planned batch's parameter block, which lands at device address `base`: one
/// descriptor per sample, then the row offsets, then the column offsets (8-byte aligned:
/// the descriptor is a multiple of 8 bytes). `addresses(i)`: sample i's input and output.
fn write_block(d: &Distortion, dtype: DType, block: &mut [u8], base: u64, addresses: impl Fn(usize) -> (u64, u64)) {
    let (nrows, ncols) = table_lengths(d);
    let size = std::mem::size_of::<DistortSample>();
    let desc_bytes = d.samples.len() * size;
    let (descs, tables) = block.split_at_mut(desc_bytes);
    let (rows, cols) = tables.split_at_mut(nrows * 4);
    rows.copy_from_slice(bytemuck::cast_slice(&d.rows[..nrows]));
    cols.copy_from_slice(bytemuck::cast_slice(&d.cols[..ncols]));
    let rows_at = base + desc_bytes as u64;
    let cols_at = rows_at + (nrows * 4) as u64;
    // The cpu's `fill_as`: the element's bits.
    let fill = fill_word(dtype, d.fill) as u32;
    for (i, (dst, s)) in descs.chunks_exact_mut(size).zip(&d.samples).enumerate() {
        let (input, output) = addresses(i);
        let sphere = match d.kind {
            Kind::Sphere => SphereMap::new(s.h, s.w),
            Kind::Water(_) | Kind::Jitter(_) => SphereMap { mid_x: 0.0, mid_y: 0.0, d: 0.0 },
        };
        let (n_degree, key, stream) = match d.kind {
            Kind::Jitter(n) => (n as i32, d.streams[i].0, d.streams[i].1),
            _ => (0, [0; 2], [0; 3]),
        };
        let desc = DistortSample {
            r#in: input,
            out: output,
            rows: rows_at,
            cols: cols_at,
            // Sizes were checked to fit an int by plan_batch (channels: the sample's bytes).
            h: s.h as i32,
            w: s.w as i32,
            c: i32::try_from(s.c).expect("channels fit in an int"),
            apply: s.apply as i32,
            linear: d.linear as i32,
            fill,
            mid_x: sphere.mid_x,
            mid_y: sphere.mid_y,
            d: sphere.d,
            n_degree,
            key0: key[0],
            key1: key[1],
            ctr1: stream[0],
            ctr2: stream[1],
        };
        dst.copy_from_slice(bytemuck::bytes_of(&desc));
    }
}

/// The most pixels a sample of the planned batch has (0: nothing to write).
fn max_pixels(d: &Distortion) -> usize {
    d.samples.iter().filter(|s| s.c > 0).map(|s| s.h * s.w).max().unwrap_or(0)
}

impl GpuOperator for DistortionGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let meta = self.op.plan_batch(&ws.host_view(), input.meta())?;
        let dtype = meta.dtype();
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let pixels = max_pixels(&self.op);
        if pixels == 0 {
            return Ok(vec![out]);
        }
        let op = &self.op;
        let base = self.params.upload_with(ws, block_len(op), |block, base| {
            write_block(op, dtype, block, base, |i| (input.sample_ptr(i), out.sample_ptr(i)));
            Ok(())
        })?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "distortion", SRC, &kernel_name(op.kind, dtype))?;
        // SAFETY: each descriptor points into `input` and `out` (alive, ordered on this
        // stream, h x w x c elements each) and at the tables in the uploaded block, which
        // cover every row and column of the samples water applies to; every read is checked
        // against the sample's h and w.
        unsafe {
            launch_records::<DistortSample>(&ws.stream, &f, base, op.samples.len(), pixels)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("distortion", SRC, &[("DistortSample", &DistortSample::LAYOUT)]);
    }
}

/// distortion.cu compiled for the host against tools/cuda_shim/shim.h and run there, on the
/// blocks the gpu backend uploads: the bytes of the cpu backend.
#[cfg(test)]
mod host_run {
    use std::sync::OnceLock;

    use crate::ops::gpu_params::HostKernels;

    use super::*;
    use crate::ops::distortion::tests::context;
    use crate::ops::distortion::water::Wave;
    use crate::ops::distortion::{SPHERE, WATER};
    use crate::ops::{ArgValue, OpDef, Operator, Workspace};
    use crate::tensor::TensorList;

    const HARNESS: &str = r#"#include "@SHIM@"
#include "@SRC@"
#include <string>

typedef void (*Kernel)(const DistortSample*);
struct Entry { const char* name; Kernel f; };
static const Entry entries[] = {
    {"water_u8", water_u8}, {"water_f32", water_f32}, {"sphere_u8", sphere_u8}, {"sphere_f32", sphere_f32},
    {"jitter_u8", jitter_u8}, {"jitter_f32", jitter_f32},
};

static FILE* in_file;
static void read_exactly(void* p, size_t n) {
    if (fread(p, 1, n, in_file) != n) { fprintf(stderr, "short case file\n"); exit(2); }
}
// A buffer of `len` bytes from the file, 8-byte aligned.
static std::vector<unsigned long long> read_buffer(unsigned long long* len) {
    read_exactly(len, 8);
    std::vector<unsigned long long> v(*len / 8 + 1);
    read_exactly(v.data(), *len);
    return v;
}

// Case file: name, samples, threads, blocks, the parameter block (addresses as offsets:
// in / out into the input and output, rows / cols into the block), the input, the output
// length. Prints the output.
int main(int argc, char** argv) {
    if (argc != 2 || !(in_file = fopen(argv[1], "rb"))) return 2;
    unsigned name_len;
    read_exactly(&name_len, 4);
    std::string name(name_len, '\0');
    read_exactly(&name[0], name_len);
    int n, threads, blocks;
    read_exactly(&n, 4); read_exactly(&threads, 4); read_exactly(&blocks, 4);
    unsigned long long block_len, in_len, out_len;
    std::vector<unsigned long long> block = read_buffer(&block_len);
    std::vector<unsigned long long> input = read_buffer(&in_len);
    read_exactly(&out_len, 8);
    // Bytes no thread writes show as 0xab.
    std::vector<unsigned long long> out(out_len / 8 + 1, 0xababababababababULL);
    DistortSample* samples = (DistortSample*)block.data();
    for (int j = 0; j < n; j++) {
        samples[j].in += (unsigned long long)input.data();
        samples[j].out += (unsigned long long)out.data();
        samples[j].rows += (unsigned long long)block.data();
        samples[j].cols += (unsigned long long)block.data();
    }
    Kernel kernel = nullptr;
    for (const Entry& e : entries)
        if (name == e.name) kernel = e.f;
    if (!kernel) { fprintf(stderr, "no kernel %s\n", name.c_str()); return 3; }
    blockDim = {(unsigned)threads, 1, 1};
    gridDim = {(unsigned)blocks, (unsigned)n, 1};
    for (unsigned y = 0; y < (unsigned)n; y++)
        for (unsigned b = 0; b < (unsigned)blocks; b++)
            for (unsigned t = 0; t < (unsigned)threads; t++) {
                blockIdx = {b, y, 0};
                threadIdx = {t, 0, 0};
                kernel(samples);
            }
    fwrite(out.data(), 1, out_len, stdout);
    return 0;
}
"#;

    /// The kernels of `distortion.cu` on the host, built once per test run.
    fn harness() -> &'static HostKernels {
        static KERNELS: OnceLock<HostKernels> = OnceLock::new();
        KERNELS.get_or_init(|| HostKernels::build("distortion", SRC, HARNESS))
    }

    /// Runs `kernel` on the host over `block` for `n` samples; returns the output bytes.
    fn run_on_host(kernel: &str, n: usize, pixels: usize, block: &[u8], input: &[u8], out_len: usize) -> Vec<u8> {
        // Few threads and blocks: the grid-stride loop runs.
        let threads = 32i32;
        let blocks = pixels.div_ceil(32).clamp(1, 3) as i32;
        let mut case = Vec::new();
        case.extend((kernel.len() as u32).to_le_bytes());
        case.extend(kernel.as_bytes());
        for v in [n as i32, threads, blocks] {
            case.extend(v.to_le_bytes());
        }
        for buf in [block, input] {
            case.extend((buf.len() as u64).to_le_bytes());
            case.extend(buf);
        }
        case.extend((out_len as u64).to_le_bytes());
        let stdout = harness().run(kernel, &case);
        assert_eq!(stdout.len(), out_len);
        stdout
    }

    /// Equal bits, any NaN equal to any NaN for FLOAT.
    fn same_bits(t: DType, a: &[u8], b: &[u8]) -> bool {
        if t != DType::F32 {
            return a == b;
        }
        a.len() == b.len()
            && a.chunks_exact(4).zip(b.chunks_exact(4)).all(|(x, y)| {
                let (x, y) = (f32::from_le_bytes(x.try_into().unwrap()), f32::from_le_bytes(y.try_into().unwrap()));
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
            })
    }

    fn distortion(def: &OpDef, args: Vec<(&str, ArgValue)>) -> Distortion {
        let ctx = context(def, args).unwrap();
        let kind = if def.is(&WATER) {
            Kind::Water(Wave::new(&ctx))
        } else if def.is(&super::super::JITTER) {
            Kind::Jitter(ctx.args.int("nDegree") as u32)
        } else {
            Kind::Sphere
        };
        Distortion::new(&ctx, kind).unwrap()
    }

    /// `def` with `args` on `x` (and `mask`): the cpu backend, and distortion.cu on the
    /// host over the block the gpu backend would upload, give the same bytes.
    fn check(def: &OpDef, args: Vec<(&str, ArgValue)>, x: &TensorList, mask: Option<&TensorList>) {
        let what = format!("{} {args:?} on {} {:?}", def.schema.name, x.dtype(), (0..x.len()).map(|i| x.shape(i).to_vec()).collect::<Vec<_>>());
        let mut d = distortion(def, args);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let mut arg_inputs = std::collections::HashMap::new();
        if let Some(m) = mask {
            arg_inputs.insert("mask", m);
        }
        let ws = Workspace { inputs: vec![x], arg_inputs, iteration: 0, batch_size: x.len(), frames: None, pool: &pool };
        let want = d.run(&ws).unwrap().remove(0);
        let meta = d.plan_batch(&ws, x.meta()).unwrap();
        let pixels = max_pixels(&d);
        if pixels == 0 {
            return; // no launch
        }
        let mut block = vec![0u8; block_len(&d)];
        write_block(&d, x.dtype(), &mut block, 0, |i| (x.offset(i) as u64, meta.offset(i) as u64));
        let input = &x.buffer().as_slice()[..x.total_bytes()];
        let got = run_on_host(&kernel_name(d.kind, x.dtype()), x.len(), pixels, &block, input, meta.total_bytes());
        for i in 0..x.len() {
            let g = &got[meta.byte_range(i)];
            assert!(same_bits(x.dtype(), want.bytes(i), g), "{what}: sample {i}: cpu {:?} vs host-run kernel {:?}", want.bytes(i), g);
        }
    }

    /// A batch of `shapes`: UINT8 over its range, or FLOAT in [-20, 280).
    fn batch(t: DType, shapes: &[Vec<usize>], seed: u64) -> TensorList {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let x = if t == DType::U8 {
            let data: Vec<Vec<u8>> = shapes.iter().map(|s| (0..s.iter().product::<usize>()).map(|_| next() as u8).collect()).collect();
            TensorList::from_samples(shapes, &data)
        } else {
            let data: Vec<Vec<f32>> = shapes.iter().map(|s| (0..s.iter().product::<usize>()).map(|_| (next() >> 40) as f32 / (1u64 << 24) as f32 * 300.0 - 20.0).collect()).collect();
            TensorList::from_samples(shapes, &data)
        };
        x.with_layout("HWC")
    }

    fn interp(linear: bool) -> (&'static str, ArgValue) {
        ("interp_type", ArgValue::Int(linear as i64))
    }

    #[test]
    fn water_on_the_host_equals_the_cpu() {
        let shapes = vec![vec![37, 53, 3], vec![5, 200, 4], vec![1, 1, 1], vec![0, 4, 3], vec![4, 4, 0], vec![64, 9, 1]];
        let waves: Vec<Vec<(&str, ArgValue)>> = vec![
            vec![],
            vec![("ampl_x", ArgValue::Float(2.0)), ("ampl_y", ArgValue::Float(3.0)), ("freq_x", ArgValue::Float(0.06)), ("freq_y", ArgValue::Float(0.08)), ("phase_x", ArgValue::Float(0.2)), ("phase_y", ArgValue::Float(0.5))],
            vec![("ampl_x", ArgValue::Float(-7.3)), ("ampl_y", ArgValue::Float(13.1)), ("freq_x", ArgValue::Float(1.7)), ("freq_y", ArgValue::Float(-0.3)), ("phase_x", ArgValue::Float(100.2)), ("phase_y", ArgValue::Float(-3.5))],
            // Points past the int range, and NaN points.
            vec![("ampl_x", ArgValue::Float(1e10))],
            vec![("ampl_y", ArgValue::Float(f64::NAN))],
        ];
        for (k, t) in [DType::U8, DType::F32].into_iter().enumerate() {
            let x = batch(t, &shapes, 1 + k as u64);
            for wave in &waves {
                for linear in [false, true] {
                    for fill in [0.0, 77.6, 300.0, -1.25] {
                        let mut args = wave.clone();
                        args.extend([interp(linear), ("fill_value", ArgValue::Float(fill))]);
                        check(&WATER, args, &x, None);
                    }
                }
            }
        }
    }

    #[test]
    fn sphere_on_the_host_equals_the_cpu() {
        let shapes = vec![vec![1, 1, 3], vec![1, 2, 3], vec![2, 1, 3], vec![3, 1, 2], vec![30, 41, 3], vec![7, 300, 1], vec![0, 5, 3], vec![4, 4, 0]];
        for (k, t) in [DType::U8, DType::F32].into_iter().enumerate() {
            let x = batch(t, &shapes, 10 + k as u64);
            for linear in [false, true] {
                for fill in [0.0, 5.5, -1.7] {
                    check(&SPHERE, vec![interp(linear), ("fill_value", ArgValue::Float(fill))], &x, None);
                }
            }
        }
    }

    #[test]
    fn jitter_on_the_host_equals_the_cpu() {
        let shapes = vec![vec![1, 1, 3], vec![2, 3, 3], vec![30, 41, 3], vec![7, 300, 1], vec![0, 5, 3], vec![4, 4, 0]];
        for (k, t) in [DType::U8, DType::F32].into_iter().enumerate() {
            let x = batch(t, &shapes, 30 + k as u64);
            for n in [1i64, 2, 5, 16] {
                for fill in [0.0, 5.5] {
                    check(&super::super::JITTER, vec![("nDegree", ArgValue::Int(n)), ("fill_value", ArgValue::Float(fill)), ("seed", ArgValue::Int(7))], &x, None);
                }
            }
        }
    }

    #[test]
    fn masked_samples_are_copied_on_the_host_too() {
        let shapes = vec![vec![9, 11, 3], vec![12, 7, 3], vec![5, 5, 3]];
        let mask = TensorList::from_samples(&[vec![], vec![], vec![]], &[vec![0i32], vec![1i32], vec![0i32]]);
        for t in [DType::U8, DType::F32] {
            let x = batch(t, &shapes, 20);
            for def in [&WATER, &SPHERE] {
                for linear in [false, true] {
                    check(def, vec![interp(linear)], &x, Some(&mask));
                }
            }
        }
    }
}
