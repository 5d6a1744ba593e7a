/* checkpoint.c: an engine's parameters, buffers and momentum in a safetensors file, and
 * back, and the retention of a run directory's newest checkpoints ([train] keep). See
 * core/train/checkpoint.h for what is stored. Nothing allocated here outlives
 * a call but the training text tb_checkpoint_load() hands its caller. */
#include "config.h"

#include "core/train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <trainbig/random.h>
#include <trainbig/version.h>
#include <unistd.h>

#include "core/engine/engine_internal.h"
#include "core/util/hash_internal.h"
#include "core/util/kill_point.h"
#include "core/util/log_control.h"
#include "core/train/safetensors_internal.h"

/* Format 2: the checksum covers the metadata too (format 1: the tensors only, so an
 * edited "iteration" resumed at another step unnoticed). Format 1 still loads. */
static const char format_name[] = "trainbig-checkpoint-2";
static const char format_1[] = "trainbig-checkpoint-1";
/* The metadata under the checksum, every key but the checksum itself. */
static const char *const summed_meta[] = { "format", "trainbig_version", "epoch",  "iteration",  "seed", "lr",
                                           "model",  "training",         "config", "config_hash" };
enum { NSUMMED = sizeof summed_meta / sizeof summed_meta[0] };
static const char momentum_prefix[] = "momentum/";

/* A tensor's checksum: its name, then its bytes 8 at a time through a multiply-xorshift
 * mix (FNV-1a byte by byte would take seconds on a full G-SCNN). */
static uint64_t tensor_sum(const char *name, const float *data, size_t n)
{
    uint64_t h = tb_fnv1a(name, strlen(name), TB_FNV1A_INIT);
    const unsigned char *p = (const unsigned char *)data;
    size_t bytes = n * sizeof *data, i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * TB_GOLDEN64;
        h ^= h >> 29;
    }
    return tb_fnv1a(p + i, bytes - i, h);
}

/* A metadata entry's share of the checksum: its key and value, NUL between them. */
static uint64_t meta_sum(const char *key, const char *value)
{
    uint64_t h = tb_fnv1a(key, strlen(key) + 1, TB_FNV1A_INIT);
    return tb_fnv1a(value, strlen(value), h) * TB_GOLDEN64;
}

void tb_text_first_difference(const char *here, const char *there, char *buf, size_t size)
{
    const char *a = here ? here : "", *b = there ? there : "";
    while (*a || *b) {
        size_t na = strcspn(a, "\n"), nb = strcspn(b, "\n");
        if (na != nb || memcmp(a, b, na) != 0) {
            snprintf(buf, size, "'%.*s' here, '%.*s' there", (int)(na < 200 ? na : 200), a, (int)(nb < 200 ? nb : 200),
                     b);
            return;
        }
        a += na + (a[na] == '\n');
        b += nb + (b[nb] == '\n');
    }
    snprintf(buf, size, "no difference");
}

/* Every parameter and momentum of e, read into host (sized by the caller), as tensors t
 * with names (the caller frees them); *k tensors, their checksum in *checksum. */
static int gather_params(const char *path, struct tb_engine *e, struct tb_st_tensor *t, char **names, float *host,
                         size_t *k, uint64_t *checksum, struct tb_err *err)
{
    size_t off = 0;
    *k = 0;
    *checksum = 0;
    for (size_t i = 0; i < tb_engine_param_count(e); i++) {
        struct tb_param *p = tb_engine_param_at(e, i);
        for (int m = 0; m < 2; m++) {
            const struct tb_tensor *src = m ? &p->momentum : &p->value;
            if (!src->data)
                continue;
            if (p->value.desc.dtype != TB_F32)
                return tb_err_set(err, TB_ERR_RUNTIME, "%s: parameter %s is not f32; checkpoints hold f32 only", path,
                                  p->name);
            size_t n = tb_shape_elems(src->desc.shape);
            int rc = e->ops->tensor_read(e->ctx, src, host + off, err);
            if (rc)
                return tb_err_prefix(err, "%s: reading %s%s from the device", path, m ? momentum_prefix : "", p->name);
            size_t len = strlen(p->name) + sizeof momentum_prefix;
            if (!(names[*k] = malloc(len)))
                return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
            snprintf(names[*k], len, "%s%s", m ? momentum_prefix : "", p->name);
            t[*k] = (struct tb_st_tensor){ names[*k], src->desc.shape, host + off };
            *checksum += tensor_sum(names[*k], host + off, n);
            (*k)++;
            off += n;
        }
    }
    return TB_OK;
}

