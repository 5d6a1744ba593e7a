/* check_platform: the platform plugins (the link classes x86-pcie and power9-nvlink, the
 * presets) opened through the core: their defaults in bytes/s and seconds, their
 * accelerators, overrides, the errors of values the key table
 * cannot catch, environment defaults applied only where unset; the core's reading of a
 * link left unset or impossible (core/config/platform.c); and the machine probe
 * behind score() and numa_node = -1, on this machine and on fake /proc and /sys trees of
 * an AC922, a DGX Station and others. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <trainbig/trainbig.h>

#include "core/config/ini.h"
#include "core/config/platform_internal.h"
#include "core/config/section_internal.h"
#include "core/config/setup_internal.h"
#include "plugins/platforms/link.h"
#include "tests/testutil.h"

static void setup(void)
{
    ck_assert_msg(getenv("TB_BUILDDIR"), "run through make check (TB_BUILDDIR unset)");
    unsetenv("TRAINBIG_PLUGIN_PATH");
    setenv("TRAINBIG_LOG", "error", 1);
}

static void open_ok(struct tb_instance *pi, const char *name, const char *settings)
{
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_instance_open(TB_KIND_PLATFORM, name, NULL, settings, pi, &err) == TB_OK, "%s: %s", name, err.msg);
    ck_assert_ptr_nonnull(pi->ctx);
}

/* Opening fails with TB_ERR_CONFIG; the message is returned in err. */
static void open_fails(const char *name, const char *settings, struct tb_err *err)
{
    struct tb_instance pi;
    tb_err_clear(err);
    ck_assert_int_eq(tb_instance_open(TB_KIND_PLATFORM, name, NULL, settings, &pi, err), TB_ERR_CONFIG);
    ck_assert_ptr_null(pi.ctx);
    ck_assert_ptr_null(pi.h);
}

static struct tb_link link_of(const struct tb_instance *pi)
{
    struct tb_link l;
    tb_platform_link(pi->h->p, pi->ctx, &l);
    return l;
}

/* What numa_node = -1 gives on this machine. */
static int this_machine_node(void)
{
    struct plat_machine m;
    char why[256];
    plat_probe("", &m);
    return plat_auto_numa_node(&m, why, sizeof why);
}

