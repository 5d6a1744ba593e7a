/* check_backend: the CPU backend's devices, memory (cap, arena, statistics), streams,
 * events and copies, tensor layout conversions, fill/accumulate and the SGD update. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <time.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <trainbig/trainbig.h>

#include "opcheck.h"
#include "testutil.h"

static struct test_backend b;

static void open_capped(void)
{
    setenv("TRAINBIG_LOG", "error", 1);
    test_backend_open(&b, "cpu", "threads = 2\ndevice_memory = 1M\n");
}

static void open_uncapped(void)
{
    setenv("TRAINBIG_LOG", "error", 1);
    test_backend_open(&b, "cpu", "threads = 2\n");
}

static void close_backend(void)
{
    test_backend_close(&b);
}

/* ------------------------------------------------------------------ devices and memory */

START_TEST(device_and_capacity)
{
    ck_assert_int_eq(b.ops.backend->device_count(b.ctx), 1);
    struct tb_device_info info;
    ck_assert_int_eq(b.ops.backend->device_info(b.ctx, 0, &info), TB_OK);
    ck_assert_uint_eq(info.capacity, 1u << 20);
    ck_assert_contains(info.name, "cpu: ");
    ck_assert_contains(info.name, "(2 threads, ");
    /* the ISA our kernels run, oneDNN's, and the channel block of blocked tensors */
    ck_assert_msg(strstr(info.name, "avx512") || strstr(info.name, "avx2") || strstr(info.name, "scalar"),
                  "no ISA in \"%s\"", info.name);
    ck_assert_msg(strstr(info.name, "nChw16c)") || strstr(info.name, "nChw8c)"), "no block in \"%s\"", info.name);
    /* A path forced for the whole run (tests/isa.sh) is the one the backend runs. */
    const char *forced = getenv("TRAINBIG_CPU_ISA");
    if (forced && *forced && strcmp(forced, "auto") != 0) {
        char want[64];
        snprintf(want, sizeof want, "(2 threads, %s", forced);
        ck_assert_contains(info.name, want);
    }
    ck_assert_int_ne(b.ops.backend->device_info(b.ctx, 1, &info), TB_OK);
}
END_TEST

START_TEST(alloc_within_cap_and_null_beyond)
{
    void *a = b.ops.backend->mem_alloc(b.ctx, 0, 512 << 10);
    ck_assert_ptr_nonnull(a);
    ck_assert_uint_eq((uintptr_t)a % 64, 0);
    memset(a, 1, 512 << 10); /* it is real memory */
    /* 512K + 600K > 1M: exhaustion is NULL, like a device, never an abort. */
    ck_assert_ptr_null(b.ops.backend->mem_alloc(b.ctx, 0, 600 << 10));
    struct tb_mem_stats st;
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.in_use, 512 << 10);
    ck_assert_uint_eq(st.peak, 512 << 10);
    ck_assert_uint_eq(st.capacity, 1 << 20);
    ck_assert_uint_eq(st.allocs, 1);
    ck_assert_uint_eq(st.fails, 1);
    b.ops.backend->mem_free(b.ctx, 0, a);
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_uint_eq(st.peak, 512 << 10);
    ck_assert_uint_eq(st.reserved, 1 << 20); /* the whole cap, reserved at create */
    ck_assert_uint_eq(st.largest_free, 1 << 20);
    ck_assert_ptr_null(b.ops.backend->mem_alloc(b.ctx, 0, (1 << 20) + 1));
}
END_TEST

START_TEST(freed_blocks_are_reused)
{
    void *a = b.ops.backend->mem_alloc(b.ctx, 0, 100000);
    b.ops.backend->mem_free(b.ctx, 0, a);
    /* The same rounded size comes back from the arena: no new system allocation. */
    void *again = b.ops.backend->mem_alloc(b.ctx, 0, 99950);
    ck_assert_ptr_eq(again, a);
    struct tb_mem_stats st;
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.reserved, st.capacity);
    ck_assert_uint_eq(st.in_use, 100352); /* rounded to 512 bytes */
    ck_assert_uint_eq(st.largest_free, st.capacity - st.in_use);
    b.ops.backend->mem_free(b.ctx, 0, again);
}
END_TEST

START_TEST(freed_block_gives_way_to_a_larger_request)
{
    void *a = b.ops.backend->mem_alloc(b.ctx, 0, 600 << 10);
    ck_assert_ptr_nonnull(a);
    b.ops.backend->mem_free(b.ctx, 0, a);
    /* 600K freed, 700K asked: the freed block merged back, so it fits without a new reservation. */
    void *c = b.ops.backend->mem_alloc(b.ctx, 0, 700 << 10);
    ck_assert_ptr_nonnull(c);
    struct tb_mem_stats st;
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.reserved, 1 << 20);
    ck_assert_uint_eq(st.in_use, 700 << 10);
    ck_assert_uint_eq(st.largest_free, 324 << 10);
    ck_assert_uint_eq(st.fails, 0);
    b.ops.backend->mem_free(b.ctx, 0, c);
}
END_TEST

/* A training step's pattern, over and over: the arena is reserved once and never grows,
 * nothing fails, and once all is freed it is one block again. */
START_TEST(steady_state_reserves_nothing_new)
{
    static const size_t sizes[] = { 100000, 37 << 10, 250 << 10, 3000, 64 << 10, 200 << 10, 1 };
    enum { N = sizeof sizes / sizeof *sizes };
    struct tb_mem_stats st;
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    const uint64_t reserved = st.reserved;
    ck_assert_uint_eq(reserved, 1 << 20);
    for (int step = 0; step < 200; step++) {
        void *p[N];
        for (int i = 0; i < N; i++) {
            p[i] = b.ops.backend->mem_alloc(b.ctx, 0, sizes[i]);
            ck_assert_ptr_nonnull(p[i]);
            ck_assert_uint_eq((uintptr_t)p[i] % 64, 0);
        }
        /* Freed in an order unlike the allocation's, as activations are. */
        for (int i = 0; i < N; i++)
            b.ops.backend->mem_free(b.ctx, 0, p[(i * 3 + step) % N]);
        b.ops.backend->mem_stats(b.ctx, 0, &st);
        ck_assert_uint_eq(st.reserved, reserved);
        ck_assert_uint_eq(st.allocs, (uint64_t)(step + 1) * N);
        ck_assert_uint_eq(st.fails, 0);
        ck_assert_uint_eq(st.in_use, 0);
        ck_assert_uint_eq(st.largest_free, st.capacity);
    }
}
END_TEST