/* Writes tensors t[0..k-1] to path with the run's metadata and their checksum. */
static int write_checkpoint(int dirfd, const char *name, const char *path, const struct tb_ckpt_info *info, const struct tb_st_tensor *t, size_t k,
                            uint64_t checksum, struct tb_err *err)
{
    char epoch[32], iteration[32], seed[32], lr[40], hash[24], sum[24];
    snprintf(epoch, sizeof epoch, "%" PRIu64, info->epoch);
    snprintf(iteration, sizeof iteration, "%" PRIu64, info->iteration);
    snprintf(seed, sizeof seed, "%" PRIu64, info->seed);
    snprintf(lr, sizeof lr, "%.17g", info->lr);
    const char *config = info->config ? info->config : "";
    snprintf(hash, sizeof hash, "%016" PRIx64, tb_fnv1a(config, strlen(config), TB_FNV1A_INIT));
    const char *meta[] = {
        "format",
        format_name,
        "trainbig_version",
        TB_VERSION,
        "epoch",
        epoch,
        "iteration",
        iteration,
        "seed",
        seed,
        "lr",
        lr,
        "model",
        info->model ? info->model : "",
        "training",
        info->training ? info->training : "",
        "config",
        config,
        "config_hash",
        hash,
        "checksum",
        sum,
    };
    const size_t nmeta = sizeof meta / sizeof meta[0] / 2;
    /* The loader sums summed_meta: every key written here but the checksum, in order. */
    _Static_assert(sizeof meta / sizeof meta[0] / 2 == NSUMMED + 1, "summed_meta must list every metadata key");
    for (size_t i = 0; i + 1 < nmeta; i++) { /* all but the checksum, which is last */
        if (strcmp(meta[2 * i], summed_meta[i]) != 0)
            return tb_err_set(err, TB_ERR_RUNTIME, "internal error: checkpoint metadata '%s' is not summed_meta[%zu]",
                              meta[2 * i], i);
        checksum += meta_sum(meta[2 * i], meta[2 * i + 1]);
    }
    snprintf(sum, sizeof sum, "%016" PRIx64, checksum);
    return tb_safetensors_write_at(dirfd, name, path, t, k, meta, nmeta, err);
}

int tb_checkpoint_save(int dirfd, const char *name, const char *path, struct tb_engine *e, const struct tb_ckpt_info *info, struct tb_err *err)
{
    const size_t np = tb_engine_param_count(e);
    size_t nt = 0, elems = 0;
    for (size_t i = 0; i < np; i++) {
        struct tb_param *p = tb_engine_param_at(e, i);
        size_t n = tb_shape_elems(p->value.desc.shape);
        nt += 1 + (p->momentum.data != NULL);
        elems += n * (1 + (p->momentum.data != NULL));
    }
    /* One host buffer for everything: the writer needs all tensors at once. */
    struct tb_st_tensor *t = calloc(nt ? nt : 1, sizeof *t);
    char **names = calloc(nt ? nt : 1, sizeof *names);
    float *host = malloc((elems ? elems : 1) * sizeof *host);
    int rc;
    size_t k = 0;
    uint64_t checksum = 0;
    if (!t || !names || !host)
        rc = tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory for a %zu-byte checkpoint", path, elems * sizeof *host);
    else
        rc = gather_params(path, e, t, names, host, &k, &checksum, err);
    if (!rc)
        rc = write_checkpoint(dirfd, name, path, info, t, k, checksum, err);
    for (size_t i = 0; names && i < nt; i++)
        free(names[i]);
    free(names);
    free(t);
    free(host);
    return rc;
}

static int parse_u64(const struct tb_safetensors *st, const char *path, const char *key, uint64_t *out,
                     struct tb_err *err)
{
    const char *v = tb_safetensors_meta(st, key);
    /* Digits only, within int64_t: strtoull alone would take "-1" as 2^64 - 1. */
    bool ok = v && *v && strspn(v, "0123456789") == strlen(v) && strlen(v) <= 19;
    if (ok) {
        *out = strtoull(v, NULL, 10);
        ok = *out <= (uint64_t)INT64_MAX;
    }
    if (!ok)
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "%s: checkpoint metadata '%s' is %s%s%s: expected a count (digits, at most %" PRId64 ")",
                          path, key, v ? "'" : "missing", v ? v : "", v ? "'" : "", INT64_MAX);
    return TB_OK;
}

