/* check_arena: the backends' suballocator (plugins/backends/arena.c): splitting, coalescing
 * on both sides, best fit, the fragmentation numbers, the blocks listed, exhaustion, growth by segments,
 * alignment, and a random sequence of allocations and frees checked against a model.
 *
 * The arena only does arithmetic on addresses, so the segments here are made-up ranges
 * that nothing ever reads or writes. */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "arena.h"

#define Q ((size_t)512)
#define KiB ((size_t)1024)
#define BASE ((uintptr_t)0x10000000)

static struct tb_arena a;

static void setup(void)
{
    ck_assert_int_eq(tb_arena_init(&a, Q), 0);
}

static void teardown(void)
{
    tb_arena_fini(&a, NULL, NULL);
}

static struct tb_arena_stats stats(void)
{
    struct tb_arena_stats st;
    tb_arena_stats(&a, &st);
    return st;
}

START_TEST(init_refuses_bad_quanta)
{
    struct tb_arena b;
    ck_assert_int_ne(tb_arena_init(&b, 32), 0);
    ck_assert_int_ne(tb_arena_init(&b, 768), 0);
    ck_assert_int_eq(tb_arena_init(&b, 64), 0);
    tb_arena_fini(&b, NULL, NULL);
}
END_TEST

START_TEST(split_hands_out_the_front_and_keeps_the_rest_free)
{
    ck_assert_int_eq(tb_arena_add(&a, BASE, 64 * KiB), 0);
    ck_assert_uint_eq(tb_arena_alloc(&a, 1000), BASE);
    ck_assert_uint_eq(tb_arena_live_size(&a, BASE), 1024); /* rounded to the quantum */
    ck_assert_uint_eq(tb_arena_alloc(&a, 1), BASE + 1024);
    struct tb_arena_stats st = stats();
    ck_assert_uint_eq(st.reserved, 64 * KiB);
    ck_assert_uint_eq(st.in_use, 1024 + Q);
    ck_assert_uint_eq(st.free, 64 * KiB - 1024 - Q);
    ck_assert_uint_eq(st.largest_free, st.free);
    ck_assert_uint_eq(st.live_blocks, 2);
    ck_assert_uint_eq(st.free_blocks, 1);
    ck_assert(tb_arena_check(&a));
}
END_TEST

START_TEST(free_coalesces_on_both_sides)
{
    ck_assert_int_eq(tb_arena_add(&a, BASE, 64 * KiB), 0);
    uintptr_t x = tb_arena_alloc(&a, 4 * KiB), y = tb_arena_alloc(&a, 4 * KiB), z = tb_arena_alloc(&a, 4 * KiB);
    ck_assert(x && y && z);
    ck_assert_uint_eq(tb_arena_free(&a, x), 4 * KiB);
    ck_assert_uint_eq(tb_arena_free(&a, z), 4 * KiB); /* z merges with the free tail */
    struct tb_arena_stats st = stats();
    ck_assert_uint_eq(st.free_blocks, 2);
    ck_assert_uint_eq(st.largest_free, 64 * KiB - 8 * KiB);
    ck_assert(tb_arena_check(&a));
    ck_assert_uint_eq(tb_arena_free(&a, y), 4 * KiB); /* y joins the block below and the one above */
    st = stats();
    ck_assert_uint_eq(st.free_blocks, 1);
    ck_assert_uint_eq(st.largest_free, 64 * KiB);
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert(tb_arena_check(&a));
    /* So the whole segment is one allocation again. */
    ck_assert_uint_eq(tb_arena_alloc(&a, 64 * KiB), BASE);
    ck_assert(tb_arena_check(&a));
}
END_TEST

/* Holes of 4K, 2K, 3K and 2K (in that address order), each between live blocks. */
static uintptr_t holes[4];

static void make_holes(void)
{
    ck_assert_int_eq(tb_arena_add(&a, BASE, 64 * KiB), 0);
    const size_t sizes[4] = { 4 * KiB, 2 * KiB, 3 * KiB, 2 * KiB };
    uintptr_t wall[4];
    for (int i = 0; i < 4; i++) {
        holes[i] = tb_arena_alloc(&a, sizes[i]);
        wall[i] = tb_arena_alloc(&a, Q);
        ck_assert(holes[i] && wall[i]);
    }
    /* Fill the tail, so only the holes are free. */
    ck_assert(tb_arena_alloc(&a, stats().largest_free));
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(tb_arena_free(&a, holes[i]), sizes[i]);
    ck_assert(tb_arena_check(&a));
}

