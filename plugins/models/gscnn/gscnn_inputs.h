/* models/gscnn/gscnn_inputs.h: the model inputs G-SCNN makes itself (gscnn_inputs.c). */
#ifndef TB_GSCNN_INPUTS_H
#define TB_GSCNN_INPUTS_H

#include <trainbig/trainbig.h>

/* prepare() and free_work() of the model's vtable (gscnn_inputs.c): the "canny" and
 * "edges" inputs of each sample. */
int gscnn_prepare(void *ctx, const struct tb_model_sample *s, const struct tb_model_feed *feeds, int nfeeds,
                  void **work, struct tb_err *err);
void gscnn_free_work(void *ctx, void *work);

#endif
