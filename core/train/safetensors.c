/* core/train/safetensors.c: safetensors files for checkpoints (see safetensors_internal.h).
 *
 * The format (huggingface/safetensors): u64 little-endian N, N bytes of JSON, then the
 * data. The JSON maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets relative to the data), plus an optional "__metadata__" object of strings. The
 * data must be covered exactly by the tensors' ranges, without holes or overlaps. The
 * header is padded with spaces to a multiple of 8 bytes, so the data, and every f32
 * tensor in it, stays aligned.
 *
 * This file reads: it maps the file and parses the header with a small JSON parser that
 * accepts exactly what this header can hold (objects, arrays, strings, non-negative
 * integers). safetensors_write.c writes. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <trainbig/file.h>
#include <trainbig/half.h>
#include <unistd.h>

#include "core/train/safetensors_internal.h"
#include "core/util/text_internal.h"

#define MAX_HEADER (100u << 20) /* the format's own limit is 100 MB */

/* The format is little-endian and tensors are written and read in host order. */
#ifdef WORDS_BIGENDIAN
#error "safetensors.c assumes a little-endian host (x86-64, ppc64le, aarch64)"
#endif

/* ------------------------------------------------------------------ reading */

struct st_entry {
    char *name;
    struct tb_shape shape;
    enum tb_dtype dtype; /* as stored: F32, BF16 or F16 */
    uint64_t begin, end;
    const float *data;
    float *converted; /* a 16-bit tensor's values as floats (data points here) */
};

/* The safetensors names of the dtypes trainbig reads. */
static const struct {
    const char *name;
    enum tb_dtype dtype;
} st_dtypes[] = { { "F32", TB_F32 }, { "BF16", TB_BF16 }, { "F16", TB_F16 } };

static const char *st_dtype_name(enum tb_dtype t)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].dtype == t)
            return st_dtypes[i].name;
    return "?";
}

struct tb_safetensors {
    char *path;
    void *map;
    size_t map_len;
    float *copy; /* the data, when the file's data is not 4-byte aligned */
    struct st_entry *t;
    size_t n, cap;
    char **meta; /* key, value pairs */
    size_t nmeta;
};

/* The parser: p walks the header, end bounds it; errors go to msg. */
struct parser {
    const char *start, *p, *end;
    char msg[256];
};

static bool perr(struct parser *ps, const char *what)
{
    if (!ps->msg[0])
        snprintf(ps->msg, sizeof ps->msg, "%s", what);
    return false;
}

static void ws(struct parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static bool expect(struct parser *ps, char c)
{
    ws(ps);
    if (ps->p >= ps->end || *ps->p != c) {
        char m[64];
        snprintf(m, sizeof m, "header: expected '%c' at byte %ld of the header", c, (long)(ps->p - ps->start));
        return perr(ps, m);
    }
    ps->p++;
    return true;
}

/* A string into a new allocation (*out), escapes decoded (\uXXXX to UTF-8, no surrogates). */
static bool parse_string(struct parser *ps, char **out)
{
    if (!expect(ps, '"'))
        return false;
    struct tb_text t = { 0 };
    tb_text_put(&t, "", 0);
    while (ps->p < ps->end && *ps->p != '"') {
        char c = *ps->p++;
        if ((unsigned char)c < 0x20) {
            free(t.s);
            return perr(ps, "header: control character in a string");
        }
        if (c != '\\') {
            tb_text_put(&t, &c, 1);
            continue;
        }
        if (ps->p >= ps->end)
            break;
        c = *ps->p++;
        const char *simple = strchr("\"\\/bfnrt", c);
        if (simple && c) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            tb_text_put(&t, &map[simple - "\"\\/bfnrt"], 1);
        } else if (c == 'u' && ps->end - ps->p >= 4) {
            unsigned v = 0;
            for (int i = 0; i < 4; i++) {
                const char h = *ps->p++;
                v = v * 16 + (unsigned)(h >= '0' && h <= '9'   ? h - '0'
                                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                               : 99);
            }
            if (v > 0xffff || (v >= 0xd800 && v <= 0xdfff)) {
                free(t.s);
                return perr(ps, "header: unsupported \\u escape");
            }
            char u[3];
            if (v < 0x80) {
                u[0] = (char)v;
                tb_text_put(&t, u, 1);
            } else if (v < 0x800) {
                u[0] = (char)(0xc0 | v >> 6);
                u[1] = (char)(0x80 | (v & 0x3f));
                tb_text_put(&t, u, 2);
            } else {
                u[0] = (char)(0xe0 | v >> 12);
                u[1] = (char)(0x80 | ((v >> 6) & 0x3f));
                u[2] = (char)(0x80 | (v & 0x3f));
                tb_text_put(&t, u, 3);
            }
        } else {
            free(t.s);
            return perr(ps, "header: bad escape in a string");
        }
    }
    if (ps->p >= ps->end || t.oom) {
        free(t.s);
        return perr(ps, t.oom ? "out of memory" : "header: unterminated string");
    }
    ps->p++;
    *out = t.s;
    return true;
}

