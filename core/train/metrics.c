/* core/train/metrics.c: the confusion matrix and the IoU metrics of validation, as the reference
 * evaluates (a confusion matrix over all validation pixels, per-class IoU, their mean
 * over the classes present, NaN classes left out). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/train/metrics_internal.h"

int tb_confusion_init(struct tb_confusion *m, int classes)
{
    m->classes = classes;
    m->counts = calloc((size_t)classes * (size_t)classes, sizeof *m->counts);
    return m->counts ? 0 : -1;
}

void tb_confusion_fini(struct tb_confusion *m)
{
    free(m->counts);
    m->counts = NULL;
}

void tb_confusion_clear(struct tb_confusion *m)
{
    memset(m->counts, 0, (size_t)m->classes * (size_t)m->classes * sizeof *m->counts);
}

size_t tb_confusion_add(struct tb_confusion *m, const float *logits, const uint8_t *labels, int n, int h, int w,
                        int ignore)
{
    const int K = m->classes;
    const size_t plane = (size_t)h * (size_t)w;
    size_t bad = 0;
    for (int b = 0; b < n; b++) {
        const float *z = logits + (size_t)b * K * plane;
        const uint8_t *lab = labels + (size_t)b * plane;
        for (size_t p = 0; p < plane; p++) {
            const int t = lab[p];
            if (t == ignore)
                continue;
            if (t >= K) {
                bad++;
                continue;
            }
            int best = 0;
            for (int k = 1; k < K; k++)
                if (z[(size_t)k * plane + p] > z[(size_t)best * plane + p])
                    best = k;
            m->counts[(size_t)t * K + best]++;
        }
    }
    return bad;
}

double tb_confusion_iou(const struct tb_confusion *m, int c)
{
    const int K = m->classes;
    uint64_t tp = m->counts[(size_t)c * K + c], labelled = 0, predicted = 0;
    for (int k = 0; k < K; k++) {
        labelled += m->counts[(size_t)c * K + k];
        predicted += m->counts[(size_t)k * K + c];
    }
    const uint64_t uni = labelled + predicted - tp;
    return uni ? (double)tp / (double)uni : NAN;
}

double tb_confusion_miou(const struct tb_confusion *m)
{
    double sum = 0;
    int n = 0;
    for (int c = 0; c < m->classes; c++) {
        const double iou = tb_confusion_iou(m, c);
        if (!isnan(iou)) {
            sum += iou;
            n++;
        }
    }
    return n ? sum / n : NAN;
}

double tb_confusion_accuracy(const struct tb_confusion *m)
{
    uint64_t right = 0, all = 0;
    for (int c = 0; c < m->classes; c++)
        for (int k = 0; k < m->classes; k++) {
            all += m->counts[(size_t)c * m->classes + k];
            right += c == k ? m->counts[(size_t)c * m->classes + k] : 0;
        }
    return all ? (double)right / (double)all : NAN;
}

void tb_confusion_print(const struct tb_confusion *m, const struct tb_class *classes, FILE *out)
{
    /* The name column as wide as the longest name ("Plastic bag & wrapper" is 21). */
    int w = (int)strlen("pixel accuracy");
    for (int c = 0; c < m->classes; c++) {
        const int n = (int)strlen(classes[c].name);
        w = n > w ? n : w;
    }
    fprintf(out, "  %-*s %7s %12s\n", w, "class", "IoU %", "pixels");
    for (int c = 0; c < m->classes; c++) {
        uint64_t labelled = 0;
        for (int k = 0; k < m->classes; k++)
            labelled += m->counts[(size_t)c * m->classes + k];
        const double iou = tb_confusion_iou(m, c);
        if (isnan(iou))
            fprintf(out, "  %-*s %7s %12llu\n", w, classes[c].name, "-", (unsigned long long)labelled);
        else
            fprintf(out, "  %-*s %7.2f %12llu\n", w, classes[c].name, 100.0 * iou, (unsigned long long)labelled);
    }
    const double miou = tb_confusion_miou(m), acc = tb_confusion_accuracy(m);
    fprintf(out, "  %-*s %7.2f\n", w, "mIoU", isnan(miou) ? 0.0 : 100.0 * miou);
    fprintf(out, "  %-*s %7.2f\n", w, "pixel accuracy", isnan(acc) ? 0.0 : 100.0 * acc);
}
