/* lib/data_report_internal.h: `trainbig data` (data_report.c): a configured dataset's
 * splits, decoded file by file. */
#ifndef TB_LIB_DATA_REPORT_INTERNAL_H
#define TB_LIB_DATA_REPORT_INTERNAL_H

#include <stdio.h>
#include <trainbig/error.h>

#include "lib/setup_internal.h"

/* Opens the train, val and test splits of s's dataset (one that does not open is
 * reported and skipped), decodes every sample, and writes to out per split: the sample
 * count, the image sizes, each bad sample with its error, and the share of pixels of
 * each class and of ignore. *bad receives the number of bad samples over all splits.
 * TB_OK unless no split opens or memory runs out. */
int tb_data_report(const struct tb_setup *s, FILE *out, size_t *bad, struct tb_err *err);

#endif
