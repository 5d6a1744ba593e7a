/* core/util/kind.h: plugin kinds by name (kind.c; tb_kind_name is the SDK's,
 * trainbig/plugin.h). */
#ifndef TB_CORE_KIND_H
#define TB_CORE_KIND_H

/* The kind for a section name ("backend"), or 0. */
int tb_kind_from_name(const char *name);

#endif
