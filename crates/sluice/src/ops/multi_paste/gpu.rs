//! GPU backend of `fn.multi_paste`: the cpu twin plans the batch (checks, per-sample
//! arguments, every region in absolute coordinates); one block of sample descriptors and
//! regions is uploaded and one launch of `multi_paste.cu` writes every output element from
//! the last region covering it (or 0), with the cpu's conversions, so both backends give the
//! same bytes.

use super::{MultiPaste, Region, SamplePlan};
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::channel::short_name;
use crate::tensor::{BatchMeta, TensorListGpu};

pub(super) const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("multi_paste.cu"));

cuda_struct! {
    /// One output sample (`struct MultiPasteSample` in multi_paste.cu).
    pub(super) struct MultiPasteSample {
        out: u64,
        /// Device address of the sample's first region.
        regions: u64,
        /// frames * height * width * channels.
        numel: i64,
        height: i64,
        width: i64,
        channels: i64,
        nregions: i32,
        /// 1 when the sample and every source it reads index below 2^31 (32-bit indexing).
        small: i32,
    }
}

cuda_struct! {
    /// One region (`struct MultiPasteRegion` in multi_paste.cu).
    pub(super) struct MultiPasteRegion {
        /// Device address of the source sample.
        r#in: u64,
        src_height: i64,
        src_width: i64,
        in_y: i64,
        in_x: i64,
        out_y: i64,
        out_x: i64,
        height: i64,
        width: i64,
    }
}

/// `v` as the kernels' signed 64-bit fields (sizes of host-side batches always fit).
fn i64_of(v: usize) -> i64 {
    i64::try_from(v).expect("sizes fit in i64")
}

/// The descriptor of output sample `s` (`numel` elements at `out`) whose regions start at
/// device address `regions`; `src_numel(r)` is the element count of region r's source.
pub(super) fn describe_sample(s: &SamplePlan, regions: &[Region], out: u64, regions_at: u64, src_numel: impl Fn(&Region) -> usize) -> MultiPasteSample {
    let numel = s.frames * s.height * s.width * s.channels;
    let small = numel <= i32::MAX as usize && regions.iter().all(|r| src_numel(r) <= i32::MAX as usize);
    MultiPasteSample {
        out,
        regions: regions_at,
        numel: i64_of(numel),
        height: i64_of(s.height),
        width: i64_of(s.width),
        channels: i64_of(s.channels),
        nregions: i32::try_from(regions.len()).expect("fewer than 2^31 regions per sample"),
        small: small as i32,
    }
}

/// The descriptor of region `r` read from device address `input`.
pub(super) fn describe_region(r: &Region, input: u64) -> MultiPasteRegion {
    MultiPasteRegion {
        r#in: input,
        src_height: i64_of(r.src_size[0]),
        src_width: i64_of(r.src_size[1]),
        in_y: i64_of(r.in_anchor[0]),
        in_x: i64_of(r.in_anchor[1]),
        out_y: i64_of(r.out_anchor[0]),
        out_x: i64_of(r.out_anchor[1]),
        height: i64_of(r.shape[0]),
        width: i64_of(r.shape[1]),
    }
}

pub(super) struct MultiPasteGpu {
    paste: MultiPaste,
    params: ParamUpload,
}

impl MultiPasteGpu {
    pub(super) fn new(paste: MultiPaste) -> MultiPasteGpu {
        MultiPasteGpu { paste, params: ParamUpload::default() }
    }
}