START_TEST(best_fit_takes_the_smallest_hole_that_holds_it)
{
    make_holes();
    /* 2K fits the first 2K hole exactly (the lower of the two equal ones). */
    ck_assert_uint_eq(tb_arena_alloc(&a, 2 * KiB), holes[1]);
    /* 2.5K: the 3K hole, not the earlier 4K one (first fit would take that). */
    ck_assert_uint_eq(tb_arena_alloc(&a, 2 * KiB + Q), holes[2]);
    /* Then 2K again: the other 2K hole. */
    ck_assert_uint_eq(tb_arena_alloc(&a, 2 * KiB), holes[3]);
    /* What is left of the 3K hole (512 bytes) fits 100 bytes best. */
    ck_assert_uint_eq(tb_arena_alloc(&a, 100), holes[2] + 2 * KiB + Q);
    ck_assert_uint_eq(tb_arena_alloc(&a, 4 * KiB), holes[0]);
    ck_assert_uint_eq(stats().free, 0);
    ck_assert(tb_arena_check(&a));
}
END_TEST

START_TEST(fragmentation_numbers)
{
    make_holes();
    struct tb_arena_stats st = stats();
    ck_assert_uint_eq(st.free, 11 * KiB);
    ck_assert_uint_eq(st.largest_free, 4 * KiB);
    ck_assert_uint_eq(st.free_blocks, 4);
    ck_assert_uint_eq(st.in_use, st.reserved - st.free);
    /* 11K free, yet 5K does not fit anywhere: that is fragmentation, and alloc says NULL. */
    ck_assert_uint_eq(tb_arena_alloc(&a, 5 * KiB), 0);
    ck_assert_uint_eq(stats().in_use, st.in_use);
    ck_assert(tb_arena_check(&a));
}
END_TEST

/* The blocks as mem_blocks lists them: every one, free and handed out, in address order,
 * a segment's first marked; the count even where out has no room for them. */
START_TEST(blocks_are_listed_in_address_order)
{
    make_holes(); /* 4 holes, 4 walls, the filled tail */
    ck_assert_int_eq(tb_arena_add(&a, BASE + 1024 * KiB, 8 * KiB), 0);
    ck_assert_uint_eq(tb_arena_blocks(&a, NULL, 0), 10);
    struct tb_mem_block b[10];
    ck_assert_uint_eq(tb_arena_blocks(&a, b, 3), 10); /* only three written */
    ck_assert_uint_eq(b[0].addr, holes[0]);
    ck_assert_uint_eq(tb_arena_blocks(&a, b, 10), 10);
    const size_t sizes[4] = { 4 * KiB, 2 * KiB, 3 * KiB, 2 * KiB };
    uintptr_t at = BASE;
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(b[2 * i].addr, holes[i]);
        ck_assert_uint_eq(b[2 * i].bytes, sizes[i]);
        ck_assert_uint_eq(b[2 * i].flags, TB_MEM_BLOCK_FREE | (i == 0 ? TB_MEM_BLOCK_FIRST : 0u));
        ck_assert_uint_eq(b[2 * i + 1].bytes, Q);
        ck_assert_uint_eq(b[2 * i + 1].flags, 0); /* a wall, handed out */
        ck_assert_uint_eq(b[2 * i].addr, at);
        at += sizes[i] + Q;
    }
    ck_assert_uint_eq(b[8].addr, at); /* the tail, handed out, to the segment's end */
    ck_assert_uint_eq(b[8].addr + b[8].bytes, BASE + 64 * KiB);
    ck_assert_uint_eq(b[8].flags, 0);
    /* The second segment: one free block, the first of its region. */
    ck_assert_uint_eq(b[9].addr, BASE + 1024 * KiB);
    ck_assert_uint_eq(b[9].bytes, 8 * KiB);
    ck_assert_uint_eq(b[9].flags, TB_MEM_BLOCK_FREE | TB_MEM_BLOCK_FIRST);
}
END_TEST

