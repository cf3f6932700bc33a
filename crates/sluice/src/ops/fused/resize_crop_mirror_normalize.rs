//! `resize` followed by `crop_mirror_normalize`, on the CPU, in one pass per sample: only the
//! resized pixels inside the crop window are computed ([`resample_window`]), each finished
//! row is rounded to u8 exactly as the resize would store it, then normalized, mirrored and
//! written in the output layout through cmn's lookup table. The output equals the unfused
//! pipeline bit for bit; the resized image never exists.
//!
//! Both operators plan the batch as usual (same arguments, checks and errors, named after
//! the user's operators). When a batch does not fit the fused kernel (non-u8 resize, nearest
//! neighbour on both axes, a crop window that needs padding, `pad_output`, more than 4
//! channels) it runs the two operators one after the other instead.

use crate::error::{Error, Result};
use crate::ops::crop::crop_mirror_normalize::{Cmn, CmnBatch, Out, U8Lut, MAX_LUT_CHANNELS};
use crate::ops::resize::kernel::{resample_window, store_row_as_dali, Plan, Window};
use crate::ops::resize::{Resize, ResizeBatch};
use crate::ops::{for_each_sample, OpContext, Operator, Workspace};
use crate::tensor::{DType, TensorList};

pub(crate) struct ResizeCmn {
    resize: Resize,
    cmn: Cmn,
}

impl ResizeCmn {
    pub(crate) fn new(resize: &OpContext, cmn: &OpContext) -> Result<ResizeCmn> {
        Ok(ResizeCmn { resize: Resize::from_ctx(resize)?, cmn: Cmn::from_ctx(cmn)? })
    }

    /// True when every sample of the planned batch can take the fused kernel.
    fn fusable(&self, r: &ResizeBatch, c: &CmnBatch) -> bool {
        r.in_type == DType::U8
            && r.out_type == DType::U8
            && !c.seq
            && matches!(r.meta.layout().as_str(), "" | "HWC")
            && !self.cmn.pad()
            && self.resize.plans().iter().zip(self.cmn.windows()).all(|(p, (wh, ww, _))| {
                (p.filter[0].is_some() || p.filter[1].is_some()) && p.c <= MAX_LUT_CHANNELS && wh.inside(p.out_h) && ww.inside(p.out_w)
            })
    }
}

impl Operator for ResizeCmn {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let (ws_resize, ws_cmn) = (ws.for_part(self.resize.ctx()), ws.for_part(self.cmn.ctx()));
        let resized = self.resize.plan_batch(&ws_resize, input.meta())?;
        let b = self.cmn.plan_batch(&ws_cmn, &resized.meta)?;
        if !self.fusable(&resized, &b) {
            let r = self.resize.resample_batch(&ws_resize, input, resized)?;
            return Ok(vec![self.cmn.crop_batch(&ws_cmn, &r, &b)?]);
        }
        let mut out = TensorList::for_overwrite(b.meta.clone()); // every element is written
        let (plans, windows, chw, ctx) = (self.resize.plans(), self.cmn.windows(), self.cmn.chw(), self.resize.ctx());
        let dtype = self.cmn.dtype();
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let (p, &(wh, ww, mirror)) = (&plans[i], &windows[i]);
            let win = Window { rows: wh.anchor as usize..wh.anchor as usize + wh.len, cols: ww.anchor as usize..ww.anchor as usize + ww.len };
            let src = input.bytes(i);
            if src.len() != p.in_h * p.in_w * p.c {
                return Err(Error::data(ctx.at(ws.iteration, i, input.source_info(i)), "input sample size does not match its shape"));
            }
            match dtype {
                DType::F32 => fused::<f32>(dst, src, p, &win, &b, chw, mirror),
                DType::F16 => fused::<u16>(dst, src, p, &win, &b, chw, mirror),
                DType::U8 => fused::<u8>(dst, src, p, &win, &b, chw, mirror),
                _ => fused::<i8>(dst, src, p, &win, &b, chw, mirror),
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// One sample: resample the window, round each value to u8 as the resize's store does, then
/// normalize, mirror and lay out as cmn does.
fn fused<O: Out>(dst: &mut [u8], src: &[u8], p: &Plan, win: &Window, b: &CmnBatch, chw: bool, mirror: bool) {
    let dst: &mut [O] = bytemuck::cast_slice_mut(dst);
    let lut = U8Lut::<O>::new(&b.mean, &b.mul, p.c);
    let oh = win.rows.len();
    ROW.with(|px| {
        let px = &mut *px.borrow_mut();
        resample_window(src, p, win, 16, |y, row, even| {
            // Round the whole row first (vectorized, as the resize stores u8), then look up.
            px.resize(row.len(), 0);
            store_row_as_dali::<u8>(px, row, even);
            lut.write_row(dst, px, y, oh, chw, mirror)
        });
    })
}

thread_local! {
    /// One resized row of the window as u8, reused across rows and samples.
    static ROW: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}
