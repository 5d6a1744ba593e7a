/* bench/step_internal.h: what the parts of bench/step share: the run's options, the
 * G-SCNN's sizes and the optimizer (step.c), the timed steps and the lines every network
 * reports (step_time.c), and the G-SCNN's benchmark (step_gscnn.c). */
#ifndef TB_BENCH_STEP_INTERNAL_H
#define TB_BENCH_STEP_INTERNAL_H

#include "benchutil.h"
#include "core/engine/engine.h"

/* The optimizer of both networks. */
#define SGD_LR 0.005f
#define SGD_MOMENTUM 0.9f
#define SGD_WEIGHT_DECAY 1e-4f

/* gscnn */
#define GSCNN_CLASSES 19 /* the synthetic dataset's (Cityscapes) classes */
#define GSCNN_IGNORE 255 /* ignore label */

struct gscnn_size {
    const char *width;       /* [model] width */
    const char *shape_width; /* [model] shape_width */
    const char *blocks;      /* [model] blocks, mod2..mod7 */
    int batch;               /* images per step */
    int side;                /* image height and width */
};

/* What a run times on and how. */
struct opts {
    bool cuda;            /* --backend cuda: sync the device around each step; TFLOP/s */
    int threads, steps;   /* CPU threads (the cpu backend's and PyTorch's), timed steps */
    double peak;          /* fp32 FLOP/s; 0 = not known (a GPU not in gpu_peaks[]) */
    bool torch;           /* run the PyTorch twin */
    char torch_args[256]; /* to both twins, after their own: " --device cuda --tf32" */
    struct gscnn_size size;
    const char *trace; /* --trace FILE: a Chrome trace of one more step (the sim's calibration) */
    enum tb_dtype precision; /* --precision: what the graphs' autocast casts to ([train] precision) */
};

/* 2 warm-up steps, then `steps` timed training steps (forward, backward, SGD); the median
 * ms in *median, the losses named in loss[] as of the last step in value[], and in
 * *nonfinite the first step (1-based, warm-up included) with a loss that is not finite, or
 * 0. */
int bench_time_steps(struct tb_engine *e, struct tb_exec *x, bool sync, int steps, int nloss, const char *const *loss,
                     float *value, double *median, int *nonfinite, struct tb_err *err);
/* The backend's reorder counters now (zero without them). */
struct tb_reorder_stats bench_reorders_now(const struct tb_engine *e);
/* Where the last step's time went, by op kind (each op's device time, device_seconds);
 * the layout conversions per step since `before` over `runs` steps; and how the backend
 * runs the convolutions (each distinct description once, with its count). */
void bench_breakdown(struct tb_engine *e, struct tb_exec *x, const struct tb_reorder_stats *before, int runs,
                     const struct opts *o);
/* Trainable parameters (elements) of the engine. */
long long bench_trainable_params(const struct tb_engine *e);
/* Runs `PYTHON SRCDIR/bench/SCRIPT ARGS`, PYTHON being $TB_PYTHON or /usr/bin/python3 (a
 * GPU machine's torch may live in another interpreter); its median ms per step, or -1 when
 * torch is not there or the script timed nothing. Lines other than the machine-readable
 * ones are shown; *params gets its 'torch-params' line (-1 without one) when not NULL. */
double bench_torch_ms(const char *srcdir, const char *script, const char *args, long long *params);
/* The lines every network ends with: trainbig's time and convolution throughput, then
 * PyTorch's and the ratio (theirs <= 0: none, `why`, or not available). */
void bench_report(const struct opts *o, double ours, double theirs, const char *why, double flops, const char *losses,
                  int nonfinite, const char *memory);
/* On a GPU, the line on the device memory trainbig's allocator held at most (what decides
 * the batch that fits); "" on the CPU. */
void bench_memory_line(const struct opts *o, struct bench_backend *b, char *buf, size_t size);
/* The error of a network that failed: on a GPU, out of memory says what to change. */
void bench_report_error(const struct opts *o, const char *net, int rc, const struct tb_err *err);
/* The source tree, where the twins' scripts are: $TB_SRCDIR, else the working directory. */
const char *bench_srcdir(void);

/* Times the gscnn model plugin's network on b, against its PyTorch twin (step_gscnn.c);
 * 0, or 1 when it could not run. */
int bench_gscnn(struct bench_backend *b, const struct opts *o);

#endif