#define ck_assert_near(x, want) \
    ck_assert_msg(fabs((x) - (want)) <= 1e-9 * fabs(want), "%s = %g, want %g", #x, (x), (want))

/* ------------------------------------------------------------------ defaults */

START_TEST(x86_pcie_defaults)
{
    struct tb_instance pi;
    open_ok(&pi, "x86-pcie", "");
    ck_assert_uint_eq(pi.h->p->abi_minor, TB_ABI_MINOR);
    struct tb_link l = link_of(&pi);
    ck_assert_near(l.h2d_bytes_per_s, 12e9);
    ck_assert_near(l.d2h_bytes_per_s, 12e9);
    ck_assert_near(l.duplex_bytes_per_s, 10e9);
    ck_assert_near(l.latency_s, 7e-6);
    ck_assert_near(l.accel_flops, 15.7e12);
    ck_assert_near(l.accel_efficiency, TB_ACCEL_EFFICIENCY_DEFAULT);
    ck_assert_near(l.accel_efficiency, atof(PLAT_EFFICIENCY_DEFAULT)); /* the key's default is the SDK's */
    ck_assert_int_eq(l.numa_node, this_machine_node());
    const char *const *env = pi.ops.platform->env_defaults(pi.ctx);
    ck_assert_str_eq(env[0], "NCCL_P2P_LEVEL=PHB");
    ck_assert_ptr_null(env[1]);
    tb_instance_close(&pi);
    ck_assert_ptr_null(pi.h);
}
END_TEST

START_TEST(power9_nvlink_defaults)
{
    struct tb_instance pi;
    open_ok(&pi, "power9-nvlink", "");
    struct tb_link l = link_of(&pi);
    ck_assert_near(l.h2d_bytes_per_s, 68e9);
    ck_assert_near(l.d2h_bytes_per_s, 68e9);
    ck_assert_near(l.duplex_bytes_per_s, 60e9);
    ck_assert_near(l.latency_s, 7e-6);
    ck_assert_near(l.accel_flops, 15.7e12);
    ck_assert_near(l.accel_efficiency, 0.7);
    ck_assert_int_eq(l.numa_node, this_machine_node());
    const char *const *env = pi.ops.platform->env_defaults(pi.ctx);
    ck_assert_str_eq(env[0], "NCCL_P2P_LEVEL=NVL");
    ck_assert_ptr_null(env[1]);
    tb_instance_close(&pi);
}
END_TEST

/* The study's machines are presets of the two classes: each has its class's values, its
 * own name and description, and is chosen by name here (its score is 0 off the machine). */
START_TEST(presets_are_their_class)
{
    static const char *const presets[] = { "ac922", "dgx-station", "p3.8xlarge" };
    static const char *const classes[] = { "power9-nvlink", "x86-pcie", "x86-pcie" };
    for (size_t i = 0; i < 3; i++) {
        struct tb_instance pi, ci;
        open_ok(&pi, presets[i], "");
        open_ok(&ci, classes[i], "");
        ck_assert_str_eq(pi.h->p->name, presets[i]);
        ck_assert_contains(pi.h->p->description, "the study's");
        struct tb_link p = link_of(&pi), c = link_of(&ci);
        ck_assert_near(p.h2d_bytes_per_s, c.h2d_bytes_per_s);
        ck_assert_near(p.d2h_bytes_per_s, c.d2h_bytes_per_s);
        ck_assert_near(p.duplex_bytes_per_s, c.duplex_bytes_per_s);
        ck_assert_near(p.latency_s, c.latency_s);
        ck_assert_near(p.accel_flops, c.accel_flops);
        ck_assert_str_eq(pi.ops.platform->env_defaults(pi.ctx)[0], ci.ops.platform->env_defaults(ci.ctx)[0]);
        ck_assert_str_eq(pi.ops.platform->swap_defaults(pi.ctx)[0], ci.ops.platform->swap_defaults(ci.ctx)[0]);
        char why[256];
        ck_assert_int_eq(pi.ops.platform->head.score(why, sizeof why), 0); /* no V100 machine runs the tests */
        ck_assert_contains(why, "name it to emulate it");
        tb_instance_close(&pi);
        tb_instance_close(&ci);
    }
    /* A preset's values are keys like its class's. */
    struct tb_instance pi;
    open_ok(&pi, "p3.8xlarge", "h2d_gbps = 11\n");
    ck_assert_near(link_of(&pi).h2d_bytes_per_s, 11e9);
    tb_instance_close(&pi);
}
END_TEST

static struct tb_accel accel_of(const struct tb_instance *pi)
{
    struct tb_accel a;
    tb_platform_accel(pi->h->p, pi->ctx, &a);
    return a;
}

/* Every platform describes its accelerator: the study's classes and presets a
 * V100 SXM2 16 GB, the newer presets theirs, each with its link; every value is a key. */
START_TEST(accelerators_described)
{
    static const struct {
        const char *platform, *name;
        double memory_gib, mem_gbps, fp16, bf16, fp32, h2d_gbps, efficiency;
    } rows[] = {
        { "x86-pcie", "V100 SXM2 16 GB", 15, 900, 125, 0, 15.7, 12, 0.7 },
        { "power9-nvlink", "V100 SXM2 16 GB", 15, 900, 125, 0, 15.7, 68, 0.7 },
        { "ac922", "V100 SXM2 16 GB", 15, 900, 125, 0, 15.7, 68, 0.7 },
        { "dgx-station", "V100 SXM2 16 GB", 15, 900, 125, 0, 15.7, 12, 0.7 },
        { "p3.8xlarge", "V100 SXM2 16 GB", 15, 900, 125, 0, 15.7, 12, 0.7 },
        { "h100-sxm", "H100 SXM5 80 GB", 78, 3350, 989, 989, 67, 48, 0.45 },
        { "h200", "H200 141 GB", 139, 4800, 989, 989, 67, 48, 0.45 },
        { "rtx4090", "GeForce RTX 4090 24 GB", 23, 1008, 165.2, 165.2, 82.6, 24, 0.7 },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct tb_instance pi;
        open_ok(&pi, rows[i].platform, "");
        const struct tb_accel a = accel_of(&pi);
        const struct tb_link l = link_of(&pi);
        ck_assert_str_eq(a.name, rows[i].name);
        ck_assert_uint_eq(a.memory_bytes, (uint64_t)(rows[i].memory_gib * 1073741824.0));
        ck_assert_near(a.mem_bytes_per_s, rows[i].mem_gbps * 1e9);
        ck_assert_near(a.fp16_flops, rows[i].fp16 * 1e12);
        ck_assert(rows[i].bf16 > 0 ? fabs(a.bf16_flops - rows[i].bf16 * 1e12) < 1 : a.bf16_flops == 0);
        ck_assert_near(l.accel_flops, rows[i].fp32 * 1e12);
        ck_assert_near(l.h2d_bytes_per_s, rows[i].h2d_gbps * 1e9);
        ck_assert_near(l.accel_efficiency, rows[i].efficiency);
        tb_instance_close(&pi);
    }
    struct tb_instance pi;
    open_ok(&pi, "dgx-station",
            "accel_name = V100 SXM2 32 GB\naccel_memory = 31G\naccel_mem_gbps = 897\naccel_fp16_tflops = 120\n"
            "accel_bf16_tflops = 1.5\n");
    const struct tb_accel a = accel_of(&pi);
    ck_assert_str_eq(a.name, "V100 SXM2 32 GB");
    ck_assert_uint_eq(a.memory_bytes, 31ull << 30);
    ck_assert_near(a.mem_bytes_per_s, 897e9);
    ck_assert_near(a.fp16_flops, 120e12);
    ck_assert_near(a.bf16_flops, 1.5e12);
    char text[256];
    tb_accel_text(&a, 15.7e12, text, sizeof text);
    ck_assert_str_eq(text, "V100 SXM2 32 GB: 31.0 GiB for trainbig, 897 GB/s memory, 15.7 TFLOP/s fp32, 120.0 fp16, "
                           "1.5 bf16 (dense, matrix units); 4 per node, ring 12 GB/s within a node and 12.5 GB/s "
                           "between nodes");
    tb_instance_close(&pi);
    /* a memory of 0, a rate written in bytes/s, are caught by the keys' ranges */
    struct tb_err err;
    open_fails("h200", "accel_memory = 0\n", &err);
    ck_assert_contains(err.msg, "accel_memory");
    open_fails("h200", "accel_mem_gbps = 4.8e12\n", &err);
    ck_assert_contains(err.msg, "accel_mem_gbps");
}
END_TEST

/* How each platform's GPUs talk to each other, for data parallelism: the ring's
 * slowest hop within a node and the network between nodes; every value is a key. */
START_TEST(gpus_together_described)
{
    static const struct {
        const char *platform;
        int per_node;
        double peer_gbps, pair_gbps, peer_us, net_gbps, net_us;
    } rows[] = {
        { "x86-pcie", 4, 12, 0, 5.7, 12.5, 2 },    { "power9-nvlink", 4, 64, 75, 3.4, 12.5, 2 },
        { "ac922", 4, 64, 75, 3.4, 12.5, 2 },      { "dgx-station", 4, 12, 0, 5.7, 12.5, 2 },
        { "p3.8xlarge", 4, 12, 0, 5.7, 1.25, 30 }, { "h100-sxm", 8, 450, 0, 3.4, 50, 2 },
        { "h200", 8, 450, 0, 3.4, 50, 2 },         { "rtx4090", 1, 24, 0, 5.7, 1.25, 30 },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct tb_instance pi;
        open_ok(&pi, rows[i].platform, "");
        const struct tb_accel a = accel_of(&pi);
        ck_assert_int_eq(a.per_node, rows[i].per_node);
        ck_assert_near(a.peer_bytes_per_s, rows[i].peer_gbps * 1e9);
        ck_assert_near(a.pair_bytes_per_s, rows[i].pair_gbps * 1e9);
        ck_assert_near(a.peer_latency_s * 1e6, rows[i].peer_us);
        ck_assert_near(a.net_bytes_per_s, rows[i].net_gbps * 1e9);
        ck_assert_near(a.net_latency_s * 1e6, rows[i].net_us);
        tb_instance_close(&pi);
    }
    struct tb_instance pi;
    open_ok(&pi, "p3.8xlarge", "gpus_per_node = 8\npeer_gbps = 25\npeer_latency_us = 3\nnet_gbps = 3.125\n"
                               "net_latency_us = 15\n");
    const struct tb_accel a = accel_of(&pi);
    ck_assert_int_eq(a.per_node, 8);
    ck_assert_near(a.peer_bytes_per_s, 25e9);
    ck_assert_near(a.peer_latency_s, 3e-6);
    ck_assert_near(a.net_bytes_per_s, 3.125e9);
    ck_assert_near(a.net_latency_s, 15e-6);
    tb_instance_close(&pi);
    struct tb_err err;
    open_fails("h100-sxm", "gpus_per_node = 0\n", &err);
    ck_assert_contains(err.msg, "gpus_per_node");
    open_fails("h100-sxm", "peer_gbps = 0\n", &err);
    ck_assert_contains(err.msg, "peer_gbps");
    open_fails("h100-sxm", "net_gbps = 4e10\n", &err); /* bytes/s by mistake */
    ck_assert_contains(err.msg, "net_gbps");
    /* two GPUs joined directly are no slower than the node's slowest hop: both keys named */
    open_fails("power9-nvlink", "pair_gbps = 50\n", &err);
    ck_assert_contains(err.msg, "pair_gbps = 50 is less than peer_gbps = 64");
    ck_assert_contains(err.msg, "allowed: 0 (as peer_gbps) or at least 64");
    open_ok(&pi, "power9-nvlink", "pair_gbps = 0\n");
    ck_assert_near(accel_of(&pi).pair_bytes_per_s, 0.0);
    tb_instance_close(&pi);
}
END_TEST

/* The hop a ring over n GPUs runs at (tb_accel_ring_hop): the pair's link for two GPUs
 * where the platform has one, the node's slowest hop for more, and over nodes the slower
 * of it and the network with the larger latency. */
START_TEST(ring_hop_by_gpus)
{
    struct tb_instance pi;
    open_ok(&pi, "ac922", "");
    const struct tb_accel a = accel_of(&pi);
    tb_instance_close(&pi);
    double bw, lat;
    tb_accel_ring_hop(&a, 2, &bw, &lat);
    ck_assert_near(bw, 75e9);
    ck_assert_near(lat * 1e6, 3.4);
    tb_accel_ring_hop(&a, 4, &bw, &lat);
    ck_assert_near(bw, 64e9);
    tb_accel_ring_hop(&a, 8, &bw, &lat);
    ck_assert_near(bw, 12.5e9);
    ck_assert_near(lat * 1e6, 3.4);
    struct tb_accel b = a;
    b.pair_bytes_per_s = 0; /* none: two GPUs take the node's hop */
    tb_accel_ring_hop(&b, 2, &bw, &lat);
    ck_assert_near(bw, 64e9);
    b.per_node = 1; /* one GPU a node: two cross the network, whatever the pair */
    b.pair_bytes_per_s = 75e9;
    b.net_latency_s = 30e-6;
    tb_accel_ring_hop(&b, 2, &bw, &lat);
    ck_assert_near(bw, 12.5e9);
    ck_assert_near(lat * 1e6, 30.0);
}
END_TEST

/* ------------------------------------------------------------------ overrides */

START_TEST(every_value_overridden)
{
    static const char *const names[] = { "x86-pcie", "power9-nvlink" };
    for (size_t i = 0; i < 2; i++) {
        struct tb_instance pi;
        open_ok(&pi, names[i],
                "h2d_gbps = 25\nd2h_gbps = 22.5\nduplex_gbps = 20\nlatency_us = 2.5\naccel_tflops = 19.5\n"
                "accel_efficiency = 0.55\nnuma_node = 3\nnccl_env = NCCL_P2P_LEVEL=SYS, NCCL_IB_DISABLE=1\n");
        struct tb_link l = link_of(&pi);
        ck_assert_near(l.h2d_bytes_per_s, 25e9);
        ck_assert_near(l.d2h_bytes_per_s, 22.5e9);
        ck_assert_near(l.duplex_bytes_per_s, 20e9);
        ck_assert_near(l.latency_s, 2.5e-6);
        ck_assert_near(l.accel_flops, 19.5e12);
        ck_assert_near(l.accel_efficiency, 0.55);
        ck_assert_int_eq(l.numa_node, 3);
        const char *const *env = pi.ops.platform->env_defaults(pi.ctx);
        ck_assert_str_eq(env[0], "NCCL_P2P_LEVEL=SYS");
        ck_assert_str_eq(env[1], "NCCL_IB_DISABLE=1");
        ck_assert_ptr_null(env[2]);
        tb_instance_close(&pi);
    }
}
END_TEST

/* duplex_gbps = 0 (as alone), duplex equal to the one-direction rate, latency 0 and an
 * empty nccl_env are all allowed. */
START_TEST(edges_allowed)
{
    struct tb_instance pi;
    open_ok(&pi, "power9-nvlink", "duplex_gbps = 0\nlatency_us = 0\nnccl_env =\n");
    struct tb_link l = link_of(&pi);
    ck_assert(l.duplex_bytes_per_s == 0.0);
    ck_assert(l.latency_s == 0.0);
    ck_assert_ptr_null(pi.ops.platform->env_defaults(pi.ctx)[0]);
    char report[256];
    size_t n = 9;
    struct tb_err err;
    ck_assert_int_eq(tb_platform_apply_env(pi.h->p, pi.ctx, report, sizeof report, &n, &err), TB_OK);
    ck_assert_str_eq(report, "none");
    ck_assert_uint_eq(n, 0);
    tb_instance_close(&pi);
    open_ok(&pi, "x86-pcie", "h2d_gbps = 16\nd2h_gbps = 14\nduplex_gbps = 14\n");
    ck_assert_near(link_of(&pi).duplex_bytes_per_s, 14e9);
    tb_instance_close(&pi);
}
END_TEST

/* ------------------------------------------------------------------ errors */

START_TEST(duplex_faster_than_alone)
{
    struct tb_err err;
    open_fails("power9-nvlink", "duplex_gbps = 70\n", &err);
    ck_assert_contains(err.msg, "[platform] duplex_gbps = 70 is more than h2d_gbps = 68 (default)");
    ck_assert_contains(err.msg, "allowed: 0 (as fast as alone) up to 68, the smaller of h2d_gbps and d2h_gbps");
    /* The direction that is slower is the one named. */
    open_fails("x86-pcie", "h2d_gbps = 30\nd2h_gbps = 20\nduplex_gbps = 25\n", &err);
    ck_assert_contains(err.msg, "duplex_gbps = 25 is more than d2h_gbps = 20");
    ck_assert_contains(err.msg, "up to 20,");
    /* The default duplex against a lowered one-direction rate. */
    open_fails("x86-pcie", "h2d_gbps = 8\n", &err);
    ck_assert_contains(err.msg, "default: [platform] duplex_gbps = 10 is more than h2d_gbps = 8");
    /* Every problem at once, one line each. */
    open_fails("x86-pcie", "duplex_gbps = 13\nnccl_env = foo, NCCL_A=1, NCCL_A=2\n", &err);
    ck_assert_int_eq(err.count, 3);
    ck_assert_uint_eq(test_count_lines(err.msg), 3);
    ck_assert_contains(err.msg, "duplex_gbps = 13 is more than h2d_gbps = 12");
    ck_assert_contains(err.msg, "nccl_env item 'foo'");
    ck_assert_contains(err.msg, "nccl_env sets NCCL_A twice");
}
END_TEST

/* Through a whole configuration: the message names the file and line of each key. */
START_TEST(duplex_error_in_a_file)
{
    const char *plugins = getenv("TB_TEST_PLUGINS");
    ck_assert_ptr_nonnull(plugins);
    setenv("TRAINBIG_PLUGIN_PATH", plugins, 1);
    char *path = test_write_file("duplex.ini", "[backend]\n"
                                               "plugin = testgood\n"
                                               "[platform]\n"
                                               "plugin = x86-pcie\n"
                                               "d2h_gbps = 9\n"
                                               "duplex_gbps = 9.5\n"
                                               "[model]\nplugin = testmodel\n"
                                               "[dataset]\nplugin = testdata\nroot = data\n");
    struct tb_config *c;
    struct tb_err err;
    ck_assert_msg(tb_config_load(path, &c, &err) == TB_OK, "%s", err.msg);
    struct tb_setup *s = (struct tb_setup *)1;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_setup_resolve(c, &s, &err), TB_ERR_CONFIG);
    ck_assert_ptr_null(s);
    ck_assert_contains(err.msg, "duplex.ini:6: [platform] duplex_gbps = 9.5 is more than d2h_gbps = 9 (");
    ck_assert_contains(err.msg, "duplex.ini:5)");
    ck_assert_int_eq(err.count, 1);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(out_of_range_and_malformed)
{
    struct tb_err err;
    open_fails("x86-pcie", "h2d_gbps = 0\n", &err);
    ck_assert_contains(err.msg, "h2d_gbps = '0'");
    ck_assert_contains(err.msg, "0.001..10000");
    open_fails("x86-pcie", "d2h_gbps = 12e9\n", &err); /* bytes/s by mistake */
    ck_assert_contains(err.msg, "d2h_gbps = '12e9'");
    open_fails("power9-nvlink", "latency_us = -1\n", &err);
    ck_assert_contains(err.msg, "latency_us = '-1'");
    open_fails("power9-nvlink", "accel_tflops = 0\n", &err);
    ck_assert_contains(err.msg, "accel_tflops = '0'");
    open_fails("power9-nvlink", "accel_efficiency = 0\n", &err);
    ck_assert_contains(err.msg, "accel_efficiency = '0'");
    ck_assert_contains(err.msg, "0.01..2");
    open_fails("x86-pcie", "accel_efficiency = 70\n", &err); /* a percentage by mistake */
    ck_assert_contains(err.msg, "accel_efficiency = '70'");
    open_fails("power9-nvlink", "numa_node = -2\n", &err);
    ck_assert_contains(err.msg, "numa_node = '-2'");
    ck_assert_contains(err.msg, "-1..1023");
    open_fails("x86-pcie", "duplex_gbps = -1\n", &err);
    ck_assert_contains(err.msg, "duplex_gbps = '-1'");
    open_fails("x86-pcie", "nccl_env = P2P_LEVEL=NVL\n", &err);
    ck_assert_contains(err.msg, "[platform] nccl_env item 'P2P_LEVEL=NVL': expected NCCL_NAME=VALUE");
    open_fails("x86-pcie", "nccl_env = NCCL_P2P_LEVEL\n", &err);
    ck_assert_contains(err.msg, "nccl_env item 'NCCL_P2P_LEVEL'");
    open_fails("x86-pcie", "nccl_env = NCCL_P2P_LEVEL=\n", &err);
    ck_assert_contains(err.msg, "nccl_env item 'NCCL_P2P_LEVEL='");
    open_fails("x86-pcie", "nccl_env = nccl_debug=INFO\n", &err);
    ck_assert_contains(err.msg, "nccl_env item 'nccl_debug=INFO'");
    open_fails("x86-pcie", "nccl_env = NCCL_P2P_LEVEL=NVL, NCCL_DEBUG=INFO, NCCL_P2P_LEVEL=SYS\n", &err);
    ck_assert_contains(err.msg,
                       "nccl_env sets NCCL_P2P_LEVEL twice ('NCCL_P2P_LEVEL=NVL' and 'NCCL_P2P_LEVEL=SYS'): keep one");
    open_fails("x86-pcie", "h2d_gbs = 3\n", &err); /* a typo: the nearest key is named */
    ck_assert_contains(err.msg, "h2d_gbps");
}
END_TEST

/* ------------------------------------------------------------------ environment */

START_TEST(env_defaults_only_where_unset)
{
    unsetenv("NCCL_P2P_LEVEL");
    unsetenv("NCCL_TB_TEST_A");
    struct tb_instance pi;
    open_ok(&pi, "x86-pcie", "nccl_env = NCCL_P2P_LEVEL=PHB, NCCL_TB_TEST_A=7\n");
    setenv("NCCL_P2P_LEVEL", "SYS", 1); /* the user's choice */
    char report[256];
    size_t n = 0;
    struct tb_err err;
    ck_assert_int_eq(tb_platform_apply_env(pi.h->p, pi.ctx, report, sizeof report, &n, &err), TB_OK);
    ck_assert_str_eq(getenv("NCCL_P2P_LEVEL"), "SYS");
    ck_assert_str_eq(getenv("NCCL_TB_TEST_A"), "7");
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(report, "set NCCL_TB_TEST_A=7; kept NCCL_P2P_LEVEL=SYS (already set)");
    /* Again: everything is set now, so nothing changes. */
    setenv("NCCL_TB_TEST_A", "8", 1);
    ck_assert_int_eq(tb_platform_apply_env(pi.h->p, pi.ctx, report, sizeof report, &n, &err), TB_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_str_eq(getenv("NCCL_TB_TEST_A"), "8");
    ck_assert_str_eq(report, "kept NCCL_P2P_LEVEL=SYS, NCCL_TB_TEST_A=8 (already set)");
    tb_instance_close(&pi);

    unsetenv("NCCL_P2P_LEVEL");
    open_ok(&pi, "power9-nvlink", "");
    ck_assert_int_eq(tb_platform_apply_env(pi.h->p, pi.ctx, report, sizeof report, NULL, &err), TB_OK);
    ck_assert_str_eq(getenv("NCCL_P2P_LEVEL"), "NVL");
    ck_assert_str_eq(report, "set NCCL_P2P_LEVEL=NVL");
    tb_instance_close(&pi);
    unsetenv("NCCL_P2P_LEVEL");
    unsetenv("NCCL_TB_TEST_A");
}
END_TEST

/* ------------------------------------------------------------------ odd plugins */

static int fake_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    (void)cfg;
    (void)err;
    *ctx = NULL;
    return TB_OK;
}

static void fake_destroy(void *ctx)
{
    (void)ctx;
}

/* A link() that knows only the three rates and leaves every other member as it is. */
static void rates_link(void *ctx, struct tb_link *out)
{
    (void)ctx;
    out->h2d_bytes_per_s = 1e9;
    out->d2h_bytes_per_s = 2e9;
    out->accel_flops = 3e12;
}

#define FAKE_HEAD { .create = fake_create, .destroy = fake_destroy }

/* A platform plugin with vtable ops, as the loader takes it in. Close with tb_plugin_close. */
static struct tb_plugin_handle *fake_plugin(const struct tb_platform_ops *ops)
{
    struct tb_plugin p = { .abi_major = TB_ABI_MAJOR,
                           .abi_minor = TB_ABI_MINOR,
                           .kind = TB_KIND_PLATFORM,
                           .name = "fake",
                           .version = "0",
                           .description = "a test descriptor",
                           .ops.platform = ops };
    struct tb_plugin_handle *h;
    struct tb_err err;
    ck_assert_msg(tb_plugin_adopt(&p, "fake.so", TB_KIND_PLATFORM, &h, &err) == TB_OK, "%s", err.msg);
    return h;
}

/* A plugin that leaves a member alone gets the core's "unknown" for it, whatever the
 * struct held before; without env_defaults it has none to apply. */
START_TEST(link_left_alone_reads_unknown)
{
    static const struct tb_platform_ops ops = { .head = FAKE_HEAD, .link = rates_link };
    struct tb_plugin_handle *p = fake_plugin(&ops);
    struct tb_link l;
    memset(&l, 0x5a, sizeof l);
    tb_platform_link(p->p, NULL, &l);
    ck_assert(l.h2d_bytes_per_s == 1e9 && l.d2h_bytes_per_s == 2e9 && l.accel_flops == 3e12);
    ck_assert(l.accel_efficiency == TB_ACCEL_EFFICIENCY_DEFAULT);
    ck_assert(l.duplex_bytes_per_s == 0.0);
    ck_assert(l.latency_s == 0.0);
    ck_assert_int_eq(l.numa_node, -1);
    char report[64];
    size_t n = 5;
    struct tb_err err;
    ck_assert_int_eq(tb_platform_apply_env(p->p, NULL, report, sizeof report, &n, &err), TB_OK);
    ck_assert_str_eq(report, "none");
    ck_assert_uint_eq(n, 0);
    tb_plugin_close(p);
}
END_TEST

/* What a plugin writes is believed, save for impossible values. */
static void link_bad(void *ctx, struct tb_link *out)
{
    rates_link(ctx, out);
    out->duplex_bytes_per_s = -1.0;
    out->latency_s = INFINITY;
    out->numa_node = -5;
}

static void link_good(void *ctx, struct tb_link *out)
{
    rates_link(ctx, out);
    out->duplex_bytes_per_s = 0.5e9;
    out->latency_s = 4e-6;
    out->numa_node = 1;
}

START_TEST(link_impossible_values_read_unknown)
{
    static const struct tb_platform_ops bad = { .head = FAKE_HEAD, .link = link_bad };
    static const struct tb_platform_ops good = { .head = FAKE_HEAD, .link = link_good };
    struct tb_link l;
    struct tb_plugin_handle *p = fake_plugin(&bad);
    tb_platform_link(p->p, NULL, &l);
    ck_assert(l.duplex_bytes_per_s == 0.0 && l.latency_s == 0.0 && l.numa_node == -1);
    tb_plugin_close(p);
    p = fake_plugin(&good);
    tb_platform_link(p->p, NULL, &l);
    ck_assert(l.duplex_bytes_per_s == 0.5e9 && l.latency_s == 4e-6 && l.numa_node == 1);
    ck_assert(l.accel_efficiency == TB_ACCEL_EFFICIENCY_DEFAULT);
    tb_plugin_close(p);
}
END_TEST

/* accel_efficiency is believed, but 0, below or not a number reads as the default. */
static double eff_written;

static void link_with_efficiency(void *ctx, struct tb_link *out)
{
    link_good(ctx, out);
    out->accel_efficiency = eff_written;
}

START_TEST(accel_efficiency_checked)
{
    static const struct tb_platform_ops ops = { .head = FAKE_HEAD, .link = link_with_efficiency };
    struct tb_link l;
    eff_written = 0.45;
    struct tb_plugin_handle *p = fake_plugin(&ops);
    tb_platform_link(p->p, NULL, &l);
    ck_assert(l.accel_efficiency == 0.45 && l.numa_node == 1);
    const double bad[] = { 0.0, -0.5, NAN, INFINITY };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        eff_written = bad[i];
        tb_platform_link(p->p, NULL, &l);
        ck_assert(l.accel_efficiency == TB_ACCEL_EFFICIENCY_DEFAULT);
    }
    tb_plugin_close(p);
}
END_TEST