/* Free neighbours merge, so a block larger than any single one freed fits afterwards;
 * free blocks that are not neighbours do not (that is fragmentation). */
START_TEST(neighbours_coalesce_for_a_large_allocation)
{
    void *p[4];
    for (int i = 0; i < 4; i++) {
        p[i] = b.ops.backend->mem_alloc(b.ctx, 0, 256 << 10);
        ck_assert_ptr_nonnull(p[i]);
    }
    ck_assert_ptr_null(b.ops.backend->mem_alloc(b.ctx, 0, 1)); /* full */
    b.ops.backend->mem_free(b.ctx, 0, p[0]);
    b.ops.backend->mem_free(b.ctx, 0, p[2]);
    struct tb_mem_stats st;
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.capacity - st.in_use, 512 << 10);
    ck_assert_uint_eq(st.largest_free, 256 << 10); /* fragmentation 1 - 256/512 = 0.5 */
    ck_assert_ptr_null(b.ops.backend->mem_alloc(b.ctx, 0, 512 << 10));
    /* p[1] freed: p[0], p[1] and p[2] are one free block of 768K. */
    b.ops.backend->mem_free(b.ctx, 0, p[1]);
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.largest_free, 768 << 10);
    void *big = b.ops.backend->mem_alloc(b.ctx, 0, 768 << 10);
    /* Blocks up to 1 MiB are taken from the top (arena.h small_limit): p[2] is the lowest. */
    ck_assert_ptr_eq(big, p[2]);
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.in_use, 1 << 20);
    ck_assert_uint_eq(st.largest_free, 0);
    ck_assert_uint_eq(st.fails, 2);
    ck_assert_uint_eq(st.reserved, 1 << 20);
    b.ops.backend->mem_free(b.ctx, 0, big);
    b.ops.backend->mem_free(b.ctx, 0, p[3]);
}
END_TEST

/* Without a cap the arena grows by segments of at least 64 MiB, kept until destroy. */
START_TEST(uncapped_grows_by_segments_and_keeps_them)
{
    open_uncapped();
    struct tb_mem_stats st;
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.reserved, 0);
    ck_assert_uint_eq(st.capacity, UINT64_MAX);
    void *a = b.ops.backend->mem_alloc(b.ctx, 0, 1 << 20);
    ck_assert_ptr_nonnull(a);
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.reserved, 64u << 20);
    ck_assert_uint_eq(st.largest_free, (63u << 20));
    /* Larger than a segment: a segment of its own. */
    void *c = b.ops.backend->mem_alloc(b.ctx, 0, 80u << 20);
    ck_assert_ptr_nonnull(c);
    memset(c, 1, 80u << 20);
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.reserved, 144u << 20);
    b.ops.backend->mem_free(b.ctx, 0, c);
    b.ops.backend->mem_free(b.ctx, 0, a);
    for (int i = 0; i < 20; i++) {
        void *x = b.ops.backend->mem_alloc(b.ctx, 0, 30u << 20), *y = b.ops.backend->mem_alloc(b.ctx, 0, 70u << 20);
        ck_assert(x && y);
        b.ops.backend->mem_free(b.ctx, 0, x);
        b.ops.backend->mem_free(b.ctx, 0, y);
    }
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.reserved, 144u << 20); /* nothing returned, nothing new */
    ck_assert_uint_eq(st.largest_free, 80u << 20);
    ck_assert_uint_eq(st.fails, 0);
    close_backend();
}
END_TEST

START_TEST(cap_beyond_the_machine_is_refused_at_create)
{
    setenv("TRAINBIG_LOG", "error", 1);
    struct tb_err err;
    tb_err_clear(&err);
    struct test_backend big;
    memset(&big, 0, sizeof big);
    /* Reserved and touched at start, so a cap no machine has is an error there, not later. */
    ck_assert_int_eq(tb_instance_open(TB_KIND_BACKEND, "cpu", NULL, "device_memory = 1000T\n", &big, &err),
                     TB_ERR_NOMEM);
    ck_assert_contains(err.msg, "cannot reserve [backend] device_memory");
    ck_assert_ptr_null(big.ctx);
}
END_TEST

START_TEST(peak_and_reset)
{
    void *a = b.ops.backend->mem_alloc(b.ctx, 0, 256 << 10);
    void *c = b.ops.backend->mem_alloc(b.ctx, 0, 256 << 10);
    b.ops.backend->mem_free(b.ctx, 0, c);
    struct tb_mem_stats st;
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.peak, 512 << 10);
    b.ops.backend->mem_reset_peak(b.ctx, 0);
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.peak, 256 << 10);
    b.ops.backend->mem_free(b.ctx, 0, a);
}
END_TEST

/* ------------------------------------------------------------------ streams and events */

#define BIG (8u << 20)

