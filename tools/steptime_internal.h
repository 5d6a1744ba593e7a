/* tools/steptime_internal.h: timing training steps of a configuration (steptime.c), for
 * `trainbig fit` and bench/lms. */
#ifndef TB_TOOLS_STEPTIME_INTERNAL_H
#define TB_TOOLS_STEPTIME_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <trainbig/error.h>
#include <trainbig/platform.h>

/* Words of the refusal of a batch larger than the training set ("batch N: the train split
 * has only M samples"), by which fit tells the data's bound from an error. */
#define TB_STEPTIME_DATA_SHORT "the train split has only"

struct tb_trace_span;

/* The timed steps' median step (by time), each figure that step's own: its parts add up
 * to its time. */
struct tb_step_timing {
    double step_s;              /* the step's time */
    double stall_s;             /* waiting for copies (the swap's stalls, and the end of the step
                                 * waiting for its last copies out) */
    double ops_s;               /* the ops' own time, forward and backward (each op's kernels, not
                                 * the memory manager's work around them) */
    double out_bytes, in_bytes; /* swapped out and in */
    /* Activations dropped for recomputation, what recomputation rebuilt and the
     * time it took (part of the step, not of ops_s); and every activation and gradient the
     * step makes, the whole the shares kept, swapped and recomputed are of. */
    double drop_bytes, recompute_bytes, recompute_s, transient_bytes;
    uint64_t peak;            /* device memory, over the timed steps */
    double conv_flops;        /* per step: the convolutions' (tb_graph_conv_flops) */
    uint64_t params;          /* trainable parameters (elements) */
    int width, height, batch; /* what was trained on */
};

/* The steps run before the timed ones, whatever the policy: prefetch tunes itself on the
 * first; hybrid plans again after its second and whenever a step had to make room its
 * plan had not left, and on two cores its plans settled within four steps (at 192x192 on
 * x86-pcie at the reference's balance on the AVX2 path, timed from the third step, it
 * was still swapping about 330 MiB and rebuilding nothing in two runs of four, with 4-19
 * ms of stall and its ops 200 ms slower; from the fifth, 200-250 MiB swapped and 140-190
 * MiB rebuilt, in four of four). A training run lives in the
 * settled state, so that is what is timed. */
enum { TB_STEPTIME_WARMUP = 4 };

/* Loads `path` (NULL: an empty configuration), applies the `nsets` assignments, and times
 * `steps` training steps on the first batch of the train split (after TB_STEPTIME_WARMUP
 * warm-up steps), forward, backward and SGD, each ending when its copies have. Out of
 * device memory is TB_ERR_NOMEM with err saying where. */
int tb_time_steps(const char *path, const char *const *sets, int nsets, int steps, struct tb_step_timing *out,
                  struct tb_err *err);
/* The same, with the file's [swap] section forgotten before the assignments: each policy
 * with only what they set. */
/* The same, writing a Chrome trace of the last timed step to `trace` (tb_exec_trace_write). */
int tb_time_steps_traced(const char *path, const char *const *sets, int nsets, int steps, const char *trace,
                         struct tb_step_timing *out, struct tb_err *err);
/* The same, keeping the last timed step's trace as spans (tb_exec_trace_spans, names
 * NULL): *spans is the caller's to free. */
int tb_time_steps_spans(const char *path, const char *const *sets, int nsets, int steps, struct tb_trace_span **spans,
                        size_t *nspans, struct tb_step_timing *out, struct tb_err *err);
int tb_time_steps_swap(const char *path, const char *const *sets, int nsets, int steps, struct tb_step_timing *out,
                       struct tb_err *err);

/* The link the run's copies see (the backend's set_platform may rewrite it: with the cpu
 * backend's emulate_link, this CPU as the accelerator and the scaled rates) and the
 * platform's own, and (accel not NULL) the platform's accelerator, for the configuration
 * of `path` (NULL: empty) and the assignments; nothing trains. */
int tb_step_link(const char *path, const char *const *sets, int nsets, struct tb_link *link, struct tb_link *platform,
                 struct tb_accel *accel, struct tb_err *err);
/* The same link as the run's backend really moves data: its pinned copies of `bytes`
 * timed each way alone and both at once, and one small copy's time as the latency
 * (tb_probe_link), beside the platform's own; for a model that is to play this device. */
int tb_step_link_measured(const char *path, const char *const *sets, int nsets, size_t bytes, struct tb_link *link,
                          struct tb_link *platform, struct tb_err *err);

#endif