static double accel_bw_written;

static void accel_scribbles(void *ctx, struct tb_accel *out)
{
    (void)ctx;
    memset(out->name, 'x', sizeof out->name); /* no terminator */
    out->memory_bytes = 16ull << 30;
    out->mem_bytes_per_s = accel_bw_written;
    out->fp16_flops = NAN;
    out->bf16_flops = -1;
    out->per_node = -3;
    out->peer_bytes_per_s = -1;
    out->net_latency_s = NAN;
}

/* What accel() writes is made safe: the name cut to its array, rates that are negative or
 * not numbers read as 0 (unknown). A plugin without accel describes no accelerator. */
START_TEST(accel_made_safe)
{
    static const struct tb_platform_ops ops = { .head = FAKE_HEAD, .link = link_with_efficiency,
                                                .accel = accel_scribbles };
    struct tb_accel a;
    accel_bw_written = 900e9;
    struct tb_plugin_handle *p = fake_plugin(&ops);
    memset(&a, 0x5a, sizeof a);
    tb_platform_accel(p->p, NULL, &a);
    ck_assert_uint_eq(strlen(a.name), sizeof a.name - 1);
    ck_assert_uint_eq(a.memory_bytes, 16ull << 30);
    ck_assert(a.mem_bytes_per_s == 900e9 && a.fp16_flops == 0 && a.bf16_flops == 0);
    ck_assert(a.per_node == 0 && a.peer_bytes_per_s == 0 && a.net_latency_s == 0);
    accel_bw_written = INFINITY;
    tb_platform_accel(p->p, NULL, &a);
    ck_assert(a.mem_bytes_per_s == 0);
    tb_plugin_close(p);
    static const struct tb_platform_ops bare = { .head = FAKE_HEAD, .link = rates_link };
    p = fake_plugin(&bare);
    memset(&a, 0x5a, sizeof a);
    tb_platform_accel(p->p, NULL, &a);
    ck_assert(a.name[0] == '\0' && a.memory_bytes == 0 && a.mem_bytes_per_s == 0 && a.fp16_flops == 0);
    char text[256];
    tb_accel_text(&a, 15.7e12, text, sizeof text);
    ck_assert_str_eq(text, "not described (the platform plugin has no accel)");
    tb_plugin_close(p);
}
END_TEST

