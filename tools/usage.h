/* tools/usage.h: the usage text of each command of `trainbig` (usage.c), printed by
 * `trainbig help COMMAND` and `trainbig COMMAND --help`; tb_usage_main is the overview. */
#ifndef TB_TOOLS_USAGE_H
#define TB_TOOLS_USAGE_H

extern const char tb_usage_main[];
extern const char tb_usage_train[];
extern const char tb_usage_predict[];
extern const char tb_usage_data[];
extern const char tb_usage_fit[];
extern const char tb_usage_study[];
extern const char tb_usage_probe[];
extern const char tb_usage_plot[];
extern const char tb_usage_config[];
extern const char tb_usage_plugins[];
extern const char tb_usage_version[];
extern const char tb_usage_help[];

#endif
