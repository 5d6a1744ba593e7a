/* tools/predict_internal.h: one image through a trained model (predict.c), as pictures. */
#ifndef TB_TOOLS_PREDICT_INTERNAL_H
#define TB_TOOLS_PREDICT_INTERNAL_H

#include <trainbig/error.h>

#include "core/config/setup.h"

struct tb_predict_request {
    const char *checkpoint; /* written by `trainbig train` with the same [model] */
    const char *input;      /* a PNG image */
    const char *output;     /* OUT.png: the colour-coded classes; beside it OUT-overlay.png
                             * (the classes blended over the input) and OUT-edges.png (the
                             * model's edge map, when it has one) */
};

/* Runs the inference graph of s's model on the input at its own size with the
 * checkpoint's weights, colours each pixel's class with the dataset's palette, and prints
 * the share of each predicted class to stdout. Errors name the file at fault. */
int tb_predict(const struct tb_setup *s, const struct tb_predict_request *req, struct tb_err *err);

#endif