static const char *const *bad_env(void *ctx)
{
    (void)ctx;
    static const char *const env[] = { "NCCL_TB_TEST_B=1", "1NCCL=2", NULL };
    return env;
}

START_TEST(malformed_env_default_sets_nothing)
{
    unsetenv("NCCL_TB_TEST_B");
    static const struct tb_platform_ops ops = { .head = FAKE_HEAD, .link = rates_link, .env_defaults = bad_env };
    struct tb_plugin_handle *p = fake_plugin(&ops);
    char report[64];
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_platform_apply_env(p->p, NULL, report, sizeof report, NULL, &err), TB_ERR_PLUGIN);
    ck_assert_contains(err.msg, "platform plugin 'fake': environment default '1NCCL=2' is not NAME=VALUE");
    ck_assert_ptr_null(getenv("NCCL_TB_TEST_B"));
    tb_plugin_close(p);
}
END_TEST

/* A [swap] section of a policy with keys min_size (1M) and depth (3), from `sets`. */
static struct tb_section *swap_section(const char *const *sets)
{
    static const struct tb_key keys[] = {
        { "min_size", TB_KEY_SIZE, "1M", NULL, "smallest tensor moved" },
        { "depth", TB_KEY_INT, "3", "1..9", "a knob" },
        TB_KEYS_END,
    };
    struct tb_config *c = tb_config_new("test");
    struct tb_err err;
    tb_err_clear(&err);
    for (; sets && *sets; sets++)
        ck_assert_int_eq(tb_config_set(c, *sets, &err), TB_OK);
    struct tb_section *sec = NULL;
    ck_assert_msg(tb_section_build(c, "swap", keys, "swap policy 'test'", NULL, &sec, &err) == TB_OK, "%s", err.msg);
    tb_config_free(c);
    return sec;
}

