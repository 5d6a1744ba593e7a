/* core/dist/world.h: the ranks of this job (comm.c). One process per device: an MPI
 * launcher (mpirun) starts the ranks, and this joins them; a process started any other
 * way is a world of one, and never touches MPI. The world is process-wide, as MPI is. */
#ifndef TB_CORE_WORLD_H
#define TB_CORE_WORLD_H

#include <stdbool.h>
#include <stddef.h>
#include <trainbig/comm.h>

/* Joins the job's ranks when the environment says an MPI launcher started this process
 * (Open MPI's OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK, PMI's PMI_SIZE); otherwise the world
 * stays one rank. Calling it again does nothing. A build without MPI started as one of
 * several ranks is an error that says so. */
int tb_comm_init(struct tb_err *err);
/* Leaves MPI (MPI_Finalize) when tb_comm_init joined it. */
void tb_comm_fini(void);
/* The world: rank 0 of 1 before tb_comm_init or without a launcher. Static storage. */
const struct tb_comm *tb_comm_world(void);
/* Ends every rank of the job with exit code `code` (MPI_Abort): how one failing rank
 * brings the whole job down instead of leaving the others waiting in a collective.
 * Returns only in a world of one. */
void tb_comm_abort(int code);

/* How long a rank waits in a collective for the others before it fails, naming the ranks
 * that did not arrive ([run] collective_timeout); 0 = forever. Set before the first
 * collective; the default is TB_COMM_DEFAULT_TIMEOUT seconds. */
#define TB_COMM_DEFAULT_TIMEOUT 600.0
void tb_comm_set_timeout(double seconds);

/* Makes the world `ranks` modelled ranks (a modelled device's, tb_device_info's ranks):
 * this process is rank 0 and the others are identical to it, so a sum over the world is
 * `ranks` times this rank's value and a broadcast changes nothing. An error in a world MPI
 * joined. tb_comm_unmodel returns to the world of one. */
int tb_comm_model_ranks(int ranks, struct tb_err *err);
void tb_comm_unmodel(void);
bool tb_comm_modelled(void);

/* Conveniences on TB_CHANNEL_MAIN of the world. */
int tb_comm_allreduce(void *data, size_t count, enum tb_comm_dtype dtype, enum tb_comm_reduce op, struct tb_err *err);
int tb_comm_broadcast(void *data, size_t bytes, int root, struct tb_err *err);

#endif
