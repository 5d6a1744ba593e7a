/* core/config/setup_internal.h: the core's own key tables (core_keys.c), which setup.c
 * validates the configuration against, beside core/config/setup.h. */
#ifndef TB_CORE_SETUP_INTERNAL_H
#define TB_CORE_SETUP_INTERNAL_H

#include "core/config/section_internal.h"
#include "core/config/settings_internal.h"
#include "core/config/setup.h"

extern const struct tb_key tb_run_keys[];
extern const struct tb_key tb_train_keys[];
extern const struct tb_key tb_report_keys[];
/* The data loader's keys, which [dataset] has besides its plugin's (core_keys.c). */
extern const struct tb_key tb_data_keys[];
/* The core's keys in [model] (sync_bn), besides its plugin's (core_keys.c). */
extern const struct tb_key tb_model_core_keys[];

#endif
