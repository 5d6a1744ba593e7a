/* trainbig/comm.h: the ranks of a data-parallel run, as a backend sees them.
 *
 * One process per device. `mpirun -np N trainbig train ...` starts N ranks; the core
 * joins them over MPI and hands each backend a struct tb_comm (backend.h: comm_attach).
 * A backend all-reduces gradients with its own engine (NCCL on GPUs) bootstrapped
 * through these collectives, or through them directly where its device memory is host
 * memory (the CPU backend).
 *
 * Collectives are blocking, work on ordinary host memory, and must be called by every
 * rank in the same order on a channel. Each channel is an independent ordering (its own
 * MPI communicator), so that two threads of a rank may run collectives at the same time,
 * one per channel, where comm->concurrent says the MPI library allows it:
 *   TB_CHANNEL_MAIN   the thread that drives the backend (the core's own collectives,
 *                     synchronised batch norm);
 *   TB_CHANNEL_GRADS  the backend's gradient all-reduce, from whichever thread runs it.
 * The struct and its functions belong to the core and outlive every backend instance. */
#ifndef TRAINBIG_COMM_H
#define TRAINBIG_COMM_H

#include <stddef.h>
#include <trainbig/error.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tb_comm_dtype { TB_COMM_F32, TB_COMM_F64, TB_COMM_U64, TB_COMM_I32 };
enum tb_comm_reduce { TB_COMM_SUM, TB_COMM_MIN, TB_COMM_MAX };
enum tb_comm_channel { TB_CHANNEL_MAIN = 0, TB_CHANNEL_GRADS = 1, TB_CHANNELS = 2 };

struct tb_comm {
    int rank, size;             /* this process, and the number of ranks (>= 1) */
    int local_rank, local_size; /* the same, among the ranks on this node */
    int concurrent;             /* 1: the two channels may be used from two threads at once */
    /* In place: every rank's `count` values combined element-wise; all ranks get the result. */
    int (*allreduce)(const struct tb_comm *c, enum tb_comm_channel ch, void *data, size_t count,
                     enum tb_comm_dtype dtype, enum tb_comm_reduce op, struct tb_err *err);
    /* `bytes` bytes of root's `data` to every rank. */
    int (*broadcast)(const struct tb_comm *c, enum tb_comm_channel ch, void *data, size_t bytes, int root,
                     struct tb_err *err);
    void *impl; /* the core's */
};

#ifdef __cplusplus
}
#endif
#endif
