//! `fn.experimental.median_blur` (cpu and gpu): each element becomes the median of the
//! `window_size` (width, height) window around it, channel by channel, as DALI 2.4's operator
//! (CV-CUDA's `MedianBlur`) and OpenCV's `cv2.medianBlur` define it:
//!
//! - the window is centred (`x - width // 2 ... x + width // 2`), both sizes odd and
//!   positive (1 leaves that axis alone); past the edges the nearest pixel is repeated
//!   (replicate border, CV-CUDA's and OpenCV's);
//! - the median is the element of rank `width * height // 2` of the window's values sorted;
//!   FLOAT values sort as IEEE's totalOrder (-0.0 below +0.0), NaNs above +inf (a NaN median
//!   is written 0x7fffffff).
//!
//! Layouts, types and per-sample `window_size` as `fn.experimental.dilate` (see the
//! [module](super)). The cpu backend runs a selection network (Batcher's odd-even merge sort,
//! pruned to the comparators the middle output depends on) on row chunks of 256 elements at
//! once, each comparator a vector min/max; UINT8 windows of 49 values or more take Huang's
//! sliding histogram instead, and other windows of more than 255 values a per-element
//! selection.
//! The gpu backend (one launch per batch) selects per element (Wirth's algorithm on up to 81
//! values, else a bitwise radix selection). Any exact selection gives the same value, so both
//! backends give the same bits.
//!
//! Where Sluice departs from DALI 2.4: the cpu backend exists; any number of interleaved
//! channels (CV-CUDA takes 1 to 4); a `window_size` argument input may hold 1 value.