START_TEST(swap_defaults_where_the_user_set_none)
{
    struct tb_instance pi;
    char report[256];
    struct tb_err err;
    tb_err_clear(&err);

    /* power9-nvlink's own default, and a key the policy does not declare left alone. */
    open_ok(&pi, "power9-nvlink", "swap_defaults = min_size=256K, threshold=4\n");
    struct tb_section *sec = swap_section(NULL);
    ck_assert_int_eq(tb_platform_apply_swap(pi.h->p, pi.ctx, sec, report, sizeof report, &err), TB_OK);
    ck_assert_uint_eq(tb_section_size(sec, "min_size"), 256u << 10);
    ck_assert_str_eq(report, "min_size = 256K");
    ck_assert_contains(tb_section_origin(sec, "min_size"), "power9-nvlink");
    tb_section_free(sec);

    /* What the user set wins. */
    static const char *const user[] = { "swap.min_size=2M", NULL };
    sec = swap_section(user);
    ck_assert_int_eq(tb_platform_apply_swap(pi.h->p, pi.ctx, sec, report, sizeof report, &err), TB_OK);
    ck_assert_uint_eq(tb_section_size(sec, "min_size"), 2u << 20);
    ck_assert_str_eq(report, "");
    tb_section_free(sec);
    tb_instance_close(&pi);

    /* x86-pcie's default is 1M. */
    open_ok(&pi, "x86-pcie", "");
    sec = swap_section(NULL);
    ck_assert_int_eq(tb_platform_apply_swap(pi.h->p, pi.ctx, sec, report, sizeof report, &err), TB_OK);
    ck_assert_str_eq(report, "min_size = 1M");
    tb_section_free(sec);
    tb_instance_close(&pi);

    /* A value the key refuses: an error naming the platform and the entry, and nothing
     * applied, not even the entry before it. */
    open_ok(&pi, "x86-pcie", "swap_defaults = depth=5, min_size=lots\n");
    sec = swap_section(NULL);
    ck_assert_int_eq(tb_platform_apply_swap(pi.h->p, pi.ctx, sec, report, sizeof report, &err), TB_ERR_CONFIG);
    ck_assert_contains(err.msg, "swap_defaults of platform 'x86-pcie': 'min_size=lots': [swap] min_size: not a size");
    ck_assert_int_eq(tb_section_int(sec, "depth"), 3);
    ck_assert_uint_eq(tb_section_size(sec, "min_size"), 1u << 20);
    tb_section_free(sec);
    tb_instance_close(&pi);

    /* An item that is not key=value is refused when the platform is opened. */
    open_fails("x86-pcie", "swap_defaults = MinSize\n", &err);
    ck_assert_contains(err.msg, "[platform] swap_defaults item 'MinSize': expected key=value");

    /* A plugin without swap_defaults applies nothing. */
    static const struct tb_platform_ops bare = { .head = FAKE_HEAD, .link = rates_link };
    struct tb_plugin_handle *p = fake_plugin(&bare);
    sec = swap_section(NULL);
    ck_assert_int_eq(tb_platform_apply_swap(p->p, NULL, sec, report, sizeof report, &err), TB_OK);
    ck_assert_str_eq(report, "");
    ck_assert_uint_eq(tb_section_size(sec, "min_size"), 1u << 20);
    tb_section_free(sec);
    tb_plugin_close(p);
}
END_TEST