START_TEST(exhaustion_is_zero_and_changes_nothing)
{
    ck_assert_uint_eq(tb_arena_alloc(&a, 1), 0); /* no segment yet */
    ck_assert_int_eq(tb_arena_add(&a, BASE, 8 * KiB), 0);
    ck_assert_uint_eq(tb_arena_alloc(&a, 8 * KiB + 1), 0);
    ck_assert_uint_eq(tb_arena_alloc(&a, 0), 0);
    ck_assert_uint_eq(tb_arena_alloc(&a, SIZE_MAX), 0);
    uintptr_t all = tb_arena_alloc(&a, 8 * KiB);
    ck_assert_uint_eq(all, BASE);
    ck_assert_uint_eq(tb_arena_alloc(&a, 1), 0);
    struct tb_arena_stats st = stats();
    ck_assert_uint_eq(st.free, 0);
    ck_assert_uint_eq(st.largest_free, 0);
    ck_assert_uint_eq(st.free_blocks, 0);
    /* Freeing what was never handed out, or twice, is refused and changes nothing. */
    ck_assert_uint_eq(tb_arena_free(&a, BASE + Q), 0);
    ck_assert_uint_eq(tb_arena_free(&a, all), 8 * KiB);
    ck_assert_uint_eq(tb_arena_free(&a, all), 0);
    ck_assert_uint_eq(tb_arena_live_size(&a, all), 0);
    ck_assert(tb_arena_check(&a));
}
END_TEST

START_TEST(growth_by_segments_never_spans_two)
{
    ck_assert_int_eq(tb_arena_add(&a, BASE, 16 * KiB), 0);
    uintptr_t x = tb_arena_alloc(&a, 16 * KiB);
    ck_assert_uint_eq(x, BASE);
    ck_assert_uint_eq(tb_arena_alloc(&a, 8 * KiB), 0);
    /* A second segment right above the first: still two, blocks do not cross. */
    ck_assert_int_eq(tb_arena_add(&a, BASE + 16 * KiB, 16 * KiB), 0);
    uintptr_t y = tb_arena_alloc(&a, 8 * KiB);
    ck_assert_uint_eq(y, BASE + 16 * KiB);
    ck_assert_uint_eq(tb_arena_free(&a, x), 16 * KiB);
    ck_assert_uint_eq(tb_arena_free(&a, y), 8 * KiB);
    struct tb_arena_stats st = stats();
    ck_assert_uint_eq(st.segments, 2);
    ck_assert_uint_eq(st.reserved, 32 * KiB);
    ck_assert_uint_eq(st.free_blocks, 2);
    ck_assert_uint_eq(st.largest_free, 16 * KiB);
    ck_assert_uint_eq(tb_arena_alloc(&a, 16 * KiB + 1), 0);
    ck_assert(tb_arena_check(&a));
}
END_TEST

static size_t released;

static void count_release(uintptr_t base, size_t bytes, void *arg)
{
    (void)arg;
    ck_assert_uint_eq(base % 4, 1); /* the base as given, not the aligned start */
    released += bytes;
}

START_TEST(segments_are_aligned_and_released_as_given)
{
    struct tb_arena b;
    ck_assert_int_eq(tb_arena_init(&b, 4096), 0);
    ck_assert_int_ne(tb_arena_add(&b, BASE + 1, 4096), 0); /* nothing left after alignment */
    ck_assert_int_eq(tb_arena_add(&b, BASE + 1, 5 * 4096), 0);
    struct tb_arena_stats st;
    tb_arena_stats(&b, &st);
    ck_assert_uint_eq(st.reserved, 4 * 4096);
    for (int i = 0; i < 4; i++) {
        uintptr_t p = tb_arena_alloc(&b, 1);
        ck_assert_uint_eq(p % 4096, 0);
        ck_assert_uint_ge(p, BASE + 1);
    }
    ck_assert_uint_eq(tb_arena_alloc(&b, 1), 0);
    ck_assert(tb_arena_check(&b));
    released = 0;
    tb_arena_fini(&b, count_release, NULL);
    ck_assert_uint_eq(released, 5 * 4096);
}
END_TEST

/* ------------------------------------------------------------------ against a model */

struct live {
    uintptr_t addr;
    size_t size;
};

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

