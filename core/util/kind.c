/* core/util/kind.c: the names of the plugin kinds. Below the loader and the log, which
 * both name kinds. */
#include "config.h"

#include "core/util/kind.h"

#include <stddef.h>
#include <string.h>
#include <trainbig/plugin.h>

static const char *const kind_names[] = { NULL, "backend", "platform", "model", "dataset", "swap" };

const char *tb_kind_name(int kind)
{
    return kind >= TB_KIND_FIRST && kind <= TB_KIND_LAST ? kind_names[kind] : NULL;
}

int tb_kind_from_name(const char *name)
{
    for (int k = TB_KIND_FIRST; k <= TB_KIND_LAST; k++)
        if (strcmp(kind_names[k], name) == 0)
            return k;
    return 0;
}
