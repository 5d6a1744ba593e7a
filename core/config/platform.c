/* platform.c: reading a platform plugin's link and accelerator, and applying its
 * environment and swap defaults. */
#include "config.h"

#include "core/config/platform_internal.h"
#include "core/config/keys_internal.h"
#include "core/config/loader.h"
#include "core/config/section_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tb_platform_link(const struct tb_plugin *p, void *ctx, struct tb_link *out)
{
    memset(out, 0, sizeof *out);
    out->numa_node = -1;
    out->accel_efficiency = TB_ACCEL_EFFICIENCY_DEFAULT;
    p->ops.platform->link(ctx, out);
    if (!isfinite(out->accel_efficiency) || out->accel_efficiency <= 0)
        out->accel_efficiency = TB_ACCEL_EFFICIENCY_DEFAULT;
    if (!isfinite(out->duplex_bytes_per_s) || out->duplex_bytes_per_s < 0)
        out->duplex_bytes_per_s = 0.0;
    if (!isfinite(out->latency_s) || out->latency_s < 0)
        out->latency_s = 0.0;
    if (out->numa_node < -1)
        out->numa_node = -1;
}

static double known_rate(double v)
{
    return isfinite(v) && v > 0 ? v : 0.0;
}

void tb_platform_accel(const struct tb_plugin *p, void *ctx, struct tb_accel *out)
{
    memset(out, 0, sizeof *out);
    if (!p->ops.platform->accel)
        return;
    p->ops.platform->accel(ctx, out);
    out->name[sizeof out->name - 1] = '\0';
    out->mem_bytes_per_s = known_rate(out->mem_bytes_per_s);
    out->fp16_flops = known_rate(out->fp16_flops);
    out->bf16_flops = known_rate(out->bf16_flops);
    out->per_node = out->per_node > 0 ? out->per_node : 0;
    out->peer_bytes_per_s = known_rate(out->peer_bytes_per_s);
    out->peer_latency_s = known_rate(out->peer_latency_s);
    out->net_bytes_per_s = known_rate(out->net_bytes_per_s);
    out->net_latency_s = known_rate(out->net_latency_s);
    out->pair_bytes_per_s = known_rate(out->pair_bytes_per_s);
}

void tb_accel_ring_hop(const struct tb_accel *a, int n, double *bytes_per_s, double *latency_s)
{
    double bw = a->peer_bytes_per_s, latency = a->peer_latency_s;
    if (n == 2 && a->per_node >= 2 && a->pair_bytes_per_s > bw)
        bw = a->pair_bytes_per_s;
    if (n > a->per_node) {
        bw = a->net_bytes_per_s < bw ? a->net_bytes_per_s : bw;
        latency = a->net_latency_s > latency ? a->net_latency_s : latency;
    }
    *bytes_per_s = bw;
    *latency_s = latency;
}

void tb_accel_text(const struct tb_accel *a, double fp32_flops, char *buf, size_t size)
{
    if (!a->name[0] && !a->memory_bytes && !a->mem_bytes_per_s) {
        snprintf(buf, size, "not described (the platform plugin has no accel)");
        return;
    }
    char mem[48] = "memory unknown", bw[48] = "bandwidth unknown", h[40] = "no fp16", b[40] = "no bf16";
    if (a->memory_bytes)
        snprintf(mem, sizeof mem, "%.1f GiB for trainbig", (double)a->memory_bytes / (1024.0 * 1024.0 * 1024.0));
    if (a->mem_bytes_per_s > 0)
        snprintf(bw, sizeof bw, "%.0f GB/s memory", a->mem_bytes_per_s / 1e9);
    if (a->fp16_flops > 0)
        snprintf(h, sizeof h, "%.1f fp16", a->fp16_flops / 1e12);
    if (a->bf16_flops > 0)
        snprintf(b, sizeof b, "%.1f bf16", a->bf16_flops / 1e12);
    char ring[200] = "", pair[48] = "";
    if (a->pair_bytes_per_s > 0)
        snprintf(pair, sizeof pair, " (%.0f GB/s over 2 GPUs)", a->pair_bytes_per_s / 1e9);
    if (a->per_node > 0)
        snprintf(ring, sizeof ring, "; %d per node, ring %.0f GB/s within a node%s and %.1f GB/s between nodes",
                 a->per_node, a->peer_bytes_per_s / 1e9, pair, a->net_bytes_per_s / 1e9);
    snprintf(buf, size, "%s: %s, %s, %.1f TFLOP/s fp32, %s, %s (dense, matrix units)%s",
             a->name[0] ? a->name : "unnamed", mem, bw, fp32_flops / 1e12, h, b, ring);
}

enum { MAX_NAME = 255 };

/* Length of the NAME in "NAME=VALUE" (a letter or '_', then letters, digits or '_', at
 * most MAX_NAME of them), or 0 when entry is not of that form. */
static size_t env_name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');
    if (!eq || eq == entry || eq - entry > MAX_NAME || isdigit((unsigned char)entry[0]))
        return 0;
    for (const char *c = entry; c < eq; c++)
        if (!(isalnum((unsigned char)*c) || *c == '_'))
            return 0;
    return (size_t)(eq - entry);
}

/* Appends "sep NAME=VALUE" to buf at *o, keeping buf terminated when it is full. */
static void append(char *buf, size_t size, size_t *o, const char *sep, const char *name, size_t name_len,
                   const char *value)
{
    if (*o + 1 >= size)
        return;
    int n = snprintf(buf + *o, size - *o, "%s%.*s=%s", sep, (int)name_len, name, value);
    if (n > 0)
        *o = *o + (size_t)n < size ? *o + (size_t)n : size - 1;
}

