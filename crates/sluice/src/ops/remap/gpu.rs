//! `fn.experimental.remap` on the GPU: the cpu twin's plan, then one launch of `remap.cu`
//! for the batch, with the cpu backend's (OpenCV's) arithmetic: both backends give the same
//! bits. The maps stay on the GPU (DALI's GPU operator takes them there too).

use super::{Plan, Remap};
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::warp::cv::{self, Interp};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::channel::short_name;
use crate::tensor::{DType, TensorListGpu};

pub(crate) const SRC: &str = concat!(include_str!("../warp/cv_sampler.cuh"), include_str!("remap.cu"));

cuda_struct! {
    /// One sample's remap (`struct RemapSample` in remap.cu).
    pub(crate) struct RemapSample {
        src: u64,
        dst: u64,
        mapx: u64,
        mapy: u64,
        /// Map elements between frames: h * w, or 0 (one map for every frame).
        map_frame: i64,
        h: i32,
        w: i32,
        c: i32,
        frames: i32,
        linear: i32,
        vec_end: i32,
        shift: f32,
        /// 1: OpenCV's new kernels; 0: the old path (linear in 1/32 pixel steps).
        fresh: i32,
    }
}

impl RemapSample {
    pub(crate) fn new((src, dst, mapx, mapy): (u64, u64, u64, u64), t: DType, plan: &Plan, interp: Interp, shift: f32) -> RemapSample {
        RemapSample {
            src,
            dst,
            mapx,
            mapy,
            map_frame: if plan.per_frame_maps { (plan.h * plan.w) as i64 } else { 0 },
            h: plan.h as i32,
            w: plan.w as i32,
            c: plan.c as i32,
            frames: plan.frames as i32,
            linear: (interp == Interp::Linear) as i32,
            vec_end: cv::vector_end(plan.w) as i32,
            shift,
            fresh: cv::new_kernels(t, plan.c) as i32,
        }
    }

    fn pixels(&self) -> usize {
        self.frames as usize * self.h as usize * self.w as usize
    }
}

/// GPU backend: the cpu twin plans, one launch remaps every sample.
pub(crate) struct RemapGpu {
    pub(crate) remap: Remap,
    pub(crate) params: ParamUpload,
}

impl GpuOperator for RemapGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let (input, mapx, mapy) = (ws.gpu_inputs[0], ws.gpu_inputs[1], ws.gpu_inputs[2]);
        let meta = self.remap.plan_batch(&ws.host_view(), input.meta(), mapx.meta(), mapy.meta())?;
        let t = meta.dtype();
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let desc: Vec<RemapSample> = self
            .remap
            .plans
            .iter()
            .enumerate()
            .filter(|(_, p)| p.frames * p.h * p.w * p.c > 0)
            .map(|(i, p)| RemapSample::new((input.sample_ptr(i), out.sample_ptr(i), mapx.sample_ptr(i), mapy.sample_ptr(i)), t, p, self.remap.interp, self.remap.shift))
            .collect();
        let max_pixels = desc.iter().map(RemapSample::pixels).max().unwrap_or(0);
        if max_pixels == 0 {
            return Ok(vec![out]);
        }
        let kernel = format!("remap_{}", short_name(t).expect("a remap pixel type"));
        let base = self.params.upload(ws, bytemuck::cast_slice(&desc))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "remap", SRC, &kernel)?;
        // SAFETY: each descriptor points into `input`, the maps and `out` (alive, ordered on
        // this stream; plan_batch checked the maps hold h * w points per map); each thread
        // writes one pixel of its sample and reads inside its frame (border taps read 0).
        unsafe {
            launch_records::<RemapSample>(&ws.stream, &f, base, desc.len(), max_pixels)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use super::*;
    use crate::ops::gpu_params::HostKernels;
    use crate::ops::remap::tests::context;
    use crate::ops::{ArgValue, Operator, Workspace};
    use crate::tensor::TensorList;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("remap", SRC, &[("RemapSample", &RemapSample::LAYOUT)]);
    }

    const HARNESS: &str = r#"#include "@SHIM@"
#include "@SRC@"
#include <string>

typedef void (*Kernel)(const RemapSample*);
struct Entry { const char* name; Kernel f; };
static const Entry entries[] = {{"remap_u8", remap_u8}, {"remap_u16", remap_u16}, {"remap_i16", remap_i16}, {"remap_f32", remap_f32}};

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