START_TEST(copies_round_trip)
{
    unsigned char *host = b.ops.backend->host_alloc(b.ctx, BIG), *back = b.ops.backend->host_alloc(b.ctx, BIG);
    void *dev = b.ops.backend->mem_alloc(b.ctx, 0, BIG);
    ck_assert(host && back && dev);
    for (size_t i = 0; i < BIG; i++)
        host[i] = (unsigned char)(i * 7 + 3);
    memset(back, 0, BIG);
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(b.ops.backend->copy_async(b.ctx, 0, TB_STREAM_H2D, dev, host, BIG, &err), TB_OK);
    struct tb_event *up = b.ops.backend->event_create(b.ctx, 0);
    ck_assert_int_eq(b.ops.backend->event_record(b.ctx, up, TB_STREAM_H2D), TB_OK);
    /* The download waits for the upload through the event, not through the caller. */
    ck_assert_int_eq(b.ops.backend->stream_wait(b.ctx, 0, TB_STREAM_D2H, up), TB_OK);
    ck_assert_int_eq(b.ops.backend->copy_async(b.ctx, 0, TB_STREAM_D2H, back, dev, BIG, &err), TB_OK);
    ck_assert_int_eq(b.ops.backend->stream_sync(b.ctx, 0, TB_STREAM_D2H), TB_OK);
    ck_assert_int_eq(b.ops.backend->event_query(b.ctx, up), 1);
    ck_assert_int_eq(memcmp(host, back, BIG), 0);
    b.ops.backend->event_destroy(b.ctx, up);
    b.ops.backend->mem_free(b.ctx, 0, dev);
    b.ops.backend->host_free(b.ctx, host);
    b.ops.backend->host_free(b.ctx, back);
}
END_TEST

/* The first byte of p[from, to) that is not `was`, or to. */
static size_t untouched(const unsigned char *p, size_t from, size_t to, unsigned char was)
{
    while (from < to && p[from] == was)
        from++;
    return from;
}

/* Copies at any alignment and length land whole and touch nothing around them: the
 * copy engines store large copies in aligned 64-byte pieces, the ends apart. */
START_TEST(copies_at_odd_offsets_and_lengths)
{
    static const size_t shifts[][3] = { { 3, 5, BIG - 64 - 7 }, { 13, 0, (256u << 10) + 1 }, { 0, 9, 300 } };
    unsigned char *host = b.ops.backend->host_alloc(b.ctx, BIG), *back = b.ops.backend->host_alloc(b.ctx, BIG);
    unsigned char *dev = b.ops.backend->mem_alloc(b.ctx, 0, BIG);
    ck_assert(host && back && dev);
    struct tb_err err;
    tb_err_clear(&err);
    for (size_t c = 0; c < sizeof shifts / sizeof *shifts; c++) {
        const size_t from = shifts[c][0], to = shifts[c][1], n = shifts[c][2];
        for (size_t i = 0; i < BIG; i++)
            host[i] = (unsigned char)(i * 11 + c);
        memset(dev, 0xee, BIG);
        memset(back, 0xdd, BIG);
        ck_assert_int_eq(b.ops.backend->copy_async(b.ctx, 0, TB_STREAM_H2D, dev + to, host + from, n, &err), TB_OK);
        ck_assert_int_eq(b.ops.backend->stream_sync(b.ctx, 0, TB_STREAM_H2D), TB_OK);
        ck_assert_int_eq(b.ops.backend->copy_async(b.ctx, 0, TB_STREAM_D2H, back + from, dev + to, n, &err), TB_OK);
        ck_assert_int_eq(b.ops.backend->stream_sync(b.ctx, 0, TB_STREAM_D2H), TB_OK);
        ck_assert_int_eq(memcmp(host + from, back + from, n), 0);
        ck_assert_uint_eq(untouched(dev, 0, to, 0xee), to);
        ck_assert_uint_eq(untouched(dev, to + n, BIG, 0xee), BIG);
        ck_assert_uint_eq(untouched(back, from + n, BIG, 0xdd), BIG);
    }
    b.ops.backend->mem_free(b.ctx, 0, dev);
    b.ops.backend->host_free(b.ctx, host);
    b.ops.backend->host_free(b.ctx, back);
}
END_TEST

/* With the link throttled to 40 MB/s, an 8 MB copy takes at least 0.2 s: long enough that
 * an event recorded after it is certainly still pending when queried at once. */
static void throttle(double bytes_per_s)
{
    struct tb_link_throttle link = { bytes_per_s, bytes_per_s, 0 };
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(b.ops.backend->set_link_throttle(b.ctx, 0, &link, &err), TB_OK);
}

START_TEST(event_pending_until_its_work_is_done)
{
    throttle(40e6);
    unsigned char *host = b.ops.backend->host_alloc(b.ctx, BIG);
    void *dev = b.ops.backend->mem_alloc(b.ctx, 0, BIG);
    memset(host, 0x5a, BIG);
    struct tb_err err;
    tb_err_clear(&err);
    struct tb_event *ev = b.ops.backend->event_create(b.ctx, 0);
    ck_assert_int_eq(b.ops.backend->event_query(b.ctx, ev), 1); /* never recorded: complete */
    b.ops.backend->copy_async(b.ctx, 0, TB_STREAM_H2D, dev, host, BIG, &err);
    b.ops.backend->event_record(b.ctx, ev, TB_STREAM_H2D);
    ck_assert_int_eq(b.ops.backend->event_query(b.ctx, ev), 0);
    ck_assert_int_eq(b.ops.backend->event_sync(b.ctx, ev), TB_OK);
    ck_assert_int_eq(b.ops.backend->event_query(b.ctx, ev), 1);
    ck_assert_int_eq(((unsigned char *)dev)[BIG - 1], 0x5a);
    b.ops.backend->event_destroy(b.ctx, ev);
    b.ops.backend->mem_free(b.ctx, 0, dev);
    b.ops.backend->host_free(b.ctx, host);
}
END_TEST

START_TEST(compute_waits_for_copy_event)
{
    throttle(40e6);
    float *host = b.ops.backend->host_alloc(b.ctx, BIG);
    for (size_t i = 0; i < BIG / 4; i++)
        host[i] = 2.0f;
    struct tb_tensor t = test_tensor(&b, test_desc(TB_F32, 1, 1, 1, BIG / 4));
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(b.ops.backend->tensor_fill(b.ctx, &t, 0.0f, &err), TB_OK);
    b.ops.backend->copy_async(b.ctx, 0, TB_STREAM_H2D, t.data, host, BIG, &err);
    struct tb_event *ev = b.ops.backend->event_create(b.ctx, 0);
    b.ops.backend->event_record(b.ctx, ev, TB_STREAM_H2D);
    /* Compute work submitted after the wait sees the copied data. */
    ck_assert_int_eq(b.ops.backend->stream_wait(b.ctx, 0, TB_STREAM_COMPUTE, ev), TB_OK);
    ck_assert_int_eq(b.ops.backend->tensor_accumulate(b.ctx, &t, &t, 1.0f, &err), TB_OK);
    ck_assert_float_eq(((float *)t.data)[0], 4.0f);
    ck_assert_float_eq(((float *)t.data)[BIG / 4 - 1], 4.0f);
    /* An event recorded on the compute stream completes with the work before it. */
    b.ops.backend->event_record(b.ctx, ev, TB_STREAM_COMPUTE);
    ck_assert_int_eq(b.ops.backend->event_query(b.ctx, ev), 1);
    b.ops.backend->event_destroy(b.ctx, ev);
    test_tensor_free(&b, &t);
    b.ops.backend->host_free(b.ctx, host);
}
END_TEST