START_TEST(random_sequence_matches_a_model)
{
    /* Three segments of different sizes, one added half way through. */
    const uintptr_t seg_base[3] = { BASE, BASE + 8 * 1024 * KiB, BASE + 32 * 1024 * KiB };
    const size_t seg_bytes[3] = { 2 * 1024 * KiB, 1024 * KiB, 4 * 1024 * KiB };
    ck_assert_int_eq(tb_arena_add(&a, seg_base[0], seg_bytes[0]), 0);
    ck_assert_int_eq(tb_arena_add(&a, seg_base[1], seg_bytes[1]), 0);
    int nsegs = 2;
    enum { MAX_LIVE = 400 };
    struct live live[MAX_LIVE];
    size_t nlive = 0, fails = 0;
    uint64_t in_use = 0;
    for (int op = 0; op < 40000; op++) {
        if (op == 20000) {
            ck_assert_int_eq(tb_arena_add(&a, seg_base[2], seg_bytes[2]), 0);
            nsegs = 3;
        }
        const bool alloc = nlive == 0 || (nlive < MAX_LIVE && next_random() % 100 < 55);
        if (alloc) {
            /* Mostly small, sometimes large, like a network's tensors. */
            const uint64_t r = next_random();
            size_t bytes = r % 8 == 0 ? 1 + (size_t)(r >> 8) % (512 * KiB) : 1 + (size_t)(r >> 8) % (16 * KiB);
            const size_t want = tb_arena_round(&a, bytes);
            struct tb_arena_stats before = stats();
            uintptr_t p = tb_arena_alloc(&a, bytes);
            if (!p) {
                /* Only when no free block holds it. */
                ck_assert_uint_lt(before.largest_free, want);
                fails++;
                continue;
            }
            ck_assert_uint_eq(p % Q, 0);
            ck_assert_uint_eq(tb_arena_live_size(&a, p), want);
            bool inside = false;
            for (int s = 0; s < nsegs; s++)
                inside |= p >= seg_base[s] && p + want <= seg_base[s] + seg_bytes[s];
            ck_assert_msg(inside, "block %#jx+%zu outside every segment", (uintmax_t)p, want);
            /* if, not ck_assert, in a loop this long (testutil.h says why) */
            for (size_t i = 0; i < nlive; i++)
                if (!(p + want <= live[i].addr || live[i].addr + live[i].size <= p))
                    ck_abort_msg("block %#jx+%zu overlaps %#jx+%zu", (uintmax_t)p, want, (uintmax_t)live[i].addr,
                                 live[i].size);
            live[nlive++] = (struct live){ p, want };
            in_use += want;
        } else {
            const size_t i = (size_t)(next_random() % nlive);
            ck_assert_uint_eq(tb_arena_free(&a, live[i].addr), live[i].size);
            in_use -= live[i].size;
            live[i] = live[--nlive];
        }
        struct tb_arena_stats st = stats();
        ck_assert_uint_eq(st.in_use, in_use);
        ck_assert_uint_eq(st.live_blocks, nlive);
        ck_assert_uint_eq(st.free, st.reserved - in_use);
        ck_assert_uint_le(st.largest_free, st.free);
        if (op % 97 == 0)
            ck_assert(tb_arena_check(&a));
    }
    ck_assert_uint_gt(fails, 0); /* the sequence did reach exhaustion */
    while (nlive) {
        ck_assert_uint_eq(tb_arena_free(&a, live[nlive - 1].addr), live[nlive - 1].size);
        nlive--;
    }
    /* Everything freed: each segment is one free block again. */
    struct tb_arena_stats st = stats();
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_uint_eq(st.free_blocks, 3);
    ck_assert_uint_eq(st.largest_free, seg_bytes[2]);
    ck_assert(tb_arena_check(&a));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arena");
    TCase *tc = tcase_create("arena");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, init_refuses_bad_quanta);
    tcase_add_test(tc, split_hands_out_the_front_and_keeps_the_rest_free);
    tcase_add_test(tc, free_coalesces_on_both_sides);
    tcase_add_test(tc, best_fit_takes_the_smallest_hole_that_holds_it);
    tcase_add_test(tc, fragmentation_numbers);
    tcase_add_test(tc, blocks_are_listed_in_address_order);
    tcase_add_test(tc, exhaustion_is_zero_and_changes_nothing);
    tcase_add_test(tc, growth_by_segments_never_spans_two);
    tcase_add_test(tc, segments_are_aligned_and_released_as_given);
    tcase_add_test(tc, random_sequence_matches_a_model);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
