/*
 * Entropy decoding only: reads a JPEG's quantized DCT coefficients with libjpeg-turbo's
 * jpeg_read_coefficients and copies a rectangle of blocks of each component out, so the
 * IDCT, upsampling and colour conversion can run elsewhere (Sluice runs them on the GPU).
 *
 * Kept in C because libjpeg reports errors by longjmp, which must not cross Rust frames:
 * every libjpeg call happens below the setjmp in this file, and Rust sees a status code.
 */
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpeglib.h"

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf env;
  int warned;
} sluice_error_mgr;

typedef struct {
  struct jpeg_decompress_struct cinfo;  /* first: a j_common_ptr is a reader pointer */
  sluice_error_mgr err;
  struct jpeg_progress_mgr progress;
  /* libjpeg's own request_virt_barray, wrapped to learn where the coefficients go. */
  jvirt_barray_ptr (*request_virt_barray)(j_common_ptr, int, boolean, JDIMENSION, JDIMENSION,
                                          JDIMENSION);
  jvirt_barray_ptr arrays[MAX_COMPONENTS];
  int n_arrays;
  /* Sequential files: stop entropy decoding once this iMCU row is complete (-1: never). */
  long stop_after_row;
} sluice_coef_reader;

#define STOPPED_EARLY 3

/* One component's rectangle of blocks, copied row by row into `dst` (bw * bh blocks of 64
 * coefficients in libjpeg's natural order). */
typedef struct {
  int32_t bx0, by0, bw, bh;
  int16_t *dst;
} sluice_coef_region;

static void on_error(j_common_ptr c) {
  sluice_error_mgr *e = (sluice_error_mgr *)c->err;
  longjmp(e->env, 1);
}

/* Warnings (level -1) mean damaged data; the caller then decodes the file the ordinary way,
 * whose checks decide whether the damage is benign. Trace messages are ignored. */
static void on_message(j_common_ptr c, int level) {
  if (level < 0) ((sluice_error_mgr *)c->err)->warned = 1;
}

static void no_output(j_common_ptr c) { (void)c; }

/* Records the whole-image coefficient arrays jpeg_read_coefficients requests (one per
 * component, in order), so they can be read even when decoding stops early. */
static jvirt_barray_ptr record_barray(j_common_ptr c, int pool_id, boolean pre_zero,
                                      JDIMENSION blocksperrow, JDIMENSION numrows,
                                      JDIMENSION maxaccess) {
  sluice_coef_reader *r = (sluice_coef_reader *)c;
  jvirt_barray_ptr a = r->request_virt_barray(c, pool_id, pre_zero, blocksperrow, numrows, maxaccess);
  if (r->n_arrays < MAX_COMPONENTS) r->arrays[r->n_arrays++] = a;
  return a;
}

/* Called before each step of jpeg_read_coefficients' input loop: in a single interleaved
 * scan (a sequential file), the rows below the window are never needed, so leave. */
static void stop_below_window(j_common_ptr common) {
  sluice_coef_reader *r = (sluice_coef_reader *)common;
  struct jpeg_decompress_struct *c = &r->cinfo;
  if (r->stop_after_row >= 0 && c->input_scan_number == 1 &&
      c->comps_in_scan == c->num_components && (long)c->input_iMCU_row > r->stop_after_row)
    longjmp(r->err.env, STOPPED_EARLY);
}

sluice_coef_reader *sluice_coef_reader_new(void) {
  sluice_coef_reader *volatile r = (sluice_coef_reader *)calloc(1, sizeof *r);
  if (!r) return NULL;
  r->cinfo.err = jpeg_std_error(&r->err.pub);
  r->err.pub.error_exit = on_error;
  r->err.pub.emit_message = on_message;
  r->err.pub.output_message = no_output;
  if (setjmp(r->err.env)) {
    free(r);
    return NULL;
  }
  jpeg_create_decompress(&r->cinfo);
  r->request_virt_barray = r->cinfo.mem->request_virt_barray;
  r->cinfo.mem->request_virt_barray = record_barray;
  r->progress.progress_monitor = stop_below_window;
  r->cinfo.progress = &r->progress;
  return r;
}

