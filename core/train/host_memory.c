/* host_memory.c: the host-memory check before a run's first step (host_memory.h). */
#include "config.h"

#include "core/train/host_memory.h"
#include "core/config/keys_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <trainbig/log.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

/* The "KEY: N kB" line of a /proc file, in bytes; 0 when missing. */
static uint64_t proc_kib(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t kib = 0;
    const size_t klen = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':' && sscanf(line + klen + 1, "%" SCNu64, &kib) == 1)
            break;
    fclose(f);
    return kib * 1024;
}

/* One number from a cgroup file; false for "max" or when unreadable. */
static bool cgroup_value(const char *dir, const char *file, uint64_t *out)
{
    char path[4096];
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fscanf(f, "%" SCNu64, out) == 1;
    fclose(f);
    return ok;
}

/* Room left under this process's cgroup (v2) memory limit; UINT64_MAX when none. */
static uint64_t cgroup_room(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return UINT64_MAX;
    char line[4096], dir[4096] = "";
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "0::", 3) == 0) {
            snprintf(dir, sizeof dir, "%s", line + 3);
            dir[strcspn(dir, "\n")] = '\0';
            break;
        }
    fclose(f);
    uint64_t max, current;
    if (!dir[0] || !cgroup_value(strcmp(dir, "/") == 0 ? "" : dir, "memory.max", &max) ||
        !cgroup_value(strcmp(dir, "/") == 0 ? "" : dir, "memory.current", &current))
        return UINT64_MAX;
    return max > current ? max - current : 0;
}

uint64_t tb_host_available(char *source, size_t source_size)
{
    uint64_t best = UINT64_MAX;
    const char *from = "unknown";
    const uint64_t meminfo = proc_kib("/proc/meminfo", "MemAvailable");
    if (meminfo) {
        best = meminfo;
        from = "MemAvailable in /proc/meminfo";
    }
    const uint64_t cgroup = cgroup_room();
    if (cgroup < best) {
        best = cgroup;
        from = "this process's cgroup: memory.max less memory.current";
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        const uint64_t size = proc_kib("/proc/self/status", "VmSize");
        const uint64_t room = (uint64_t)rl.rlim_cur > size ? (uint64_t)rl.rlim_cur - size : 0;
        if (room < best) {
            best = room;
            from = "ulimit -v less this process's size";
        }
    }
    /* A smaller host, to ask what fits on one (documented in trainbig(1)). */
    const char *as = getenv("TRAINBIG_HOST_MEMORY");
    uint64_t given;
    if (as && *as && (tb_parse_size(as, &given) != 0 || given == 0)) {
        static bool warned; /* once a process */
        if (!warned)
            tb_log(TB_LOG_WARN, "TRAINBIG_HOST_MEMORY = '%s' is not a size above 0 (as 16G or 512M): ignored", as);
        warned = true;
    } else if (as && *as && given < best) {
        best = given;
        from = "TRAINBIG_HOST_MEMORY";
    }
    if (source && source_size)
        snprintf(source, source_size, "%s", from);
    return best;
}

/* Appends ", TEXT" (or TEXT first) to buf. */
static void add_part(char *buf, size_t cap, const char *text)
{
    size_t used = strlen(buf);
    snprintf(buf + used, cap - used, "%s%s", used ? "; " : "", text);
}

int tb_host_memory_check(struct tb_engine *e, struct tb_graph *const *gs, size_t ng, uint64_t buffers, bool checkpoints,
                         const char *what, const char *fix, uint64_t *need, struct tb_err *err)
{
    struct tb_exec_estimate est;
    int rc = tb_exec_estimate(e, gs, ng, &est, err);
    if (rc)
        return rc;
    struct tb_mem_stats st = { 0 };
    e->ops->mem_stats(e->ctx, e->device, &st);
    const uint64_t step = est.step, device = st.in_use + est.made + est.step;
    const bool unbounded = st.capacity == UINT64_MAX;
    const bool swapping = e->swap.ops != NULL;
    const uint64_t grow = unbounded && device > st.reserved ? device - st.reserved : 0;
    /* A modelled device's memory and its swapped copies are address space with no bytes
     * behind them, and its run writes no checkpoint: only the batches are real. */
    const uint64_t swap = !e->modelled && !unbounded && swapping && device > st.capacity ? device - st.capacity : 0;
    const uint64_t ckpt = checkpoints && !e->modelled ? est.saved : 0;
    const uint64_t total = grow + swap + buffers + ckpt;
    if (need)
        *need = total;
    char source[192];
    uint64_t avail = tb_host_available(source, sizeof source);
    /* Ranks on one host share its memory: each may count on its share. */
    const int sharers = e->comm && e->comm->local_size > 1 ? e->comm->local_size : 1;
    if (sharers > 1 && avail != UINT64_MAX) {
        avail /= (uint64_t)sharers;
        size_t used = strlen(source);
        snprintf(source + used, sizeof source - used, ", shared by the %d ranks on this host", sharers);
    }
    if (total > avail) {
        char parts[1024] = "", part[320];
        if (grow) {
            snprintf(part, sizeof part,
                     "%.2f GiB of device memory, which is host memory here: a step needs %.2f GiB (%.2f GiB of "
                     "inputs, parameters and state, %.2f GiB of activations at its peak) and the backend "
                     "has no [backend] device_memory to bound it",
                     (double)grow / GIB, (double)device / GIB, (double)(device - step) / GIB, (double)step / GIB);
            add_part(parts, sizeof parts, part);
        }
        if (swap) {
            snprintf(part, sizeof part,
                     "%.2f GiB of swap space at least: a step needs %.2f GiB of device memory, %.2f GiB more than "
                     "the device's %.2f GiB, and [swap] moves that out to host memory",
                     (double)swap / GIB, (double)device / GIB, (double)swap / GIB, (double)st.capacity / GIB);
            add_part(parts, sizeof parts, part);
        }
        if (buffers) {
            snprintf(part, sizeof part, "%.2f GiB of input batches", (double)buffers / GIB);
            add_part(parts, sizeof parts, part);
        }
        if (ckpt) {
            snprintf(part, sizeof part, "%.2f GiB to write a checkpoint", (double)ckpt / GIB);
            add_part(parts, sizeof parts, part);
        }
        return tb_err_set(err, TB_ERR_NOMEM,
                          "%s needs at least %.2f GiB " TB_HOST_MEMORY_REFUSAL " (%s), but only %.2f GiB is "
                          "available to it (%s); %s",
                          what, (double)total / GIB, parts, (double)avail / GIB, source, fix);
    }
    if (swapping && avail != UINT64_MAX && !e->modelled) {
        e->swap_space_limit = avail - grow - buffers - ckpt;
        snprintf(e->swap_space_why, sizeof e->swap_space_why,
                 "the host had %.2f GiB available at start (%s), %.2f GiB of it kept for the rest of the run",
                 (double)avail / GIB, source, (double)(grow + buffers + ckpt) / GIB);
    }
    return TB_OK;
}