/* ------------------------------------------------------------------ score() and the probe */

START_TEST(score_names_this_cpu)
{
    struct plat_machine m;
    plat_probe("", &m);
    char cpu[200];
    plat_cpu_text(&m, cpu, sizeof cpu);
    static const char *const names[] = { "x86-pcie", "power9-nvlink" };
    for (size_t i = 0; i < 2; i++) {
        struct tb_instance pi;
        open_ok(&pi, names[i], "");
        char why[256] = "";
        int score = pi.ops.platform->head.score(why, sizeof why);
        ck_assert_contains(why, cpu);
        if (i == 0 && m.cpu == PLAT_CPU_X86) {
            ck_assert_int_ge(score, 10);
            ck_assert_contains(why, "x86 CPU (");
        }
        if (i == 1 && m.cpu != PLAT_CPU_POWER9) {
            ck_assert_int_eq(score, 0);
            ck_assert_contains(why, "not a POWER9 CPU (");
        }
        tb_instance_close(&pi);
    }
}
END_TEST

/* A fake root: files written under <tmp>/<name>/..., directories made on the way. */
static char *fake_root(const char *name)
{
    char *root = test_path(name);
    ck_assert_int_eq(mkdir(root, 0755), 0);
    return root;
}

static void put(const char *root, const char *rel, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s", path);
        *s = '/';
    }
    if (!text) {
        ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s", path);
        return;
    }
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void put_gpu(const char *root, const char *bus, const char *node, bool npu)
{
    char rel[256];
    snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/vendor", bus);
    put(root, rel, "0x10de\n");
    snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/class", bus);
    put(root, rel, "0x030200\n");
    snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/numa_node", bus);
    put(root, rel, node);
    if (npu) {
        snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/of_node/ibm,npu", bus);
        put(root, rel, "");
    }
}

