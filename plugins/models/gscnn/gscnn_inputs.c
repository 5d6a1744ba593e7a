/* models/gscnn/gscnn_inputs.c: the inputs G-SCNN computes from each sample (its prepare()):
 *   "canny"  f32 (N,1,H,W)  Canny edges of the 8-bit image before normalisation, 0 or 255,
 *                           thresholds 10 and 100 as the reference's cv2.Canny call;
 *   "edges"  u8  (N,1,H,W)  1 within 2 px of a class boundary, 0 elsewhere, ignore_label
 *                           where the label is ignored: the edge loss's targets (the
 *                           reference's onehot_to_binary_edges, radius 2).
 * The edge maps themselves are the SDK's (trainbig/edges.h); what is G-SCNN's is the choice
 * of thresholds and radius, and that the inference graph reads only "canny". */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "gscnn_inputs.h"

enum { CANNY_LOW = 10, CANNY_HIGH = 100, EDGE_RADIUS = 2 };

/* One loader thread's scratch: the Canny edges as bytes, and Canny's own buffers. */
struct gscnn_work {
    uint8_t *canny8;
    size_t capacity;
    struct tb_canny_work canny;
};

void gscnn_free_work(void *ctx, void *work)
{
    (void)ctx;
    struct gscnn_work *w = work;
    free(w->canny8);
    tb_canny_work_free(&w->canny);
    free(w);
}

static int canny(const struct tb_model_sample *s, float *out, struct gscnn_work *w, struct tb_err *err)
{
    const size_t plane = (size_t)s->width * (size_t)s->height;
    if (w->capacity < plane) {
        uint8_t *p = realloc(w->canny8, plane);
        if (!p)
            return tb_err_set(err, TB_ERR_NOMEM, "sample %s: out of memory for its Canny edges", s->name);
        w->canny8 = p;
        w->capacity = plane;
    }
    if (tb_canny(s->rgb, s->width, s->height, CANNY_LOW, CANNY_HIGH, w->canny8, &w->canny) != 0)
        return tb_err_set(err, TB_ERR_NOMEM, "sample %s: out of memory for its Canny edges", s->name);
    for (size_t p = 0; p < plane; p++)
        out[p] = w->canny8[p];
    return TB_OK;
}

int gscnn_prepare(void *ctx, const struct tb_model_sample *s, const struct tb_model_feed *feeds, int nfeeds,
                  void **work, struct tb_err *err)
{
    (void)ctx;
    if (!*work && !(*work = calloc(1, sizeof(struct gscnn_work))))
        return tb_err_set(err, TB_ERR_NOMEM, "sample %s: out of memory for G-SCNN's inputs", s->name);
    for (int i = 0; i < nfeeds; i++) {
        const struct tb_model_feed *f = &feeds[i];
        if (strcmp(f->name, "canny") == 0 && f->dtype == TB_F32 && f->channels == 1) {
            int rc = canny(s, f->data, *work, err);
            if (rc)
                return rc;
        } else if (strcmp(f->name, "edges") == 0 && f->dtype == TB_U8 && f->channels == 1) {
            tb_label_edges(s->labels, s->width, s->height, EDGE_RADIUS, (uint8_t)s->ignore_label, f->data);
        } else {
            return tb_err_set(err, TB_ERR_PLUGIN, "gscnn: internal error: asked to prepare input '%s' (%d channels)",
                              f->name, f->channels);
        }
    }
    return TB_OK;
}
