//! `fn.experimental.warp_perspective` on the GPU: the cpu twin's plan, then one launch of
//! `perspective.cu` for the batch, whose arithmetic is the cpu backend's (OpenCV's), so both
//! backends give the same bits. (DALI's GPU operator runs CV-CUDA, whose results differ from
//! its cpu operator's; Sluice's two backends agree with DALI's cpu one.)

use super::cv::{self, Interp};
use super::perspective::{Plan, Planes, WarpPerspective};
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::channel::short_name;
use crate::tensor::{DType, TensorListGpu};

pub(crate) const SRC: &str = concat!(include_str!("cv_sampler.cuh"), include_str!("perspective.cu"));

cuda_struct! {
    /// One sample's warp (`struct PerspectiveSample` in perspective.cu).
    pub(crate) struct PerspectiveSample {
        src: u64,
        dst: u64,
        /// Old path: destination pixel -> source point, f64.
        md: [f64; 9],
        /// New kernels: the same map in f32.
        m: [f32; 9],
        /// Per channel, the pixel type's values.
        fill: [f32; 4],
        in_h: i32,
        in_w: i32,
        c: i32,
        out_h: i32,
        out_w: i32,
        planes: i32,
        /// 0 nearest, 1 linear, 2 cubic.
        interp: i32,
        border: i32,
        fresh: i32,
        block_w: i32,
        vec_end: i32,
    }
}

impl PerspectiveSample {
    /// Sample `planes` at `src`, warped by `plan` into `dst` (pixel type `t`).
    pub(crate) fn new(src: u64, dst: u64, t: DType, planes: Planes, plan: &Plan, interp: Interp, border: cv::BorderMode) -> PerspectiveSample {
        let fill = plan.fill.map(|v| fill_as_f32(t, v));
        PerspectiveSample {
            src,
            dst,
            md: plan.map.m,
            m: plan.map.f32(),
            fill,
            in_h: planes.h as i32,
            in_w: planes.w as i32,
            c: planes.c as i32,
            out_h: plan.out_h as i32,
            out_w: plan.out_w as i32,
            planes: planes.planes as i32,
            interp: match interp {
                Interp::Nearest => 0,
                Interp::Linear => 1,
                Interp::Cubic => 2,
            },
            border: border as i32,
            // Also which bicubic kernel: `cv::cubic_vector_kernel` is the same rule.
            fresh: cv::new_kernels(t, planes.c) as i32,
            block_w: cv::old_block_width(plan.out_h, plan.out_w) as i32,
            vec_end: cv::vector_end(plan.out_w) as i32,
        }
    }

    fn pixels(&self) -> usize {
        self.planes as usize * self.out_h as usize * self.out_w as usize
    }
}

/// `fill` as the kernels hold it: the pixel type's value (`saturate_cast`), in f32 (exact
/// for UINT8, UINT16, INT16).
pub(crate) fn fill_as_f32(t: DType, v: f64) -> f32 {
    struct Fill(f64);
    impl cv::CvKernel for Fill {
        type Output = f32;
        fn run<T: cv::CvPixel>(self) -> f32 {
            T::from_f64(self.0).to_f32()
        }
    }
    cv::dispatch(t, Fill(v)).expect("a warp pixel type")
}

/// GPU backend: the cpu twin plans, one launch warps every sample.
pub(crate) struct WarpPerspectiveGpu {
    pub(crate) warp: WarpPerspective,
    pub(crate) params: ParamUpload,
}

impl GpuOperator for WarpPerspectiveGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let host = ws.host_view();
        let matrices = host.inputs.first().copied();
        let (meta, kind) = self.warp.plan_batch(&host, input.meta(), matrices)?;
        let t = meta.dtype();
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let mut desc = Vec::with_capacity(input.len());
        for (i, plan) in self.warp.plans.iter().enumerate() {
            let planes = kind.split(input.shape(i));
            if planes.planes * plan.out_h * plan.out_w * planes.c == 0 {
                continue; // nothing to write (the plan refused an empty source otherwise)
            }
            desc.push(PerspectiveSample::new(input.sample_ptr(i), out.sample_ptr(i), t, planes, plan, self.warp.interp, self.warp.border));
        }
        let max_pixels = desc.iter().map(PerspectiveSample::pixels).max().unwrap_or(0);
        if max_pixels == 0 {
            return Ok(vec![out]);
        }
        let kernel = format!("warp_perspective_{}", short_name(t).expect("a warp pixel type"));
        let base = self.params.upload(ws, bytemuck::cast_slice(&desc))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "warp_perspective", SRC, &kernel)?;
        // SAFETY: each descriptor points into `input` and `out` (alive, ordered on this
        // stream); each thread writes one pixel inside its sample's output and reads inside
        // its plane of the input (border indices are clamped into it).
        unsafe {
            launch_records::<PerspectiveSample>(&ws.stream, &f, base, desc.len(), max_pixels)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use super::*;
    use crate::ops::gpu_params::HostKernels;
    use crate::ops::{ArgValue, Operator, Workspace};
    use crate::tensor::TensorList;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("warp_perspective", SRC, &[("PerspectiveSample", &PerspectiveSample::LAYOUT)]);
    }

    const HARNESS: &str = r#"#include "@SHIM@"