START_TEST(copy_after_wait_waits_on_other_stream)
{
    /* A D2H copy queued behind a wait for an H2D event reads what the H2D copy wrote,
     * although the D2H stream itself is idle and the H2D copy is slow. */
    throttle(40e6);
    unsigned char *src = b.ops.backend->host_alloc(b.ctx, BIG), *dst = b.ops.backend->host_alloc(b.ctx, BIG);
    void *dev = b.ops.backend->mem_alloc(b.ctx, 0, BIG);
    memset(src, 0x33, BIG);
    memset(dev, 0x00, BIG);
    memset(dst, 0x11, BIG);
    struct tb_err err;
    tb_err_clear(&err);
    struct tb_event *ev = b.ops.backend->event_create(b.ctx, 0);
    b.ops.backend->copy_async(b.ctx, 0, TB_STREAM_H2D, dev, src, BIG, &err);
    b.ops.backend->event_record(b.ctx, ev, TB_STREAM_H2D);
    b.ops.backend->stream_wait(b.ctx, 0, TB_STREAM_D2H, ev);
    b.ops.backend->copy_async(b.ctx, 0, TB_STREAM_D2H, dst, dev, BIG, &err);
    b.ops.backend->event_destroy(b.ctx, ev); /* destroying with work still queued is allowed */
    b.ops.backend->stream_sync(b.ctx, 0, TB_STREAM_D2H);
    ck_assert_int_eq(dst[0], 0x33);
    ck_assert_int_eq(dst[BIG - 1], 0x33);
    b.ops.backend->mem_free(b.ctx, 0, dev);
    b.ops.backend->host_free(b.ctx, src);
    b.ops.backend->host_free(b.ctx, dst);
}
END_TEST

START_TEST(rerecording_moves_the_event)
{
    throttle(40e6);
    unsigned char *host = b.ops.backend->host_alloc(b.ctx, BIG);
    void *dev = b.ops.backend->mem_alloc(b.ctx, 0, BIG);
    struct tb_err err;
    tb_err_clear(&err);
    struct tb_event *ev = b.ops.backend->event_create(b.ctx, 0);
    b.ops.backend->event_record(b.ctx, ev, TB_STREAM_D2H); /* D2H is idle: completes at once */
    b.ops.backend->stream_sync(b.ctx, 0, TB_STREAM_D2H);
    ck_assert_int_eq(b.ops.backend->event_query(b.ctx, ev), 1);
    b.ops.backend->copy_async(b.ctx, 0, TB_STREAM_D2H, host, dev, BIG, &err);
    b.ops.backend->event_record(b.ctx, ev, TB_STREAM_D2H);
    ck_assert_int_eq(b.ops.backend->event_query(b.ctx, ev), 0);
    b.ops.backend->event_sync(b.ctx, ev);
    ck_assert_int_eq(b.ops.backend->event_query(b.ctx, ev), 1);
    b.ops.backend->event_destroy(b.ctx, ev);
    b.ops.backend->mem_free(b.ctx, 0, dev);
    b.ops.backend->host_free(b.ctx, host);
}
END_TEST

START_TEST(destroy_waits_for_queued_copies)
{
    /* destroy() drains the queues: the copy below lands although nobody waits for it. */
    throttle(200e6);
    unsigned char *host = malloc(BIG), *dst = malloc(BIG);
    memset(host, 0x77, BIG);
    memset(dst, 0, BIG);
    struct tb_err err;
    tb_err_clear(&err);
    b.ops.backend->copy_async(b.ctx, 0, TB_STREAM_D2H, dst, host, BIG, &err);
    test_backend_close(&b);
    ck_assert_int_eq(dst[BIG - 1], 0x77);
    free(host);
    free(dst);
    open_uncapped(); /* for the teardown */
}
END_TEST

/* ------------------------------------------------------------------ tensors */

