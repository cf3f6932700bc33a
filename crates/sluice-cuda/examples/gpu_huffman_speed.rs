//! nvJPEG's GPU-Huffman decoder's own throughput, with nothing else running: `--threads`
//! threads, each with a state and a stream of its own, decode the files (whole, or centred
//! windows of half the area) one at a time for `--seconds`.
//!
//!     gpu_huffman_speed [--threads 8] [--window] [--seconds 5] FILE...
//!
//! Prints images per second, the CPU time the process used per image (the host phase:
//! parsing and staging the entropy-coded data), and how many files the decoder refused.

#[path = "common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sluice_codecs::read_info;
use sluice_cuda::nvjpeg::{GpuHuffman, GpuHuffmanState, HwWindow, NvJpeg};
use sluice_cuda::GpuEvent;
use sluice_cuda::{DeviceBuffer, GpuDevice};

use common::{take_flag, take_number};

/// User + system CPU seconds of this process so far (Linux).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<f64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0.0)).collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let (threads, seconds) = (take_number(&mut args, "--threads", 8.0) as usize, take_number(&mut args, "--seconds", 5.0));
    let window = take_flag(&mut args, "--window");
    let files: Vec<Vec<u8>> = args.iter().map(|f| std::fs::read(f).expect("read")).collect();
    let infos: Vec<_> = files.iter().map(|b| read_info(b).expect("header")).collect();
    let dev = GpuDevice::open(0).expect("GPU");
    let nv = NvJpeg::hybrid(&dev).expect("nvJPEG");
    let g = GpuHuffman::new(&nv).expect("GPU-Huffman decoder");
    let stream = dev.new_stream().expect("stream");
    let max_px: usize = infos.iter().map(|i| i.width * i.height * 3).max().unwrap();
    let out = DeviceBuffer::alloc(&dev, &stream, max_px * threads).expect("alloc");
    let ready = GpuEvent::new(&dev).expect("event");
    ready.record(&stream).expect("record");
    let (next, refused) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let run = |t: usize, state: &mut GpuHuffmanState, until: Instant| -> usize {
        let mut images = 0;
        while Instant::now() < until {
            let i = next.fetch_add(1, Ordering::Relaxed) % files.len();
            let (w, h) = (infos[i].width, infos[i].height);
            let win = window.then(|| {
                let (ww, hh) = ((w as f64 * 0.707) as usize, (h as f64 * 0.707) as usize);
                HwWindow { x: (w - ww) / 2, y: (h - hh) / 2, width: ww, height: hh }
            });
            let pitch = win.map_or(w, |r| r.width) * 3;
            // SAFETY: each thread writes its own slot of `out`, large enough for any image;
            // `files` outlives the decode call.
            let took = unsafe { state.decode(&files[i], win, (out.device_ptr() + (t * max_px) as u64, pitch), &ready) }.expect("decode");
            if took {
                images += 1;
            } else {
                refused.fetch_add(1, Ordering::Relaxed);
            }
        }
        images
    };
    let mut states: Vec<GpuHuffmanState> = (0..threads).map(|_| GpuHuffmanState::new(&g).expect("state")).collect();
    // Warm-up (buffers grow to the largest image).
    std::thread::scope(|s| {
        for (t, st) in states.iter_mut().enumerate() {
            s.spawn(move || run(t, st, Instant::now() + Duration::from_secs(1)));
        }
    });
    states.iter().for_each(|s| s.wait_idle().unwrap());
    refused.store(0, Ordering::Relaxed);
    let (t0, cpu0) = (Instant::now(), cpu_seconds());
    let until = t0 + Duration::from_secs_f64(seconds);
    let images: usize = std::thread::scope(|s| {
        let hs: Vec<_> = states.iter_mut().enumerate().map(|(t, st)| s.spawn(move || run(t, st, until))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    states.iter().for_each(|s| s.wait_idle().unwrap());
    let (secs, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
    let (free, total) = cudarc::driver::result::mem_get_info().expect("cuMemGetInfo");
    println!(
        "gpu huffman: threads {threads} window {window}: {:.0} img/s, {:.2} ms CPU per image ({:.1} cores busy), {} refused; device memory in use {:.0} MiB",
        images as f64 / secs,
        cpu * 1e3 / images.max(1) as f64,
        cpu / secs,
        refused.load(Ordering::Relaxed),
        (total - free) as f64 / (1u64 << 20) as f64
    );
}