static bool parse_uint(struct parser *ps, uint64_t *out)
{
    ws(ps);
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
        return perr(ps, "header: expected a non-negative integer");
    uint64_t v = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        if (v > (UINT64_MAX - 9) / 10)
            return perr(ps, "header: integer too large");
        v = v * 10 + (uint64_t)(*ps->p++ - '0');
    }
    *out = v;
    return true;
}

/* [a, b, ...] of at most max integers; *n receives the count. */
static bool parse_uints(struct parser *ps, uint64_t *v, int max, int *n)
{
    *n = 0;
    if (!expect(ps, '['))
        return false;
    ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return true;
    }
    for (;;) {
        if (*n == max)
            return perr(ps, "header: too many dimensions");
        if (!parse_uint(ps, &v[(*n)++]))
            return false;
        ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        return expect(ps, ']');
    }
}

static bool parse_metadata(struct parser *ps, struct tb_safetensors *st)
{
    if (!expect(ps, '{'))
        return false;
    ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return true;
    }
    for (;;) {
        char *k = NULL, *v = NULL;
        if (!parse_string(ps, &k) || !expect(ps, ':')) {
            free(k);
            return false;
        }
        ws(ps);
        if (ps->p >= ps->end || *ps->p != '"') {
            free(k);
            return perr(ps, "header: __metadata__ must map strings to strings");
        }
        if (!parse_string(ps, &v)) {
            free(k);
            return false;
        }
        char **m = realloc(st->meta, (st->nmeta + 1) * 2 * sizeof *m);
        if (!m) {
            free(k);
            free(v);
            return perr(ps, "out of memory");
        }
        st->meta = m;
        m[2 * st->nmeta] = k;
        m[2 * st->nmeta + 1] = v;
        st->nmeta++;
        ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        return expect(ps, '}');
    }
}

/* {"dtype": "F32", "shape": [...], "data_offsets": [b, e]} in any order. */
static bool parse_tensor(struct parser *ps, struct st_entry *e)
{
    if (!expect(ps, '{'))
        return false;
    bool dtype = false, shape = false, offsets = false;
    for (;;) {
        char *k = NULL;
        if (!parse_string(ps, &k) || !expect(ps, ':')) {
            free(k);
            return false;
        }
        bool ok;
        if (strcmp(k, "dtype") == 0) {
            char *v = NULL;
            ok = parse_string(ps, &v);
            e->dtype = 0;
            for (size_t i = 0; ok && i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
                if (strcmp(v, st_dtypes[i].name) == 0)
                    e->dtype = st_dtypes[i].dtype;
            if (ok && !e->dtype) {
                char m[128];
                snprintf(m, sizeof m, "tensor '%s' is %.16s; trainbig reads F32, BF16 and F16", e->name, v);
                ok = perr(ps, m);
            }
            free(v);
            dtype = true;
        } else if (strcmp(k, "shape") == 0) {
            uint64_t d[4];
            int nd;
            /* trainbig writes every tensor as (N, C, H, W), and reads only that. */
            ok = parse_uints(ps, d, 4, &nd) && (nd == 4 || perr(ps, "header: a shape is not 4-dimensional"));
            for (int i = 0; ok && i < 4; i++)
                if (d[i] > INT32_MAX)
                    ok = perr(ps, "header: a dimension is too large");
            if (ok)
                e->shape = (struct tb_shape){ (int)d[0], (int)d[1], (int)d[2], (int)d[3] };
            shape = true;
        } else if (strcmp(k, "data_offsets") == 0) {
            uint64_t d[4];
            int nd;
            ok = parse_uints(ps, d, 2, &nd) && (nd == 2 || perr(ps, "header: data_offsets needs 2 numbers"));
            if (ok) {
                e->begin = d[0];
                e->end = d[1];
            }
            offsets = true;
        } else
            ok = perr(ps, "header: a tensor has an unknown field");
        free(k);
        if (!ok)
            return false;
        ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (!expect(ps, '}'))
            return false;
        if (!dtype || !shape || !offsets)
            return perr(ps, "header: a tensor lacks dtype, shape or data_offsets");
        return true;
    }
}

static int cmp_begin(const void *a, const void *b)
{
    const struct st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* The whole file, mapped read-only: *map and *len, or an error naming path. */
/* "path: what: the system's reason". */
static int fail_errno(struct tb_err *err, const char *what, const char *path)
{
    return tb_err_set(err, TB_ERR_RUNTIME, "%s: %s: %s", path, what, strerror(errno));
}

static int map_file(const char *path, void **map, size_t *len, struct tb_err *err)
{
    int fd = tb_open_regular(path, "the file", TB_ERR_RUNTIME, err);
    if (fd < 0)
        return err->status;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return fail_errno(err, "cannot stat", path);
    }
    *len = (size_t)sb.st_size;
    if (*len < 8) {
        close(fd);
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: %zu bytes: too short for a safetensors file (truncated?)", path,
                          *len);
    }
    *map = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (*map == MAP_FAILED)
        return fail_errno(err, "cannot map", path);
    return TB_OK;
}

