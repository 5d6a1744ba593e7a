/* core/train/metrics_internal.h: segmentation metrics (metrics.c): a confusion matrix over the
 * classes, per-class IoU and their mean, and the table validation prints. */
#ifndef TB_CORE_METRICS_INTERNAL_H
#define TB_CORE_METRICS_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include <trainbig/dataset.h>

struct tb_confusion {
    int classes;
    uint64_t *counts; /* [label][prediction], classes x classes */
};

/* 0, or -1 when out of memory. */
int tb_confusion_init(struct tb_confusion *m, int classes);
void tb_confusion_fini(struct tb_confusion *m);
void tb_confusion_clear(struct tb_confusion *m);

/* Adds a batch: logits (N, K, H, W) f32 in NCHW order, predictions by argmax over K (the
 * first maximum on ties), and labels (N, 1, H, W); pixels labelled ignore are skipped.
 * Returns the number of pixels whose label is neither a class nor ignore (not counted). */
size_t tb_confusion_add(struct tb_confusion *m, const float *logits, const uint8_t *labels, int n, int h, int w,
                        int ignore);

/* IoU of class c: tp / (tp + fp + fn); NaN when the class is neither labelled nor
 * predicted anywhere (it then does not count in the mean). */
double tb_confusion_iou(const struct tb_confusion *m, int c);
/* The mean IoU over the classes whose IoU is not NaN; NaN when there is none. */
double tb_confusion_miou(const struct tb_confusion *m);
/* Pixel accuracy over the counted pixels; NaN when none. */
double tb_confusion_accuracy(const struct tb_confusion *m);

/* The validation table: one row per class (name, IoU in %, labelled pixels), then mIoU. */
void tb_confusion_print(const struct tb_confusion *m, const struct tb_class *classes, FILE *out);

#endif