void sluice_coef_reader_free(sluice_coef_reader *r) {
  if (!r) return;
  jpeg_destroy_decompress(&r->cinfo);
  free(r);
}

/*
 * Reads `data` and copies regions[ci] of each of its `ncomp` components, plus each
 * component's quantization table (natural order) into quant[ci * 64 ...]. Sequential files
 * are entropy-decoded only down to the last block row the regions need.
 * `sampling` holds the expected (h, v) factors per component.
 * Returns 0 on success, 1 when the file is not what the caller planned for (size, colour
 * space, sampling, a region outside the component), 2 on any libjpeg error or warning.
 */
int sluice_read_coefficients(sluice_coef_reader *r, const unsigned char *data, unsigned long len,
                             int32_t width, int32_t height, int32_t ncomp, const int32_t *sampling,
                             const sluice_coef_region *regions, uint16_t *quant) {
  struct jpeg_decompress_struct *c = &r->cinfo;
  int ci, k, row, jumped;

  r->err.warned = 0;
  r->n_arrays = 0;
  r->stop_after_row = -1;
  jumped = setjmp(r->err.env);
  if (jumped == 1) {
    jpeg_abort_decompress(c);
    return 2;
  }
  if (jumped == 0) {
    jpeg_mem_src(c, data, len);
    jpeg_read_header(c, TRUE);
    if ((int32_t)c->image_width != width || (int32_t)c->image_height != height ||
        c->num_components != ncomp || c->data_precision != 8 ||
        c->jpeg_color_space != (ncomp == 1 ? JCS_GRAYSCALE : JCS_YCbCr)) {
      jpeg_abort_decompress(c);
      return 1;
    }
    for (ci = 0; ci < ncomp; ci++) {
      const jpeg_component_info *comp = &c->comp_info[ci];
      const sluice_coef_region *g = &regions[ci];
      long last_row;
      if (comp->h_samp_factor != sampling[2 * ci] || comp->v_samp_factor != sampling[2 * ci + 1] ||
          g->bx0 < 0 || g->by0 < 0 || g->bw <= 0 || g->bh <= 0 ||
          (JDIMENSION)(g->bx0 + g->bw) > comp->width_in_blocks ||
          (JDIMENSION)(g->by0 + g->bh) > comp->height_in_blocks) {
        jpeg_abort_decompress(c);
        return 1;
      }
      /* In an interleaved scan an iMCU row holds v_samp_factor block rows of a component. */
      last_row = (long)(g->by0 + g->bh - 1) / (ncomp == 1 ? 1 : comp->v_samp_factor);
      if (!c->progressive_mode && last_row > r->stop_after_row) r->stop_after_row = last_row;
    }
    jpeg_read_coefficients(c);
  }
  /* Here after the whole file, or after a STOPPED_EARLY jump below the window. */
  if (r->err.warned || r->n_arrays != ncomp) {
    jpeg_abort_decompress(c);
    return 2;
  }
  for (ci = 0; ci < ncomp; ci++) {
    const jpeg_component_info *comp = &c->comp_info[ci];
    const sluice_coef_region *g = &regions[ci];
    if (!comp->quant_table) {
      jpeg_abort_decompress(c);
      return 2;
    }
    for (k = 0; k < DCTSIZE2; k++) quant[ci * DCTSIZE2 + k] = comp->quant_table->quantval[k];
    for (row = 0; row < g->bh; row++) {
      JBLOCKARRAY blocks = (*c->mem->access_virt_barray)((j_common_ptr)c, r->arrays[ci],
                                                         (JDIMENSION)(g->by0 + row), 1, FALSE);
      memcpy(g->dst + (size_t)row * g->bw * DCTSIZE2, blocks[0][g->bx0],
             (size_t)g->bw * DCTSIZE2 * sizeof(JCOEF));
    }
  }
  jpeg_abort_decompress(c);
  return 0;
}
