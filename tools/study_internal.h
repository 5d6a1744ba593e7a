/* tools/study_internal.h: `trainbig study` (study.c drives it and writes report.md; each
 * benchmark is a module of its own: study_time.c, study_grid.c, study_lms.c (overhead and
 * the step's timeline), study_scaling.c). */
#ifndef TB_TOOLS_STUDY_INTERNAL_H
#define TB_TOOLS_STUDY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <trainbig/error.h>

#include "tools/lms_internal.h"

/* The benchmarks, numbered as the report's sections. */
enum {
    TB_STUDY_TIME = 1,     /* training time per platform, time to a target mIoU */
    TB_STUDY_GRID = 2,     /* use of LMS: batch x crop, fits / swaps / does not fit */
    TB_STUDY_OVERHEAD = 3, /* LMS overhead per platform, policy and size */
    TB_STUDY_TIMELINE = 4, /* one step's timeline per platform, idle gaps */
    TB_STUDY_SCALING = 5,  /* 1 -> N ranks, measured and modelled */
    TB_STUDY_COUNT = 5,
};

enum tb_study_scale { TB_STUDY_SMALL, TB_STUDY_REFERENCE, TB_STUDY_TEST };

struct tb_study_request {
    const char *config; /* the INI file */
    const char *const *sets;
    int nsets;
    const char *out; /* the report's directory (created) */
    enum tb_study_scale scale;
    unsigned only;    /* bit 1 << n for each benchmark n to run; 0 = all */
    const char *self; /* this program (mpirun runs it for the scaling benchmark) */
};

/* Runs the benchmarks asked for and writes out/report.md and the figures. */
int tb_study(const struct tb_study_request *rq, struct tb_err *err);

/* ------------------------------------------------------------------ for the benchmarks */

/* The sizes of one scale. */
struct tb_study_sizes {
    const char *name;
    /* 1 */
    int time_steps;     /* timed steps per platform */
    double target_miou; /* the target where the configuration sets none */
    double time_cap;    /* device memory as a share of the step's footprint */
    /* 2 */
    int batches[6], nbatch;
    int crops[6], ncrop;
    uint64_t grid_memory; /* device memory of the grid's runs when the configuration sets none */
    /* 3, 4 */
    int lms_sizes[2], lms_batch, lms_steps, lms_rounds;
    double lms_cap;
    /* 5 */
    int ranks[4], nranks;
    int scaling_steps;
    double minutes; /* what the whole study is expected to take, for the progress line */
};

#define TB_STUDY_NPLAT 3
extern const char *const tb_study_platforms[TB_STUDY_NPLAT]; /* the presets of the study's machines */

/* What the benchmarks share while the study runs. */
struct tb_study {
    const struct tb_study_request *rq;
    const struct tb_study_sizes *sz;
    const char *backend;                 /* "cpu" (links emulated), "cuda" or "sim" (every figure predicted) */
    char sim_profile[4096];              /* sim: its [backend] sim_profile, "" = none */
    char policy[64];                     /* the configuration's [swap] plugin */
    uint64_t device_memory;              /* its [backend] device_memory; 0 = not set (unbounded on the cpu) */
    double target_miou;                  /* its [train] target_miou; 0 = none set */
    bool sync_bn;                        /* its [model] sync_bn: over ranks, batch norm synchronised */
    double cpu_gflops;                   /* this CPU's convolution rate, measured by the cpu backend (the header) */
    double accel_gflops[TB_STUDY_NPLAT]; /* each platform's accelerator, achieved (the header; cpu backend) */
    FILE *md;                            /* report.md, being written */
    char *dir;                           /* rq->out */
    double t0;                           /* when the study began */
    double share_done;                   /* of the expected total, by the benchmarks finished */
    double frac;                         /* of the running benchmark, done: it sets this as it goes */
    int bench, nbench, ibench;
    bool tty;
    struct tb_lms_options lms_opts; /* benchmarks 3 and 4's one measurement (study_lms.c): its options, */
    struct tb_lms_result *lms;      /* and its result, once made */
    int lms_rc;                     /* its outcome, once tried */
    bool lms_tried;
};

/* The progress line: which benchmark runs, what it does now, how long is left. */
void tb_study_progress(struct tb_study *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* DIR/NAME, allocated. */
char *tb_study_path(const struct tb_study *s, const char *name);

/* The number after `"name":` (spaces allowed around the colon) in a line of JSON (an
 * MLPerf log's, a row of epochs.jsonl), or NAN. The lines are the program's own, flat. */
double tb_study_json_number(const char *line, const char *name);

/* Links DIR/name.png and .svg from the report (as alt) when rc, the figure's outcome, is 0;
 * returns rc. */
int tb_study_figure(struct tb_study *s, const char *name, const char *alt, int rc);

/* Bars of lru, prefetch and hybrid per category, lru beside the published figures (NaN: none),
 * written as DIR/name.png and .svg and linked from the report. */
struct tb_study_bars {
    const char *name, *alt, *title, *xlabel, *ylabel, *note;
    const char *const *categories;
    size_t n;
    int decimals; /* of the value labels */
    const double *lru, *prefetch, *hybrid, *published;
};
int tb_study_policy_bars(struct tb_study *s, const struct tb_study_bars *b, struct tb_err *err);

int tb_study_time(struct tb_study *s, struct tb_err *err);
/* A step of the configuration with `extra` after the user's assignments, the file's [swap]
 * section forgotten (tb_time_steps_swap), timed over the scale's time_steps (study_time.c). */
struct tb_step_timing;
int tb_study_time_step(const struct tb_study *s, const char *const *extra, int nextra, struct tb_step_timing *t,
                       struct tb_err *err);
/* Benchmark 1 on the sim backend (study_time_sim.c): the training time per platform, predicted. */
int tb_study_time_sim(struct tb_study *s, struct tb_err *err);
int tb_study_grid(struct tb_study *s, struct tb_err *err);
int tb_study_overhead(struct tb_study *s, struct tb_err *err);
int tb_study_timeline(struct tb_study *s, struct tb_err *err);
int tb_study_scaling(struct tb_study *s, struct tb_err *err);

#endif
