/* dataset_probe PLUGIN.so CONFIG SPLIT: opens a dataset plugin file, validates CONFIG's
 * [dataset] section against its keys, opens SPLIT and decodes every sample, printing
 * one line per sample: "NAME WxH rgbsum=S labels=v:count,...". Used by the tests to
 * exercise a dataset vtable for real. Exit 0, or 1 with the error on stderr. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <trainbig/trainbig.h>

#include "core/config/ini.h"
#include "core/config/loader.h"
#include "core/config/section_internal.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: dataset_probe PLUGIN.so CONFIG SPLIT\n");
        return 2;
    }
    struct tb_err err;
    tb_err_clear(&err);
    struct tb_plugin_handle *h = NULL;
    struct tb_config *cfg = NULL;
    struct tb_section *sec = NULL;
    void *ctx = NULL;
    struct tb_sample sample = { 0 };
    int rc = tb_plugin_open(argv[1], TB_KIND_DATASET, &h, &err);
    if (rc == TB_OK)
        rc = tb_config_load(argv[2], &cfg, &err);
    if (rc == TB_OK) {
        static const char *const skip[] = { "plugin", NULL };
        rc = tb_section_build(cfg, "dataset", h->p->keys, "the probed plugin", skip, &sec, &err);
    }
    const struct tb_dataset_ops *ops = h ? h->p->ops.dataset : NULL;
    if (rc == TB_OK)
        rc = tb_dataset_open(h->p, sec, argv[3], &ctx, &err);
    if (rc == TB_OK) {
        const struct tb_class *classes;
        size_t nclasses = ops->classes(ctx, &classes);
        printf("classes %zu:", nclasses);
        for (size_t c = 0; c < nclasses; c++)
            printf(" %s", classes[c].name);
        printf("\nsamples %zu\n", ops->count(ctx));
        for (size_t i = 0; rc == TB_OK && i < ops->count(ctx); i++) {
            rc = ops->load(ctx, i, &sample, &err);
            if (rc)
                break;
            size_t pixels = (size_t)sample.width * sample.height;
            unsigned long long sum = 0;
            for (size_t p = 0; p < 3 * pixels; p++)
                sum += sample.image[p];
            unsigned long counts[256] = { 0 };
            for (size_t p = 0; p < pixels; p++)
                counts[sample.label[p]]++;
            printf("%s %ux%u rgbsum=%llu labels=", ops->sample_name(ctx, i), sample.width, sample.height, sum);
            const char *sep = "";
            for (int v = 0; v < 256; v++)
                if (counts[v]) {
                    printf("%s%d:%lu", sep, v, counts[v]);
                    sep = ",";
                }
            printf("\n");
        }
    }
    if (ctx)
        tb_plugin_destroy(h->p, ctx);
    tb_sample_release(&sample);
    tb_section_free(sec);
    tb_config_free(cfg);
    tb_plugin_close(h);
    if (rc) {
        fprintf(stderr, "dataset_probe: error: %s\n", err.msg);
        return 1;
    }
    return 0;
}
