/* core/config/settings.h: the core's own keys ([run], [train], [report], the loader's
 * keys of [dataset], [model] sync_bn) as typed structs, read once when the configuration
 * is resolved (struct tb_setup's settings). How each key is bound to its field is
 * core/config/settings_internal.h's. */
#ifndef TB_CORE_SETTINGS_H
#define TB_CORE_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/data/dataloader.h"

enum { TB_LR_POLY = 0, TB_LR_CONSTANT = 1 };                    /* [train] lr_policy */
/* [train] precision, in the key's order; tb_precision_dtype gives each one's dtype. */
enum { TB_PRECISION_FP32 = 0, TB_PRECISION_BF16 = 1, TB_PRECISION_FP16 = 2 };
enum { TB_PROGRESS_AUTO = 0, TB_PROGRESS_YES, TB_PROGRESS_NO }; /* [report] progress */

struct tb_run_settings {
    const char *name, *output;
    int seed, epochs, log_level;
    double collective_timeout; /* seconds; 0 = forever */
};

struct tb_train_settings {
    int batch, val_batch, val_every, checkpoint_every, keep, replica_check, lr_policy, precision;
    double lr, lr_power, momentum, weight_decay;
    double target_miou; /* 0 = none */
    bool val_at_start;
    uint64_t allreduce_bucket;
};

struct tb_report_settings {
    const char *csv, *jsonl, *trace, *mllog; /* "" for not set */
    int progress;
};

struct tb_settings {
    struct tb_run_settings run;
    struct tb_train_settings train;
    struct tb_report_settings report;
    struct tb_data_settings data;
    bool sync_bn; /* [model] */
};

#endif
