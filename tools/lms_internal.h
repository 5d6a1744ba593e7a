/* tools/lms_internal.h: what large model support costs, per platform and swap policy
 * (lms.c): the measurement bench/lms prints and `trainbig study` reports. The method is
 * described at the top of lms.c. */
#ifndef TB_TOOLS_LMS_INTERNAL_H
#define TB_TOOLS_LMS_INTERNAL_H

#include <stdbool.h>
#include <trainbig/error.h>
#include <trainbig/platform.h>

#include "tools/steptime_internal.h"

enum {
    TB_LMS_MAX_PLAT = 4,
    TB_LMS_NPOL = 3, /* the policies, indices into tb_lms_policies: */
    TB_LMS_LRU = 0,
    TB_LMS_PREFETCH = 1,
    TB_LMS_HYBRID = 2,
    TB_LMS_NMODE = 3, /* the link as emulated, at the reference's balance, the control */
    TB_LMS_AS_IS = 0,
    TB_LMS_REF = 1,
    TB_LMS_CONTROL = 2,
    TB_LMS_MAX_ROUNDS = 15,
};

extern const char *const tb_lms_policies[TB_LMS_NPOL];

struct tb_lms_result;

struct tb_lms_options {
    const char *config;  /* the network of this INI file, trained on synthetic images; NULL = the quickstart's */
    const char *backend; /* "cpu" (links emulated), "cuda" (the real link) or "sim" (each platform modelled) */
    const char *platforms[TB_LMS_MAX_PLAT]; /* cpu: each emulated; cuda: one, the real link's */
    int nplat;
    int sizes[2];                      /* square images, the smaller first */
    int batch, steps, rounds, threads; /* threads: the cpu backend's, 0 = all cores */
    double cap_fraction;               /* device memory capped at this share of a size's footprint */
    const char *trace;                 /* a Chrome trace of the larger size's last round under
                                        * prefetch on the last platform (cpu: at the reference's
                                        * balance); NULL = none */
    bool spans;                        /* keep the larger size's last round's step as spans: uncapped,
                                        * and under prefetch on each platform (cpu: at the reference's
                                        * balance) */
    bool hybrid;                       /* measure the hybrid policy too (its cases are not run otherwise) */
    bool reported_only;                /* only the study's cases: lru as emulated, every policy at the
                                        * reference's balance and the control; prefetch not run twice
                                        * (no A/A, hybrid paired with its one run) */
    const char *const *user;           /* assignments added to every run */
    int nuser;
    /* Called when the preamble is measured (size -1) and after each size (0, 1), with the
     * result so far: bench/lms prints as it goes. NULL = not called. */
    void (*progress)(void *arg, const struct tb_lms_options *o, const struct tb_lms_result *r, int size);
    void *progress_arg;
};

/* One case: a size, a mode, a platform and a policy, over the rounds. */
struct tb_lms_case {
    bool run;    /* measured (the control runs prefetch only) */
    bool failed; /* a run failed: why */
    char why[160];
    /* The median round's (by overhead; of an even count, the lower middle one), so that
     * the parts add up; the spread over all rounds. */
    double step_s;
    double overhead, lo, hi; /* % of the round's uncapped step: the median round's, min, max */
    /* % of the round's uncapped step: waiting for copies; the ops' own slowdown; recomputing */
    double stall, ops, recompute;
    struct tb_step_timing mid; /* the median round's run: bytes each way, peak */
    /* Against prefetch (lru and hybrid, where prefetch ran too): each round's overhead less
     * prefetch's (where it ran twice, their mean) in the same round, mode and platform,
     * all against the same uncapped step, run minutes apart at most; in points: the median
     * over the rounds, min, max. Paired so that a slow spell of the machine, which moves a
     * round's cases together, drops out of the comparison. */
    bool paired;
    double vs_prefetch, vs_lo, vs_hi;
    /* prefetch at the reference's balance where hybrid ran: it runs a second time right
     * after hybrid, and hybrid's pair is the mean of the two runs around it (lru's too,
     * as it is the same reference). aa: the second run's overhead less the first's (A/A),
     * the median over the rounds, min, max: how far apart the same plan lands, the
     * resolution of the pairing on this machine. */
    bool repeated;
    double aa, aa_lo, aa_hi;
};