int tb_platform_apply_env(const struct tb_plugin *p, void *ctx, char *report, size_t report_size, size_t *nset,
                          struct tb_err *err)
{
    if (nset)
        *nset = 0;
    snprintf(report, report_size, "none");
    if (!p->ops.platform->env_defaults)
        return TB_OK;
    const char *const *env = p->ops.platform->env_defaults(ctx);
    if (!env || !env[0])
        return TB_OK;
    /* Every entry is checked before the first is set: nothing is applied half. */
    for (size_t i = 0; env[i]; i++)
        if (!env_name_len(env[i]))
            return tb_err_set(err, TB_ERR_PLUGIN,
                              "platform plugin '%s': environment default '%s' is not NAME=VALUE (a name of 1 to %d "
                              "letters, digits and '_', not starting with a digit)",
                              p->name, env[i], MAX_NAME);
    char set[2048] = "", kept[2048] = "";
    size_t count_set = 0, nkept = 0, oset = 0, okept = 0;
    for (size_t i = 0; env[i]; i++) {
        size_t n = env_name_len(env[i]);
        char name[MAX_NAME + 1];
        memcpy(name, env[i], n);
        name[n] = '\0';
        const char *have = getenv(name);
        if (have) {
            append(kept, sizeof kept, &okept, nkept++ ? ", " : "", name, n, have);
            continue;
        }
        if (setenv(name, env[i] + n + 1, 0) != 0)
            return tb_err_set(err, TB_ERR_NOMEM, "platform plugin '%s': cannot set %s in the environment", p->name,
                              env[i]);
        append(set, sizeof set, &oset, count_set++ ? ", " : "", name, n, env[i] + n + 1);
    }
    if (count_set && nkept)
        snprintf(report, report_size, "set %s; kept %s (already set)", set, kept);
    else if (count_set)
        snprintf(report, report_size, "set %s", set);
    else
        snprintf(report, report_size, "kept %s (already set)", kept);
    if (nset)
        *nset = count_set;
    return TB_OK;
}

/* Whether `name` is one of the items of the ", "-separated list. */
static bool listed(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* A swap default for a key the chosen policy does not have: it must be a key of some
 * installed swap plugin (then it is that policy's setting, checked against its key) or
 * it is a mistake that would otherwise be ignored. 0, or -1 with why filled. */
static int check_other_policies(const char *key, const char *value, char *why, size_t why_size)
{
    struct tb_plugin_list l;
    if (tb_plugin_list(TB_KIND_SWAP, &l) != TB_OK) {
        snprintf(why, why_size, "cannot list the swap plugins");
        return -1;
    }
    char names[512] = "";
    size_t o = 0;
    int rc = 1; /* not found yet */
    for (size_t i = 0; i < l.n && rc > 0; i++) {
        const struct tb_key *k = tb_keys_find(l.items[i]->p->keys, key);
        if (k) {
            struct tb_value v;
            memset(&v, 0, sizeof v);
            rc = tb_key_parse(k, value, NULL, &v, why, why_size) ? -1 : 0;
            tb_value_free(&v);
        }
        const struct tb_key *keys = l.items[i]->p->keys;
        for (size_t j = 0; rc > 0 && keys && keys[j].name && o + 1 < sizeof names; j++)
            if (!listed(names, keys[j].name)) /* once, as a hint */
                o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", o ? ", " : "", keys[j].name);
    }
    tb_plugin_list_free(&l);
    if (rc > 0)
        snprintf(why, why_size, "no installed swap plugin has a key '%s' (their keys: %s)", key, o ? names : "none");
    return rc ? -1 : 0;
}

int tb_platform_apply_swap(const struct tb_plugin *p, void *ctx, struct tb_section *swap, char *report,
                           size_t report_size, struct tb_err *err)
{
    if (report_size)
        report[0] = '\0';
    if (!p->ops.platform->swap_defaults)
        return TB_OK;
    const char *const *defs = p->ops.platform->swap_defaults(ctx);
    /* Checked first, applied after: nothing is applied half. */
    for (size_t pass = 0; pass < 2; pass++) {
        size_t o = 0;
        for (size_t i = 0; defs && defs[i]; i++) {
            const char *eq = strchr(defs[i], '=');
            char key[64];
            if (!eq || eq == defs[i] || (size_t)(eq - defs[i]) >= sizeof key)
                return tb_err_set(err, TB_ERR_PLUGIN, "platform plugin '%s': swap default '%s' is not key=value",
                                  p->name, defs[i]);
            memcpy(key, defs[i], (size_t)(eq - defs[i]));
            key[eq - defs[i]] = '\0';
            char why[512], origin[160];
            snprintf(origin, sizeof origin, "platform '%s' swap_defaults", p->name);
            int rc = tb_section_has(swap, key)
                         ? tb_section_default(swap, key, eq + 1, pass ? origin : NULL, why, sizeof why)
                     : pass ? 0
                            : check_other_policies(key, eq + 1, why, sizeof why);
            if (rc < 0)
                return tb_err_set(err, TB_ERR_CONFIG, "[platform] swap_defaults of platform '%s': '%s': [swap] %s: %s",
                                  p->name, defs[i], key, why);
            if (pass && rc > 0 && o + 1 < report_size) {
                int n = snprintf(report + o, report_size - o, "%s%s = %s", o ? ", " : "", key, eq + 1);
                if (n > 0)
                    o = o + (size_t)n < report_size ? o + (size_t)n : report_size - 1;
            }
        }
    }
    return TB_OK;
}
