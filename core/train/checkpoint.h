/* core/train/checkpoint.h: training checkpoints (checkpoint.c): every parameter and
 * buffer of an engine by its dotted name, each momentum buffer as "momentum/NAME", and
 * what a run needs to continue exactly where it stopped, in one safetensors file written
 * atomically (core/train/safetensors_internal.h).
 *
 * Metadata (all strings): format "trainbig-checkpoint-2", trainbig_version, epoch
 * (epochs completed), iteration (steps completed over the run), seed, lr (of the last
 * step, %.17g), model (the text that identifies the network: plugin, [model] keys,
 * classes), training (the settings that decide the weights a run reaches: [run] seed and
 * epochs, [train], [dataset]), config (the effective configuration as `trainbig config`
 * prints it, for people), config_hash (FNV-1a of config, hex), checksum (of every tensor
 * with its name and of every metadata entry above, so flipped bytes or an edited
 * iteration are found, not trained on). Format 1 (the same, its checksum over the tensors
 * only) still loads, with a warning. */
#ifndef TB_CORE_CHECKPOINT_H
#define TB_CORE_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>
#include <trainbig/error.h>

#include "core/engine/engine.h"

struct tb_ckpt_info {
    uint64_t epoch;     /* epochs completed */
    uint64_t iteration; /* steps completed since the run began */
    uint64_t seed;
    double lr;
    const char *model;    /* see above; save: given, load: compared */
    const char *training; /* save: given; load: *training_there receives the file's */
    const char *config;   /* save only */
};

/* Writes every parameter, buffer and momentum buffer of e, and info, to name in the
 * directory open as dirfd (AT_FDCWD: a path), which messages call path. */
int tb_checkpoint_save(int dirfd, const char *name, const char *path, struct tb_engine *e, const struct tb_ckpt_info *info, struct tb_err *err);

/* Reads path and loads it into e, whose parameters must all exist already (the graphs'
 * executors made them). Refuses, naming the file and the difference, a file that is not
 * a trainbig checkpoint, is truncated or corrupt, was written for another model
 * (info->model differs: the first differing line is named), or lacks or has extra
 * tensors or other shapes. With momentum, every momentum buffer in the file is loaded
 * too (training resumes); without, they are ignored (prediction). Nothing is loaded
 * unless everything checks. On success info's counters are the file's, and
 * *training_there (when not NULL) a copy of its training text, the caller's to free. */
int tb_checkpoint_load(const char *path, struct tb_engine *e, bool momentum, struct tb_ckpt_info *info,
                       char **training_there, struct tb_err *err);

/* Deletes all but the newest `keep` checkpoints in the directory open as dirfd (dir in
 * messages; names sort in the order they
 * were written): files named as the trainer names them, epoch-EEEE.safetensors and
 * epoch-EEEE-step-SSSSSS.safetensors; no other file is touched. A file that cannot be
 * removed stays (not an error); each one removed is logged at level debug. */
void tb_checkpoint_prune(int dirfd, const char *dir, int keep);

/* Removes from the directory open as dirfd (dir in messages) the temporary files of checkpoints and reports ("NAME.tmp.PID") whose
 * process no longer runs: what a run killed while writing one left behind. Each removal
 * is logged. */
void tb_checkpoint_sweep_temps(int dirfd, const char *dir);

/* The first line where texts a and b differ, as "A (here) / B (there)" into buf; for
 * messages about configurations that differ. */
void tb_text_first_difference(const char *here, const char *there, char *buf, size_t size);

#endif