START_TEST(tensor_layout_nhwc_or_blocked)
{
    struct tb_tensor_desc d = test_desc(TB_F32, 2, 3, 4, 5);
    struct tb_tensor t = test_tensor(&b, d);
    size_t n = tb_shape_elems(d.shape);
    float *nchw = malloc(n * sizeof *nchw), *back = malloc(n * sizeof *back);
    for (size_t i = 0; i < n; i++)
        nchw[i] = (float)i;
    test_upload(&b, &t, nchw);
    ck_assert_uint_eq(b.ops.backend->tensor_bytes(b.ctx, &d), n * 4);
    const float *dev = t.data;
    for (int in = 0; in < 2; in++)
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 4; y++)
                for (int x = 0; x < 5; x++)
                    ck_assert_float_eq(dev[((in * 4 + y) * 5 + x) * 3 + c], nchw[((in * 3 + c) * 4 + y) * 5 + x]);
    test_download(&b, &t, back);
    ck_assert_int_eq(memcmp(nchw, back, n * sizeof *back), 0);
    test_tensor_free(&b, &t);

    /* A channel count that is a multiple of the block: nChwBc, B as the device name says. */
    struct tb_device_info info;
    ck_assert_int_eq(b.ops.backend->device_info(b.ctx, 0, &info), TB_OK);
    const int B = strstr(info.name, "nChw16c") ? 16 : 8;
    d = test_desc(TB_F32, 2, 32, 3, 2);
    t = test_tensor(&b, d);
    n = tb_shape_elems(d.shape);
    float *nchw2 = malloc(n * sizeof *nchw2), *back2 = malloc(n * sizeof *back2);
    for (size_t i = 0; i < n; i++)
        nchw2[i] = (float)i;
    test_upload(&b, &t, nchw2);
    ck_assert_uint_eq(b.ops.backend->tensor_bytes(b.ctx, &d), n * 4);
    dev = t.data;
    for (int in = 0; in < 2; in++)
        for (int c = 0; c < 32; c++)
            for (int y = 0; y < 3; y++)
                for (int x = 0; x < 2; x++)
                    ck_assert_float_eq(dev[(((in * (32 / B) + c / B) * 3 + y) * 2 + x) * B + c % B],
                                       nchw2[((in * 32 + c) * 3 + y) * 2 + x]);
    test_download(&b, &t, back2);
    ck_assert_int_eq(memcmp(nchw2, back2, n * sizeof *back2), 0);
    test_tensor_free(&b, &t);
    free(nchw2);
    free(back2);

    /* u8 labels convert the same way. */
    struct tb_tensor l = test_tensor(&b, test_desc(TB_U8, 1, 2, 1, 3));
    const unsigned char lab[6] = { 1, 2, 3, 4, 5, 6 };
    unsigned char got[6];
    test_upload(&b, &l, lab);
    const unsigned char *raw = l.data;
    ck_assert_int_eq(raw[0], 1);
    ck_assert_int_eq(raw[1], 4);
    ck_assert_int_eq(raw[2], 2);
    test_download(&b, &l, got);
    ck_assert_int_eq(memcmp(lab, got, 6), 0);
    test_tensor_free(&b, &l);
    free(nchw);
    free(back);
}
END_TEST

/* A 16-bit float's value. */
static double pc_half(uint16_t h, enum tb_dtype d)
{
    return d == TB_BF16 ? (double)tb_f32_from_bf16(h) : (double)tb_f32_from_f16(h);
}

START_TEST(fill_and_accumulate)
{
    struct tb_tensor a = test_tensor(&b, test_desc(TB_F32, 1, 4, 3, 3));
    struct tb_tensor c = test_tensor(&b, test_desc(TB_F32, 1, 4, 3, 3));
    struct tb_tensor other = test_tensor(&b, test_desc(TB_F32, 1, 4, 3, 2));
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(b.ops.backend->tensor_fill(b.ctx, &a, 1.5f, &err), TB_OK);
    ck_assert_int_eq(b.ops.backend->tensor_fill(b.ctx, &c, 2.0f, &err), TB_OK);
    ck_assert_int_eq(b.ops.backend->tensor_accumulate(b.ctx, &a, &c, -0.5f, &err), TB_OK);
    for (int i = 0; i < 36; i++)
        ck_assert_float_eq(((float *)a.data)[i], 0.5f);
    ck_assert_int_eq(b.ops.backend->tensor_accumulate(b.ctx, &a, &other, 1.0f, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "f32 1x4x3x2 into f32 1x4x3x3; it takes float tensors of one dtype and one shape");
    test_tensor_free(&b, &a);
    test_tensor_free(&b, &c);
    test_tensor_free(&b, &other);
}
END_TEST

/* At 16 bits, where the backend lists them: the fill is the value rounded; the sum is
 * taken in f32 and rounded once (1 + 2^-8 is a bf16 tie, 1 + 2^-11 an f16 one: both go to
 * the even 1; 1 + 3 * 2^-8 rounds up). Another dtype is refused, naming both. */
START_TEST(fill_and_accumulate_sixteen_bit)
{
    const struct tb_backend_ops *o = b.ops.backend;
    const uint32_t dtypes = o->dtypes ? o->dtypes(b.ctx, 0) : 0;
    static const enum tb_dtype dts[] = { TB_BF16, TB_F16 };
    for (int k = 0; k < 2; k++) {
        const enum tb_dtype d = dts[k];
        if (!(dtypes >> d & 1u))
            continue;
        const float tie = d == TB_BF16 ? 0x1p-8f : 0x1p-11f;
        struct tb_tensor a = test_tensor(&b, test_desc(d, 1, 16, 3, 3));
        struct tb_tensor c = test_tensor(&b, test_desc(d, 1, 16, 3, 3));
        struct tb_tensor f = test_tensor(&b, test_desc(TB_F32, 1, 16, 3, 3));
        struct tb_err err;
        tb_err_clear(&err);
        uint16_t got[144];
        ck_assert_int_eq(o->tensor_fill(b.ctx, &a, 1.0f, &err), TB_OK);
        ck_assert_int_eq(o->tensor_fill(b.ctx, &c, tie, &err), TB_OK);
        test_download(&b, &c, got);
        for (int i = 0; i < 144; i++)
            ck_assert_float_eq((float)pc_half(got[i], d), tie);
        ck_assert_int_eq(o->tensor_accumulate(b.ctx, &a, &c, 1.0f, &err), TB_OK);
        test_download(&b, &a, got);
        for (int i = 0; i < 144; i++)
            ck_assert_float_eq((float)pc_half(got[i], d), 1.0f);
        ck_assert_int_eq(o->tensor_accumulate(b.ctx, &a, &c, 3.0f, &err), TB_OK);
        test_download(&b, &a, got);
        for (int i = 0; i < 144; i++)
            ck_assert_float_eq((float)pc_half(got[i], d), 1.0f + 4 * tie);
        ck_assert_int_eq(o->tensor_accumulate(b.ctx, &a, &f, 1.0f, &err), TB_ERR_RUNTIME);
        ck_assert_contains(err.msg, "tensor_accumulate: f32 1x16x3x3 into ");
        test_tensor_free(&b, &a);
        test_tensor_free(&b, &c);
        test_tensor_free(&b, &f);
    }
}
END_TEST

START_TEST(sgd_matches_pytorch_semantics)
{
    /* torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01), two steps, by hand:
     * step 1: d = g + wd p; buf = d; p -= lr buf.  step 2: buf = m buf + d; p -= lr buf. */
    struct tb_tensor p = test_tensor(&b, test_desc(TB_F32, 1, 3, 1, 1));
    struct tb_tensor g = test_tensor(&b, test_desc(TB_F32, 1, 3, 1, 1));
    struct tb_tensor m = test_tensor(&b, test_desc(TB_F32, 1, 3, 1, 1));
    const float p0[3] = { 1.0f, -2.0f, 0.5f }, g1[3] = { 0.3f, 0.1f, -0.4f }, g2[3] = { -0.2f, 0.05f, 0.6f };
    test_upload(&b, &p, p0);
    struct tb_err err;
    tb_err_clear(&err);
    b.ops.backend->tensor_fill(b.ctx, &m, 0.0f, &err);
    double want[3], buf[3];
    for (int i = 0; i < 3; i++) {
        double d = g1[i] + 0.01 * p0[i];
        buf[i] = d;
        want[i] = p0[i] - 0.1 * buf[i];
    }
    test_upload(&b, &g, g1);
    ck_assert_int_eq(b.ops.backend->sgd_update(b.ctx, &p, &g, &m, 0.1f, 0.9f, 0.01f, &err), TB_OK);
    for (int i = 0; i < 3; i++) {
        double d = g2[i] + 0.01 * want[i];
        buf[i] = 0.9 * buf[i] + d;
        want[i] = want[i] - 0.1 * buf[i];
    }
    test_upload(&b, &g, g2);
    ck_assert_int_eq(b.ops.backend->sgd_update(b.ctx, &p, &g, &m, 0.1f, 0.9f, 0.01f, &err), TB_OK);
    float got[3], mom[3];
    test_download(&b, &p, got);
    test_download(&b, &m, mom);
    test_assert_close("param", got, want, 3, 1e-6, 1e-6);
    test_assert_close("momentum", mom, buf, 3, 1e-6, 1e-6);
    test_tensor_free(&b, &p);
    test_tensor_free(&b, &g);
    test_tensor_free(&b, &m);
}
END_TEST

START_TEST(open_validates_settings)
{
    struct tb_instance bad;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_instance_open(TB_KIND_BACKEND, "cpu", NULL, "threads = 2\nthraeds = 2\n", &bad, &err),
                     TB_ERR_CONFIG);
    ck_assert_contains(err.msg, "[backend] unknown key 'thraeds'");
    ck_assert_contains(err.msg, "did you mean 'threads'?");
    ck_assert_ptr_null(bad.ctx);
    ck_assert_int_eq(tb_instance_open(TB_KIND_BACKEND, "cpu", NULL, "device_memory = lots\n", &bad, &err),
                     TB_ERR_CONFIG);
    ck_assert_contains(err.msg, "[backend] device_memory = 'lots': not a size");
    ck_assert_int_eq(tb_instance_open(TB_KIND_BACKEND, "cpux", NULL, "", &bad, &err), TB_ERR_PLUGIN);
    ck_assert_contains(err.msg, "no backend plugin named 'cpux'; did you mean 'cpu'?");
}
END_TEST