impl GpuOperator for MultiPasteGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let inputs = &ws.gpu_inputs;
        let metas: Vec<&BatchMeta> = inputs.iter().map(|t| t.meta()).collect();
        let meta = self.paste.plan_batch(&ws.host_view(), &metas)?;
        let (in_dtype, out_dtype) = (metas[0].dtype(), meta.dtype());
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let max_numel = (0..out.len()).map(|i| out.numel(i)).max().unwrap_or(0);
        if max_numel == 0 {
            return Ok(vec![out]);
        }
        let plan = &self.paste.plan;
        // One block: the sample descriptors, then every region (both structs are multiples
        // of 8 bytes, so the regions stay aligned).
        let desc_bytes = plan.samples.len() * std::mem::size_of::<MultiPasteSample>();
        let region_size = std::mem::size_of::<MultiPasteRegion>();
        let len = desc_bytes + plan.regions.len() * region_size;
        let base = self.params.upload_with(ws, len, |block, base| {
            let (descs, regions) = block.split_at_mut(desc_bytes);
            for (dst, r) in regions.chunks_exact_mut(region_size).zip(&plan.regions) {
                dst.copy_from_slice(bytemuck::bytes_of(&describe_region(r, inputs[r.input].sample_ptr(r.sample))));
            }
            let regions_at = base + desc_bytes as u64;
            for (i, (dst, s)) in descs.chunks_exact_mut(std::mem::size_of::<MultiPasteSample>()).zip(&plan.samples).enumerate() {
                let at = regions_at + (s.regions.start * region_size) as u64;
                let d = describe_sample(s, &plan.regions[s.regions.clone()], out.sample_ptr(i), at, |r| inputs[r.input].numel(r.sample));
                dst.copy_from_slice(bytemuck::bytes_of(&d));
            }
            Ok(())
        })?;
        let names = (short_name(in_dtype), short_name(out_dtype));
        let kernel = format!("multi_paste_{}_{}", names.0.expect("types checked by plan"), names.1.expect("types checked by plan"));
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "multi_paste", SRC, &kernel)?;
        // SAFETY: each descriptor points at `out`'s sample (numel elements of the output
        // type) and at its regions inside the uploaded block; each region points at a
        // sample of an input (alive, ordered on this stream) and was checked by the plan to
        // lie inside that source (every frame of it) and inside the canvas.
        unsafe {
            launch_records::<MultiPasteSample>(&ws.stream, &f, base, plan.samples.len(), max_numel)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use crate::ops::gpu_params::HostKernels;

    use super::super::tests::{ids, image, op, rows, run};
    use super::*;
    use crate::ops::ArgValue;
    use crate::tensor::{DType, TensorList};

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("multi_paste", SRC, &[("MultiPasteSample", &MultiPasteSample::LAYOUT), ("MultiPasteRegion", &MultiPasteRegion::LAYOUT)]);
    }

    /// A C++ program running one launch of multi_paste.cu on the CPU (tools/cuda_shim/shim.h,
    /// every thread of the grid in turn) from a case file (see [`run_on_host`]); it writes
    /// the output bytes.
    const HARNESS: &str = r#"#include <cstdlib>
#include <string>
#include "@SHIM@"
#include "@SRC@"
typedef void (*Kernel)(const MultiPasteSample*);

static FILE* in_file;
static void read_exactly(void* p, size_t n) {
    if (fread(p, 1, n, in_file) != n) { fprintf(stderr, "short case file\n"); exit(2); }
}

#define K(NAME) if (name == #NAME) kernel = NAME;

