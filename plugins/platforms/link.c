/* platforms/link.c: the link both shipped platforms read from their keys, and what they
 * learn about the machine from /proc and /sys for score() and numa_node = -1. */
#define _POSIX_C_SOURCE 200809L
#include "link.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* ------------------------------------------------------------------ the instance */

struct plat {
    struct tb_link link;
    struct tb_accel accel;
    char **env;  /* "NAME=VALUE" copies ended by NULL: what env_defaults returns */
    char **swap; /* "key=value" copies ended by NULL: what swap_defaults returns */
};

/* A [swap] key (lower case letters, digits, '_'), '=', then a non-empty value. */
static bool swap_item_ok(const char *item)
{
    const char *eq = strchr(item, '=');
    if (!eq || eq == item || !eq[1])
        return false;
    for (const char *p = item; p < eq; p++)
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_'))
            return false;
    return true;
}

/* NCCL_ followed by capitals, digits and '_', then '=' and a non-empty value. */
static bool nccl_item_ok(const char *item, size_t *name_len)
{
    const char *eq = strchr(item, '=');
    if (!eq || strncmp(item, "NCCL_", 5) != 0 || eq - item <= 5 || !eq[1])
        return false;
    for (const char *p = item; p < eq; p++)
        if (!(isupper((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_'))
            return false;
    *name_len = (size_t)(eq - item);
    return true;
}

/* Checks nccl_env; every wrong item is one line in err. */
static int check_env_list(const struct tb_section *cfg, struct tb_err *err)
{
    const char *const *items;
    size_t n = tb_section_list(cfg, "nccl_env", &items);
    const char *origin = tb_section_origin(cfg, "nccl_env");
    int rc = TB_OK;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        if (!nccl_item_ok(items[i], &len)) {
            rc = tb_err_add(err, TB_ERR_CONFIG,
                            "%s: [platform] nccl_env item '%s': expected NCCL_NAME=VALUE (a name of capitals, digits "
                            "and '_' that starts with NCCL_, '=', then a value), for example NCCL_P2P_LEVEL=NVL; an "
                            "empty nccl_env sets nothing",
                            origin, items[i]);
            continue;
        }
        for (size_t j = 0; j < i; j++)
            if (strncmp(items[j], items[i], len + 1) == 0) {
                rc = tb_err_add(err, TB_ERR_CONFIG, "%s: [platform] nccl_env sets %.*s twice ('%s' and '%s'): keep one",
                                origin, (int)len, items[i], items[j], items[i]);
                break;
            }
    }
    return rc;
}

/* Checks swap_defaults; every wrong item is one line in err. The values are checked
 * against the policy's keys when the core applies them. */
static int check_swap_list(const struct tb_section *cfg, struct tb_err *err)
{
    const char *const *items;
    size_t n = tb_section_list(cfg, "swap_defaults", &items);
    int rc = TB_OK;
    for (size_t i = 0; i < n; i++)
        if (!swap_item_ok(items[i]))
            rc = tb_err_add(err, TB_ERR_CONFIG,
                            "%s: [platform] swap_defaults item '%s': expected key=value with a [swap] key (lower case "
                            "letters, digits and '_'), for example min_size=1M; an empty swap_defaults sets nothing",
                            tb_section_origin(cfg, "swap_defaults"), items[i]);
    return rc;
}

/* Copies of the list key's items, ended by NULL; NULL when out of memory. */
static char **copy_list(const struct tb_section *cfg, const char *key)
{
    const char *const *items;
    size_t n = tb_section_list(cfg, key, &items);
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if (!(out[i] = strdup(items[i]))) {
            for (size_t j = 0; j < i; j++)
                free(out[j]);
            free(out);
            return NULL;
        }
    return out;
}

static void free_env(char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

int plat_create(const struct tb_plugin *self, const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    *ctx = NULL;
    const double h2d = tb_section_float(cfg, "h2d_gbps"), d2h = tb_section_float(cfg, "d2h_gbps");
    const double duplex = tb_section_float(cfg, "duplex_gbps");
    int rc = TB_OK;
    if (duplex > h2d || duplex > d2h) {
        const char *key = duplex > h2d ? "h2d_gbps" : "d2h_gbps";
        rc = tb_err_add(err, TB_ERR_CONFIG,
                        "%s: [platform] duplex_gbps = %g is more than %s = %g (%s): with both directions copying at "
                        "once, neither is faster than alone; allowed: 0 (as fast as alone) up to %g, the smaller of "
                        "h2d_gbps and d2h_gbps",
                        tb_section_origin(cfg, "duplex_gbps"), duplex, key, duplex > h2d ? h2d : d2h,
                        tb_section_origin(cfg, key), h2d < d2h ? h2d : d2h);
    }
    const double pair = tb_section_float(cfg, "pair_gbps"), peer = tb_section_float(cfg, "peer_gbps");
    if (pair > 0 && pair < peer) {
        const int pair_rc =
            tb_err_add(err, TB_ERR_CONFIG,
                       "%s: [platform] pair_gbps = %g is less than peer_gbps = %g (%s): two GPUs "
                       "joined directly are no slower than the slowest hop of a ring over the node; "
                       "allowed: 0 (as peer_gbps) or at least %g",
                       tb_section_origin(cfg, "pair_gbps"), pair, peer, tb_section_origin(cfg, "peer_gbps"), peer);
        rc = rc ? rc : pair_rc;
    }
    int env_rc = check_env_list(cfg, err);
    int swap_rc = check_swap_list(cfg, err);
    if (rc || env_rc || swap_rc)
        return rc ? rc : env_rc ? env_rc : swap_rc;

    struct plat *p = calloc(1, sizeof *p);
    char **env = copy_list(cfg, "nccl_env"), **swap = copy_list(cfg, "swap_defaults");
    if (!p || !env || !swap) {
        free(p);
        free_env(env);
        free_env(swap);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    /* copies: the section's strings need not outlive the instance */
    p->env = env;
    p->swap = swap;
    p->link.h2d_bytes_per_s = h2d * 1e9;
    p->link.d2h_bytes_per_s = d2h * 1e9;
    p->link.duplex_bytes_per_s = duplex * 1e9;
    p->link.latency_s = tb_section_float(cfg, "latency_us") * 1e-6;
    p->link.accel_flops = tb_section_float(cfg, "accel_tflops") * 1e12;
    p->link.accel_efficiency = tb_section_float(cfg, "accel_efficiency");
    snprintf(p->accel.name, sizeof p->accel.name, "%s", tb_section_string(cfg, "accel_name"));
    p->accel.memory_bytes = tb_section_size(cfg, "accel_memory");
    p->accel.mem_bytes_per_s = tb_section_float(cfg, "accel_mem_gbps") * 1e9;
    p->accel.fp16_flops = tb_section_float(cfg, "accel_fp16_tflops") * 1e12;
    p->accel.bf16_flops = tb_section_float(cfg, "accel_bf16_tflops") * 1e12;
    p->accel.per_node = (int)tb_section_int(cfg, "gpus_per_node");
    p->accel.peer_bytes_per_s = tb_section_float(cfg, "peer_gbps") * 1e9;
    p->accel.peer_latency_s = tb_section_float(cfg, "peer_latency_us") * 1e-6;
    p->accel.pair_bytes_per_s = pair * 1e9;
    p->accel.net_bytes_per_s = tb_section_float(cfg, "net_gbps") * 1e9;
    p->accel.net_latency_s = tb_section_float(cfg, "net_latency_us") * 1e-6;
    p->link.numa_node = (int)tb_section_int(cfg, "numa_node");
    if (p->link.numa_node == -1) {
        struct plat_machine m;
        char why[256];
        plat_probe("", &m);
        p->link.numa_node = plat_auto_numa_node(&m, why, sizeof why);
        tb_log_plugin(self, TB_LOG_DEBUG, "numa_node = -1 (%s): %s", tb_section_origin(cfg, "numa_node"), why);
    }
    *ctx = p; /* the caller's until destroy */
    return TB_OK;
}

void plat_destroy(void *ctx)
{
    struct plat *p = ctx;
    if (!p)
        return;
    free_env(p->env);
    free_env(p->swap);
    free(p);
}

void plat_link(void *ctx, struct tb_link *out)
{
    *out = ((const struct plat *)ctx)->link;
}

void plat_accel(void *ctx, struct tb_accel *out)
{
    *out = ((const struct plat *)ctx)->accel;
}

const char *const *plat_env_defaults(void *ctx)
{
    return (const char *const *)((const struct plat *)ctx)->env;
}

const char *const *plat_swap_defaults(void *ctx)
{
    return (const char *const *)((const struct plat *)ctx)->swap;
}

/* ------------------------------------------------------------------ the machine */

enum { MAX_GPUS = 64 };

struct gpu {
    char bus[32];
    int node;
    bool nvlink;
};

/* The first line of the file at path (no newline) into buf; false when it cannot be read. */
static bool read_first_line(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* "key<spaces>: value" -> key and value, both trimmed; false without a colon. */
static bool split_field(char *line, char **key, char **value)
{
    char *colon = strchr(line, ':');
    if (!colon)
        return false;
    char *end = colon;
    while (end > line && isspace((unsigned char)end[-1]))
        end--;
    *end = '\0';
    char *v = colon + 1;
    while (isspace((unsigned char)*v))
        v++;
    v[strcspn(v, "\n")] = '\0';
    for (size_t n = strlen(v); n && isspace((unsigned char)v[n - 1]); n--)
        v[n - 1] = '\0';
    *key = line;
    *value = v;
    return true;
}

static void probe_cpu(const char *root, struct plat_machine *m)
{
    char path[PATH_MAX], line[1024], vendor[64] = "";
    snprintf(path, sizeof path, "%s/proc/cpuinfo", root);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        char *key, *value;
        if (!split_field(line, &key, &value))
            continue;
        if (strcmp(key, "vendor_id") == 0 && !vendor[0])
            snprintf(vendor, sizeof vendor, "%s", value);
        else if ((strcmp(key, "model name") == 0 || strcmp(key, "cpu") == 0) && !m->cpu_model[0])
            snprintf(m->cpu_model, sizeof m->cpu_model, "%s", value); /* x86 / POWER */
        else if (strcmp(key, "machine") == 0 && !m->machine[0])
            snprintf(m->machine, sizeof m->machine, "%s", value); /* POWER: "PowerNV 8335-GTG" */
    }
    if (f)
        fclose(f);
    static const char *const x86_vendors[] = { "GenuineIntel", "AuthenticAMD", "HygonGenuine", "CentaurHauls" };
    for (size_t i = 0; i < sizeof x86_vendors / sizeof *x86_vendors; i++)
        if (strcmp(vendor, x86_vendors[i]) == 0)
            m->cpu = PLAT_CPU_X86;
    if (m->cpu == PLAT_CPU_UNKNOWN && strstr(m->cpu_model, "POWER9"))
        m->cpu = PLAT_CPU_POWER9;
    else if (m->cpu == PLAT_CPU_UNKNOWN && strncmp(m->cpu_model, "POWER", 5) == 0)
        m->cpu = PLAT_CPU_POWER;
    else if (m->cpu == PLAT_CPU_UNKNOWN && (vendor[0] || m->cpu_model[0]))
        m->cpu = PLAT_CPU_OTHER;
#if defined(__x86_64__) || defined(__i386__)
    if (m->cpu == PLAT_CPU_UNKNOWN && !*root)
        m->cpu = PLAT_CPU_X86; /* no /proc/cpuinfo: what this build runs on */
#endif
}

static struct gpu *find_or_add(struct gpu *g, int *n, const char *bus)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(g[i].bus, bus) == 0)
            return &g[i];
    if (*n == MAX_GPUS)
        return NULL;
    struct gpu *x = &g[(*n)++];
    snprintf(x->bus, sizeof x->bus, "%s", bus);
    x->node = -1;
    x->nvlink = false;
    return x;
}

/* NVIDIA display and 3D controllers (class 0x03xxxx) on the PCI bus: their NUMA node,
 * and whether the device tree ties them to a POWER9 NVLink unit ("ibm,npu", which
 * skiboot gives every GPU it wires to the CPU over NVLink). */
static void scan_pci(const char *root, struct gpu *g, int *n)
{
    char dir[PATH_MAX], path[PATH_MAX + 300], text[64];
    snprintf(dir, sizeof dir, "%s/sys/bus/pci/devices", root);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof g->bus)
            continue;
        snprintf(path, sizeof path, "%s/%s/vendor", dir, e->d_name);
        if (!read_first_line(path, text, sizeof text) || strtol(text, NULL, 16) != 0x10de)
            continue;
        snprintf(path, sizeof path, "%s/%s/class", dir, e->d_name);
        if (!read_first_line(path, text, sizeof text) || (strtol(text, NULL, 16) >> 16) != 0x03)
            continue;
        struct gpu *x = find_or_add(g, n, e->d_name);
        if (!x)
            break;
        snprintf(path, sizeof path, "%s/%s/numa_node", dir, e->d_name);
        if (read_first_line(path, text, sizeof text))
            x->node = atoi(text) < -1 ? -1 : atoi(text);
        snprintf(path, sizeof path, "%s/%s/of_node/ibm,npu", dir, e->d_name);
        x->nvlink |= exists(path);
    }
    if (d)
        closedir(d);
}

/* The GPUs the NVIDIA driver lists. It gives a GPU a numa_status file only when the GPU's
 * memory is coherent with the CPU's, which takes an NVLink to the CPU. */
static void scan_driver(const char *root, struct plat_machine *m, struct gpu *g, int *n)
{
    char dir[PATH_MAX], path[PATH_MAX + 300];
    snprintf(dir, sizeof dir, "%s/proc/driver/nvidia/gpus", root);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof g->bus)
            continue;
        m->driver = true;
        struct gpu *x = find_or_add(g, n, e->d_name);
        if (!x)
            break;
        snprintf(path, sizeof path, "%s/%s/numa_status", dir, e->d_name);
        x->nvlink |= exists(path);
    }
    if (d)
        closedir(d);
}

