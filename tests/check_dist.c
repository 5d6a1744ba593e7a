/* check_dist: the pieces of data parallelism, on two or more ranks of the CPU backend.
 * dist.test runs it under `mpirun -np 2`; started alone (one rank) it skips (77).
 *   - the backend's gradient all-reduce: buckets averaged over the ranks, in place;
 *   - synchronised batch norm on each rank's share equals plain batch norm over the
 *     global batch in one process: outputs, statistics, running statistics, the input
 *     gradient, and gamma's and beta's gradients once summed over the ranks;
 *   - the replica check: silent while the ranks' weights agree, naming the parameter when
 *     one rank's differs (buffers only when asked), and buffers broadcast from rank 0.
 * Every rank runs every case in the same order (no forking: the ranks' collectives must
 * meet). */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dist/world.h"
#include "core/engine/engine_internal.h"
#include "core/dist/replicas_internal.h"
#include "opcheck.h"

static const struct tb_comm *world;

static void attach(struct test_backend *b)
{
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_ptr_nonnull(b->ops.backend->comm_attach);
    ck_assert_msg(b->ops.backend->comm_attach(b->ctx, 0, world, &err) == TB_OK, "%s", err.msg);
}

START_TEST(gradients_are_averaged_in_buckets)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", "threads = 1\n");
    attach(&b);
    const int sizes[3] = { 5, 1000, 7 };
    struct tb_tensor t[3];
    float *host[3];
    for (int i = 0; i < 3; i++) {
        t[i] = test_tensor(&b, f32(1, sizes[i], 1, 1));
        host[i] = malloc((size_t)sizes[i] * sizeof **host);
        ck_assert_ptr_nonnull(host[i]);
        /* rank r holds (r + 1) * base: the mean is base * (ranks + 1) / 2, exactly. */
        for (int e = 0; e < sizes[i]; e++)
            host[i][e] = (float)(world->rank + 1) * (float)(i + 1 + 0.5 * e);
        test_upload(&b, &t[i], host[i]);
    }
    struct tb_err err;
    tb_err_clear(&err);
    const float scale = 1.0f / (float)world->size;
    ck_assert_msg(b.ops.backend->allreduce_start(b.ctx, t, 2, scale, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(b.ops.backend->allreduce_start(b.ctx, t + 2, 1, scale, &err) == TB_OK, "%s", err.msg);
    double busy = -1, waited = -1;
    ck_assert_msg(b.ops.backend->allreduce_wait(b.ctx, &busy, &waited, &err) == TB_OK, "%s", err.msg);
    ck_assert(busy >= 0 && waited >= 0);
    for (int i = 0; i < 3; i++) {
        test_download(&b, &t[i], host[i]);
        for (int e = 0; e < sizes[i]; e++) {
            float want = (float)(i + 1 + 0.5 * e) * (float)(world->size + 1) / 2.0f;
            ck_assert_msg(host[i][e] == want, "tensor %d element %d: %g, expected %g", i, e, (double)host[i][e],
                          (double)want);
        }
        test_tensor_free(&b, &t[i]);
        free(host[i]);
    }
    test_backend_close(&b);
}
END_TEST

static struct tb_op bn_op(int n, int c, int h, int w, int sync)
{
    struct tb_op op = new_op(TB_OP_BATCHNORM, 1, 5, 3);
    op.in[0] = f32(n, c, h, w);
    for (int i = 1; i < 5; i++)
        op.in[i] = f32(1, c, 1, 1);
    op.out[0] = f32(n, c, h, w);
    op.out[1] = op.out[2] = f32(1, c, 1, 1);
    op.p.bn.eps = 1e-5f;
    op.p.bn.momentum = 0.1f;
    op.p.bn.training = 1;
    op.p.bn.sync = sync;
    return op;
}

static void assert_close(const char *what, const float *got, const float *want, size_t n, double atol, double rtol)
{
    for (size_t e = 0; e < n; e++)
        ck_assert_msg(fabs((double)got[e] - (double)want[e]) <= atol + rtol * fabs((double)want[e]),
                      "rank %d, %s[%zu]: %.9g, one process %.9g", world->rank, what, e, (double)got[e],
                      (double)want[e]);
}

START_TEST(sync_batchnorm_matches_one_process)
{
    enum { NL = 2, C = 3, H = 5, W = 4 };
    const int N = NL * world->size;
    const size_t img = (size_t)C * H * W, mine = (size_t)world->rank * NL * img;
    struct test_backend bs, b1;
    test_backend_open(&bs, "cpu", "threads = 1\n");
    test_backend_open(&b1, "cpu", "threads = 1\n");
    attach(&bs);
    struct tb_op os = bn_op(NL, C, H, W, 1), o1 = bn_op(N, C, H, W, 0);
    struct opcheck s, one;
    opcheck_init(&s, &bs, &os);
    opcheck_init(&one, &b1, &o1);
    /* The global batch, the same on every rank; each rank's share is its slice. A mean
     * well away from 0 tests the centring. */
    float *x = malloc((size_t)N * img * sizeof *x), *dy = malloc((size_t)N * img * sizeof *dy);
    float gamma[C], beta[C], rm[C] = { 0 }, rv[C] = { 1, 1, 1 };
    ck_assert(x && dy);
    test_random(x, (size_t)N * img, 11, 2.0f, 5.0f);
    test_random(dy, (size_t)N * img, 12, -1.0f, 1.0f);
    test_random(gamma, C, 13, 0.5f, 1.5f);
    test_random(beta, C, 14, -0.5f, 0.5f);
    opcheck_set_input(&s, 0, x + mine);
    opcheck_set_input(&one, 0, x);
    const float *vec[4] = { gamma, beta, rm, rv };
    for (int i = 0; i < 4; i++) {
        opcheck_set_input(&s, (uint32_t)i + 1, vec[i]);
        opcheck_set_input(&one, (uint32_t)i + 1, vec[i]);
    }
    float *ys = malloc(NL * img * sizeof *ys), *y1 = malloc((size_t)N * img * sizeof *y1);
    ck_assert(ys && y1);
    float *dout_s[3] = { dy + mine, NULL, NULL }, *dout_1[3] = { dy, NULL, NULL };
    opcheck_forward(&s, 0);
    opcheck_forward(&one, 0);
    opcheck_get_output(&s, 0, ys);
    opcheck_get_output(&one, 0, y1);
    assert_close("y", ys, y1 + mine, NL * img, 2e-5, 2e-5);
    for (uint32_t j = 1; j < 3; j++) {
        float a[C], b[C];
        opcheck_get_output(&s, j, a);
        opcheck_get_output(&one, j, b);
        assert_close(j == 1 ? "save_mean" : "save_invstd", a, b, C, 0, 1e-6);
    }
    for (uint32_t i = 3; i < 5; i++) { /* running statistics, updated in place */
        float a[C], b[C];
        test_download(&bs, &s.in[i], a);
        test_download(&b1, &one.in[i], b);
        assert_close(i == 3 ? "running_mean" : "running_var", a, b, C, 0, 1e-6);
    }
    /* backward (opcheck_backward runs it on the saved statistics of the forward above) */
    opcheck_backward(&s, dout_s);
    opcheck_backward(&one, dout_1);
    float *dxs = malloc(NL * img * sizeof *dxs), *dx1 = malloc((size_t)N * img * sizeof *dx1);
    ck_assert(dxs && dx1);
    test_download(&bs, &s.din[0], dxs);
    test_download(&b1, &one.din[0], dx1);
    assert_close("dx", dxs, dx1 + mine, NL * img, 2e-5, 1e-4);
    for (uint32_t i = 1; i < 3; i++) {
        float a[C], b[C];
        test_download(&bs, &s.din[i], a);
        test_download(&b1, &one.din[i], b);
        struct tb_err err;
        tb_err_clear(&err);
        ck_assert_msg(tb_comm_allreduce(a, C, TB_COMM_F32, TB_COMM_SUM, &err) == TB_OK, "%s", err.msg);
        assert_close(i == 1 ? "dgamma (summed over ranks)" : "dbeta (summed over ranks)", a, b, C, 1e-5, 1e-5);
    }
    free(x);
    free(dy);
    free(ys);
    free(y1);
    free(dxs);
    free(dx1);
    opcheck_fini(&s);
    opcheck_fini(&one);
    test_backend_close(&bs);
    test_backend_close(&b1);
}
END_TEST

START_TEST(replica_check_names_what_differs)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", "threads = 1\n");
    struct tb_engine e;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_engine_init(&e, b.h->p, b.ctx, 0, 5, &err) == TB_OK, "%s", err.msg);
    struct tb_param *w1, *w2, *buf;
    ck_assert(tb_engine_param(&e, "conv1.weight", true, f32(4, 3, 3, 3), TB_INIT_KAIMING_NORMAL, &w1, &err) == TB_OK);
    ck_assert(tb_engine_param(&e, "conv2.weight", true, f32(2, 4, 3, 3), TB_INIT_KAIMING_NORMAL, &w2, &err) == TB_OK);
    ck_assert(tb_engine_param(&e, "bn.running_mean", false, f32(1, 4, 1, 1), TB_INIT_ZEROS, &buf, &err) == TB_OK);
    /* Same seed, same names: the same weights everywhere. */
    ck_assert_msg(tb_replicas_check(&e, world, true, &err) == TB_OK, "%s", err.msg);

    /* Rank 1 nudges one weight of conv2: every rank is told, by name. */
    float v[2 * 4 * 3 * 3];
    test_download(&b, &w2->value, v);
    if (world->rank == 1)
        v[17] = nextafterf(v[17], 10.0f);
    test_upload(&b, &w2->value, v);
    int rc = tb_replicas_check(&e, world, false, &err);
    ck_assert_int_eq(rc, TB_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "conv2.weight and 0 more of 3 parameters are not the same on all") != NULL, "%s",
                  err.msg);
    if (world->rank == 1)
        v[17] = nextafterf(v[17], -10.0f);
    test_upload(&b, &w2->value, v);
    ck_assert_msg(tb_replicas_check(&e, world, false, &err) == TB_OK, "%s", err.msg);

    /* A buffer that differs counts only when buffers are asked for, and rank 0's wins. */
    float m[4] = { 0, 0, 0, (float)world->rank };
    test_upload(&b, &buf->value, m);
    ck_assert_msg(tb_replicas_check(&e, world, false, &err) == TB_OK, "%s", err.msg);
    ck_assert_int_eq(tb_replicas_check(&e, world, true, &err), TB_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "bn.running_mean (a buffer)") != NULL, "%s", err.msg);
    ck_assert_msg(tb_replicas_broadcast_buffers(&e, world, 0, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_replicas_check(&e, world, true, &err) == TB_OK, "%s", err.msg);
    test_download(&b, &buf->value, m);
    ck_assert(m[3] == 0.0f);
    tb_engine_fini(&e);
    test_backend_close(&b);
}
END_TEST

int main(void)
{
    struct tb_err err;
    tb_err_clear(&err);
    if (tb_comm_init(&err) != TB_OK) {
        fprintf(stderr, "check_dist: %s\n", err.msg);
        return 1;
    }
    world = tb_comm_world();
    if (world->size < 2) {
        printf("check_dist: skipped: one rank (run it with mpirun -np 2)\n");
        tb_comm_fini();
        return 77;
    }
    Suite *s = suite_create("dist");
    TCase *tc = tcase_create("ranks");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gradients_are_averaged_in_buckets);
    tcase_add_test(tc, sync_batchnorm_matches_one_process);
    tcase_add_test(tc, replica_check_names_what_differs);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    /* A rank that failed ends the job: the others may be waiting in a collective. */
    if (failed)
        tb_comm_abort(1);
    tb_comm_fini();
    return failed ? 1 : 0;
}