#include "@SRC@"
#include <string>

typedef void (*Kernel)(const PerspectiveSample*);
struct Entry { const char* name; Kernel f; };
static const Entry entries[] = {
    {"warp_perspective_u8", warp_perspective_u8}, {"warp_perspective_u16", warp_perspective_u16},
    {"warp_perspective_i16", warp_perspective_i16}, {"warp_perspective_f32", warp_perspective_f32},
};

static FILE* in_file;
static void read_exactly(void* p, size_t n) {
    if (fread(p, 1, n, in_file) != n) { fprintf(stderr, "short case file\n"); exit(2); }
}
static std::vector<unsigned long long> read_buffer(unsigned long long* len) {
    read_exactly(len, 8);
    std::vector<unsigned long long> v(*len / 8 + 1);
    read_exactly(v.data(), *len);
    return v;
}

// Case file: name, samples, threads, blocks, the descriptors (src / dst as offsets into the
// input and output), the input, the output length. Prints the output.
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
    std::vector<unsigned long long> out(out_len / 8 + 1, 0xababababababababULL);
    PerspectiveSample* samples = (PerspectiveSample*)block.data();
    for (int j = 0; j < n; j++) {
        samples[j].src += (unsigned long long)input.data();
        samples[j].dst += (unsigned long long)out.data();
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

    fn harness() -> &'static HostKernels {
        static KERNELS: OnceLock<HostKernels> = OnceLock::new();
        KERNELS.get_or_init(|| HostKernels::build("warp_perspective", SRC, HARNESS))
    }

    /// `x` warped with `args` (and per-sample `matrices` as the second input): the cpu
    /// backend, and perspective.cu on the host over the descriptors the gpu backend would
    /// upload, give the same bytes.
    fn check(args: Vec<(&str, ArgValue)>, x: &TensorList, matrices: Option<&TensorList>) {
        let what = format!("{args:?} on {} {:?}", x.dtype(), (0..x.len()).map(|i| x.shape(i).to_vec()).collect::<Vec<_>>());
        let ctx = crate::ops::warp::perspective::tests::context(args);
        let mut op = WarpPerspective::new(&ctx).unwrap();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let mut inputs = vec![x];
        inputs.extend(matrices);
        let ws = Workspace { inputs, arg_inputs: Default::default(), iteration: 0, batch_size: x.len(), frames: None, pool: &pool };
        let want = op.run(&ws).unwrap().remove(0);
        let (meta, kind) = op.plan_batch(&ws, x.meta(), matrices).unwrap();
        let mut desc = Vec::new();
        let mut kept = Vec::new();
        for (i, plan) in op.plans.iter().enumerate() {
            let planes = kind.split(x.shape(i));
            if planes.planes * plan.out_h * plan.out_w * planes.c == 0 {
                continue;
            }
            kept.push(i);
            desc.push(PerspectiveSample::new(x.offset(i) as u64, meta.offset(i) as u64, x.dtype(), planes, plan, op.interp, op.border));
        }
        let pixels = desc.iter().map(PerspectiveSample::pixels).max().unwrap_or(0);
        if pixels == 0 {
            return;
        }
        let kernel = format!("warp_perspective_{}", short_name(x.dtype()).unwrap());
        let mut case = Vec::new();
        case.extend((kernel.len() as u32).to_le_bytes());
        case.extend(kernel.as_bytes());
        // Few threads and blocks: the grid-stride loop runs.
        for v in [desc.len() as i32, 32, pixels.div_ceil(32).clamp(1, 3) as i32] {
            case.extend(v.to_le_bytes());
        }
        let block: &[u8] = bytemuck::cast_slice(&desc);
        let input = &x.buffer().as_slice()[..x.total_bytes()];
        for buf in [block, input] {
            case.extend((buf.len() as u64).to_le_bytes());
            case.extend(buf);
        }
        case.extend((meta.total_bytes() as u64).to_le_bytes());
        let got = harness().run(&kernel, &case);
        for i in kept {
            let g = &got[meta.byte_range(i)];
            let w = want.bytes(i);
            let same = if x.dtype() == DType::F32 {
                w.chunks_exact(4).zip(g.chunks_exact(4)).all(|(a, b)| {
                    let (a, b) = (f32::from_le_bytes(a.try_into().unwrap()), f32::from_le_bytes(b.try_into().unwrap()));
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
                })
            } else {
                w == g
            };
            assert!(same, "{what}: sample {i}: cpu and host-run kernel differ");
        }
    }

    fn batch(t: DType, shapes: &[Vec<usize>], layout: &str, seed: u64) -> TensorList {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let n = |s: &Vec<usize>| s.iter().product::<usize>();
        let x = match t {
            DType::U8 => TensorList::from_samples(shapes, &shapes.iter().map(|s| (0..n(s)).map(|_| next() as u8).collect::<Vec<u8>>()).collect::<Vec<_>>()),
            DType::U16 => TensorList::from_samples(shapes, &shapes.iter().map(|s| (0..n(s)).map(|_| next() as u16).collect::<Vec<u16>>()).collect::<Vec<_>>()),
            DType::I16 => TensorList::from_samples(shapes, &shapes.iter().map(|s| (0..n(s)).map(|_| next() as i16).collect::<Vec<i16>>()).collect::<Vec<_>>()),
            _ => TensorList::from_samples(shapes, &shapes.iter().map(|s| (0..n(s)).map(|_| (next() >> 40) as f32 / (1u64 << 24) as f32 * 300.0 - 20.0).collect::<Vec<f32>>()).collect::<Vec<_>>()),
        };
        x.with_layout(layout)
    }

    #[test]
    fn warp_perspective_on_the_host_equals_the_cpu() {
        let m = |v: [f64; 9]| ("matrix", ArgValue::FloatList(v.to_vec()));
        let matrices = [
            [0.9, 0.1, 3.5, -0.05, 1.1, -2.0, 0.001, -0.002, 1.0],
            [1.2, -0.3, -10.0, 0.2, 0.8, 5.0, -0.003, 0.004, 1.1],
            // Points at and past the horizon (w <= 0 inside the output).
            [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.05, 0.02, -1.0],
        ];
        let shapes = vec![vec![23, 41, 3], vec![1, 70, 3], vec![40, 1, 3], vec![3, 4, 0]];
        for (k, t) in [DType::U8, DType::U16, DType::I16, DType::F32].into_iter().enumerate() {
            for (layout, shapes) in [("HWC", shapes.clone()), ("HWC", vec![vec![17, 33, 2], vec![5, 9, 4]]), ("FCHW", vec![vec![2, 3, 9, 18]])] {
                let x = batch(t, &shapes, layout, 1 + k as u64);
                for mat in matrices {
                    for (interp, border) in [(0, "constant"), (1, "constant"), (1, "replicate"), (0, "reflect"), (1, "reflect_101"), (1, "wrap"), (2, "constant"), (2, "replicate"), (2, "reflect_101")] {
                        let mut args = vec![m(mat), ("interp_type", ArgValue::Int(interp)), ("border_mode", ArgValue::Str(border.into())), ("size", ArgValue::FloatList(vec![19.0, 37.0]))];
                        if border == "constant" {
                            args.push(("fill_value", ArgValue::FloatList(vec![77.6])));
                        }
                        check(args, &x, None);
                    }
                }
            }
        }
    }

    #[test]
    fn per_sample_matrices_and_inverse_maps_on_the_host() {
        let x = batch(DType::U8, &[vec![30, 50, 1], vec![12, 300, 3]], "HWC", 9);
        let mats = TensorList::from_samples(&[vec![3, 3], vec![3, 3]], &[vec![1.1f32, 0.2, -3.0, 0.1, 0.9, 2.0, 0.001, 0.0, 1.0], vec![0.7f32, 0.0, 1.0, 0.0, 1.3, 0.0, 0.0, 0.002, 1.0]]);
        for inverse in [true, false] {
            for origin in ["corner", "center"] {
                check(vec![("inverse_map", ArgValue::Bool(inverse)), ("pixel_origin", ArgValue::Str(origin.into()))], &x, Some(&mats));
            }
        }
    }
}