static int cmp_bus(const void *a, const void *b)
{
    return strcmp(((const struct gpu *)a)->bus, ((const struct gpu *)b)->bus);
}

void plat_probe(const char *root, struct plat_machine *m)
{
    memset(m, 0, sizeof *m);
    m->gpu_node = -1;
    probe_cpu(root, m);
    struct gpu g[MAX_GPUS];
    int n = 0;
    scan_pci(root, g, &n);
    scan_driver(root, m, g, &n);
    if (!n)
        return;
    qsort(g, (size_t)n, sizeof *g, cmp_bus); /* the driver numbers GPUs in bus order */
    m->gpus = n;
    for (int i = 0; i < n; i++) {
        m->gpus_nvlink += g[i].nvlink;
        m->nodes_differ |= g[i].node != g[0].node;
    }
    snprintf(m->gpu_bus, sizeof m->gpu_bus, "%s", g[0].bus);
    m->gpu_node = g[0].node;
    char path[PATH_MAX + 100], line[512];
    snprintf(path, sizeof path, "%s/proc/driver/nvidia/gpus/%s/information", root, g[0].bus);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        char *key, *value;
        if (split_field(line, &key, &value) && strcmp(key, "Model") == 0) {
            snprintf(m->gpu_model, sizeof m->gpu_model, "%s", value);
            break;
        }
    }
    if (f)
        fclose(f);
}