/* emulate_link: the platform's link scaled by this CPU's achieved convolution rate over
 * the accelerator's achieved rate, accel_flops x accel_efficiency (compute_gflops fixed
 * here, so the figures are exact): 157 GFLOP/s against 15.7 TFLOP/s x 1 makes copies 100
 * times slower, latency 100 times longer, and the link the policies see is the scaled one,
 * whose accelerator is this CPU. An efficiency of 0.5 makes them 50 times slower, and one
 * left 0 (unknown) is the default's. Without emulate_link the link is left alone. */
START_TEST(link_emulation_scales_the_platform_link)
{
    struct tb_instance e;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_instance_open(TB_KIND_BACKEND, "cpu", NULL,
                                   "threads = 1\nemulate_link = yes\ncompute_gflops = 157\n", &e, &err) == TB_OK,
                  "%s", err.msg);
    struct tb_link link = { 12e9, 10e9, 15.7e12, 8e9, 7e-6, -1, 1.0 };
    char note[1024];
    ck_assert_int_eq(e.ops.backend->set_platform(e.ctx, 0, &link, note, sizeof note, &err), TB_OK);
    ck_assert(fabs(link.h2d_bytes_per_s - 120e6) < 1 && fabs(link.d2h_bytes_per_s - 100e6) < 1);
    ck_assert(fabs(link.duplex_bytes_per_s - 80e6) < 1 && fabs(link.latency_s - 7e-4) < 1e-12);
    ck_assert(fabs(link.accel_flops - 157e9) < 1 && link.accel_efficiency == 1.0);
    ck_assert_contains(note, "emulating");
    ck_assert_contains(note, "this CPU's convolutions run at 157.0 GFLOP/s ([backend] compute_gflops)");
    ck_assert_contains(note, "15.7 TFLOP/s x 1.00 = 15.70 TFLOP/s");
    ck_assert_contains(note, "120 / 100 MB/s");
    /* A copy of 1.2 MB on the emulated link cannot finish in less than 10 ms. */
    void *host = e.ops.backend->host_alloc(e.ctx, 1200000), *dev = e.ops.backend->mem_alloc(e.ctx, 0, 1200000);
    struct tb_event *ev = e.ops.backend->event_create(e.ctx, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(e.ops.backend->copy_async(e.ctx, 0, TB_STREAM_H2D, dev, host, 1200000, &err), TB_OK);
    e.ops.backend->event_record(e.ctx, ev, TB_STREAM_H2D);
    e.ops.backend->event_sync(e.ctx, ev);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) >= 0.01);
    e.ops.backend->event_destroy(e.ctx, ev);
    e.ops.backend->mem_free(e.ctx, 0, dev);
    e.ops.backend->host_free(e.ctx, host);
    tb_instance_close(&e);

    /* link_scale multiplies the emulated rates and divides the latency. */
    ck_assert_msg(tb_instance_open(TB_KIND_BACKEND, "cpu", NULL,
                                   "threads = 1\nemulate_link = yes\ncompute_gflops = 157\nlink_scale = 4\n", &e,
                                   &err) == TB_OK,
                  "%s", err.msg);
    struct tb_link scaled = { 12e9, 10e9, 15.7e12, 8e9, 7e-6, -1, 1.0 };
    ck_assert_int_eq(e.ops.backend->set_platform(e.ctx, 0, &scaled, note, sizeof note, &err), TB_OK);
    ck_assert(fabs(scaled.h2d_bytes_per_s - 480e6) < 1 && fabs(scaled.d2h_bytes_per_s - 400e6) < 1);
    ck_assert(fabs(scaled.duplex_bytes_per_s - 320e6) < 1 && fabs(scaled.latency_s - 1.75e-4) < 1e-12);
    ck_assert_contains(note, "link_scale");
    tb_instance_close(&e);

    /* The accelerator's achieved rate: 15.7 TFLOP/s x 0.5 makes copies 50 times slower;
     * an efficiency of 0 (unknown) is TB_ACCEL_EFFICIENCY_DEFAULT's. */
    ck_assert_int_eq(tb_instance_open(TB_KIND_BACKEND, "cpu", NULL,
                                      "threads = 1\nemulate_link = yes\ncompute_gflops = 157\n", &e, &err),
                     TB_OK);
    struct tb_link half = { 12e9, 10e9, 15.7e12, 8e9, 7e-6, -1, 0.5 };
    ck_assert_int_eq(e.ops.backend->set_platform(e.ctx, 0, &half, note, sizeof note, &err), TB_OK);
    ck_assert(fabs(half.h2d_bytes_per_s - 240e6) < 1 && fabs(half.latency_s - 3.5e-4) < 1e-12);
    ck_assert_contains(note, "15.7 TFLOP/s x 0.50 = 7.85 TFLOP/s");
    struct tb_link unknown = { 12e9, 10e9, 15.7e12, 8e9, 7e-6, -1, 0 };
    ck_assert_int_eq(e.ops.backend->set_platform(e.ctx, 0, &unknown, note, sizeof note, &err), TB_OK);
    const double s = 157e9 / (15.7e12 * TB_ACCEL_EFFICIENCY_DEFAULT);
    ck_assert(fabs(unknown.h2d_bytes_per_s - 12e9 * s) < 1);
    tb_instance_close(&e);

    struct tb_mem_stats ms;
    /* Measured under a cap too small for the convolution: a configuration error naming
     * both keys. */
    ck_assert_int_eq(tb_instance_open(TB_KIND_BACKEND, "cpu", NULL,
                                      "threads = 1\nemulate_link = yes\ndevice_memory = 1M\n", &e, &err),
                     TB_OK);
    struct tb_link tight = { 12e9, 10e9, 15.7e12, 8e9, 7e-6, -1, 0.7 };
    tb_err_clear(&err);
    ck_assert_int_eq(e.ops.backend->set_platform(e.ctx, 0, &tight, note, sizeof note, &err), TB_ERR_CONFIG);
    ck_assert_contains(err.msg, "[backend] device_memory = 1.0 MiB");
    ck_assert_contains(err.msg, "[backend] compute_gflops");
    e.ops.backend->mem_stats(e.ctx, 0, &ms);
    ck_assert_uint_eq(ms.in_use, 0);
    tb_instance_close(&e);

    ck_assert_int_eq(tb_instance_open(TB_KIND_BACKEND, "cpu", NULL, "threads = 1\n", &e, &err), TB_OK);
    struct tb_link same = { 12e9, 10e9, 15.7e12, 8e9, 7e-6, -1, 0.7 };
    ck_assert_int_eq(e.ops.backend->set_platform(e.ctx, 0, &same, note, sizeof note, &err), TB_OK);
    ck_assert(same.h2d_bytes_per_s == 12e9 && same.latency_s == 7e-6);
    ck_assert_str_eq(note, "");
    tb_instance_close(&e);
}
END_TEST

