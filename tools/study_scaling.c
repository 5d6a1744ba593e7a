/* tools/study_scaling.c: the study's fifth benchmark (work in progress on this branch). */
#include "config.h"

#include "tools/study_internal.h"

int tb_study_scaling(struct tb_study *s, struct tb_err *err)
{
    (void)s;
    return tb_err_set(err, TB_ERR_RUNTIME, "scaling: not written yet");
}