void plat_cpu_text(const struct plat_machine *m, char *buf, size_t size)
{
    if (!m->cpu_model[0])
        snprintf(buf, size, "%s", m->machine[0] ? m->machine : "model unknown");
    else if (m->machine[0])
        snprintf(buf, size, "%s, %s", m->cpu_model, m->machine);
    else
        snprintf(buf, size, "%s", m->cpu_model);
}

/* "2 NVIDIA GPUs (Tesla V100-SXM2-16GB)" */
static void gpus_text(const struct plat_machine *m, char *buf, size_t size)
{
    snprintf(buf, size, "%d NVIDIA GPU%s%s%s%s", m->gpus, m->gpus == 1 ? "" : "s", m->gpu_model[0] ? " (" : "",
             m->gpu_model, m->gpu_model[0] ? ")" : "");
}

int plat_score_power9(const struct plat_machine *m, char *why, size_t why_size)
{
    char cpu[200], gpus[160];
    plat_cpu_text(m, cpu, sizeof cpu);
    gpus_text(m, gpus, sizeof gpus);
    if (m->cpu != PLAT_CPU_POWER9) {
        snprintf(why, why_size, "not a POWER9 CPU (%s)", cpu);
        return 0;
    }
    if (m->gpus_nvlink) {
        snprintf(why, why_size, "POWER9 CPU (%s); %s, %d on NVLink to the CPU", cpu, gpus, m->gpus_nvlink);
        return 30;
    }
    if (m->gpus) {
        snprintf(why, why_size, "POWER9 CPU (%s), but %s %s on PCIe, not NVLink", cpu, gpus,
                 m->gpus == 1 ? "is" : "are");
        return 5;
    }
    snprintf(why, why_size, "POWER9 CPU (%s), no NVIDIA GPU found: assuming an AC922's NVLink 2.0", cpu);
    return 20;
}