/* Measured (compute_gflops = 0): the rate is a convolution's through the backend's own
 * kernels, reported beside the FMA peak; its memory goes back. Only its presence is
 * checked: no timing is asserted. (Tagged "jit": it runs oneDNN's kernels, which
 * check-valgrind leaves out.) */
START_TEST(link_emulation_measures_a_convolution)
{
    struct tb_instance e;
    struct tb_err err;
    char note[1024];
    ck_assert_int_eq(tb_instance_open(TB_KIND_BACKEND, "cpu", NULL, "threads = 1\nemulate_link = yes\n", &e, &err),
                     TB_OK);
    struct tb_link measured = { 12e9, 10e9, 15.7e12, 8e9, 7e-6, -1, 0.7 };
    ck_assert_msg(e.ops.backend->set_platform(e.ctx, 0, &measured, note, sizeof note, &err) == TB_OK, "%s", err.msg);
    ck_assert_contains(note, "(measured: 3x3 64->64");
    ck_assert_contains(note, "GFLOP/s FMA peak)");
    ck_assert(measured.accel_flops > 0 && measured.accel_efficiency > 0 && measured.accel_efficiency <= 1);
    struct tb_mem_stats ms;
    e.ops.backend->mem_stats(e.ctx, 0, &ms);
    ck_assert_uint_eq(ms.in_use, 0);
    ck_assert_uint_eq(ms.peak, 0);
    tb_instance_close(&e);
}
END_TEST

/* The node a page of ours is on, by move_pages(2) without moving anything; -1 where the
 * call fails, -2 where a container's seccomp or the kernel forbids it (nothing to check). */
static int page_node(void *p)
{
    void *page = (void *)((uintptr_t)p & ~(uintptr_t)4095);
    int status = -1;
    if (syscall(SYS_move_pages, 0, 1UL, &page, NULL, &status, 0) != 0)
        return errno == EPERM || errno == ENOSYS ? -2 : -1;
    return status;
}

/* Page p is on node 0, where the machine lets us ask. */
static void ck_assert_on_node0(void *p)
{
    const int node = page_node(p);
    if (node != -2)
        ck_assert_int_eq(node, 0);
}

