/* core/config/setup.h: a whole configuration resolved: every section validated, every
 * plugin found and loaded (setup.c). This is what `trainbig config` prints and what the
 * training pipeline starts from. Plugin instances opened outside a configuration too. */
#ifndef TB_CORE_SETUP_H
#define TB_CORE_SETUP_H

#include <stdio.h>

#include "core/config/ini.h"
#include "core/config/loader.h"
#include "core/config/settings.h"

struct tb_section; /* a section's validated values: core/config/section_internal.h */

/* The sections, in the order they are validated and printed. */
enum tb_section_id {
    TB_SEC_RUN,
    TB_SEC_BACKEND,
    TB_SEC_PLATFORM,
    TB_SEC_MODEL,
    TB_SEC_DATASET,
    TB_SEC_SWAP,
    TB_SEC_TRAIN,
    TB_SEC_REPORT,
    TB_SEC_COUNT
};

struct tb_setup_slot {
    const char *name;                /* section name, static */
    int kind;                        /* plugin kind, 0 for the core's own sections */
    struct tb_section *section;      /* validated values */
    struct tb_plugin_handle *plugin; /* plugin sections: the loaded plugin */
    char *plugin_origin;             /* where `plugin = ...` came from */
    char *plugin_note;               /* "auto: chose ..." when chosen by score */
    /* [platform]: the instance made to validate its settings, kept until its swap
     * defaults are read (tb_setup_resolve), then destroyed: the run makes its own */
    void *platform_ctx;
};

struct tb_setup {
    const struct tb_config *cfg; /* not owned: outlives the setup */
    struct tb_setup_slot slot[TB_SEC_COUNT];
    /* The [swap] keys the platform's swap_defaults filled ("min_size = 256K, ..."), or
     * "": what tb_setup_resolve applied, for the run's log line. */
    char swap_note[512];
    /* The core's own keys, read once from the sections above (settings_internal.h). */
    struct tb_settings settings;
};

/* Validates all of cfg and loads its plugins. Every problem found is one line in err
 * (TB_ERR_CONFIG or TB_ERR_PLUGIN): nothing runs until the whole file is right. Applies
 * [run] log_level, then the defaults other settings imply, where the user set none: the
 * platform's swap_defaults in [swap], and under an MPI launcher with more than one rank
 * [backend] device = the local rank; so tb_setup_print shows what a run uses. On success
 * *out is the caller's (tb_setup_free), and cfg must outlive it. */
int tb_setup_resolve(const struct tb_config *cfg, struct tb_setup **out, struct tb_err *err);
void tb_setup_free(struct tb_setup *s);

/* Sets [sec] plugin = name in cfg (a plugin section: model, dataset, swap, backend or
 * platform) and drops the section's keys that neither that plugin nor the core declares
 * there: keys written for the file's own plugin that the other does not know. Keys both
 * declare stay. For tools that run a configuration with another plugin (the study's
 * synthetic images in place of a dataset). */
int tb_config_switch_plugin(struct tb_config *cfg, enum tb_section_id sec, const char *name, struct tb_err *err);

/* The effective configuration as INI text: every key, its value, and where it came from
 * (file and line, --set, default, auto). */
void tb_setup_print(const struct tb_setup *s, FILE *out);

/* The names of the installed plugins of a kind, "a, b" or "none". */
void tb_plugin_names(int kind, char *buf, size_t size);

/* A plugin instance opened outside a full configuration (benchmarks, tests, tools): the
 * plugin, its settings, and the context its create() (a dataset's open()) made. ops is
 * the plugin's vtable as the loader completed it (loader.h). */
struct tb_instance {
    struct tb_plugin_handle *h;
    union tb_plugin_ops ops;
    void *ctx;
    struct tb_config *cfg;
    struct tb_section *sec;
};

/* Finds plugin `name` of `kind`, validates `settings` ("key = value" lines of its section,
 * as in a file) against its keys, and creates an instance; for a dataset, one with `split`
 * opened (ignored for other kinds: pass NULL). On failure *in is left empty and err says
 * why. Close with tb_instance_close(). For a platform, read its link with
 * tb_platform_link(in->h->p, in->ctx, &link) (core/config/platform_internal.h). */
int tb_instance_open(int kind, const char *name, const char *split, const char *settings, struct tb_instance *in,
                     struct tb_err *err);
void tb_instance_close(struct tb_instance *in);

#endif
