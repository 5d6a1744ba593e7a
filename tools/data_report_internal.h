/* tools/data_report_internal.h: `trainbig data` (data_report.c): a configured dataset's
 * splits, decoded file by file; and its training samples as pictures (data_show.c). */
#ifndef TB_TOOLS_DATA_REPORT_INTERNAL_H
#define TB_TOOLS_DATA_REPORT_INTERNAL_H

#include <stdio.h>
#include <trainbig/error.h>

#include "core/config/setup.h"

/* Opens the train, val and test splits of s's dataset (one that does not open is
 * reported and skipped), decodes every sample, and writes to out per split: the sample
 * count, the image sizes, each bad sample with its error, and the share of pixels of
 * each class and of ignore. *bad receives the number of bad samples over all splits,
 * missing the names of the splits training needs that did not open ("val": [train]
 * val_every or val_at_start validates on it; "" when none). TB_OK unless no split opens or
 * memory runs out. */
int tb_data_report(const struct tb_setup *s, FILE *out, size_t *bad, char *missing, size_t missing_size,
                   struct tb_err *err);

/* `trainbig data --show N DIR` (data_show.c): writes the first n training samples of
 * epoch 1, as the data loader makes them, to DIR/sample-NNNN.png (created if missing):
 * the image and the labels blended over it side by side. One line per file to out. */
int tb_data_show(const struct tb_setup *s, int n, const char *dir, FILE *out, struct tb_err *err);

#endif