START_TEST(pinned_memory_on_the_platform_numa_node)
{
    struct tb_instance e;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_instance_open(TB_KIND_BACKEND, "cpu", NULL, "threads = 1\n", &e, &err), TB_OK);
    struct tb_link link = { 12e9, 10e9, 15.7e12, 8e9, 7e-6, 0, 0.7 };
    char note[512];
    ck_assert_int_eq(e.ops.backend->set_platform(e.ctx, 0, &link, note, sizeof note, &err), TB_OK);
    const size_t bytes = 1 << 20;
    char *p = e.ops.backend->host_alloc(e.ctx, bytes);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % 64, 0);
    memset(p, 1, bytes);
#ifdef HAVE_NUMA
    if (strstr(note, "no NUMA support") == NULL) {
        ck_assert_contains(note, "pinned host memory on NUMA node 0");
        ck_assert_on_node0(p);
        ck_assert_on_node0(p + bytes - 1);
    }
#else
    ck_assert_contains(note, "no libnuma");
    (void)ck_assert_on_node0;
#endif
    e.ops.backend->host_free(e.ctx, p);

    /* A node the machine does not have: said, and the memory is the OS's to place. */
    struct tb_link far = { 12e9, 10e9, 15.7e12, 8e9, 7e-6, 4095, 0.7 };
    ck_assert_int_eq(e.ops.backend->set_platform(e.ctx, 0, &far, note, sizeof note, &err), TB_OK);
    ck_assert_contains(note, "NUMA node 4095 asked for");
    ck_assert_contains(note, "left to the OS");
    p = e.ops.backend->host_alloc(e.ctx, bytes);
    ck_assert_ptr_nonnull(p);
    memset(p, 2, bytes);
    e.ops.backend->host_free(e.ctx, p);
    tb_instance_close(&e);
}
END_TEST

START_TEST(unknown_op_refused_at_prepare)
{
    struct tb_op op;
    memset(&op, 0, sizeof op);
    op.kind = (enum tb_op_kind)99;
    op.id = 42;
    void *state = (void *)1;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(b.ops.backend->op_prepare(b.ctx, 0, &op, &state, &err), TB_ERR_RUNTIME);
    ck_assert_ptr_null(state);
    ck_assert_contains(err.msg, "op 42");
}
END_TEST

/* Every backend, the modelled one too, checks an op against the contract before anything
 * else: a relu whose output is not its input's shape is refused, naming the op. */
START_TEST(op_breaking_the_contract_refused_by_every_backend)
{
    static const char *const names[] = { "cpu", "sim" };
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        struct test_backend e;
        test_backend_open(&e, names[n], "");
        struct tb_op op;
        memset(&op, 0, sizeof op);
        op.kind = TB_OP_RELU;
        op.id = 7;
        op.nin = op.nout = 1;
        op.in[0] = (struct tb_tensor_desc){ TB_F32, { 2, 3, 4, 5 } };
        op.out[0] = (struct tb_tensor_desc){ TB_F32, { 2, 3, 4, 6 } };
        void *state = (void *)1;
        struct tb_err err;
        tb_err_clear(&err);
        ck_assert_int_eq(e.ops.backend->op_prepare(e.ctx, 0, &op, &state, &err), TB_ERR_RUNTIME);
        ck_assert_ptr_null(state);
        ck_assert_contains(err.msg, "op 7 (relu): relu: output 0 is f32 2x3x4x6");
        op.out[0].shape.w = 5; /* now it keeps the contract */
        ck_assert_msg(e.ops.backend->op_prepare(e.ctx, 0, &op, &state, &err) == TB_OK, "%s: %s", names[n], err.msg);
        e.ops.backend->op_release(e.ctx, state);
        test_backend_close(&e);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend");
    TCase *tc = tcase_create("memory");
    tcase_add_checked_fixture(tc, open_capped, close_backend);
    tcase_add_test(tc, device_and_capacity);
    tcase_add_test(tc, alloc_within_cap_and_null_beyond);
    tcase_add_test(tc, freed_blocks_are_reused);
    tcase_add_test(tc, freed_block_gives_way_to_a_larger_request);
    tcase_add_test(tc, steady_state_reserves_nothing_new);
    tcase_add_test(tc, neighbours_coalesce_for_a_large_allocation);
    tcase_add_test(tc, peak_and_reset);
    suite_add_tcase(s, tc);

    tc = tcase_create("growth");
    tcase_add_test(tc, uncapped_grows_by_segments_and_keeps_them);
    tcase_add_test(tc, cap_beyond_the_machine_is_refused_at_create);
    suite_add_tcase(s, tc);

    tc = tcase_create("streams");
    tcase_add_checked_fixture(tc, open_uncapped, close_backend);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, copies_round_trip);
    tcase_add_test(tc, copies_at_odd_offsets_and_lengths);
    tcase_add_test(tc, event_pending_until_its_work_is_done);
    tcase_add_test(tc, compute_waits_for_copy_event);
    tcase_add_test(tc, copy_after_wait_waits_on_other_stream);
    tcase_add_test(tc, rerecording_moves_the_event);
    tcase_add_test(tc, destroy_waits_for_queued_copies);
    suite_add_tcase(s, tc);

    tc = tcase_create("tensors");
    tcase_add_checked_fixture(tc, open_uncapped, close_backend);
    tcase_add_test(tc, tensor_layout_nhwc_or_blocked);
    tcase_add_test(tc, fill_and_accumulate);
    tcase_add_test(tc, fill_and_accumulate_sixteen_bit);
    tcase_add_test(tc, sgd_matches_pytorch_semantics);
    tcase_add_test(tc, unknown_op_refused_at_prepare);
    tcase_add_test(tc, op_breaking_the_contract_refused_by_every_backend);
    tcase_add_test(tc, open_validates_settings);
    tcase_add_test(tc, link_emulation_scales_the_platform_link);
    tcase_add_test(tc, pinned_memory_on_the_platform_numa_node);
    suite_add_tcase(s, tc);

    tc = tcase_create("measure");
    tcase_set_tags(tc, "jit");
    tcase_add_test(tc, link_emulation_measures_a_convolution);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
