/* check_lms: the arithmetic behind bench/lms's verdicts (tools/lms.c), on rounds made up
 * here, without timing anything: a case paired with prefetch round by round (against the
 * mean of the prefetch runs around it where prefetch ran twice), prefetch's A/A, and the
 * hybrid target (no worse than prefetch in the paired median; within the bound where
 * prefetch is above it). A timed run of bench/lms small enough for the suite takes
 * minutes on two cores; these take none. */
#include "config.h"

#include "tests/testutil.h"
#include "tools/lms_internal.h"

#define EPS 1e-12

START_TEST(paired_against_one_prefetch_run)
{
    const double over[3] = { 10, 25, 4 }, first[3] = { 12, 20, 9 };
    double med, lo, hi;
    tb_lms_paired(over, first, NULL, 3, &med, &lo, &hi);
    /* differences -2, +5, -5: median -2 */
    ck_assert_double_eq_tol(med, -2, EPS);
    ck_assert_double_eq_tol(lo, -5, EPS);
    ck_assert_double_eq_tol(hi, 5, EPS);
}
END_TEST

START_TEST(paired_against_the_mean_of_the_runs_around_it)
{
    const double over[3] = { 10, 20, 5 }, first[3] = { 12, 18, 9 }, again[3] = { 14, 22, 7 };
    double med, lo, hi;
    tb_lms_paired(over, first, again, 3, &med, &lo, &hi);
    /* references 13, 20, 8: differences -3, 0, -3 */
    ck_assert_double_eq_tol(med, -3, EPS);
    ck_assert_double_eq_tol(lo, -3, EPS);
    ck_assert_double_eq_tol(hi, 0, EPS);
    /* against the first run alone the same rounds read -2, +2, -4: the second run counts */
    tb_lms_paired(over, first, NULL, 3, &med, &lo, &hi);
    ck_assert_double_eq_tol(med, -2, EPS);
}
END_TEST

START_TEST(a_slow_round_drops_out_of_the_pairing)
{
    /* hybrid 3 points under prefetch in every round; round 2 ran 40 points slow on both */
    const double first[4] = { 20, 21, 60, 19 }, again[4] = { 22, 19, 62, 21 };
    double over[4];
    for (int i = 0; i < 4; i++)
        over[i] = (first[i] + again[i]) / 2 - 3;
    double med, lo, hi;
    tb_lms_paired(over, first, again, 4, &med, &lo, &hi);
    ck_assert_double_eq_tol(med, -3, EPS);
    ck_assert_double_eq_tol(lo, -3, EPS);
    ck_assert_double_eq_tol(hi, -3, EPS);
}
END_TEST

START_TEST(an_even_count_takes_the_mean_of_the_middle_two)
{
    const double over[4] = { 1, 8, 4, 30 }, first[4] = { 0, 0, 0, 0 };
    double med, lo, hi;
    tb_lms_paired(over, first, NULL, 4, &med, &lo, &hi);
    ck_assert_double_eq_tol(med, 6, EPS);
    ck_assert_double_eq_tol(lo, 1, EPS);
    ck_assert_double_eq_tol(hi, 30, EPS);
}
END_TEST

START_TEST(aa_is_the_second_run_less_the_first)
{
    const double first[5] = { 20, 25, 18, 30, 22 }, again[5] = { 21, 20, 18, 36, 24 };
    double med, lo, hi;
    tb_lms_paired(again, first, NULL, 5, &med, &lo, &hi);
    /* +1, -5, 0, +6, +2 */
    ck_assert_double_eq_tol(med, 1, EPS);
    ck_assert_double_eq_tol(lo, -5, EPS);
    ck_assert_double_eq_tol(hi, 6, EPS);
}
END_TEST

static struct tb_lms_case ran(double overhead, double vs_prefetch)
{
    struct tb_lms_case c = { .run = true, .overhead = overhead, .paired = true, .vs_prefetch = vs_prefetch };
    return c;
}

START_TEST(hybrid_must_not_be_worse_than_prefetch)
{
    const struct tb_lms_case pf = ran(20, 0);
    struct tb_lms_case h = ran(5, 0.1);
    ck_assert(!tb_lms_hybrid_met(&h, &pf, 0));
    ck_assert(!tb_lms_hybrid_met(&h, &pf, 10));
    h.vs_prefetch = 0;
    ck_assert(tb_lms_hybrid_met(&h, &pf, 0));
    ck_assert(tb_lms_hybrid_met(&h, &pf, 10));
}
END_TEST

START_TEST(the_bound_holds_where_prefetch_is_above_it)
{
    const struct tb_lms_case pf = ran(20, 0);
    struct tb_lms_case h = ran(10.5, -8);
    ck_assert(!tb_lms_hybrid_met(&h, &pf, 10)); /* x86-pcie: over 10% */
    ck_assert(tb_lms_hybrid_met(&h, &pf, 0));   /* power9-nvlink: no bound */
    h.overhead = 10;
    ck_assert(tb_lms_hybrid_met(&h, &pf, 10));
    /* prefetch within the bound: hybrid need only not be worse */
    const struct tb_lms_case low = ran(8, 0);
    h = ran(9, -0.5);
    ck_assert(tb_lms_hybrid_met(&h, &low, 10));
}
END_TEST

START_TEST(a_case_that_did_not_run_is_not_met)
{
    const struct tb_lms_case pf = ran(20, 0), h = ran(1, -15);
    struct tb_lms_case off = h;
    off.run = false;
    ck_assert(!tb_lms_hybrid_met(&off, &pf, 10));
    off = h;
    off.paired = false;
    ck_assert(!tb_lms_hybrid_met(&off, &pf, 10));
    off = pf;
    off.run = false;
    ck_assert(!tb_lms_hybrid_met(&h, &off, 10));
    ck_assert(tb_lms_hybrid_met(&h, &pf, 10));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lms");
    TCase *tc = tcase_create("verdicts");
    tcase_add_test(tc, paired_against_one_prefetch_run);
    tcase_add_test(tc, paired_against_the_mean_of_the_runs_around_it);
    tcase_add_test(tc, a_slow_round_drops_out_of_the_pairing);
    tcase_add_test(tc, an_even_count_takes_the_mean_of_the_middle_two);
    tcase_add_test(tc, aa_is_the_second_run_less_the_first);
    tcase_add_test(tc, hybrid_must_not_be_worse_than_prefetch);
    tcase_add_test(tc, the_bound_holds_where_prefetch_is_above_it);
    tcase_add_test(tc, a_case_that_did_not_run_is_not_met);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