/* The checksum first: a flipped byte anywhere is a corrupt file, whatever else it says. */
static int check_checksum(const struct tb_safetensors *st, const char *path, bool with_meta, struct tb_err *err)
{
    uint64_t want, have = 0;
    for (size_t i = 0; with_meta && i < NSUMMED; i++) {
        const char *v = tb_safetensors_meta(st, summed_meta[i]);
        if (!v)
            return tb_err_set(err, TB_ERR_RUNTIME, "%s: the checkpoint is corrupt: metadata '%s' is missing", path,
                              summed_meta[i]);
        have += meta_sum(summed_meta[i], v);
    }
    const char *sum = tb_safetensors_meta(st, "checksum");
    char *end;
    if (!sum || (want = strtoull(sum, &end, 16), *end || end == sum))
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: checkpoint metadata 'checksum' is missing or malformed", path);
    const size_t nt = tb_safetensors_count(st);
    for (size_t i = 0; i < nt; i++) {
        struct tb_shape shape;
        const float *data;
        const char *name = tb_safetensors_at(st, i, &shape, &data);
        have += tensor_sum(name, data, tb_shape_elems(shape));
    }
    if (have != want)
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "%s: the checkpoint is corrupt: its tensors%s do not match its checksum (%016" PRIx64
                          " computed, %016" PRIx64 " recorded); use an earlier checkpoint",
                          path, with_meta ? " and metadata" : "", have, want);
    return TB_OK;
}

/* Every tensor of the file must belong to the engine, every parameter and buffer of the
 * engine must be in the file, shapes equal: checked before anything is loaded. */
static int check_tensors(const struct tb_safetensors *st, struct tb_engine *e, const char *path, struct tb_err *err)
{
    const size_t nt = tb_safetensors_count(st), np = tb_engine_param_count(e);
    size_t found = 0;
    for (size_t i = 0; i < nt; i++) {
        struct tb_shape shape;
        const float *data;
        const char *name = tb_safetensors_at(st, i, &shape, &data);
        bool is_m = strncmp(name, momentum_prefix, sizeof momentum_prefix - 1) == 0;
        struct tb_param *p = tb_engine_find_param(e, is_m ? name + sizeof momentum_prefix - 1 : name);
        if (!p || (is_m && !p->trainable))
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "%s: the checkpoint holds '%s', which this model does not have: it was written for "
                              "another network",
                              path, name);
        struct tb_shape want_shape = p->value.desc.shape;
        if (memcmp(&shape, &want_shape, sizeof shape) != 0)
            return tb_err_set(
                err, TB_ERR_RUNTIME, "%s: '%s' is (%d,%d,%d,%d) in the checkpoint and (%d,%d,%d,%d) in this model",
                path, name, shape.n, shape.c, shape.h, shape.w, want_shape.n, want_shape.c, want_shape.h, want_shape.w);
        found += !is_m;
    }
    for (size_t i = 0; found != np && i < np; i++) {
        struct tb_param *p = tb_engine_param_at(e, i);
        struct tb_shape shape;
        if (!tb_safetensors_find(st, p->name, &shape))
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "%s: the checkpoint lacks '%s', which this model has: it was written for another "
                              "network",
                              path, p->name);
    }
    return TB_OK;
}

/* Writes the file's tensors into the engine's parameters and buffers (and momentum, when
 * asked): after check_tensors. */
static int load_tensors(const struct tb_safetensors *st, struct tb_engine *e, bool momentum, const char *path,
                        struct tb_err *err)
{
    int rc = TB_OK;
    const size_t nt = tb_safetensors_count(st);
    for (size_t i = 0; i < nt && !rc; i++) {
        struct tb_shape shape;
        const float *data;
        const char *name = tb_safetensors_at(st, i, &shape, &data);
        bool is_m = strncmp(name, momentum_prefix, sizeof momentum_prefix - 1) == 0;
        if (is_m && !momentum)
            continue;
        struct tb_param *p = tb_engine_find_param(e, is_m ? name + sizeof momentum_prefix - 1 : name);
        if (is_m)
            rc = tb_param_momentum(e, p, err);
        if (!rc)
            rc = e->ops->tensor_write(e->ctx, is_m ? &p->momentum : &p->value, data, err);
        if (rc)
            tb_err_prefix(err, "%s: loading %s", path, name);
    }
    return rc;
}

