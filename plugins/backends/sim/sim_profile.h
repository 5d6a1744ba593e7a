/* backends/sim/sim_profile.h: per-op times measured on a real device, by op signature
 * (tb_op_signature), for the sim backend to use where an op matches ([backend]
 * sim_profile; sim_profile.c).
 *
 * Two formats: a CSV file whose header is "op,seconds" (or "op,seconds,scratch_bytes"),
 * one op's signature, its measured seconds (and the device memory it took for itself)
 * per line ('#' starts a comment line); or a Chrome trace as trainbig writes one
 * ([report] trace, bench/step --trace), whose compute-track op events carry the
 * signature in args.op, their device time in dur (microseconds) and, from a backend that
 * says (op_scratch_bytes), that memory in args.scratch. An op measured several
 * times (repeated blocks, several steps) takes the median time and the most memory. */
#ifndef TB_SIM_PROFILE_H
#define TB_SIM_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <trainbig/error.h>

struct sim_timing {
    char *op; /* the signature, owned */
    double seconds;
    uint64_t scratch; /* bytes; 0: none, or not in the file */
};

struct sim_profile {
    struct sim_timing *t; /* sorted by op; after loading, one per signature */
    size_t n, cap;
    size_t read; /* timings read from the file, before the medians */
};

/* Loads path into p (zeroed first). An unreadable file, or a line or event that is not a
 * timing, is an error naming the file and the line or event. */
int sim_profile_load(struct sim_profile *p, const char *path, struct tb_err *err);
void sim_profile_free(struct sim_profile *p);
/* The measured seconds of the op of signature op, or -1 when the profile has none. */
double sim_profile_find(const struct sim_profile *p, const char *op);
/* The op's timing (seconds and scratch), or NULL when the profile has none. */
const struct sim_timing *sim_profile_lookup(const struct sim_profile *p, const char *op);

#endif