use super::gpu::MedianGpu;
use super::{parse_input, read_pair, Keyed};
use crate::error::{Error, Result};
use crate::ops::filters::filter::Geometry;
use crate::ops::{for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// `fn.experimental.median_blur`.
pub static MEDIAN_BLUR: OpDef = OpDef {
    schema: OpSchema {
        name: "experimental__MedianBlur",
        doc: "Median blur performs smoothing of an image or sequence of images by replacing each pixel with the median color of a surrounding rectangular region.\n\nThis operator allows sequence inputs.\n\nInput: HW, HWC, FHWC, CHW or FCHW images of UINT8, UINT16 or FLOAT.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[tensor_arg("window_size", T::IntList, D::IntList(&[3, 3]), "The size of the window over which the smoothing is performed, (width, height): odd and positive.")]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(MedianBlur::new(ctx)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(MedianGpu::new(MedianBlur::new(ctx))))),
};

pub struct MedianBlur {
    pub(super) ctx: OpContext,
    /// Each sample's window (width, height).
    pub(super) windows: Vec<(usize, usize)>,
}

impl MedianBlur {
    fn new(ctx: &OpContext) -> MedianBlur {
        MedianBlur { ctx: ctx.clone(), windows: Vec::new() }
    }

    /// Checks the batch and fills `self.windows`; shared by both backends.
    pub(super) fn plan(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<Geometry> {
        let geometry = parse_input(&self.ctx, ws, input)?;
        let op = self.ctx.display_name.as_str();
        let n = input.len();
        self.windows.clear();
        for i in 0..n {
            let (kw, kh) = read_pair(&self.ctx, ws, "window_size", i, n)?;
            if kw < 1 || kh < 1 || kw % 2 == 0 || kh % 2 == 0 {
                return Err(Error::arg(op, "window_size", format!("sample {i}: the window size must be odd and positive; got ({kw}, {kh})")));
            }
            if kw.saturating_mul(kh) > 1 << 20 {
                return Err(Error::arg(op, "window_size", format!("sample {i}: at most 2^20 values per window; got ({kw}, {kh})")));
            }
            self.windows.push((kw as usize, kh as usize));
        }
        Ok(geometry)
    }
}

/// One comparator of a selection network: wires `i < j`; `Both` leaves the smaller value on
/// `i` and the larger on `j`, `Min` / `Max` write only `i` / only `j`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmp {
    Both(u16, u16),
    Min(u16, u16),
    Max(u16, u16),
}

/// A network selecting the median of `n` values (`n` odd): wires `0..n` hold the values,
/// `n..n + low` the lowest key and the rest the highest (padding to a power of two); the
/// median ends on wire `out`.
#[derive(Debug, Clone)]
pub(crate) struct Network {
    pub wires: usize,
    pub low: usize,
    pub out: usize,
    pub cmps: Vec<Cmp>,
}

/// Batcher's odd-even merge sort of `size` wires (a power of two).
fn batcher(size: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut p = 1;
    while p < size {
        let mut k = p;
        while k >= 1 {
            let mut j = k % p;
            while j + k < size {
                for i in 0..k.min(size - j - k) {
                    if (i + j) / (2 * p) == (i + j + k) / (2 * p) {
                        out.push((i + j, i + j + k));
                    }
                }
                j += 2 * k;
            }
            k /= 2;
        }
        p *= 2;
    }
    out
}

/// The pruned median network for `n` values (odd, at most 2^15).
pub(crate) fn median_network(n: usize) -> Network {
    let wires = n.next_power_of_two().max(2);
    let pad = wires - n;
    let low = pad / 2;
    let out = low + n / 2;
    // Backwards: keep the comparators whose outputs are still needed.
    let mut live = vec![false; wires];
    live[out] = true;
    let mut cmps = Vec::new();
    for (i, j) in batcher(wires).into_iter().rev() {
        let c = match (live[i], live[j]) {
            (false, false) => continue,
            (true, true) => Cmp::Both(i as u16, j as u16),
            (true, false) => Cmp::Min(i as u16, j as u16),
            (false, true) => Cmp::Max(i as u16, j as u16),
        };
        live[i] = true;
        live[j] = true;
        cmps.push(c);
    }
    cmps.reverse();
    Network { wires, low, out, cmps }
}

/// Windows of at most this many values take the network; larger ones a per-element selection.
const NETWORK_MAX: usize = 255;
/// Elements of a row filtered together through the network (its wires stay in cache).
const CHUNK: usize = 256;

#[derive(Default)]
struct Scratch<K> {
    /// The slice's rows with their replicated border columns, as keys.
    padded: Vec<K>,
    wires: Vec<K>,
    window: Vec<K>,
    /// Where each window row starts in `padded` (the histogram's rows).
    starts: Vec<usize>,
    network: Option<(usize, Network)>,
}

/// The median filter of one sample (`slices` images of h x w x c) with window (kw, kh).
fn median_sample<E: Keyed>(dst: &mut [E], src: &[E], dims: (usize, usize, usize, usize), (kw, kh): (usize, usize), s: &mut Scratch<E::Key>) {
    let (slices, h, w, c) = dims;
    let row = w * c;
    let size = h * row;
    if size == 0 {
        return;
    }
    let n = kw * kh;
    let (rx, ry) = (kw / 2, kh / 2);
    let pw = (w + kw - 1) * c;
    if n <= NETWORK_MAX && s.network.as_ref().is_none_or(|(m, _)| *m != n) {
        s.network = Some((n, median_network(n)));
    }
    for (src, dst) in src.chunks_exact(size).zip(dst.chunks_exact_mut(size)).take(slices) {
        // Padded rows: column px stands for clamp(px - rx).
        s.padded.clear();
        s.padded.reserve(h * pw);
        for y in 0..h {
            let srow = &src[y * row..(y + 1) * row];
            for px in 0..w + kw - 1 {
                let sx = px.saturating_sub(rx).min(w - 1);
                s.padded.extend(srow[sx * c..(sx + 1) * c].iter().map(|v| v.key(true)));
            }
        }
        for y in 0..h {
            let drow = &mut dst[y * row..(y + 1) * row];
            let rows = |t: usize| (y + t).saturating_sub(ry).min(h - 1);
            if <E::Key as MaybeByte>::IS_BYTE && n >= HISTOGRAM_MIN {
                s.starts.clear();
                s.starts.extend((0..kh).map(|t| rows(t) * pw));
                histogram_row(drow, &s.padded, &s.starts, c, w, kw);
            } else if let Some((_, net)) = s.network.as_ref().filter(|_| n <= NETWORK_MAX) {
                for e0 in (0..row).step_by(CHUNK) {
                    let len = CHUNK.min(row - e0);
                    s.wires.resize(net.wires * CHUNK, E::LOWEST);
                    for t in 0..kh {
                        let prow = &s.padded[rows(t) * pw..];
                        for j in 0..kw {
                            let wire = t * kw + j;
                            s.wires[wire * CHUNK..wire * CHUNK + len].copy_from_slice(&prow[e0 + j * c..e0 + j * c + len]);
                        }
                    }
                    for wire in n..net.wires {
                        s.wires[wire * CHUNK..(wire + 1) * CHUNK].fill(if wire < n + net.low { E::LOWEST } else { E::HIGHEST });
                    }
                    run_network(&mut s.wires, &net.cmps, len);
                    for (d, &k) in drow[e0..e0 + len].iter_mut().zip(&s.wires[net.out * CHUNK..net.out * CHUNK + len]) {
                        *d = E::from_key(k);
                    }
                }
            } else {
                for (e, d) in drow.iter_mut().enumerate() {
                    s.window.clear();
                    for t in 0..kh {
                        let prow = &s.padded[rows(t) * pw..];
                        s.window.extend((0..kw).map(|j| prow[e + j * c]));
                    }
                    let (_, m, _) = s.window.select_nth_unstable(n / 2);
                    *d = E::from_key(*m);
                }
            }
        }
    }
}

/// UINT8 windows of at least this many values take the sliding histogram.
const HISTOGRAM_MIN: usize = 49;

/// A key type that may be a byte (UINT8's windows can use a 256-bin histogram).
pub(crate) trait MaybeByte: Copy {
    const IS_BYTE: bool;
    fn byte(self) -> u8;
    fn from_byte(b: u8) -> Self;
}
impl MaybeByte for u8 {
    const IS_BYTE: bool = true;
    fn byte(self) -> u8 {
        self
    }
    fn from_byte(b: u8) -> u8 {
        b
    }
}
impl MaybeByte for u16 {
    const IS_BYTE: bool = false;
    fn byte(self) -> u8 {
        unreachable!()
    }
    fn from_byte(_: u8) -> u16 {
        unreachable!()
    }
}
impl MaybeByte for i32 {
    const IS_BYTE: bool = false;
    fn byte(self) -> u8 {
        unreachable!()
    }
    fn from_byte(_: u8) -> i32 {
        unreachable!()
    }
}

/// One output row of a UINT8 median by Huang's sliding histogram (per channel: the window
/// moves one column, its kh values leave and kh enter), the median found through 16 coarse
/// bins of 16.
fn histogram_row<E: Keyed>(drow: &mut [E], padded: &[E::Key], starts: &[usize], c: usize, w: usize, kw: usize) {
    let half = (kw * starts.len() / 2) as u32;
    for ch in 0..c {
        let mut fine = [0u32; 256];
        let mut coarse = [0u32; 16];
        let add = |px: usize, fine: &mut [u32; 256], coarse: &mut [u32; 16], up: bool| {
            for &r in starts {
                let v = padded[r + px * c + ch].byte() as usize;
                if up {
                    fine[v] += 1;
                    coarse[v >> 4] += 1;
                } else {
                    fine[v] -= 1;
                    coarse[v >> 4] -= 1;
                }
            }
        };
        for px in 0..kw {
            add(px, &mut fine, &mut coarse, true);
        }
        for x in 0..w {
            if x > 0 {
                add(x - 1, &mut fine, &mut coarse, false);
                add(x + kw - 1, &mut fine, &mut coarse, true);
            }
            // The value of rank `half`: the first bin where the count so far passes it.
            let mut below = 0u32;
            let mut b = 0;
            while below + coarse[b] <= half {
                below += coarse[b];
                b += 1;
            }
            let mut v = b * 16;
            while below + fine[v] <= half {
                below += fine[v];
                v += 1;
            }
            drow[x * c + ch] = E::from_key(<E::Key as MaybeByte>::from_byte(v as u8));
        }
    }
}

/// Applies `cmps` to wires of `CHUNK` lanes (`len` of them used).
fn run_network<K: Ord + Copy>(wires: &mut [K], cmps: &[Cmp], len: usize) {
    for &c in cmps {
        let (i, j) = match c {
            Cmp::Both(i, j) | Cmp::Min(i, j) | Cmp::Max(i, j) => (i as usize, j as usize),
        };
        let (lo, hi) = wires.split_at_mut(j * CHUNK);
        let (a, b) = (&mut lo[i * CHUNK..i * CHUNK + len], &mut hi[..len]);
        match c {
            Cmp::Both(..) => {
                for (x, y) in a.iter_mut().zip(b.iter_mut()) {
                    let (p, q) = (*x, *y);
                    *x = p.min(q);
                    *y = p.max(q);
                }
            }
            Cmp::Min(..) => {
                for (x, &y) in a.iter_mut().zip(b.iter()) {
                    *x = (*x).min(y);
                }
            }
            Cmp::Max(..) => {
                for (x, y) in a.iter().zip(b.iter_mut()) {
                    *y = (*x).max(*y);
                }
            }
        }
    }
}

impl Operator for MedianBlur {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let geometry = self.plan(ws, input.meta())?;
        let mut out = TensorList::for_overwrite(input.meta().clone());
        let (windows, dtype) = (&self.windows, input.dtype());
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let dims = geometry.split(input.shape(i));
            let src = input.bytes(i);
            macro_rules! go {
                ($t:ty) => {{
                    thread_local! {
                        static SCRATCH: std::cell::RefCell<Scratch<<$t as Keyed>::Key>> = std::cell::RefCell::new(Scratch::default());
                    }
                    SCRATCH.with(|s| median_sample::<$t>(bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(src), dims, windows[i], &mut s.borrow_mut()))
                }};
            }
            match dtype {
                DType::U8 => go!(u8),
                DType::U16 => go!(u16),
                _ => go!(f32),
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::tests::{float_values, values};
    use super::*;

    /// The definition: sort each window's keys, take the middle one.
    pub(in crate::ops::morphology) fn reference<E: Keyed>(src: &[E], dims: (usize, usize, usize, usize), (kw, kh): (usize, usize)) -> Vec<E> {
        let (slices, h, w, c) = dims;
        let mut out = Vec::with_capacity(src.len());
        for s in 0..slices {
            for y in 0..h {
                for x in 0..w {
                    for ch in 0..c {
                        let mut win = Vec::new();
                        for i in 0..kh {
                            for j in 0..kw {
                                let sy = (y + i).saturating_sub(kh / 2).min(h - 1);
                                let sx = (x + j).saturating_sub(kw / 2).min(w - 1);
                                win.push(src[((s * h + sy) * w + sx) * c + ch].key(true));
                            }
                        }
                        win.sort();
                        out.push(E::from_key(win[win.len() / 2]));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn batcher_networks_sort_every_zero_one_input() {
        for size in [2usize, 4, 8, 16] {
            let net = batcher(size);
            for bits in 0u32..1 << size {
                let mut v: Vec<u32> = (0..size).map(|k| (bits >> k) & 1).collect();
                for &(i, j) in &net {
                    if v[i] > v[j] {
                        v.swap(i, j);
                    }
                }
                assert!(v.windows(2).all(|p| p[0] <= p[1]), "size {size} input {bits:b}");
            }
        }
        // Comparator counts of odd-even merge sort: (p^2 - p + 4) 2^(p-2) - 1.
        assert_eq!(batcher(16).len(), 63);
        assert_eq!(batcher(256).len(), 3839);
    }

    #[test]
    fn pruned_networks_select_the_median() {
        for n in [1usize, 3, 5, 7, 9, 15, 25, 49, 81, 121, 255] {
            let net = median_network(n);
            for seed in 0..20u64 {
                let vals: Vec<u8> = values(n, seed + n as u64 * 100, |r| (r % 7) as u8 * 40);
                let mut wires = vec![0u8; net.wires * CHUNK];
                for (k, &v) in vals.iter().enumerate() {
                    wires[k * CHUNK] = v;
                }
                for k in n..net.wires {
                    wires[k * CHUNK] = if k < n + net.low { 0 } else { 255 };
                }
                run_network(&mut wires, &net.cmps, 1);
                let mut sorted = vals.clone();
                sorted.sort();
                assert_eq!(wires[net.out * CHUNK], sorted[n / 2], "n {n} seed {seed}");
            }
        }
        assert!(median_network(9).cmps.len() < batcher(16).len());
    }

    fn check_type<E: Keyed>(gen: impl Fn(usize, u64) -> Vec<E>) {
        let shapes = [(1, 7, 9, 3), (2, 5, 4, 1), (1, 1, 6, 2), (1, 6, 1, 1), (3, 2, 3, 4), (1, 20, 70, 1)];
        let windows = [(3, 3), (1, 1), (1, 5), (5, 3), (7, 7), (9, 9), (3, 17), (17, 17)];
        let mut s = Scratch::default();
        let mut k = 0;
        for dims in shapes {
            for &win in &windows {
                k += 1;
                let n = dims.0 * dims.1 * dims.2 * dims.3;
                let src = gen(n, k);
                let want = reference(&src, dims, win);
                let mut got = vec![E::from_key(E::LOWEST); n];
                median_sample::<E>(&mut got, &src, dims, win, &mut s);
                assert!(bytemuck::cast_slice::<E, u8>(&got) == bytemuck::cast_slice::<E, u8>(&want), "{dims:?} {win:?}:\n{got:?}\n{want:?}");
            }
        }
    }

    #[test]
    fn the_cpu_filter_equals_the_definition() {
        check_type::<u8>(|n, seed| values(n, seed, |r| (r >> 24) as u8));
        check_type::<u16>(|n, seed| values(n, seed, |r| (r >> 20) as u16));
        check_type::<f32>(|n, seed| float_values(n, seed));
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    /// `cargo test --release -p sluice morphology::median::speed -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn median_one_image() {
        let (h, w, c) = (480usize, 640usize, 3usize);
        let src: Vec<u8> = (0..h * w * c).map(|v| (v * 37 % 251) as u8).collect();
        let mut dst = vec![0u8; h * w * c];
        let mut s = Scratch::default();
        for k in [3usize, 5, 7, 9, 15, 17] {
            let t = std::time::Instant::now();
            for _ in 0..5 {
                median_sample::<u8>(&mut dst, &src, (1, h, w, c), (k, k), &mut s);
            }
            eprintln!("median {k}x{k} u8 480x640x3: {:.3} ms per image", t.elapsed().as_secs_f64() * 1e3 / 5.0);
        }
    }
}