int main(int argc, char** argv) {
    if (argc != 2 || !(in_file = fopen(argv[1], "rb"))) return 2;
    unsigned name_len, n, nregions, threads, blocks;
    read_exactly(&name_len, 4);
    std::string name(name_len, '\0');
    read_exactly(&name[0], name_len);
    read_exactly(&n, 4); read_exactly(&nregions, 4); read_exactly(&threads, 4); read_exactly(&blocks, 4);
    std::vector<MultiPasteSample> samples(n);
    read_exactly(samples.data(), n * sizeof(MultiPasteSample));
    std::vector<MultiPasteRegion> regions(nregions + 1);
    read_exactly(regions.data(), nregions * sizeof(MultiPasteRegion));
    unsigned long long in_len, out_len;
    read_exactly(&in_len, 8);
    std::vector<unsigned long long> input(in_len / 8 + 1);
    read_exactly(input.data(), in_len);
    read_exactly(&out_len, 8);
    // Bytes no thread writes show as 0xab.
    std::vector<unsigned long long> out(out_len / 8 + 1, 0xababababababababULL);
    // Addresses in the case file are offsets: into the input, the output, the regions.
    for (MultiPasteRegion& r : regions) r.in += (unsigned long long)input.data();
    for (MultiPasteSample& s : samples) {
        s.out += (unsigned long long)out.data();
        s.regions = (unsigned long long)(regions.data() + s.regions);
    }
    Kernel kernel = nullptr;
    K(multi_paste_u8_u8) K(multi_paste_u8_i16) K(multi_paste_u8_i32) K(multi_paste_u8_f32)
    K(multi_paste_i16_u8) K(multi_paste_i16_i16) K(multi_paste_i16_i32) K(multi_paste_i16_f32)
    K(multi_paste_i32_u8) K(multi_paste_i32_i16) K(multi_paste_i32_i32) K(multi_paste_i32_f32)
    K(multi_paste_f32_u8) K(multi_paste_f32_i16) K(multi_paste_f32_i32) K(multi_paste_f32_f32)
    if (!kernel) { fprintf(stderr, "no kernel %s\n", name.c_str()); return 3; }
    blockDim = {threads, 1, 1};
    gridDim = {blocks, n, 1};
    for (unsigned y = 0; y < n; y++)
        for (unsigned b = 0; b < blocks; b++)
            for (unsigned t = 0; t < threads; t++) {
                blockIdx = {b, y, 0};
                threadIdx = {t, 0, 0};
                kernel(samples.data());
            }
    fwrite(out.data(), 1, out_len, stdout);
    return 0;
}
"#;

    /// The kernels of `multi_paste.cu` on the host, built once per test run.
    fn harness() -> &'static HostKernels {
        static KERNELS: OnceLock<HostKernels> = OnceLock::new();
        KERNELS.get_or_init(|| HostKernels::build("multi_paste", SRC, HARNESS))
    }

    /// Runs kernel `name` on the host (samples' `out` are byte offsets into an output of
    /// `out_len` bytes and `regions` indices into `regions`, whose `in` are byte offsets into
    /// `input`) with a small grid, so the threads' stride loop runs; returns the output.
    fn run_on_host(name: &str, samples: &[MultiPasteSample], regions: &[MultiPasteRegion], input: &[u8], out_len: usize) -> Vec<u8> {
        let (threads, blocks) = (32u32, 3u32);
        let mut case = Vec::new();
        case.extend((name.len() as u32).to_le_bytes());
        case.extend(name.as_bytes());
        for v in [samples.len() as u32, regions.len() as u32, threads, blocks] {
            case.extend(v.to_le_bytes());
        }
        case.extend(bytemuck::cast_slice::<MultiPasteSample, u8>(samples));
        case.extend(bytemuck::cast_slice::<MultiPasteRegion, u8>(regions));
        case.extend((input.len() as u64).to_le_bytes());
        case.extend(input);
        case.extend((out_len as u64).to_le_bytes());
        let stdout = harness().run(name, &case);
        assert_eq!(stdout.len(), out_len);
        stdout
    }

    /// Samples of `t` with `shapes`: bytes from a xorshift, FLOAT with NaNs (quiet and
    /// signaling), infinities, zeros and values past every integer range among them.
    fn batch(t: DType, shapes: &[[usize; 3]], seed: u64) -> TensorList {
        let shapes: Vec<&[usize]> = shapes.iter().map(|s| &s[..]).collect();
        let mut x = TensorList::new(t, 3, shapes).with_layout("HWC");
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let specials: [u32; 8] = [0x7fc1_2345, 0x7f80_0001, 0x7f80_0000, 0xff80_0000, 0x8000_0000, 0x4f40_0000, 0xcf40_0000, 0x4020_0000];
        for s in x.samples_mut() {
            for (k, b) in s.iter_mut().enumerate() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *b = (state >> 24) as u8;
                // FLOAT: mostly values of a few hundred (bits 23..30 of each word).
                if t == DType::F32 && k % 4 == 3 {
                    *b = (*b & 0x80) | 0x43;
                }
            }
            if t == DType::F32 {
                for (k, w) in s.chunks_exact_mut(4).enumerate().filter(|(k, _)| k % 5 == 0) {
                    w.copy_from_slice(&specials[(k / 5) % specials.len()].to_le_bytes());
                }
            }
        }
        x
    }

    #[test]
    fn the_kernel_run_on_the_host_equals_the_cpu_backend() {
        let types = [DType::U8, DType::I16, DType::I32, DType::F32];
        let shapes = [[9, 11, 3], [7, 6, 3], [9, 11, 3], [5, 4, 3]];
        // Overlapping regions, repeated sources, a sample with none, an empty region.
        let in_ids = ids(&[&[1, 0, 2], &[3], &[], &[0, 0]]);
        let in_anchors = rows(&[&[[0, 0], [2, 3], [1, 1]], &[[1, 1]], &[], &[[0, 0], [8, 10]]]);
        let shapes_arg = rows(&[&[[7, 6], [5, 5], [8, 8]], &[[4, 3]], &[], &[[0, 4], [1, 1]]]);
        let out_anchors = rows(&[&[[0, 0], [3, 4], [2, 2]], &[[6, 8]], &[], &[[3, 3], [0, 0]]]);
        for tin in types {
            for tout in types {
                let x = batch(tin, &shapes, 3 + tin as u64);
                let mut m = op(vec![("dtype", ArgValue::Int(tout as i64)), ("output_size", ArgValue::IntList(vec![10, 12]))], &["in_ids", "in_anchors", "shapes", "out_anchors"]).unwrap();
                let args = [("in_ids", &in_ids), ("in_anchors", &in_anchors), ("shapes", &shapes_arg), ("out_anchors", &out_anchors)];
                let want = run(&mut m, &[&x], &args).unwrap();
                let plan = &m.plan;
                let regions: Vec<MultiPasteRegion> = plan.regions.iter().map(|r| describe_region(r, x.offset(r.sample) as u64)).collect();
                let samples: Vec<MultiPasteSample> = plan
                    .samples
                    .iter()
                    .enumerate()
                    .map(|(i, s)| describe_sample(s, &plan.regions[s.regions.clone()], want.offset(i) as u64, s.regions.start as u64, |r| x.numel(r.sample)))
                    .collect();
                let input = &x.buffer().as_slice()[..x.total_bytes()];
                let name = format!("multi_paste_{}_{}", short_name(tin).unwrap(), short_name(tout).unwrap());
                let got = run_on_host(&name, &samples, &regions, input, want.total_bytes());
                for i in 0..want.len() {
                    assert_eq!(&got[want.byte_range(i)], want.bytes(i), "{name}: sample {i}");
                }
            }
        }
    }

    #[test]
    fn sequences_and_positional_inputs_on_the_host_equal_the_cpu_backend() {
        // Two positional FHWC inputs, 3 frames; the second pasted over the first.
        let a = image::<u8>(&[[6, 5, 2], [6, 5, 2]], |k| (k % 200) as u8 + 1);
        let seq = |x: &TensorList| {
            let data: Vec<Vec<u8>> = (0..x.len()).map(|i| x.bytes(i).to_vec()).collect();
            TensorList::from_samples(&[vec![3, 2, 5, 2], vec![3, 2, 5, 2]], &data).with_layout("FHWC")
        };
        let (s0, s1) = (seq(&a), seq(&image::<u8>(&[[6, 5, 2], [6, 5, 2]], |k| 255 - (k % 200) as u8)));
        let mut m = op(vec![("shapes", ArgValue::IntList(vec![2, 5, 1, 2])), ("out_anchors", ArgValue::IntList(vec![0, 0, 1, 3]))], &[]).unwrap();
        let want = run(&mut m, &[&s0, &s1], &[]).unwrap();
        // Both inputs in one blob: s1 after s0.
        let mut input = s0.buffer().as_slice()[..s0.total_bytes()].to_vec();
        let s1_at = input.len();
        input.extend_from_slice(&s1.buffer().as_slice()[..s1.total_bytes()]);
        let plan = &m.plan;
        let at = |r: &Region| (if r.input == 0 { s0.offset(r.sample) } else { s1_at + s1.offset(r.sample) }) as u64;
        let regions: Vec<MultiPasteRegion> = plan.regions.iter().map(|r| describe_region(r, at(r))).collect();
        let samples: Vec<MultiPasteSample> = plan
            .samples
            .iter()
            .enumerate()
            .map(|(i, s)| describe_sample(s, &plan.regions[s.regions.clone()], want.offset(i) as u64, s.regions.start as u64, |_| 30))
            .collect();
        let got = run_on_host("multi_paste_u8_u8", &samples, &regions, &input, want.total_bytes());
        for i in 0..want.len() {
            assert_eq!(&got[want.byte_range(i)], want.bytes(i), "sample {i}");
        }
    }
}