static const char power9_cpuinfo[] = "processor\t: 0\n"
                                     "cpu\t\t: POWER9, altivec supported\n"
                                     "clock\t\t: 3800.000000MHz\n"
                                     "revision\t: 2.2 (pvr 004e 1202)\n\n"
                                     "timebase\t: 512000000\n"
                                     "platform\t: PowerNV\n"
                                     "model\t\t: 8335-GTG\n"
                                     "machine\t\t: PowerNV 8335-GTG\n";

static const char xeon_cpuinfo[] = "processor\t: 0\n"
                                   "vendor_id\t: GenuineIntel\n"
                                   "cpu family\t: 6\n"
                                   "model\t\t: 79\n"
                                   "model name\t: Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz\n"
                                   "cpu MHz\t\t: 2200.000\n";

START_TEST(probe_ac922)
{
    char *root = fake_root("ac922");
    put(root, "proc/cpuinfo", power9_cpuinfo);
    /* An NPU (IBM's NVLink unit, not a GPU) and two GPUs on the two sockets' nodes 0 and 8. */
    put(root, "sys/bus/pci/devices/0007:00:00.0/vendor", "0x1014\n");
    put(root, "sys/bus/pci/devices/0007:00:00.0/class", "0x068000\n");
    put_gpu(root, "0035:03:00.0", "8\n", true);
    put_gpu(root, "0004:04:00.0", "0\n", true);
    put(root, "proc/driver/nvidia/gpus/0004:04:00.0/information",
        "Model: \t\t Tesla V100-SXM2-16GB\nIRQ:   \t\t 33\nBus Location: \t 0004:04:00.0\n");
    put(root, "proc/driver/nvidia/gpus/0035:03:00.0/information", "Model: \t\t Tesla V100-SXM2-16GB\n");
    struct plat_machine m;
    plat_probe(root, &m);
    ck_assert_int_eq(m.cpu, PLAT_CPU_POWER9);
    ck_assert_str_eq(m.cpu_model, "POWER9, altivec supported");
    ck_assert_str_eq(m.machine, "PowerNV 8335-GTG");
    ck_assert_int_eq(m.gpus, 2);
    ck_assert_int_eq(m.gpus_nvlink, 2);
    ck_assert(m.driver);
    ck_assert_str_eq(m.gpu_bus, "0004:04:00.0");
    ck_assert_str_eq(m.gpu_model, "Tesla V100-SXM2-16GB");
    ck_assert_int_eq(m.gpu_node, 0);
    ck_assert(m.nodes_differ);
    char why[256];
    ck_assert_int_eq(plat_score_power9(&m, why, sizeof why), 30);
    ck_assert_str_eq(why, "POWER9 CPU (POWER9, altivec supported, PowerNV 8335-GTG); 2 NVIDIA GPUs (Tesla "
                          "V100-SXM2-16GB), 2 on NVLink to the CPU");
    ck_assert_int_eq(plat_score_x86_pcie(&m, why, sizeof why), 0);
    ck_assert_str_eq(why, "not an x86 CPU (POWER9, altivec supported, PowerNV 8335-GTG)");
    /* The AC922 preset claims it above its class; the x86 presets do not. */
    ck_assert_int_eq(plat_score_ac922(&m, why, sizeof why), 35);
    ck_assert_contains(why, "2 on NVLink to the CPU; recognised as the IBM AC922 (8335-GT*)");
    ck_assert_int_eq(plat_score_dgx_station(&m, why, sizeof why), 0);
    ck_assert_contains(why, "a preset for the NVIDIA DGX Station");
    ck_assert_int_eq(plat_score_p3_8xlarge(&m, why, sizeof why), 0);
    ck_assert_int_eq(plat_auto_numa_node(&m, why, sizeof why), 0);
    ck_assert_contains(why, "GPU 0004:04:00.0 is on node 0");
    ck_assert_contains(why, "set numa_node");
    free(root);
}
END_TEST

START_TEST(probe_dgx_station)
{
    char *root = fake_root("dgxs");
    put(root, "proc/cpuinfo", xeon_cpuinfo);
    put_gpu(root, "0000:07:00.0", "0\n", false);
    put_gpu(root, "0000:08:00.0", "0\n", false);
    put(root, "sys/bus/pci/devices/0000:00:1f.2/vendor", "0x8086\n");
    put(root, "sys/bus/pci/devices/0000:00:1f.2/class", "0x010601\n");
    put(root, "proc/driver/nvidia/gpus/0000:07:00.0/information", "Model: \t\t Tesla V100-DGXS-32GB\n");
    struct plat_machine m;
    plat_probe(root, &m);
    ck_assert_int_eq(m.cpu, PLAT_CPU_X86);
    ck_assert_int_eq(m.gpus, 2);
    ck_assert_int_eq(m.gpus_nvlink, 0);
    ck_assert(!m.nodes_differ);
    char why[256];
    ck_assert_int_eq(plat_score_x86_pcie(&m, why, sizeof why), 15);
    ck_assert_str_eq(why, "x86 CPU (Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz); 2 NVIDIA GPUs (Tesla V100-DGXS-32GB) "
                          "on PCIe");
    ck_assert_int_eq(plat_score_power9(&m, why, sizeof why), 0);
    ck_assert_str_eq(why, "not a POWER9 CPU (Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz)");
    ck_assert_int_eq(plat_score_dgx_station(&m, why, sizeof why), 20);
    ck_assert_int_eq(plat_score_p3_8xlarge(&m, why, sizeof why), 0);
    ck_assert_contains(why, "this machine (Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz) is not one: name it");
    ck_assert_int_eq(plat_score_ac922(&m, why, sizeof why), 0);
    ck_assert_int_eq(plat_auto_numa_node(&m, why, sizeof why), 0);
    ck_assert_str_eq(why, "GPU 0000:07:00.0 is on node 0");
    free(root);
}
END_TEST

START_TEST(probe_p3_8xlarge)
{
    char *root = fake_root("p3");
    put(root, "proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz\n");
    put_gpu(root, "0000:00:1b.0", "-1\n", false);
    struct plat_machine m;
    plat_probe(root, &m);
    char why[256];
    ck_assert_int_eq(plat_score_p3_8xlarge(&m, why, sizeof why), 20);
    ck_assert_contains(why, "on PCIe; recognised as the AWS p3.8xlarge");
    ck_assert_int_eq(plat_score_dgx_station(&m, why, sizeof why), 0);
    /* The same CPU without a GPU is not the instance. */
    char *bare = fake_root("p3bare");
    put(bare, "proc/cpuinfo", "vendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz\n");
    plat_probe(bare, &m);
    ck_assert_int_eq(plat_score_p3_8xlarge(&m, why, sizeof why), 0);
    free(root);
    free(bare);
}
END_TEST

