//! The hardware JPEG engine's own throughput, with nothing else running: batches of
//! `--batch` images (whole, or centred windows of half the area) submitted back to back on
//! `--states` alternating nvJPEG states, from `--threads` submitting threads.
//!
//!     engine_speed [--batch 166] [--states 2] [--threads 1] [--window] [--pinned] [--busy N] [--seconds 5] FILE...
//!
//! `--pinned` hands nvJPEG the encoded files from page-locked memory; `--busy N` keeps N
//! other threads spinning meanwhile (a loaded CPU, as in a pipeline).
//! Prints images per second and how long each submit call blocked the calling thread.

#[path = "common/mod.rs"]
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_codecs::read_info;
use sluice_cuda::nvjpeg::{HwBatchDecoder, HwTarget, HwWindow, NvJpeg};
use sluice_cuda::GpuEvent;
use sluice_cuda::{DeviceBuffer, GpuDevice};

use common::{take_flag, take_number};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut opt = |name: &str, default: f64| take_number(&mut args, name, default);
    let (batch, states, threads, seconds) = (opt("--batch", 166.0) as usize, opt("--states", 2.0) as usize, opt("--threads", 1.0) as usize, opt("--seconds", 5.0));
    let busy = opt("--busy", 0.0) as usize;
    let (window, pinned) = (take_flag(&mut args, "--window"), take_flag(&mut args, "--pinned"));
    let owned: Vec<Vec<u8>> = args.iter().map(|f| std::fs::read(f).expect("read")).collect();
    let infos: Vec<_> = owned.iter().map(|b| read_info(b).expect("header")).collect();
    let dev = GpuDevice::open(0).expect("GPU");
    let mut pin = sluice_cuda::PinnedBuffer::alloc(&dev, owned.iter().map(|f| f.len()).sum::<usize>().max(1)).expect("pinned");
    let files: Vec<&[u8]> = if pinned {
        let mut at = 0;
        let spans: Vec<(usize, usize)> = owned
            .iter()
            .map(|f| {
                pin.as_mut_slice()[at..at + f.len()].copy_from_slice(f);
                at += f.len();
                (at - f.len(), f.len())
            })
            .collect();
        spans.iter().map(|&(a, l)| &pin.as_slice()[a..a + l]).collect()
    } else {
        owned.iter().map(|f| &f[..]).collect()
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    let nv = NvJpeg::hardware(&dev).expect("hardware decoder");
    let stream = dev.new_stream().expect("stream");
    let max_px: usize = infos.iter().map(|i| i.width * i.height * 3).max().unwrap();
    let out = DeviceBuffer::alloc(&dev, &stream, max_px * batch * states).expect("alloc");
    let decoders: Vec<Mutex<HwBatchDecoder>> = (0..states).map(|_| Mutex::new(HwBatchDecoder::new(&nv, batch).expect("decoder"))).collect();
    let start = Arc::new(GpuEvent::new(&dev).expect("event"));
    start.record(&stream).expect("record");
    let next = Mutex::new(0usize);
    let blocked = Mutex::new(Vec::<Duration>::new());
    let run = |until: Instant| -> usize {
        let mut images = 0;
        while Instant::now() < until {
            let k = {
                let mut n = next.lock().unwrap();
                *n += 1;
                *n
            };
            let s = k % states;
            let mut dec = decoders[s].lock().unwrap();
            let idx: Vec<usize> = (0..batch).map(|j| (k * batch + j) % files.len()).collect();
            let data: Vec<&[u8]> = idx.iter().map(|&i| &files[i][..]).collect();
            let targets: Vec<HwTarget> = idx
                .iter()
                .enumerate()
                .map(|(j, &i)| {
                    let (w, h) = (infos[i].width, infos[i].height);
                    let win = window.then(|| {
                        let (ww, hh) = ((w as f64 * 0.707) as usize, (h as f64 * 0.707) as usize);
                        HwWindow { x: (w - ww) / 2, y: (h - hh) / 2, width: ww, height: hh }
                    });
                    let pitch = win.map_or(w, |r| r.width) * 3;
                    HwTarget { ptr: out.device_ptr() + ((s * batch + j) * max_px) as u64, pitch, width: w, window: win }
                })
                .collect();
            let t = Instant::now();
            // SAFETY: every target is a disjoint slot of `out`, large enough for any image;
            // `files` outlives the synchronize at the end.
            unsafe { dec.submit(&data, &targets, &start) }.expect("submit");
            blocked.lock().unwrap().push(t.elapsed());
            images += batch;
        }
        images
    };
    // Warm-up (state buffers, engine clocks).
    run(Instant::now() + Duration::from_secs(1));
    for d in &decoders {
        d.lock().unwrap().join(&stream).unwrap();
    }
    stream.synchronize().unwrap();
    blocked.lock().unwrap().clear();
    let t0 = Instant::now();
    let until = t0 + Duration::from_secs_f64(seconds);
    let images: usize = std::thread::scope(|s| {
        for _ in 0..busy {
            s.spawn(|| {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            });
        }
        let hs: Vec<_> = (0..threads).map(|_| s.spawn(|| run(until))).collect();
        let n = hs.into_iter().map(|h| h.join().unwrap()).sum();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        n
    });
    for d in &decoders {
        d.lock().unwrap().join(&stream).unwrap();
    }
    stream.synchronize().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let mut b = blocked.lock().unwrap().clone();
    b.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    // Device memory in use beyond our own output buffer: nvJPEG's states and buffers (plus
    // the context's own).
    let (free, total) = cudarc::driver::result::mem_get_info().expect("cuMemGetInfo");
    let mib = |v: u64| v as f64 / (1u64 << 20) as f64;
    let (pool, _) = dev.pool_usage().expect("pool");
    println!(
        "engine: batch {batch} states {states} threads {threads} window {window} pinned {pinned} busy {busy}: {:.0} img/s; submit blocked median {:.2} ms, p90 {:.2} ms per batch; device memory {:.0} MiB besides our pool's {:.0} MiB",
        images as f64 / secs,
        ms(b[b.len() / 2]),
        ms(b[b.len() * 9 / 10]),
        mib((total - free) as u64) - mib(pool),
        mib(pool)
    );
}