struct tb_lms_size {
    int size;
    struct tb_step_timing base; /* the first uncapped run: footprint (peak) */
    double base_step_s;         /* median over the rounds */
    double rate;                /* the uncapped step's conv FLOP/s, median over the rounds */
    uint64_t cap;
    struct tb_lms_case cases[TB_LMS_NMODE][TB_LMS_MAX_PLAT][TB_LMS_NPOL];
};

struct tb_lms_result {
    double ref_bpx, ref_fpx;               /* the reference G-SCNN: device bytes and conv FLOPs per image pixel */
    double net_bpx, net_fpx;               /* the quickstart's */
    double k;                              /* the reference's FLOP per byte over the quickstart's */
    bool user_rate;                        /* backend.compute_gflops given by the user: every run's CPU rate */
    double fma_peak;                       /* this CPU's FMA peak as the cpu backend measured it; 0 = unknown */
    struct tb_link emu[TB_LMS_MAX_PLAT];   /* the links the runs see (cpu: rewritten by emulate_link) */
    struct tb_link given[TB_LMS_MAX_PLAT]; /* the platforms' own */
    struct tb_lms_size sizes[2];
    /* With options.spans: [0] the uncapped step, [1 + p] platform p's under prefetch
     * (tb_time_steps_spans; NULL where the run failed). Freed by tb_lms_result_free. */
    struct tb_trace_span *spans[1 + TB_LMS_MAX_PLAT];
    size_t nspans[1 + TB_LMS_MAX_PLAT];
};

void tb_lms_result_free(struct tb_lms_result *r);

/* A case against prefetch, round by round: each round's overhead `over` less prefetch's
 * `first` in the same round, or, where prefetch ran again after the case (`again`, NULL
 * = not), less the mean of the two runs around it; in points, the median over the n
 * rounds (n: 1..TB_LMS_MAX_ROUNDS; of an even count, the mean of the middle two), min
 * and max. A slow spell of the machine moves a round's runs together and drops out. With
 * `over` prefetch's second run and `again` NULL, it is prefetch's A/A. */
void tb_lms_paired(const double *over, const double *first, const double *again, int n, double *med, double *lo,
                   double *hi);

/* hybrid's target for one size and platform: both cases ran, hybrid is no worse than
 * prefetch in the paired median (at most 0 points), and, where `bound` > 0 and
 * prefetch's overhead is above it, hybrid's is at most `bound` (%). */
bool tb_lms_hybrid_met(const struct tb_lms_case *hybrid, const struct tb_lms_case *prefetch, double bound);

/* Runs the measurement. A failing case is recorded in its tb_lms_case; a failure of what
 * every case needs (the uncapped runs, the intensities, the links) returns an error. */
int tb_lms_measure(const struct tb_lms_options *o, struct tb_lms_result *r, struct tb_err *err);

/* k alone: the reference G-SCNN's conv FLOPs per device byte over the network's (o's
 * config, sizes and batch; one step each), on the cpu backend. */
int tb_lms_balance(const struct tb_lms_options *o, double *k, struct tb_err *err);

/* The step's conv rate over platform p's accelerator (achieved): the emulation's factor f
 * for size z. */
double tb_lms_factor(const struct tb_lms_result *r, int z, int p);

/* The study's overhead of IBM LMS (on demand, as lru) on the machine `platform` names
 * (its preset or link class), at its 600x600 (z = 0) or 700x700 (z = 1); -1 = none
 * published for it. */
double tb_lms_published(const char *platform, int z);

#endif