int tb_checkpoint_load(const char *path, struct tb_engine *e, bool momentum, struct tb_ckpt_info *info,
                       char **training_there, struct tb_err *err)
{
    if (training_there)
        *training_there = NULL;
    struct tb_safetensors *st;
    int rc = tb_safetensors_read(path, &st, err);
    if (rc)
        return rc;
    const char *format = tb_safetensors_meta(st, "format");
    const bool old_format = format && strcmp(format, format_1) == 0;
    if (!format || (strcmp(format, format_name) != 0 && !old_format)) {
        rc = tb_err_set(err, TB_ERR_RUNTIME,
                        "%s: not a trainbig checkpoint (metadata 'format' is %s%s%s, expected '%s')", path,
                        format ? "'" : "", format ? format : "missing", format ? "'" : "", format_name);
        goto out;
    }
    rc = check_checksum(st, path, !old_format, err);
    if (rc)
        goto out;
    if (old_format)
        tb_log(TB_LOG_WARN, "%s: written by an older trainbig (%s): its checksum covers the tensors, not the metadata",
               path, format_1);
    const char *model = tb_safetensors_meta(st, "model");
    if (!model || strcmp(model, info->model ? info->model : "") != 0) {
        char diff[600];
        tb_text_first_difference(info->model, model, diff, sizeof diff);
        rc = tb_err_set(err, TB_ERR_RUNTIME,
                        "%s: the checkpoint was written for another model configuration (%s); resume with the "
                        "[model] settings it was trained with",
                        path, diff);
        goto out;
    }
    struct tb_ckpt_info got = *info;
    rc = parse_u64(st, path, "epoch", &got.epoch, err);
    if (!rc)
        rc = parse_u64(st, path, "iteration", &got.iteration, err);
    if (!rc)
        rc = parse_u64(st, path, "seed", &got.seed, err);
    const char *lr = tb_safetensors_meta(st, "lr");
    char *end;
    if (!rc && (!lr || (got.lr = strtod(lr, &end), *end || end == lr)))
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: checkpoint metadata 'lr' is missing or not a number", path);
    if (!rc)
        rc = check_tensors(st, e, path, err);
    if (!rc)
        rc = load_tensors(st, e, momentum, path, err);
    if (rc)
        goto out;
    info->epoch = got.epoch;
    info->iteration = got.iteration;
    info->seed = got.seed;
    info->lr = got.lr;
    if (training_there) {
        const char *tr = tb_safetensors_meta(st, "training");
        *training_there = strdup(tr ? tr : "");
        if (!*training_there)
            rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
out:
    tb_safetensors_free(st);
    return rc;
}

/* ------------------------------------------------------------------ retention */

static bool is_checkpoint_name(const char *n)
{
    unsigned e, s;
    char tail[32];
    if (sscanf(n, "epoch-%4u%31s", &e, tail) != 2)
        return false;
    return strcmp(tail, ".safetensors") == 0 ||
           (sscanf(tail, "-step-%6u%31s", &s, tail) == 2 && strcmp(tail, ".safetensors") == 0);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A listing of the directory open as dirfd (its own descriptor, so dirfd stays the
 * caller's); NULL when it cannot be read. */
static DIR *list_dir(int dirfd)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0)
        close(fd);
    return d;
}

void tb_checkpoint_prune(int dirfd, const char *dir, int keep)
{
    DIR *d = list_dir(dirfd);
    if (!d)
        return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!is_checkpoint_name(de->d_name))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn)
                break;
            names = nn;
        }
        if (!(names[n] = strdup(de->d_name)))
            break;
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i + (size_t)keep < n; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (unlinkat(dirfd, names[i], 0) == 0) {
            tb_log(TB_LOG_DEBUG, "%s: removed ([train] keep = %d)", path, keep);
            tb_kill_point("removed", path);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Whether name is a temporary file this program writes next to its target
 * ("epoch-0002.safetensors.tmp.4711", "epochs.csv.tmp.4711-2") of a process that no
 * longer runs: *pid receives the number. */
static bool is_stale_temp(const char *name, long *pid)
{
    const char *t = strstr(name, ".tmp.");
    if (!t || t == name)
        return false;
    char *end;
    *pid = strtol(t + 5, &end, 10);
    if (end == t + 5 || *pid <= 0)
        return false;
    if (*end == '-') { /* the k-th name tried (atomic_file.c) */
        const char *k = end + 1;
        strtol(k, &end, 10);
        if (end == k)
            return false;
    }
    if (*end)
        return false;
    return *pid != (long)getpid() && kill((pid_t)*pid, 0) != 0 && errno == ESRCH;
}

void tb_checkpoint_sweep_temps(int dirfd, const char *dir)
{
    DIR *d = list_dir(dirfd);
    if (!d)
        return;
    for (struct dirent *de; (de = readdir(d));) {
        long pid;
        if (!is_stale_temp(de->d_name, &pid))
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (unlinkat(dirfd, de->d_name, 0) == 0)
            tb_log(TB_LOG_INFO, "%s: removed, left unfinished by process %ld, which stopped while writing it", path,
                   pid);
    }
    closedir(d);
}