int plat_score_x86_pcie(const struct plat_machine *m, char *why, size_t why_size)
{
    char cpu[200], gpus[160];
    plat_cpu_text(m, cpu, sizeof cpu);
    gpus_text(m, gpus, sizeof gpus);
    if (m->cpu != PLAT_CPU_X86) {
        snprintf(why, why_size, "not an x86 CPU (%s)", cpu);
        return 0;
    }
    if (m->gpus) {
        snprintf(why, why_size, "x86 CPU (%s); %s on PCIe", cpu, gpus);
        return 15;
    }
    snprintf(why, why_size, "x86 CPU (%s), no NVIDIA GPU found: GPUs would attach over PCIe", cpu);
    return 10;
}

/* A preset's score: its class's plus 5 where `is_it` recognises the machine, else 0. */
static int score_preset(const struct plat_machine *m, bool is_it, const char *machine_name,
                        int (*class_score)(const struct plat_machine *, char *, size_t), char *why, size_t why_size)
{
    char cpu[200];
    plat_cpu_text(m, cpu, sizeof cpu);
    if (!is_it) {
        snprintf(why, why_size, "a preset for the %s; this machine (%s) is not one: name it to emulate it",
                 machine_name, cpu);
        return 0;
    }
    const int s = class_score(m, why, why_size);
    if (s <= 0)
        return 0;
    const size_t n = strlen(why);
    if (n < why_size)
        snprintf(why + n, why_size - n, "; recognised as the %s", machine_name);
    return s + 5;
}

