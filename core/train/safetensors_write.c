/* core/train/safetensors_write.c: writing safetensors files (the format: safetensors.c):
 * the header built in memory, the file written whole or not at all (core/util/atomic_file.h),
 * so a checkpoint is either whole or not there. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/train/safetensors_internal.h"
#include "core/util/atomic_file.h"
#include "core/util/text_internal.h"

#ifdef WORDS_BIGENDIAN
#error "safetensors_write.c assumes a little-endian host (x86-64, ppc64le, aarch64)"
#endif

static void putf(struct tb_text *t, const char *fmt, unsigned long long a, unsigned long long b)
{
    char buf[64];
    int n = snprintf(buf, sizeof buf, fmt, a, b);
    tb_text_put(t, buf, (size_t)n);
}

/* "path: what: the system's reason". */
/* The JSON header of tensors t with metadata, padded to 8 bytes, into h. */
static int write_header(struct tb_text *h, const char *path, const struct tb_st_tensor *t, size_t n,
                        const char *const *meta, size_t nmeta, struct tb_err *err)
{
    tb_text_puts(h, "{");
    if (nmeta) {
        tb_text_puts(h, "\"__metadata__\":{");
        for (size_t i = 0; i < nmeta; i++) {
            if (i)
                tb_text_puts(h, ",");
            tb_text_put_json_string(h, meta[2 * i]);
            tb_text_puts(h, ":");
            tb_text_put_json_string(h, meta[2 * i + 1]);
        }
        tb_text_puts(h, "}");
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        if (!t[i].name[0] || strpbrk(t[i].name, "\"\\") || strcmp(t[i].name, "__metadata__") == 0)
            return tb_err_set(err, TB_ERR_RUNTIME, "%s: tensor name '%s' cannot be stored", path, t[i].name);
        const uint64_t bytes = (uint64_t)tb_shape_elems(t[i].shape) * sizeof(float);
        tb_text_puts(h, nmeta || i ? "," : "");
        tb_text_put_json_string(h, t[i].name);
        putf(h, ":{\"dtype\":\"F32\",\"shape\":[%llu,%llu,", (unsigned long long)t[i].shape.n,
             (unsigned long long)t[i].shape.c);
        putf(h, "%llu,%llu],", (unsigned long long)t[i].shape.h, (unsigned long long)t[i].shape.w);
        putf(h, "\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset, (unsigned long long)(offset + bytes));
        offset += bytes;
    }
    tb_text_puts(h, "}");
    while (!h->oom && h->len % 8)
        tb_text_puts(h, " ");
    if (h->oom)
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory for the header", path);
    return TB_OK;
}

/* The header's length, the header and the tensors' data into f (the new file for path). */
static int write_body(const char *path, FILE *f, const struct tb_text *h, const struct tb_st_tensor *t, size_t n,
                      struct tb_err *err)
{
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)h->len >> (8 * i));
    if (fwrite(len8, 1, 8, f) != 8 || fwrite(h->s, 1, h->len, f) != h->len)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot write: %s", path, strerror(errno));
    for (size_t i = 0; i < n; i++) {
        const size_t count = tb_shape_elems(t[i].shape);
        /* f32 little-endian, the host order (big-endian hosts fail to compile, above). */
        if (fwrite(t[i].data, sizeof(float), count, f) != count)
            return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot write: %s", path, strerror(errno));
    }
    return TB_OK;
}

int tb_safetensors_write(const char *path, const struct tb_st_tensor *t, size_t n, const char *const *meta,
                         size_t nmeta, struct tb_err *err)
{
    return tb_safetensors_write_at(AT_FDCWD, path, path, t, n, meta, nmeta, err);
}

int tb_safetensors_write_at(int dirfd, const char *name, const char *path, const struct tb_st_tensor *t, size_t n,
                            const char *const *meta, size_t nmeta, struct tb_err *err)
{
    struct tb_text h = { 0 };
    struct tb_atomic_file a;
    int rc = write_header(&h, path, t, n, meta, nmeta, err);
    if (!rc)
        rc = tb_atomic_openat(&a, dirfd, name, path, err);
    if (!rc)
        rc = tb_atomic_close(&a, write_body(path, a.f, &h, t, n, err), err);
    free(h.s);
    return rc;
}
