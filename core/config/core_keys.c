/* core_keys.c: the keys of the sections the core itself owns: [run], [train], [report],
 * and the data loader's keys, which [dataset] holds beside its plugin's. */
#include "config.h"

#include "core/config/settings_internal.h"
#include "core/config/setup_internal.h"

/* Counts and step numbers are held in int: their keys stop at INT_MAX. */
#define INT_TOP "2147483647"

/* A setting is one row: S(key, type, default, range, field, help), the key as a user
 * writes it and the field of the section's settings struct (settings.h) it fills. Each
 * section's list makes both its key table, which the configuration is validated against
 * and listed from, and its bindings, which settings.c fills the struct from; so a key
 * cannot be declared without its field, nor bound under a name it does not have. The
 * field's type comes from its C type; check_config tests that it holds the key's whole
 * range, so the range declared is the range enforced. */
#define KEY_ROW(name, type, def, range, field, help) { name, TB_KEY_##type, def, range, help },
#define BIND_ROW(T, name, type, def, range, field, help) TB_BIND(name, T, field),

#define RUN_SETTINGS(S)                                                                                           \
    S("name", STRING, "trainbig", NULL, name, "name of the run, used in output file names")                       \
    S("seed", INT, "1", "0.." INT_TOP, seed,                                                                      \
      "seed of every random choice: data order, augmentation, dropout, initial weights")                          \
    S("output", PATH, "runs", NULL, output,                                                                       \
      "where run directories go: a run writes to OUTPUT/NAME (OUTPUT/NAME.2 ... when that holds an earlier run)") \
    S("epochs", INT, "1", "1.." INT_TOP, epochs, "passes over the training split")                                \
    S("log_level", ENUM, "info", "error|warn|info|debug", log_level,                                              \
      "log verbosity; the TRAINBIG_LOG environment variable wins over it")                                        \
    S("collective_timeout", FLOAT, "600", "0..604800", collective_timeout,                                        \
      "data parallel: seconds a rank waits in a collective for the others before the job ends, naming the ranks " \
      "that did not arrive; 0 = wait forever")

#define BIND_RUN(...) BIND_ROW(struct tb_run_settings, __VA_ARGS__)
const struct tb_key tb_run_keys[] = { RUN_SETTINGS(KEY_ROW) TB_KEYS_END };
const struct tb_binding tb_run_bindings[] = { RUN_SETTINGS(BIND_RUN) TB_BINDINGS_END };

#define TRAIN_SETTINGS(S)                                                                                             \
    S("batch", INT, "2", "1..65536", batch, "images per step, over all ranks together")                               \
    S("val_batch", INT, "0", "0..65536", val_batch, "images per validation step; 0 = batch")                          \
    S("lr", FLOAT, "0.01", "0..", lr, "base learning rate")                                                           \
    S("lr_policy", ENUM, "poly", "poly|constant", lr_policy,                                                          \
      "learning-rate schedule: poly decays to 0 over the run, per iteration; constant keeps lr")                      \
    S("lr_power", FLOAT, "1.0", "0..", lr_power,                                                                      \
      "exponent of the poly schedule: lr * (1 - iteration/iterations)^power")                                         \
    S("momentum", FLOAT, "0.9", "0..1", momentum, "SGD momentum")                                                     \
    S("weight_decay", FLOAT, "1e-4", "0..", weight_decay, "L2 weight decay")                                          \
    S("precision", ENUM, "fp32", "fp32|bf16|fp16", precision,                                                        \
      "arithmetic: fp32; or bf16 / fp16 mixed precision: convolutions and what carries their outputs in 16 bits, "   \
      "losses and parameters (master weights) in fp32 (trainbig.ini(5), PRECISION)")                                 \
    S("val_every", INT, "1", "0.." INT_TOP, val_every, "validate every N epochs and after the last; 0 = never")       \
    S("val_at_start", BOOL, "no", NULL, val_at_start, "validate once before the first step: the untrained baseline")  \
    S("target_miou", FLOAT, "0", "0..1", target_miou,                                                                 \
      "end training after the epoch whose validation reaches this mIoU (a fraction); 0 = none; needs val_every > 0")  \
    S("checkpoint_every", INT, "1", "0.." INT_TOP, checkpoint_every,                                                  \
      "write a checkpoint every N epochs; 0 = only at the end")                                                       \
    S("keep", INT, "3", "1.." INT_TOP, keep, "checkpoints kept in the run directory: the last N, older ones deleted") \
    S("allreduce_bucket", SIZE, "25M", "1K..4G", allreduce_bucket,                                                    \
      "data parallel: gradients per all-reduce bucket; a bucket is reduced while backward goes on")                   \
    S("replica_check", INT, "0", "0.." INT_TOP, replica_check,                                                        \
      "data parallel: every N steps, check that every rank holds the same weights (a hash per parameter); 0 = never")