int plat_score_ac922(const struct plat_machine *m, char *why, size_t why_size)
{
    return score_preset(m, m->cpu == PLAT_CPU_POWER9 && strstr(m->machine, "8335-GT"), "IBM AC922 (8335-GT*)",
                        plat_score_power9, why, why_size);
}

int plat_score_dgx_station(const struct plat_machine *m, char *why, size_t why_size)
{
    return score_preset(m, m->cpu == PLAT_CPU_X86 && m->gpus && strstr(m->cpu_model, "E5-2698 v4"),
                        "NVIDIA DGX Station (Xeon E5-2698 v4 and GPUs)", plat_score_x86_pcie, why, why_size);
}

int plat_score_p3_8xlarge(const struct plat_machine *m, char *why, size_t why_size)
{
    return score_preset(m, m->cpu == PLAT_CPU_X86 && m->gpus && strstr(m->cpu_model, "E5-2686 v4"),
                        "AWS p3.8xlarge (Xeon E5-2686 v4 and GPUs)", plat_score_x86_pcie, why, why_size);
}

/* The GPU presets: recognised by the model the driver names (an x86 host with it). */
static bool gpu_is(const struct plat_machine *m, const char *model, const char *unless)
{
    return m->cpu == PLAT_CPU_X86 && m->gpus && strstr(m->gpu_model, model) &&
           !(unless && strstr(m->gpu_model, unless));
}

int plat_score_h100_sxm(const struct plat_machine *m, char *why, size_t why_size)
{
    return score_preset(m, gpu_is(m, "H100", "PCIe"), "H100 SXM host (x86, NVIDIA H100 80GB HBM3)",
                        plat_score_x86_pcie, why, why_size);
}

int plat_score_h200(const struct plat_machine *m, char *why, size_t why_size)
{
    return score_preset(m, gpu_is(m, "H200", NULL), "H200 host (x86, NVIDIA H200)", plat_score_x86_pcie, why,
                        why_size);
}

int plat_score_rtx4090(const struct plat_machine *m, char *why, size_t why_size)
{
    return score_preset(m, gpu_is(m, "RTX 4090", NULL), "RTX 4090 workstation (x86, GeForce RTX 4090)",
                        plat_score_x86_pcie, why, why_size);
}

int plat_auto_numa_node(const struct plat_machine *m, char *why, size_t why_size)
{
    if (!m->gpus)
        snprintf(why, why_size, "no NVIDIA GPU found: node unknown (-1)");
    else if (m->gpu_node < 0)
        snprintf(why, why_size, "GPU %s has no NUMA node in sysfs: node unknown (-1)", m->gpu_bus);
    else
        snprintf(why, why_size, "GPU %s is on node %d%s", m->gpu_bus, m->gpu_node,
                 m->nodes_differ ? " (the other GPUs are not all there: set numa_node to choose)" : "");
    return m->gpus ? m->gpu_node : -1;
}
