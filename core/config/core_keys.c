/* core_keys.c: the keys of the sections the core itself owns: [run], [train], [report],
 * and the data loader's keys, which [dataset] holds beside its plugin's. */
#include "config.h"

#include "core/config/settings_internal.h"
#include "core/config/setup_internal.h"

/* Counts and step numbers are held in int: their keys stop at INT_MAX. */
#define INT_TOP "2147483647"

const struct tb_key tb_run_keys[] = {
    { "name", TB_KEY_STRING, "trainbig", NULL, "name of the run, used in output file names" },
    { "seed", TB_KEY_INT, "1", "0..2147483647",
      "seed of every random choice: data order, augmentation, dropout, initial weights" },
    { "output", TB_KEY_PATH, "runs", NULL,
      "where run directories go: a run writes to OUTPUT/NAME (OUTPUT/NAME.2 ... when that holds an earlier run)" },
    { "epochs", TB_KEY_INT, "1", "1.." INT_TOP, "passes over the training split" },
    { "log_level", TB_KEY_ENUM, "info", "error|warn|info|debug",
      "log verbosity; the TRAINBIG_LOG environment variable wins over it" },
    { "collective_timeout", TB_KEY_FLOAT, "600", "0..604800",
      "data parallel: seconds a rank waits in a collective for the others before the job ends, naming the ranks "
      "that did not arrive; 0 = wait forever" },
    TB_KEYS_END,
};

const struct tb_binding tb_run_bindings[] = {
    TB_BIND("name", TB_FIELD_TEXT, struct tb_run_settings, name),
    TB_BIND("seed", TB_FIELD_INT, struct tb_run_settings, seed),
    TB_BIND("output", TB_FIELD_TEXT, struct tb_run_settings, output),
    TB_BIND("epochs", TB_FIELD_INT, struct tb_run_settings, epochs),
    TB_BIND("log_level", TB_FIELD_INT, struct tb_run_settings, log_level),
    TB_BIND("collective_timeout", TB_FIELD_DOUBLE, struct tb_run_settings, collective_timeout),
    TB_BINDINGS_END,
};

const struct tb_key tb_train_keys[] = {
    { "batch", TB_KEY_INT, "2", "1..65536", "images per step, over all ranks together" },
    { "val_batch", TB_KEY_INT, "0", "0..65536", "images per validation step; 0 = batch" },
    { "lr", TB_KEY_FLOAT, "0.01", "0..", "base learning rate" },
    { "lr_policy", TB_KEY_ENUM, "poly", "poly|constant",
      "learning-rate schedule: poly decays to 0 over the run, per iteration; constant keeps lr" },
    { "lr_power", TB_KEY_FLOAT, "1.0", "0..", "exponent of the poly schedule: lr * (1 - iteration/iterations)^power" },
    { "momentum", TB_KEY_FLOAT, "0.9", "0..1", "SGD momentum" },
    { "weight_decay", TB_KEY_FLOAT, "1e-4", "0..", "L2 weight decay" },
    { "val_every", TB_KEY_INT, "1", "0.." INT_TOP, "validate every N epochs and after the last; 0 = never" },
    { "val_at_start", TB_KEY_BOOL, "no", NULL, "validate once before the first step: the untrained baseline" },
    { "target_miou", TB_KEY_FLOAT, "0", "0..1",
      "end training after the epoch whose validation reaches this mIoU (a fraction); 0 = none; needs val_every > 0" },
    { "checkpoint_every", TB_KEY_INT, "1", "0.." INT_TOP, "write a checkpoint every N epochs; 0 = only at the end" },
    { "keep", TB_KEY_INT, "3", "1.." INT_TOP, "checkpoints kept in the run directory: the last N, older ones deleted" },
    { "allreduce_bucket", TB_KEY_SIZE, "25M", "1K..4G",
      "data parallel: gradients per all-reduce bucket; a bucket is reduced while backward goes on" },
    { "replica_check", TB_KEY_INT, "0", "0.." INT_TOP,
      "data parallel: every N steps, check that every rank holds the same weights (a hash per parameter); 0 = never" },
    TB_KEYS_END,
};

const struct tb_binding tb_train_bindings[] = {
    TB_BIND("batch", TB_FIELD_INT, struct tb_train_settings, batch),
    TB_BIND("val_batch", TB_FIELD_INT, struct tb_train_settings, val_batch),
    TB_BIND("lr", TB_FIELD_DOUBLE, struct tb_train_settings, lr),
    TB_BIND("lr_policy", TB_FIELD_INT, struct tb_train_settings, lr_policy),
    TB_BIND("lr_power", TB_FIELD_DOUBLE, struct tb_train_settings, lr_power),
    TB_BIND("momentum", TB_FIELD_DOUBLE, struct tb_train_settings, momentum),
    TB_BIND("weight_decay", TB_FIELD_DOUBLE, struct tb_train_settings, weight_decay),
    TB_BIND("val_every", TB_FIELD_INT, struct tb_train_settings, val_every),
    TB_BIND("val_at_start", TB_FIELD_BOOL, struct tb_train_settings, val_at_start),
    TB_BIND("target_miou", TB_FIELD_DOUBLE, struct tb_train_settings, target_miou),
    TB_BIND("checkpoint_every", TB_FIELD_INT, struct tb_train_settings, checkpoint_every),
    TB_BIND("keep", TB_FIELD_INT, struct tb_train_settings, keep),
    TB_BIND("allreduce_bucket", TB_FIELD_U64, struct tb_train_settings, allreduce_bucket),
    TB_BIND("replica_check", TB_FIELD_INT, struct tb_train_settings, replica_check),
    TB_BINDINGS_END,
};