// Case file: name, samples, threads, blocks, the descriptors (addresses as offsets into the
// input, the output, and the maps), the input, the x maps, the y maps, the output length.
int main(int argc, char** argv) {
    if (argc != 2 || !(in_file = fopen(argv[1], "rb"))) return 2;
    unsigned name_len;
    read_exactly(&name_len, 4);
    std::string name(name_len, '\0');
    read_exactly(&name[0], name_len);
    int n, threads, blocks;
    read_exactly(&n, 4); read_exactly(&threads, 4); read_exactly(&blocks, 4);
    unsigned long long block_len, in_len, mx_len, my_len, out_len;
    std::vector<unsigned long long> block = read_buffer(&block_len);
    std::vector<unsigned long long> input = read_buffer(&in_len);
    std::vector<unsigned long long> mx = read_buffer(&mx_len);
    std::vector<unsigned long long> my = read_buffer(&my_len);
    read_exactly(&out_len, 8);
    std::vector<unsigned long long> out(out_len / 8 + 1, 0xababababababababULL);
    RemapSample* samples = (RemapSample*)block.data();
    for (int j = 0; j < n; j++) {
        samples[j].src += (unsigned long long)input.data();
        samples[j].dst += (unsigned long long)out.data();
        samples[j].mapx += (unsigned long long)mx.data();
        samples[j].mapy += (unsigned long long)my.data();
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
        KERNELS.get_or_init(|| HostKernels::build("remap", SRC, HARNESS))
    }

    fn check(args: Vec<(&str, ArgValue)>, x: &TensorList, mx: &TensorList, my: &TensorList) {
        let what = format!("{args:?} on {} {:?}", x.dtype(), (0..x.len()).map(|i| x.shape(i).to_vec()).collect::<Vec<_>>());
        let mut op = Remap::new(&context(args).unwrap()).unwrap();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let ws = Workspace { inputs: vec![x, mx, my], arg_inputs: Default::default(), iteration: 0, batch_size: x.len(), frames: None, pool: &pool };
        let want = op.run(&ws).unwrap().remove(0);
        let meta = op.plan_batch(&ws, x.meta(), mx.meta(), my.meta()).unwrap();
        let kept: Vec<usize> = (0..x.len()).filter(|&i| meta.numel(i) > 0).collect();
        let desc: Vec<RemapSample> = kept.iter().map(|&i| RemapSample::new((x.offset(i) as u64, meta.offset(i) as u64, mx.offset(i) as u64, my.offset(i) as u64), x.dtype(), &op.plans[i], op.interp, op.shift)).collect();
        let pixels = desc.iter().map(RemapSample::pixels).max().unwrap_or(0);
        if pixels == 0 {
            return;
        }
        let kernel = format!("remap_{}", short_name(x.dtype()).unwrap());
        let mut case = Vec::new();
        case.extend((kernel.len() as u32).to_le_bytes());
        case.extend(kernel.as_bytes());
        for v in [desc.len() as i32, 32, pixels.div_ceil(32).clamp(1, 3) as i32] {
            case.extend(v.to_le_bytes());
        }
        let bufs: [&[u8]; 4] = [bytemuck::cast_slice(&desc), &x.buffer().as_slice()[..x.total_bytes()], &mx.buffer().as_slice()[..mx.total_bytes()], &my.buffer().as_slice()[..my.total_bytes()]];
        for buf in bufs {
            case.extend((buf.len() as u64).to_le_bytes());
            case.extend(buf);
        }
        case.extend((meta.total_bytes() as u64).to_le_bytes());
        let got = harness().run(&kernel, &case);
        for i in kept {
            let (g, w) = (&got[meta.byte_range(i)], want.bytes(i));
            let same = if x.dtype() == DType::F32 {
                w.chunks_exact(4).zip(g.chunks_exact(4)).all(|(a, b)| a == b || (f32::from_le_bytes(a.try_into().unwrap()).is_nan() && f32::from_le_bytes(b.try_into().unwrap()).is_nan()))
            } else {
                w == g
            };
            assert!(same, "{what}: sample {i}: cpu and host-run kernel differ");
        }
    }

    #[test]
    fn remap_on_the_host_equals_the_cpu() {
        let mut state = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let shapes = [vec![13usize, 37, 3], vec![4, 70, 1], vec![1, 1, 3], vec![0, 5, 1]];
        let maps: Vec<(Vec<f32>, Vec<f32>)> = shapes
            .iter()
            .map(|s| {
                let n = s[0] * s[1];
                // Points around and past the image, some exactly on pixel centres and halves.
                let coord = |r: u64, len: usize| match r % 4 {
                    0 => (r >> 8) as f32 % (len as f32 + 4.0) - 2.0,
                    1 => ((r >> 8) % (2 * len as u64 + 4)) as f32 * 0.5 - 1.0,
                    _ => (r >> 11) as f32 / (1u64 << 53) as f32 * (len as f32 + 2.0) - 1.0,
                };
                ((0..n).map(|_| coord(next(), s[1])).collect(), (0..n).map(|_| coord(next(), s[0])).collect())
            })
            .collect();
        let map_shapes: Vec<Vec<usize>> = shapes.iter().map(|s| vec![s[0], s[1]]).collect();
        let mx = TensorList::from_samples(&map_shapes, &maps.iter().map(|m| m.0.clone()).collect::<Vec<_>>());
        let my = TensorList::from_samples(&map_shapes, &maps.iter().map(|m| m.1.clone()).collect::<Vec<_>>());
        for t in [DType::U8, DType::U16, DType::I16, DType::F32] {
            let data: Vec<Vec<f32>> = shapes.iter().map(|s| (0..s.iter().product::<usize>()).map(|_| (next() % 60000) as f32 - if t == DType::I16 { 30000.0 } else { 0.0 }).collect()).collect();
            let x = match t {
                DType::U8 => TensorList::from_samples(&shapes, &data.iter().map(|d| d.iter().map(|&v| v as u8).collect::<Vec<u8>>()).collect::<Vec<_>>()),
                DType::U16 => TensorList::from_samples(&shapes, &data.iter().map(|d| d.iter().map(|&v| v as u16).collect::<Vec<u16>>()).collect::<Vec<_>>()),
                DType::I16 => TensorList::from_samples(&shapes, &data.iter().map(|d| d.iter().map(|&v| v as i16).collect::<Vec<i16>>()).collect::<Vec<_>>()),
                _ => TensorList::from_samples(&shapes, &data.iter().map(|d| d.iter().map(|&v| v * 0.01 - 3.0).collect::<Vec<f32>>()).collect::<Vec<_>>()),
            }
            .with_layout("HWC");
            for interp in [0, 1] {
                for origin in ["corner", "center"] {
                    check(vec![("interp", ArgValue::Int(interp)), ("pixel_origin", ArgValue::Str(origin.into()))], &x, &mx, &my);
                }
            }
        }
    }
}