/* The header's JSON object: "__metadata__" and one entry per tensor into st. False with
 * ps->msg on a syntax error. */
static bool parse_header(struct parser *ps, struct tb_safetensors *st)
{
    bool ok = expect(ps, '{');
    ws(ps);
    if (ok && ps->p < ps->end && *ps->p == '}') {
        ps->p++;
    } else {
        while (ok) {
            char *k = NULL;
            ok = parse_string(ps, &k) && expect(ps, ':');
            if (ok && strcmp(k, "__metadata__") == 0) {
                ok = parse_metadata(ps, st);
                free(k);
            } else if (ok) {
                if (st->n == st->cap) {
                    size_t cap = st->cap ? 2 * st->cap : 64;
                    struct st_entry *t = realloc(st->t, cap * sizeof *t);
                    if (!t) {
                        free(k);
                        ok = perr(ps, "out of memory");
                        break;
                    }
                    st->t = t;
                    st->cap = cap;
                }
                struct st_entry *e = &st->t[st->n++];
                memset(e, 0, sizeof *e);
                e->name = k;
                ok = parse_tensor(ps, e);
            } else {
                free(k);
            }
            ws(ps);
            if (ok && ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                continue;
            }
            ok = ok && expect(ps, '}');
            break;
        }
    }
    ws(ps);
    if (ok && ps->p != ps->end)
        ok = perr(ps, "header: text after the closing brace");
    return ok;
}

/* Bytes of a tensor of shape s and dtype t; UINT64_MAX where that does not fit 64 bits
 * (each side may be up to INT32_MAX: (65536,65536,65536,65536) would wrap around to 0). */
static uint64_t tensor_bytes(struct tb_shape s, enum tb_dtype t)
{
    const uint64_t d[4] = { (uint64_t)s.n, (uint64_t)s.c, (uint64_t)s.h, (uint64_t)s.w };
    if (!d[0] || !d[1] || !d[2] || !d[3])
        return 0;
    uint64_t bytes = tb_dtype_size(t);
    for (int i = 0; i < 4; i++) {
        if (bytes > UINT64_MAX / d[i])
            return UINT64_MAX;
        bytes *= d[i];
    }
    return bytes;
}

/* Every byte of the data (data_len after the header) belongs to exactly one tensor, and
 * each tensor's size matches its shape. */
static int check_layout(const struct tb_safetensors *st, const char *path, uint64_t data_len, struct tb_err *err)
{
    struct st_entry *sorted = st->n ? malloc(st->n * sizeof *sorted) : NULL;
    if (st->n && !sorted)
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", path);
    if (st->n) { /* a file of no tensors: no array, and qsort takes no NULL even for 0 */
        memcpy(sorted, st->t, st->n * sizeof *sorted);
        qsort(sorted, st->n, sizeof *sorted, cmp_begin);
    }
    int rc = TB_OK;
    uint64_t at = 0;
    for (size_t i = 0; i < st->n && !rc; i++) {
        const struct st_entry *e = &sorted[i];
        const uint64_t want = tensor_bytes(e->shape, e->dtype);
        if (e->end < e->begin)
            rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin",
                            path, e->name, (unsigned long long)e->begin, (unsigned long long)e->end);
        else if (e->end > data_len)
            rc = tb_err_set(err, TB_ERR_RUNTIME,
                            "%s: tensor '%s': data_offsets [%llu, %llu] end past the %llu bytes the file holds after "
                            "the header (truncated, or a wrong offset)",
                            path, e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                            (unsigned long long)data_len);
        else if (e->end - e->begin != want)
            rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: tensor '%s': %llu bytes for shape (%d,%d,%d,%d) of %s", path,
                            e->name, (unsigned long long)(e->end - e->begin), e->shape.n, e->shape.c, e->shape.h,
                            e->shape.w, st_dtype_name(e->dtype));
        else if (e->begin != at)
            rc = tb_err_set(err, TB_ERR_RUNTIME,
                            "%s: tensor '%s' starts at byte %llu of the data, expected %llu "
                            "(a hole or an overlap)",
                            path, e->name, (unsigned long long)e->begin, (unsigned long long)at);
        at = e->end;
    }
    free(sorted);
    if (!rc && at != data_len)
        rc = tb_err_set(err, TB_ERR_RUNTIME,
                        "%s: the tensors cover %llu bytes but the file holds %llu after the "
                        "header (truncated or padded)",
                        path, (unsigned long long)at, (unsigned long long)data_len);
    return rc;
}

