//! The ROI-decoding core of `image_crop`, `image_slice` and `image_random_crop`: windows
//! placed once per batch ([`plan_windows`]), decoded on the cpu ([`decode_windows`]) or by the
//! mixed decoder, so both backends cut the same windows.

use std::sync::Arc;

use sluice_codecs::{DecodeParams, ImageInfo, Roi};
use sluice_cuda::GpuDevice;

use super::common::{decode_sample, decode_setup, downscale_hint, read_headers, scaled_window, PlaceWindow};
use super::mixed::{trace_headers, MixedDecoder};
use crate::error::{Error, Result};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList, TensorListGpu};

/// Reads every header (in parallel when `parallel`, see `read_headers`) and places every
/// sample's window with
/// `window(i, info, (height, width))`, `(height, width)` being the full oriented image size;
/// a window outside its image is an error naming the sample. Shared by the cpu and mixed
/// ROI decoders, so both decode the same windows.
pub(crate) fn plan_windows<F>(ctx: &OpContext, ws: &Workspace<'_>, params: &DecodeParams, parallel: bool, window: F) -> Result<(Vec<ImageInfo>, Vec<Roi>)>
where
    F: Fn(usize, &ImageInfo, (usize, usize)) -> Result<Roi>,
{
    let input = ws.inputs[0];
    let infos = read_headers(ctx, ws, input, parallel)?;
    let mut rois = Vec::with_capacity(infos.len());
    for (i, info) in infos.iter().enumerate() {
        let (h, w, _) = info.output_shape(params);
        let r = window(i, info, (h, w))?;
        if r.width == 0 || r.height == 0 || r.x + r.width > w || r.y + r.height > h {
            return Err(Error::data(
                ctx.at(ws.iteration, i, input.source_info(i)),
                format!("window {}x{} at (x {}, y {}) does not fit the {w}x{h} image", r.width, r.height, r.x, r.y),
            ));
        }
        rois.push(r);
    }
    Ok((infos, rois))
}

/// Decodes the window `window(i, info, (height, width))` of every sample (see
/// [`plan_windows`]). The batch is allocated once, and every sample decodes only its window
/// straight into its output slot.
///
/// With `downscale_to = Some([h, w])` (set by the graph when a fixed-size resize follows),
/// a JPEG window at least 2, 4 or 8 times larger than that in both dimensions is decoded at
/// 1/2, 1/4 or 1/8 scale in the DCT domain (libjpeg-turbo): far less work, and the resize
/// that follows starts from an image still at least as large as its output.
pub(crate) fn decode_windows<F>(
    ctx: &OpContext,
    ws: &Workspace<'_>,
    params: &DecodeParams,
    dtype: DType,
    downscale_to: Option<[usize; 2]>,
    window: F,
) -> Result<TensorList>
where
    F: Fn(usize, &ImageInfo, (usize, usize)) -> Result<Roi>,
{
    let input = ws.inputs[0];
    let (infos, windows) = plan_windows(ctx, ws, params, true, window)?;
    let mut rois = Vec::with_capacity(infos.len());
    let mut denoms = Vec::with_capacity(infos.len());
    let mut shapes = Vec::with_capacity(infos.len());
    for (info, &r) in infos.iter().zip(&windows) {
        let (r, d) = scaled_window(info, params, r, downscale_to);
        rois.push(r);
        denoms.push(d);
        shapes.push([r.height, r.width, info.output_channels(params.color)]);
    }
    // Every pixel is decoded into place; a failed sample fails the whole batch.
    let mut out = TensorList::for_overwrite(BatchMeta::new(dtype, 3, shapes.iter().map(|s| &s[..])));
    out.set_layout("HWC".into());
    out.inherit_source_info(input);
    crate::ops::for_each_sample(ws.pool, &mut out, |i, dst| {
        let p = DecodeParams { roi: Some(rois[i]), scale_denom: denoms[i], ..*params };
        decode_sample(ctx, ws, input, i, &infos[i], &p, dtype, dst)
    })?;
    Ok(out)
}

/// The cpu backend of a ROI decoder.
pub(crate) struct WindowDecoderCpu<P> {
    ctx: OpContext,
    params: DecodeParams,
    dtype: DType,
    place: P,
    downscale_to: Option<[usize; 2]>,
}

impl<P: PlaceWindow> WindowDecoderCpu<P> {
    pub(crate) fn new(ctx: &OpContext, place: P) -> Result<WindowDecoderCpu<P>> {
        let (params, dtype) = decode_setup(ctx)?;
        Ok(WindowDecoderCpu { ctx: ctx.clone(), params, dtype, place, downscale_to: downscale_hint(ctx) })
    }
}

impl<P: PlaceWindow> Operator for WindowDecoderCpu<P> {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let ctx = &self.ctx;
        let out = decode_windows(ctx, ws, &self.params, self.dtype, self.downscale_to, |i, _, hw| self.place.place(ctx, ws, i, hw))?;
        Ok(vec![out])
    }
}

/// The mixed backend of a ROI decoder.
pub(crate) struct WindowDecoderMixed<P> {
    dec: MixedDecoder,
    place: P,
    downscale_to: Option<[usize; 2]>,
}

impl<P: PlaceWindow> WindowDecoderMixed<P> {
    pub(crate) fn new(ctx: &OpContext, dev: &Arc<GpuDevice>, place: P) -> Result<WindowDecoderMixed<P>> {
        decode_setup(ctx)?;
        Ok(WindowDecoderMixed { dec: MixedDecoder::new(ctx, dev)?, place, downscale_to: downscale_hint(ctx) })
    }
}

impl<P: PlaceWindow> GpuOperator for WindowDecoderMixed<P> {
    fn starts_early(&self) -> bool {
        true
    }

    fn start(&mut self, ws: &GpuWorkspace<'_>) -> Result<()> {
        let ctx = self.dec.ctx();
        let host = ws.host_view();
        let t = std::time::Instant::now();
        let (infos, windows) = plan_windows(ctx, &host, self.dec.params(), false, |i, _, hw| self.place.place(ctx, &host, i, hw))?;
        trace_headers(ctx, ws.iteration, t);
        self.dec.begin(ws, infos, Some(&windows), self.downscale_to)
    }

    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        if !self.dec.started(ws.iteration) {
            self.start(ws)?;
        }
        Ok(vec![self.dec.finish(ws)?])
    }
}