/* The GPU presets know their machine by the GPU the driver names, on an x86 host. */
START_TEST(probe_gpu_presets)
{
    static const struct {
        const char *model;
        int h100, h200, rtx;
    } rows[] = {
        { "NVIDIA H100 80GB HBM3", 20, 0, 0 },
        { "NVIDIA H100 PCIe", 0, 0, 0 },
        { "NVIDIA H200", 0, 20, 0 },
        { "NVIDIA GeForce RTX 4090", 0, 0, 20 },
        { "Tesla V100-SXM2-16GB", 0, 0, 0 },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "gpu%zu", i);
        char *root = fake_root(name);
        put(root, "proc/cpuinfo", xeon_cpuinfo);
        put_gpu(root, "0000:07:00.0", "0\n", false);
        char model[128];
        snprintf(model, sizeof model, "Model: \t\t %s\n", rows[i].model);
        put(root, "proc/driver/nvidia/gpus/0000:07:00.0/information", model);
        struct plat_machine m;
        plat_probe(root, &m);
        char why[256];
        ck_assert_int_eq(plat_score_h100_sxm(&m, why, sizeof why), rows[i].h100);
        ck_assert_int_eq(plat_score_h200(&m, why, sizeof why), rows[i].h200);
        ck_assert_int_eq(plat_score_rtx4090(&m, why, sizeof why), rows[i].rtx);
        if (rows[i].rtx)
            ck_assert_contains(why, "recognised as the RTX 4090 workstation");
        free(root);
    }
}
END_TEST

START_TEST(probe_without_gpus)
{
    char *root = fake_root("nogpu");
    put(root, "proc/cpuinfo", "vendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n");
    put(root, "sys/bus/pci/devices", NULL);
    struct plat_machine m;
    plat_probe(root, &m);
    char why[256];
    ck_assert_int_eq(plat_score_x86_pcie(&m, why, sizeof why), 10);
    ck_assert_str_eq(why, "x86 CPU (AMD EPYC 7B13), no NVIDIA GPU found: GPUs would attach over PCIe");
    ck_assert_int_eq(plat_score_dgx_station(&m, why, sizeof why), 0); /* neither preset's CPU */
    ck_assert_int_eq(plat_score_p3_8xlarge(&m, why, sizeof why), 0);
    ck_assert_int_eq(plat_auto_numa_node(&m, why, sizeof why), -1);
    ck_assert_str_eq(why, "no NVIDIA GPU found: node unknown (-1)");

    /* A POWER9 whose GPUs are on PCIe, and one with none visible. */
    char *p9 = fake_root("p9pcie");
    put(p9, "proc/cpuinfo", power9_cpuinfo);
    put_gpu(p9, "0033:01:00.0", "-1\n", false);
    plat_probe(p9, &m);
    ck_assert_int_eq(plat_score_power9(&m, why, sizeof why), 5);
    ck_assert_contains(why, "but 1 NVIDIA GPU is on PCIe, not NVLink");
    ck_assert_int_eq(plat_auto_numa_node(&m, why, sizeof why), -1);
    ck_assert_contains(why, "GPU 0033:01:00.0 has no NUMA node in sysfs");
    char *p9bare = fake_root("p9bare");
    put(p9bare, "proc/cpuinfo", power9_cpuinfo);
    plat_probe(p9bare, &m);
    ck_assert_int_eq(plat_score_power9(&m, why, sizeof why), 20);
    ck_assert_contains(why, "no NVIDIA GPU found: assuming an AC922's NVLink 2.0");

    /* Nothing readable: unknown, and neither platform claims it. */
    char *empty = fake_root("empty");
    plat_probe(empty, &m);
    ck_assert_int_eq(m.cpu, PLAT_CPU_UNKNOWN);
    ck_assert_int_eq(plat_score_x86_pcie(&m, why, sizeof why), 0);
    ck_assert_str_eq(why, "not an x86 CPU (model unknown)");
    ck_assert_int_eq(plat_score_power9(&m, why, sizeof why), 0);
    free(root);
    free(p9);
    free(p9bare);
    free(empty);
}
END_TEST

/* Only the driver's view (no sysfs): a GPU whose memory the driver made coherent with the
 * CPU's (numa_status) is on NVLink to it. */
START_TEST(probe_driver_only)
{
    char *root = fake_root("driveronly");
    put(root, "proc/cpuinfo", power9_cpuinfo);
    put(root, "proc/driver/nvidia/gpus/0004:04:00.0/information", "Model: \t\t Tesla V100-SXM2-32GB\n");
    put(root, "proc/driver/nvidia/gpus/0004:04:00.0/numa_status", "memblock size: 256MB\n");
    struct plat_machine m;
    plat_probe(root, &m);
    ck_assert_int_eq(m.gpus, 1);
    ck_assert_int_eq(m.gpus_nvlink, 1);
    ck_assert_int_eq(m.gpu_node, -1);
    char why[256];
    ck_assert_int_eq(plat_score_power9(&m, why, sizeof why), 30);
    ck_assert_contains(why, "1 NVIDIA GPU (Tesla V100-SXM2-32GB), 1 on NVLink to the CPU");
    free(root);
}
END_TEST

static Suite *platform_suite(void)
{
    Suite *s = suite_create("platform");
    TCase *tc = tcase_create("plugins");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, x86_pcie_defaults);
    tcase_add_test(tc, power9_nvlink_defaults);
    tcase_add_test(tc, presets_are_their_class);
    tcase_add_test(tc, accelerators_described);
    tcase_add_test(tc, gpus_together_described);
    tcase_add_test(tc, ring_hop_by_gpus);
    tcase_add_test(tc, every_value_overridden);
    tcase_add_test(tc, edges_allowed);
    tcase_add_test(tc, duplex_faster_than_alone);
    tcase_add_test(tc, duplex_error_in_a_file);
    tcase_add_test(tc, out_of_range_and_malformed);
    tcase_add_test(tc, env_defaults_only_where_unset);
    tcase_add_test(tc, score_names_this_cpu);
    suite_add_tcase(s, tc);
    TCase *core = tcase_create("core");
    tcase_add_test(core, link_left_alone_reads_unknown);
    tcase_add_test(core, link_impossible_values_read_unknown);
    tcase_add_test(core, accel_efficiency_checked);
    tcase_add_test(core, accel_made_safe);
    tcase_add_test(core, malformed_env_default_sets_nothing);
    tcase_add_test(core, swap_defaults_where_the_user_set_none);
    suite_add_tcase(s, core);
    TCase *probe = tcase_create("probe");
    tcase_add_test(probe, probe_ac922);
    tcase_add_test(probe, probe_dgx_station);
    tcase_add_test(probe, probe_p3_8xlarge);
    tcase_add_test(probe, probe_gpu_presets);
    tcase_add_test(probe, probe_without_gpus);
    tcase_add_test(probe, probe_driver_only);
    suite_add_tcase(s, probe);
    return s;
}

int main(void)
{
    return test_run_suite(platform_suite());
}
