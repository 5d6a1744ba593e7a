/* check_sim: the parts of the sim backend that stand alone (plugins/backends/sim): the
 * virtual clocks' ordering of streams, events and the host as CUDA orders them, the
 * link's copy times (each direction alone, both at once), the op-time model's roofline
 * over the op costs on the platforms' accelerators, and the modelled device memory (the
 * shared arena over addresses with no bytes behind them). */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <trainbig/trainbig.h>

#include "plugins/backends/sim/sim_clock.h"
#include "plugins/backends/sim/sim_comm.h"
#include "plugins/backends/sim/sim_memory.h"
#include "plugins/backends/sim/sim_model.h"
#include "plugins/backends/sim/sim_profile.h"
#include "tests/testutil.h"

#define ck_assert_close(x, want) \
    ck_assert_msg(fabs((x) - (want)) <= 1e-12 + 1e-9 * fabs(want), "%s = %.12g, want %.12g", #x, (double)(x), (double)(want))

/* ------------------------------------------------------------------ clocks */

/* Work on one stream runs in order, each piece from when the host submitted it; work on
 * another stream runs beside it. */
START_TEST(streams_order_and_overlap)
{
    struct sim_clock c;
    sim_clock_init(&c, 1e-6);
    ck_assert_close(sim_submit(&c, TB_STREAM_COMPUTE, 1e-3), 1e-6);
    ck_assert_close(sim_submit(&c, TB_STREAM_COMPUTE, 2e-3), 1e-3 + 1e-6); /* after the first */
    ck_assert_close(c.tail[TB_STREAM_COMPUTE], 3e-3 + 1e-6);
    ck_assert_close(c.host, 2e-6); /* the host only submitted */
    ck_assert_close(sim_submit(&c, TB_STREAM_H2D, 5e-4), 3e-6); /* a copy beside the compute */
    ck_assert_close(c.tail[TB_STREAM_H2D], 5e-4 + 3e-6);
}
END_TEST

/* A host that waits for its compute (host_waits: ops on the host's own thread, as the cpu
 * backend's) is where the compute ends after each submission, and so sees a copy queued
 * beside it finish sooner than a host running ahead does; copies alone do not hold it. */
START_TEST(host_waiting_for_compute)
{
    struct sim_clock c;
    sim_clock_init(&c, 1e-6);
    c.host_waits = true;
    struct sim_event copied = { 0 };
    sim_submit(&c, TB_STREAM_D2H, 2e-3);
    sim_record(&c, &copied, TB_STREAM_D2H);
    ck_assert_close(c.host, 1e-6); /* a copy: the host goes on */
    sim_submit(&c, TB_STREAM_COMPUTE, 1e-3);
    ck_assert_close(c.host, 1e-3 + 2e-6); /* the op: it waited */
    ck_assert(!sim_query(&c, &copied));
    sim_submit(&c, TB_STREAM_COMPUTE, 1.5e-3);
    ck_assert_close(c.host, 2.5e-3 + 3e-6);
    ck_assert(sim_query(&c, &copied)); /* done by the time the second op was */
    struct sim_clock ahead;
    sim_clock_init(&ahead, 1e-6);
    struct sim_event later = { 0 };
    sim_submit(&ahead, TB_STREAM_D2H, 2e-3);
    sim_record(&ahead, &later, TB_STREAM_D2H);
    sim_submit(&ahead, TB_STREAM_COMPUTE, 1e-3);
    sim_submit(&ahead, TB_STREAM_COMPUTE, 1.5e-3);
    ck_assert(!sim_query(&ahead, &later)); /* the same work: the host is still at 3 us */
    /* and its compute ends one submission later: the waiting host launched the second op
     * after the first had ended, the other while it ran */
    ck_assert_close(c.tail[TB_STREAM_COMPUTE] - ahead.tail[TB_STREAM_COMPUTE], 1e-6);
}
END_TEST

/* An event recorded on a stream completes with the work before it; a stream that waits on
 * it starts its next work no earlier; a query tells without waiting, a sync waits. */
START_TEST(events_order_streams_and_host)
{
    struct sim_clock c;
    sim_clock_init(&c, 0);
    struct sim_event copied = { 0 }, never = { 0 };
    sim_submit(&c, TB_STREAM_H2D, 4e-3);
    sim_record(&c, &copied, TB_STREAM_H2D);
    ck_assert_close(copied.time, 4e-3);
    sim_submit(&c, TB_STREAM_COMPUTE, 1e-3); /* does not wait: runs at once */
    ck_assert_close(c.tail[TB_STREAM_COMPUTE], 1e-3);
    sim_wait(&c, TB_STREAM_COMPUTE, &copied);
    ck_assert_close(sim_submit(&c, TB_STREAM_COMPUTE, 1e-3), 4e-3); /* waits for the copy */
    ck_assert(!sim_query(&c, &copied));
    ck_assert(sim_query(&c, &never)); /* never recorded: complete */
    sim_event_sync(&c, &copied);
    ck_assert_close(c.host, 4e-3);
    ck_assert(sim_query(&c, &copied));
    sim_stream_sync(&c, TB_STREAM_COMPUTE);
    ck_assert_close(c.host, 5e-3);
    /* a wait on an event already passed changes nothing */
    sim_wait(&c, TB_STREAM_COMPUTE, &copied);
    ck_assert_close(c.tail[TB_STREAM_COMPUTE], 5e-3);
    /* recording again moves the event */
    sim_record(&c, &copied, TB_STREAM_COMPUTE);
    ck_assert_close(copied.time, 5e-3);
}
END_TEST

/* A copy takes the link's latency plus its bytes at the direction's rate, and the duplex
 * rate when the other direction is busy as it starts. */
START_TEST(copies_on_the_link)
{
    const struct tb_link link = { .h2d_bytes_per_s = 12e9, .d2h_bytes_per_s = 11e9, .duplex_bytes_per_s = 10e9,
                                  .latency_s = 7e-6 };
    struct sim_clock c;
    sim_clock_init(&c, 0);
    const size_t mib = 1 << 20;
    ck_assert_close(sim_copy_seconds(&c, TB_STREAM_H2D, 12 * mib, &link), 7e-6 + 12.0 * mib / 12e9);
    ck_assert_close(sim_copy_seconds(&c, TB_STREAM_D2H, 11 * mib, &link), 7e-6 + 11.0 * mib / 11e9);
    sim_submit(&c, TB_STREAM_H2D, sim_copy_seconds(&c, TB_STREAM_H2D, 64 * mib, &link));
    /* device to host while host to device is busy: both at the duplex rate */
    ck_assert_close(sim_copy_seconds(&c, TB_STREAM_D2H, 10 * mib, &link), 7e-6 + 10.0 * mib / 10e9);
    /* once that copy is over, alone again */
    sim_stream_sync(&c, TB_STREAM_H2D);
    ck_assert_close(sim_copy_seconds(&c, TB_STREAM_D2H, 11 * mib, &link), 7e-6 + 11.0 * mib / 11e9);
    /* a stream waiting on an event is idle until then, not busy */
    struct sim_clock w;
    sim_clock_init(&w, 0);
    struct sim_event later = { 1.0, true };
    sim_wait(&w, TB_STREAM_H2D, &later);
    ck_assert_close(sim_copy_seconds(&w, TB_STREAM_D2H, 11 * mib, &link), 7e-6 + 11.0 * mib / 11e9);
}
END_TEST

/* ------------------------------------------------------------------ the op model */

static struct tb_op op_with(enum tb_op_kind kind, uint32_t nin, const struct tb_tensor_desc *in)
{
    struct tb_op op = test_op(kind, nin, in);
    if (kind == TB_OP_CONV2D)
        op.p.conv = (struct tb_conv2d_params){ in[1].shape.h, in[1].shape.w, 1, 1, in[1].shape.h / 2, in[1].shape.w / 2,
                                               1, 1, 0 };
    char why[200];
    ck_assert_msg(tb_op_outputs(&op, op.out, &op.nout, why, sizeof why) == 0, "%s", why);
    return op;
}

static struct sim_device v100(void)
{
    const struct tb_link l = { .accel_flops = 15.7e12, .accel_efficiency = 0.7 };
    const struct tb_accel a = { .name = "V100", .memory_bytes = 15ull << 30, .mem_bytes_per_s = 900e9, .fp16_flops = 125e12 };
    struct sim_device d;
    sim_device_from(&d, &l, &a);
    return d;
}

/* A large 3x3 convolution is bound by arithmetic at the platform's convolution
 * efficiency; a ReLU by memory at 0.8 of the bandwidth; each pays one launch. */
START_TEST(roofline_of_a_conv_and_a_relu)
{
    const struct sim_device d = v100();
    const struct tb_tensor_desc x = { TB_F32, { 8, 64, 128, 128 } }, w = { TB_F32, { 64, 64, 3, 3 } };
    const struct tb_tensor_desc in[] = { x, w };
    const struct tb_op conv = op_with(TB_OP_CONV2D, 2, in);
    struct sim_estimate e;
    sim_op_estimate(&d, &conv, false, 0, &e);
    const double flops = 2.0 * 8 * 64 * 128 * 128 * 64 * 9;
    ck_assert(!e.memory_bound);
    ck_assert_str_eq(e.row, "conv2d 3x3 and up");
    ck_assert_close(e.seconds, flops / (15.7e12 * 0.7) + 5e-6);
    sim_op_estimate(&d, &conv, true, 0x3, &e); /* two gradients: twice the work, two kernels */
    ck_assert_close(e.seconds, 2 * flops / (15.7e12 * 0.7) + 10e-6);

    const struct tb_op relu = op_with(TB_OP_RELU, 1, &x);
    sim_op_estimate(&d, &relu, false, 0, &e);
    ck_assert(e.memory_bound);
    ck_assert_close(e.seconds, 2.0 * 4 * 8 * 64 * 128 * 128 / (900e9 * 0.8) + 5e-6);
}
END_TEST

/* The classes of convolution: the first on an RGB image is narrow, a 1x1 and a dilated
 * one are theirs; on a faster device the same op takes as much less as its rates say. */
START_TEST(conv_classes_and_devices)
{
    const struct sim_device d = v100();
    struct sim_estimate e;
    const struct tb_tensor_desc rgb = { TB_F32, { 2, 3, 256, 256 } }, w1 = { TB_F32, { 64, 3, 3, 3 } };
    const struct tb_tensor_desc in1[] = { rgb, w1 };
    struct tb_op first = op_with(TB_OP_CONV2D, 2, in1);
    sim_op_estimate(&d, &first, false, 0, &e);
    ck_assert_str_eq(e.row, "conv2d narrow");
    const struct tb_tensor_desc x = { TB_F32, { 8, 256, 64, 64 } }, w11 = { TB_F32, { 256, 256, 1, 1 } };
    const struct tb_tensor_desc in2[] = { x, w11 };
    struct tb_op pw = op_with(TB_OP_CONV2D, 2, in2);
    sim_op_estimate(&d, &pw, false, 0, &e);
    ck_assert_str_eq(e.row, "conv2d 1x1");
    const struct tb_tensor_desc w33 = { TB_F32, { 256, 256, 3, 3 } };
    const struct tb_tensor_desc in3[] = { x, w33 };
    struct tb_op dil = op_with(TB_OP_CONV2D, 2, in3);
    dil.p.conv.dil_h = dil.p.conv.dil_w = 2;
    dil.p.conv.pad_h = dil.p.conv.pad_w = 2;
    sim_op_estimate(&d, &dil, false, 0, &e);
    ck_assert_str_eq(e.row, "conv2d dilated");

    const struct tb_link hl = { .accel_flops = 67e12, .accel_efficiency = 0.45 };
    const struct tb_accel ha = {
        .name = "H100", .memory_bytes = 78ull << 30, .mem_bytes_per_s = 3350e9, .fp16_flops = 989e12, .bf16_flops = 989e12
    };
    struct sim_device h;
    sim_device_from(&h, &hl, &ha);
    struct tb_op big = op_with(TB_OP_CONV2D, 2, in3);
    struct sim_estimate ev, eh;
    sim_op_estimate(&d, &big, false, 0, &ev);
    sim_op_estimate(&h, &big, false, 0, &eh);
    ck_assert_close((ev.seconds - d.launch_s) / (eh.seconds - h.launch_s), (67e12 * 0.45) / (15.7e12 * 0.7));
}
END_TEST

/* An op without backward costs no kernel there; a platform that describes no accelerator
 * gets the stated defaults (a V100's), so the model always answers. */
START_TEST(no_backward_and_defaults)
{
    const struct sim_device d = v100();
    const struct tb_tensor_desc labels = { TB_U8, { 2, 1, 64, 64 } };
    struct tb_op cw;
    memset(&cw, 0, sizeof cw);
    cw.kind = TB_OP_CLASS_WEIGHTS;
    cw.nin = 1;
    cw.in[0] = labels;
    cw.p.label.classes = 19;
    char why[200];
    ck_assert_msg(tb_op_outputs(&cw, cw.out, &cw.nout, why, sizeof why) == 0, "%s", why);
    struct sim_estimate e;
    sim_op_estimate(&d, &cw, true, 0x1, &e);
    ck_assert(e.seconds == 0);
    sim_op_estimate(&d, &cw, false, 0, &e);
    ck_assert(e.seconds > 0);
    struct sim_device none;
    sim_device_from(&none, NULL, NULL);
    ck_assert(none.fp32_flops == 15.7e12 && none.mem_bytes_per_s == 900e9 && none.conv_efficiency == 0.7);
}
END_TEST

/* ------------------------------------------------------------------ device memory */

/* The kB of this process's resident memory (VmRSS). */
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* A 16 GiB device is modelled without its memory: 15 GiB handed out leaves this process's
 * resident memory where it was. */
START_TEST(device_memory_without_its_bytes)
{
    struct sim_memory m;
    ck_assert_int_eq(sim_memory_init(&m, 16ull << 30), 0);
    const long before = rss_kib();
    void *a = sim_memory_alloc(&m, (size_t)15 << 30);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_null(sim_memory_alloc(&m, (size_t)2 << 30)); /* past the capacity */
    struct tb_mem_stats st;
    sim_memory_stats(&m, &st);
    ck_assert_uint_eq(st.in_use, 15ull << 30);
    ck_assert_uint_eq(st.capacity, 16ull << 30);
    ck_assert_uint_eq(st.fails, 1);
    ck_assert_uint_eq(st.allocs, 1);
    ck_assert(before < 0 || rss_kib() - before < 64 * 1024);
    ck_assert(sim_memory_free(&m, a));
    ck_assert(!sim_memory_free(&m, a)); /* not a live block any more */
    sim_memory_fini(&m);
}
END_TEST

/* Fragmentation is the allocator's: with the first and third of three blocks freed, the
 * free bytes would hold twice a block but no free block does. */
START_TEST(device_memory_fragments)
{
    struct sim_memory m;
    const size_t mib4 = (size_t)4 << 20;
    ck_assert_int_eq(sim_memory_init(&m, 3 * (uint64_t)mib4), 0);
    void *b[3];
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_nonnull(b[i] = sim_memory_alloc(&m, mib4));
    ck_assert(sim_memory_free(&m, b[0]) && sim_memory_free(&m, b[2]));
    struct tb_mem_stats st;
    sim_memory_stats(&m, &st);
    ck_assert_uint_eq(st.capacity - st.in_use, 2 * (uint64_t)mib4);
    ck_assert_uint_eq(st.largest_free, mib4);
    ck_assert_ptr_null(sim_memory_alloc(&m, 2 * mib4));
    ck_assert_uint_eq(st.peak, 3 * (uint64_t)mib4);
    sim_memory_reset_peak(&m);
    sim_memory_stats(&m, &st);
    ck_assert_uint_eq(st.peak, mib4);
    struct tb_mem_block blocks[8];
    ck_assert_uint_eq(tb_arena_blocks(&m.arena, blocks, 8), 3);
    ck_assert(blocks[0].flags & TB_MEM_BLOCK_FREE && !(blocks[1].flags & TB_MEM_BLOCK_FREE));
    sim_memory_fini(&m);
    struct sim_memory none;
    ck_assert_int_ne(sim_memory_init(&none, 0), 0); /* no memory: refused, nothing to free */
}
END_TEST

/* ------------------------------------------------------------------ calibration */

/* An op's signature names its kind, the parameters that change its work, its shapes and
 * the pass; two ops alike but for one of them differ. */
START_TEST(signature_of_an_op)
{
    const struct tb_tensor_desc x = { TB_F32, { 2, 64, 56, 56 } }, w = { TB_F32, { 64, 64, 3, 3 } };
    const struct tb_tensor_desc in[] = { x, w };
    struct tb_op conv = op_with(TB_OP_CONV2D, 2, in);
    char a[256], b[256];
    ck_assert_uint_eq(tb_op_signature(&conv, false, a, sizeof a), strlen(a));
    ck_assert_str_eq(a, "conv2d k=3x3 s=1x1 p=1x1 d=1x1 bias=0 in=2x64x56x56;64x64x3x3 out=2x64x56x56 forward");
    tb_op_signature(&conv, true, b, sizeof b);
    ck_assert_str_ne(a, b);
    conv.p.conv.dil_h = conv.p.conv.dil_w = 2;
    tb_op_signature(&conv, false, b, sizeof b);
    ck_assert_str_ne(a, b);
    /* too small a buffer: the line's whole length, cut and terminated */
    char small[8];
    ck_assert_uint_eq(tb_op_signature(&conv, false, small, sizeof small), strlen(b));
    ck_assert_str_eq(small, "conv2d ");
    const struct tb_tensor_desc lab = { TB_U8, { 2, 1, 8, 8 } }, logits = { TB_F32, { 2, 4, 8, 8 } };
    const struct tb_tensor_desc ce_in[] = { logits, lab };
    const struct tb_op ce = op_with(TB_OP_SOFTMAX_CE, 2, ce_in);
    tb_op_signature(&ce, false, a, sizeof a);
    ck_assert_str_eq(a, "softmax_ce weighted=0 per_image=0 in=2x4x8x8;2x1x8x8u8 out=1x1x1x1 forward");
}
END_TEST

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* A CSV profile: comments skipped, an op measured three times takes the median. */
START_TEST(csv_profile_takes_medians)
{
    char path[] = "/tmp/check_sim_profile_XXXXXX";
    ck_assert_int_ge(mkstemp(path), 0);
    write_file(path, "# measured on a device\nop,seconds\nrelu in=1x1x1x1 out=1x1x1x1 forward,0.003\n"
                     "relu in=1x1x1x1 out=1x1x1x1 forward,0.001\n\nrelu in=1x1x1x1 out=1x1x1x1 forward,0.002\n"
                     "add in=1x1x1x1;1x1x1x1 out=1x1x1x1 forward,5e-6\r\n");
    struct sim_profile p;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(sim_profile_load(&p, path, &err) == TB_OK, "%s", err.msg);
    ck_assert_uint_eq(p.read, 4);
    ck_assert_uint_eq(p.n, 2);
    ck_assert_close(sim_profile_find(&p, "relu in=1x1x1x1 out=1x1x1x1 forward"), 0.002);
    ck_assert_close(sim_profile_find(&p, "add in=1x1x1x1;1x1x1x1 out=1x1x1x1 forward"), 5e-6);
    ck_assert(sim_profile_find(&p, "relu in=1x1x1x1 out=1x1x1x1 backward") < 0);
    ck_assert_uint_eq(sim_profile_lookup(&p, "relu in=1x1x1x1 out=1x1x1x1 forward")->scratch, 0);
    sim_profile_free(&p);

    /* With the scratch column: the median time, the most memory of the op's passes. */
    write_file(path, "op,seconds,scratch_bytes\nconv2d a,b forward,0.003,4096\nconv2d a,b forward,0.001,8192\n"
                     "conv2d a,b forward,0.002,0\nrelu forward,1e-6, 0 \n");
    tb_err_clear(&err);
    ck_assert_msg(sim_profile_load(&p, path, &err) == TB_OK, "%s", err.msg);
    ck_assert_uint_eq(p.n, 2);
    const struct sim_timing *t = sim_profile_lookup(&p, "conv2d a,b forward");
    ck_assert_ptr_nonnull(t);
    ck_assert_close(t->seconds, 0.002);
    ck_assert_uint_eq(t->scratch, 8192);
    ck_assert_uint_eq(sim_profile_lookup(&p, "relu forward")->scratch, 0);
    ck_assert_ptr_null(sim_profile_lookup(&p, "relu backward"));
    sim_profile_free(&p);
    unlink(path);
}
END_TEST

/* What is not a profile is refused, naming the file and the line. */
START_TEST(bad_profiles_refused)
{
    char path[] = "/tmp/check_sim_profile_XXXXXX";
    ck_assert_int_ge(mkstemp(path), 0);
    static const struct {
        const char *text, *says;
    } bad[] = {
        { "signature,time\nx,1\n", ":1: the header is neither 'op,seconds' nor 'op,seconds,scratch_bytes'" },
        { "op,seconds,scratch_bytes\nrelu forward,0.1,lots\n", ":2: scratch_bytes 'lots' is not a whole number" },
        { "op,seconds,scratch_bytes\nrelu forward,0.1,-5\n", ":2: scratch_bytes '-5' is not a whole number" },
        { "op,seconds,scratch_bytes\nrelu forward,0.1\n", ":2: scratch_bytes '0.1' is not a whole number" },
        { "op,seconds\nrelu forward,fast\n", ":2: seconds 'fast' is not a number in 0..3600" },
        { "op,seconds\nrelu forward,-1\n", ":2: seconds '-1' is not a number" },
        { "op,seconds\nno comma here\n", ":2: not 'signature,seconds'" },
        { "op,seconds\n", "no op timings in it" },
        { "", "empty: no 'op,seconds' header" },
#ifdef HAVE_JANSSON
        { "{\"traceEvents\":[{\"name\":\"x\",\"cat\":\"op\",\"dur\":3}]}", "without its signature (args.op)" },
        { "{\"traceEvents\": [", "not a Chrome trace" },
        { "{\"traceEvents\":[{\"cat\":\"op\",\"dur\":3,\"args\":{\"op\":\"x\",\"scratch\":-1}}]}",
          "args.scratch is not bytes" },
#endif
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(path, bad[i].text);
        struct sim_profile p;
        struct tb_err err;
        tb_err_clear(&err);
        ck_assert_int_eq(sim_profile_load(&p, path, &err), TB_ERR_CONFIG);
        ck_assert_contains(err.msg, path);
        ck_assert_contains(err.msg, bad[i].says);
        ck_assert_uint_eq(p.n, 0);
    }
    struct sim_profile p;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_ne(sim_profile_load(&p, "/nonexistent/profile.csv", &err), TB_OK);
    ck_assert_contains(err.msg, "/nonexistent/profile.csv");
    unlink(path);
}
END_TEST

#ifdef HAVE_JANSSON
/* A Chrome trace as trainbig writes one: its op events' signatures and durations
 * (microseconds); copies and recomputations are not ops' times. */
START_TEST(trace_profile)
{
    char path[] = "/tmp/check_sim_profile_XXXXXX";
    ck_assert_int_ge(mkstemp(path), 0);
    write_file(path, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
                     "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"compute\"}},\n"
                     "{\"name\":\"c1\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":0,\"dur\":250.5,\"args\":{\"op\":\"conv2d A forward\"}},\n"
                     "{\"name\":\"c2\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":0,\"dur\":10,\"args\":{\"op\":\"conv2d B forward\",\"scratch\":65536}},\n"
                     "{\"name\":\"c1\",\"cat\":\"recompute\",\"ph\":\"X\",\"ts\":300,\"dur\":999,\"args\":{\"bytes\":4}},\n"
                     "{\"name\":\"t\",\"cat\":\"swap out\",\"ph\":\"X\",\"ts\":0,\"dur\":77,\"args\":{\"bytes\":4}}]}\n");
    struct sim_profile p;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(sim_profile_load(&p, path, &err) == TB_OK, "%s", err.msg);
    ck_assert_uint_eq(p.n, 2);
    ck_assert_close(sim_profile_find(&p, "conv2d A forward"), 250.5e-6);
    ck_assert_uint_eq(sim_profile_lookup(&p, "conv2d A forward")->scratch, 0);
    ck_assert_uint_eq(sim_profile_lookup(&p, "conv2d B forward")->scratch, 65536);
    sim_profile_free(&p);
    unlink(path);
}
END_TEST
#endif

/* The ring all-reduce: 2(n-1)/n of the bytes over the slowest hop and 2(n-1) steps of its
 * latency; within a node the GPUs' link, over nodes the slower of it and the network. */
START_TEST(ring_allreduce_over_the_links)
{
    const struct tb_accel a = { .per_node = 4,
                                .peer_bytes_per_s = 64e9,
                                .peer_latency_s = 3.4e-6,
                                .net_bytes_per_s = 12.5e9,
                                .net_latency_s = 2e-6 };
    ck_assert_close(sim_ring_seconds(&a, 1, 1e9), 0.0);
    ck_assert_close(sim_ring_seconds(&a, 2, 1e9), 1.0 * 1e9 / 64e9 + 2 * 3.4e-6);
    ck_assert_close(sim_ring_seconds(&a, 4, 1e9), 1.5 * 1e9 / 64e9 + 6 * 3.4e-6);
    ck_assert_close(sim_ring_seconds(&a, 8, 1e9), 1.75 * 1e9 / 12.5e9 + 14 * 3.4e-6);
    /* a network faster than the node's hop: the node's still bounds the ring */
    struct tb_accel fast = a;
    fast.net_bytes_per_s = 100e9;
    fast.net_latency_s = 9e-6;
    ck_assert_close(sim_ring_seconds(&fast, 8, 1e9), 1.75 * 1e9 / 64e9 + 14 * 9e-6);
    ck_assert_close(sim_ring_seconds(&a, 4, 0), 6 * 3.4e-6);
    /* two GPUs joined directly (an AC922 socket's pair): their own link, not the node's hop */
    struct tb_accel pair = a;
    pair.pair_bytes_per_s = 75e9;
    ck_assert_close(sim_ring_seconds(&pair, 2, 1e9), 1.0 * 1e9 / 75e9 + 2 * 3.4e-6);
    ck_assert_close(sim_ring_seconds(&pair, 4, 1e9), 1.5 * 1e9 / 64e9 + 6 * 3.4e-6);
}
END_TEST

/* Synchronised batch norm's sums, in doubles as the cuda backend reduces them: forward
 * C + 1 then 2C values, backward 2C + 1, each its own ring. */
START_TEST(syncbn_rings)
{
    struct tb_accel a = { 0 };
    a.per_node = 4;
    a.peer_bytes_per_s = 64e9;
    a.peer_latency_s = 3.4e-6;
    const int64_t C = 256;
    ck_assert_close(sim_syncbn_seconds(&a, 4, C, false),
                    sim_ring_seconds(&a, 4, (C + 1) * 8.0) + sim_ring_seconds(&a, 4, 2 * C * 8.0));
    ck_assert_close(sim_syncbn_seconds(&a, 4, C, true), sim_ring_seconds(&a, 4, (2 * C + 1) * 8.0));
    /* small vectors: the latency of the ring's 6 steps dominates */
    ck_assert(sim_syncbn_seconds(&a, 4, C, false) > 2 * 6 * 3.4e-6);
    ck_assert(sim_syncbn_seconds(&a, 4, C, false) < 2 * 6 * 3.4e-6 * 1.2);
    ck_assert_close(sim_syncbn_seconds(&a, 1, C, false), 0.0);
    ck_assert_close(sim_syncbn_seconds(&a, 1, C, true), 0.0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sim");
    TCase *tc = tcase_create("clock");
    tcase_add_test(tc, streams_order_and_overlap);
    tcase_add_test(tc, host_waiting_for_compute);
    tcase_add_test(tc, events_order_streams_and_host);
    tcase_add_test(tc, copies_on_the_link);
    tcase_add_test(tc, ring_allreduce_over_the_links);
    tcase_add_test(tc, syncbn_rings);
    suite_add_tcase(s, tc);
    tc = tcase_create("model");
    tcase_add_test(tc, roofline_of_a_conv_and_a_relu);
    tcase_add_test(tc, conv_classes_and_devices);
    tcase_add_test(tc, no_backward_and_defaults);
    suite_add_tcase(s, tc);
    tc = tcase_create("memory");
    tcase_add_test(tc, device_memory_without_its_bytes);
    tcase_add_test(tc, device_memory_fragments);
    suite_add_tcase(s, tc);
    tc = tcase_create("calibration");
    tcase_add_test(tc, signature_of_an_op);
    tcase_add_test(tc, csv_profile_takes_medians);
    tcase_add_test(tc, bad_profiles_refused);
#ifdef HAVE_JANSSON
    tcase_add_test(tc, trace_profile);
#endif
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
