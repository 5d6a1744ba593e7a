/* tools/study_time.c: the study's first benchmark (work in progress on this branch). */
#include "config.h"

#include "tools/study_internal.h"

int tb_study_time(struct tb_study *s, struct tb_err *err)
{
    (void)s;
    return tb_err_set(err, TB_ERR_RUNTIME, "training time per platform: not written yet");
}