int tb_safetensors_read(const char *path, struct tb_safetensors **out, struct tb_err *err)
{
    *out = NULL;
    void *map = NULL;
    size_t len = 0;
    int rc = map_file(path, &map, &len, err);
    if (rc)
        return rc;
    struct tb_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        munmap(map, len);
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", path);
    }
    st->map = map; /* st owns the mapping from here: tb_safetensors_free unmaps it */
    st->map_len = len;
    const unsigned char *b = map;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)b[i] << (8 * i);
    if (hlen > MAX_HEADER || hlen > len - 8) {
        rc = tb_err_set(err, TB_ERR_RUNTIME,
                        "%s: header length %llu does not fit a %zu-byte file: not a safetensors file, or truncated",
                        path, (unsigned long long)hlen, len);
        goto out;
    }
    struct parser ps = { 0 };
    ps.start = ps.p = (const char *)b + 8;
    ps.end = ps.p + hlen;
    if (!parse_header(&ps, st)) {
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: not a valid safetensors file: %s", path, ps.msg);
        goto out;
    }
    const uint64_t data_len = len - 8 - hlen;
    rc = check_layout(st, path, data_len, err);
    if (rc)
        goto out;
    const unsigned char *data = b + 8 + hlen;
    if ((uintptr_t)data % sizeof(float)) {
        st->copy = malloc(data_len ? data_len : 1);
        if (!st->copy) {
            rc = tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", path);
            goto out;
        }
        memcpy(st->copy, data, data_len);
        data = (const unsigned char *)st->copy;
    }
    for (size_t i = 0; i < st->n && !rc; i++) {
        struct st_entry *e = &st->t[i];
        const unsigned char *at = data + e->begin;
        if (e->dtype == TB_F32 && (uintptr_t)at % sizeof(float) == 0) {
            e->data = (const float *)(const void *)at;
            continue;
        }
        /* a 16-bit tensor (little-endian), each value converted exactly to a float; or an
         * F32 one that a 16-bit one before it left at an address floats cannot be read at */
        const size_t count = tb_shape_elems(e->shape);
        e->converted = malloc(count * sizeof(float));
        if (!e->converted) {
            rc = tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory for tensor '%s'", path, e->name);
            break;
        }
        if (e->dtype == TB_F32)
            memcpy(e->converted, at, count * sizeof(float));
        for (size_t j = 0; e->dtype != TB_F32 && j < count; j++) {
            const uint16_t h = (uint16_t)(at[2 * j] | at[2 * j + 1] << 8);
            e->converted[j] = e->dtype == TB_BF16 ? tb_f32_from_bf16(h) : tb_f32_from_f16(h);
        }
        e->data = e->converted;
    }
out:
    if (rc) {
        tb_safetensors_free(st);
        return rc;
    }
    *out = st;
    return TB_OK;
}

void tb_safetensors_free(struct tb_safetensors *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n; i++)
        free(st->t[i].name), free(st->t[i].converted);
    for (size_t i = 0; i < 2 * st->nmeta; i++)
        free(st->meta[i]);
    free(st->meta);
    free(st->t);
    free(st->copy);
    if (st->map)
        munmap(st->map, st->map_len);
    free(st->path);
    free(st);
}

size_t tb_safetensors_count(const struct tb_safetensors *st)
{
    return st->n;
}

const char *tb_safetensors_at(const struct tb_safetensors *st, size_t i, struct tb_shape *shape, const float **data)
{
    if (i >= st->n)
        return NULL;
    if (shape)
        *shape = st->t[i].shape;
    if (data)
        *data = st->t[i].data;
    return st->t[i].name;
}

const float *tb_safetensors_find(const struct tb_safetensors *st, const char *name, struct tb_shape *shape)
{
    for (size_t i = 0; i < st->n; i++)
        if (strcmp(st->t[i].name, name) == 0) {
            if (shape)
                *shape = st->t[i].shape;
            return st->t[i].data;
        }
    return NULL;
}

const char *tb_safetensors_meta(const struct tb_safetensors *st, const char *key)
{
    for (size_t i = 0; i < st->nmeta; i++)
        if (strcmp(st->meta[2 * i], key) == 0)
            return st->meta[2 * i + 1];
    return NULL;
}
