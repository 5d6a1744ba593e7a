/* core/train/run.h: what training and prediction both start from (run.c): the
 * configured backend, model and engine, and graphs of the model built and ready to run. */
#ifndef TB_CORE_RUN_H
#define TB_CORE_RUN_H

#include <stdbool.h>
#include <trainbig/model.h>

#include "core/engine/engine.h"
#include "core/config/setup.h"

struct tb_run {
    const struct tb_setup *s; /* not owned */
    const struct tb_plugin *backend;
    void *backend_ctx;
    const struct tb_plugin *model;
    void *model_ctx;
    const struct tb_plugin *swap; /* the [swap] policy, given to the engine */
    void *swap_ctx;
    const struct tb_plugin *platform; /* its link goes to the policy and the backend */
    void *platform_ctx;
    struct tb_link link;          /* what copies see: the platform's, or the emulated one */
    struct tb_link platform_link; /* the platform's, as it describes it */
    struct tb_accel accel;        /* the platform's accelerator, as it describes it (zeros: none) */
    struct tb_engine engine;      /* valid while engine_ready */
    bool engine_ready;
    bool modelled_ranks; /* the world is the modelled device's ranks (tb_comm_model_ranks) until close */
};

/* Creates the backend, model and swap-policy instances s configures and an engine on
 * device 0 seeded with [run] seed, whose executors use the policy. Close with tb_run_close() whatever this returns. */
int tb_run_open(struct tb_run *r, const struct tb_setup *s, struct tb_err *err);
void tb_run_close(struct tb_run *r);

/* Builds the model's training or inference graph for `in` and an executor for it on the
 * engine (graphs share parameters by name). On success both are the caller's: free x,
 * then g. */
int tb_run_graph(struct tb_run *r, bool training, const struct tb_model_input *in, struct tb_graph **g,
                 struct tb_exec **x, struct tb_err *err);
/* The two halves of tb_run_graph, for a caller that checks what the executor will need
 * (core/train/host_memory.h) before making it: the graph alone (the caller's; freed on
 * failure), then its executor (the caller's; g must outlive it). */
int tb_run_build(struct tb_run *r, bool training, const struct tb_model_input *in, struct tb_graph **g,
                 struct tb_err *err);
int tb_run_exec(struct tb_run *r, struct tb_graph *g, const struct tb_model_input *in, struct tb_exec **x,
                struct tb_err *err);

/* The text that identifies the network a checkpoint belongs to: the model plugin, each
 * [model] key with its value, and the number of classes. The caller frees it. */
char *tb_run_model_text(const struct tb_setup *s, int classes);

/* The settings that decide which weights training reaches ([run] seed and epochs, the
 * [train] keys of the optimiser and batch, every key of [dataset] but the loader's
 * workers and prefetch), one "section.key = value" per line. The caller frees it. */
char *tb_run_training_text(const struct tb_setup *s);

/* The effective configuration as `trainbig config` prints it. The caller frees it. */
char *tb_run_config_text(const struct tb_setup *s);
/* FNV-1a of that text: the config_hash checkpoints carry, printed %016" PRIx64 ". */
uint64_t tb_run_config_hash(const char *text);

#endif
