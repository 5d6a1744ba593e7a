/* backends/op_dispatch.h: what every backend's op_prepare does before its own kernel
 * does anything, shared by the cpu, cuda and sim backends (each compiles op_dispatch.c
 * in, as it does arena.c): the op checked against the contract of trainbig/ops.h, so a
 * kernel checks only what is its own; for a backend with a kernel per kind, the kernel
 * looked up in its table (NULL: none) and the state the core holds for the op: the
 * kernel, the kernel's own state, and the most scratch each pass asked for, which the
 * backend's op_scratch_bytes reports.
 *
 * Memory: the state is the dispatcher's, freed by tb_op_dispatch_release after the
 * kernel's release has freed the kernel's own. */
#ifndef TB_OP_DISPATCH_H
#define TB_OP_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <trainbig/backend.h>
#include <trainbig/ops.h>

/* Checks op against the contract (tb_op_check); TB_ERR_RUNTIME naming the op, its kind and
 * what is wrong. */
int tb_op_dispatch_check(const struct tb_op *op, struct tb_err *err);

/* A backend's kernels, as the dispatcher calls them: kernel is the table's entry for
 * op's kind, which the backend casts back to its own kernel type. */
struct tb_op_dispatch {
    const char *backend; /* in messages */
    /* the kernel's own state for op into *inner (NULL where it keeps none) */
    int (*prepare)(void *backend, const void *kernel, const struct tb_op *op, void **inner, struct tb_err *err);
    void (*release)(const void *kernel, void *inner);
};

struct tb_op_state {
    const void *kernel;
    void *inner;
    uint64_t scratch[2]; /* the most a forward (or rerun), and a backward, took for itself */
};

/* op_prepare: kernel is the backend's for op's kind (NULL: it has none, an error naming
 * the kind); then the contract, then the kernel's prepare. *state is a struct
 * tb_op_state, or NULL on error. */
int tb_op_dispatch_prepare(const struct tb_op_dispatch *d, void *backend, const void *kernel, const struct tb_op *op,
                           void **state, struct tb_err *err);
/* op_release: the kernel's release, then the state; NULL is nothing. */
void tb_op_dispatch_release(const struct tb_op_dispatch *d, void *state);

/* After a pass that took `bytes` of scratch: kept as its direction's most. */
void tb_op_dispatch_scratch(void *state, bool backward, uint64_t bytes);
/* op_scratch_bytes: the most a pass of that direction took since prepare (0 for NULL). */
uint64_t tb_op_dispatch_scratch_bytes(const void *state, bool backward);

#endif