const struct tb_key tb_report_keys[] = {
    { "csv", TB_KEY_PATH, "", NULL, "per-epoch CSV report (appended); empty = epochs.csv in the run directory" },
    { "jsonl", TB_KEY_PATH, "", NULL,
      "per-epoch JSON lines with per-class IoU (appended); empty = epochs.jsonl in the run directory" },
    { "trace", TB_KEY_PATH, "", NULL,
      "Chrome-trace JSON of the run's second step: ops and swap copies on their streams (Perfetto); empty = none" },
    { "mllog", TB_KEY_PATH, "", NULL,
      "MLPerf-style event log (:::MLLOG lines), written by rank 0: a new run truncates it, --resume appends; "
      "empty = none" },
    { "progress", TB_KEY_ENUM, "auto", "auto|yes|no",
      "live progress line: auto = when stderr is a terminal (else a plain line every 30 s)" },
    TB_KEYS_END,
};

const struct tb_binding tb_report_bindings[] = {
    TB_BIND("csv", TB_FIELD_TEXT, struct tb_report_settings, csv),
    TB_BIND("jsonl", TB_FIELD_TEXT, struct tb_report_settings, jsonl),
    TB_BIND("trace", TB_FIELD_TEXT, struct tb_report_settings, trace),
    TB_BIND("mllog", TB_FIELD_TEXT, struct tb_report_settings, mllog),
    TB_BIND("progress", TB_FIELD_INT, struct tb_report_settings, progress),
    TB_BINDINGS_END,
};

/* The reference's augmentation (Takikawa et al. 2019, after Zhu et al. 2019) by default. */
const struct tb_key tb_data_keys[] = {
    { "workers", TB_KEY_INT, "2", "0..256",
      "loader threads decoding and augmenting samples; 0 = on the training thread" },
    { "prefetch", TB_KEY_INT, "2", "1..64", "batches the loader prepares ahead of the training step" },
    { "on_bad_sample", TB_KEY_ENUM, "fail", "fail|skip",
      "a sample that cannot be read: fail = stop, naming it; skip = log it, count it, train on another" },
    { "crop", TB_KEY_INT, "0", "0..65536", "training crop (square), pixels; 0 = the size of the first training image" },
    { "augment", TB_KEY_BOOL, "yes", NULL,
      "training augmentation (scale, flip, colour jitter, blur below); no = random crops only" },
    { "scale_min", TB_KEY_FLOAT, "0.5", "0.01..100", "random scale, lower bound" },
    { "scale_max", TB_KEY_FLOAT, "2.0", "0.01..100", "random scale, upper bound" },
    { "flip", TB_KEY_BOOL, "yes", NULL, "horizontal flip with probability 1/2" },
    { "color_jitter", TB_KEY_FLOAT, "0.25", "0..0.5",
      "brightness, contrast and saturation factors in [1-j, 1+j], hue shift in [-j, j] turns" },
    { "blur_prob", TB_KEY_FLOAT, "0.5", "0..1", "probability of a Gaussian blur" },
    { "blur_sigma_min", TB_KEY_FLOAT, "0.15", "0..20", "Gaussian blur sigma, lower bound (pixels)" },
    { "blur_sigma_max", TB_KEY_FLOAT, "1.3", "0..20", "Gaussian blur sigma, upper bound (pixels)" },
    { "val_size", TB_KEY_STRING, "", NULL,
      "validation images resized to WxH (e.g. 1024x512); empty = as decoded, all of one size" },
    TB_KEYS_END,
};

const struct tb_binding tb_data_bindings[] = {
    TB_BIND("workers", TB_FIELD_INT, struct tb_data_settings, workers),
    TB_BIND("prefetch", TB_FIELD_INT, struct tb_data_settings, prefetch),
    TB_BIND("on_bad_sample", TB_FIELD_INT, struct tb_data_settings, on_bad_sample),
    TB_BIND("crop", TB_FIELD_U32, struct tb_data_settings, crop),
    TB_BIND("augment", TB_FIELD_BOOL, struct tb_data_settings, augment),
    TB_BIND("scale_min", TB_FIELD_FLOAT, struct tb_data_settings, aug.scale_min),
    TB_BIND("scale_max", TB_FIELD_FLOAT, struct tb_data_settings, aug.scale_max),
    TB_BIND("flip", TB_FIELD_BOOL, struct tb_data_settings, aug.flip),
    TB_BIND("color_jitter", TB_FIELD_FLOAT, struct tb_data_settings, aug.jitter),
    TB_BIND("blur_prob", TB_FIELD_FLOAT, struct tb_data_settings, aug.blur_prob),
    TB_BIND("blur_sigma_min", TB_FIELD_FLOAT, struct tb_data_settings, aug.blur_sigma_min),
    TB_BIND("blur_sigma_max", TB_FIELD_FLOAT, struct tb_data_settings, aug.blur_sigma_max),
    TB_BIND("val_size", TB_FIELD_TEXT, struct tb_data_settings, val_size),
    TB_BINDINGS_END,
};

/* The core's keys in [model], beside the model plugin's. */
const struct tb_key tb_model_core_keys[] = {
    { "sync_bn", TB_KEY_BOOL, "yes", NULL,
      "data parallel: batch norm statistics over every rank's images (synchronised), as one process over the global "
      "batch would compute them; no = each rank's own" },
    TB_KEYS_END,
};

const struct tb_binding tb_model_core_bindings[] = {
    TB_BIND("sync_bn", TB_FIELD_BOOL, struct tb_settings, sync_bn),
    TB_BINDINGS_END,
};