#define BIND_TRAIN(...) BIND_ROW(struct tb_train_settings, __VA_ARGS__)
const struct tb_key tb_train_keys[] = { TRAIN_SETTINGS(KEY_ROW) TB_KEYS_END };
const struct tb_binding tb_train_bindings[] = { TRAIN_SETTINGS(BIND_TRAIN) TB_BINDINGS_END };

#define REPORT_SETTINGS(S)                                                                                         \
    S("csv", PATH, "", NULL, csv, "per-epoch CSV report (appended); empty = epochs.csv in the run directory")      \
    S("jsonl", PATH, "", NULL, jsonl,                                                                              \
      "per-epoch JSON lines with per-class IoU (appended); empty = epochs.jsonl in the run directory")             \
    S("trace", PATH, "", NULL, trace,                                                                              \
      "Chrome-trace JSON of the run's second step: ops and swap copies on their streams (Perfetto); empty = none") \
    S("mllog", PATH, "", NULL, mllog,                                                                              \
      "MLPerf-style event log (:::MLLOG lines), written by rank 0: a new run truncates it, --resume appends; "     \
      "empty = none")                                                                                              \
    S("progress", ENUM, "auto", "auto|yes|no", progress,                                                           \
      "live progress line: auto = when stderr is a terminal (else a plain line every 30 s)")

#define BIND_REPORT(...) BIND_ROW(struct tb_report_settings, __VA_ARGS__)
const struct tb_key tb_report_keys[] = { REPORT_SETTINGS(KEY_ROW) TB_KEYS_END };
const struct tb_binding tb_report_bindings[] = { REPORT_SETTINGS(BIND_REPORT) TB_BINDINGS_END };

/* The reference's augmentation (Takikawa et al. 2019, after Zhu et al. 2019) by default. */
#define DATA_SETTINGS(S)                                                                                              \
    S("workers", INT, "2", "0..256", workers,                                                                         \
      "loader threads decoding and augmenting samples; 0 = on the training thread")                                   \
    S("prefetch", INT, "2", "1..64", prefetch, "batches the loader prepares ahead of the training step")              \
    S("on_bad_sample", ENUM, "fail", "fail|skip", on_bad_sample,                                                      \
      "a sample that cannot be read: fail = stop, naming it; skip = log it, count it, train on another")              \
    S("crop", INT, "0", "0..65536", crop, "training crop (square), pixels; 0 = the size of the first training image") \
    S("augment", BOOL, "yes", NULL, augment,                                                                          \
      "training augmentation (scale, flip, colour jitter, blur below); no = random crops only")                       \
    S("scale_min", FLOAT, "0.5", "0.01..100", aug.scale_min, "random scale, lower bound")                             \
    S("scale_max", FLOAT, "2.0", "0.01..100", aug.scale_max, "random scale, upper bound")                             \
    S("flip", BOOL, "yes", NULL, aug.flip, "horizontal flip with probability 1/2")                                    \
    S("color_jitter", FLOAT, "0.25", "0..0.5", aug.jitter,                                                            \
      "brightness, contrast and saturation factors in [1-j, 1+j], hue shift in [-j, j] turns")                        \
    S("blur_prob", FLOAT, "0.5", "0..1", aug.blur_prob, "probability of a Gaussian blur")                             \
    S("blur_sigma_min", FLOAT, "0.15", "0..20", aug.blur_sigma_min, "Gaussian blur sigma, lower bound (pixels)")      \
    S("blur_sigma_max", FLOAT, "1.3", "0..20", aug.blur_sigma_max, "Gaussian blur sigma, upper bound (pixels)")       \
    S("val_size", STRING, "", NULL, val_size,                                                                         \
      "validation images resized to WxH (e.g. 1024x512); empty = as decoded, all of one size")

#define BIND_DATA(...) BIND_ROW(struct tb_data_settings, __VA_ARGS__)
const struct tb_key tb_data_keys[] = { DATA_SETTINGS(KEY_ROW) TB_KEYS_END };
const struct tb_binding tb_data_bindings[] = { DATA_SETTINGS(BIND_DATA) TB_BINDINGS_END };

/* The core's keys in [model], beside the model plugin's. */
#define MODEL_CORE_SETTINGS(S)                                                                                        \
    S("sync_bn", BOOL, "yes", NULL, sync_bn,                                                                          \
      "data parallel: batch norm statistics over every rank's images (synchronised), as one process over the global " \
      "batch would compute them; no = each rank's own")

#define BIND_MODEL_CORE(...) BIND_ROW(struct tb_settings, __VA_ARGS__)
const struct tb_key tb_model_core_keys[] = { MODEL_CORE_SETTINGS(KEY_ROW) TB_KEYS_END };
const struct tb_binding tb_model_core_bindings[] = { MODEL_CORE_SETTINGS(BIND_MODEL_CORE) TB_BINDINGS_END };
