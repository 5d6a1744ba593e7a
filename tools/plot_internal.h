/* tools/plot_internal.h: `trainbig plot` (plot.c): a run directory's epoch reports as
 * figures. */
#ifndef TB_TOOLS_PLOT_INTERNAL_H
#define TB_TOOLS_PLOT_INTERNAL_H

#include <stdio.h>
#include <trainbig/error.h>

/* Reads run_dir/epochs.jsonl (the rows of the last run in it, a resumed run's included)
 * and writes into out_dir (NULL: run_dir/plots; the directory is created) loss, accuracy,
 * throughput, swap and class_iou, each as NAME.png and NAME.svg, printing each path to
 * out. The whole file is read and checked before anything is written; an error names the
 * file (and line) at fault. Built without PLplot or jansson: an error saying which, and
 * the package that provides it. */
int tb_plot(const char *run_dir, const char *out_dir, FILE *out, struct tb_err *err);

#endif
