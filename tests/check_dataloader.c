/* check_dataloader: the data loader's contract. Batches are the same whatever the number
 * of workers and the prefetch depth; an epoch covers the split once; ranks get disjoint
 * shares that cover it; a bad sample stops the run (fail) or is replaced and reported
 * (skip), the same way every time; a resumed range gives the batches of an unbroken one;
 * validation keeps its short last batch and refuses, by name, a size it cannot take.
 *
 * The split is an in-test dataset: sample i is an image whose every label is i (so a
 * batch slot says which sample it holds), of a size that may vary with i. */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/ini.h"
#include "core/data/dataloader.h"
#include "core/config/setup_internal.h"

struct fake {
    size_t n;
    uint32_t w, h;
    bool vary;       /* sample i is (w + i % 3) x h */
    const bool *bad; /* [n]: load fails */
    char names[256][32];
    pthread_mutex_t mu;
    size_t loads;
};

static int fake_load(void *ctx, size_t i, struct tb_sample *out, struct tb_err *err)
{
    struct fake *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->loads++;
    pthread_mutex_unlock(&f->mu);
    if (f->bad && f->bad[i])
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: corrupt (test)", f->names[i]);
    uint32_t w = f->w + (f->vary ? (uint32_t)(i % 3) : 0);
    int rc = tb_sample_reserve(out, w, f->h, err);
    if (rc)
        return rc;
    for (uint32_t y = 0; y < f->h; y++)
        for (uint32_t x = 0; x < w; x++) {
            uint8_t *p = out->image + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(i * 37 + x * 5);
            p[1] = (uint8_t)(i * 11 + y * 7);
            p[2] = (uint8_t)((x ^ y) * 13);
            out->label[(size_t)y * w + x] = (uint8_t)i;
        }
    return TB_OK;
}

static size_t fake_count(void *ctx)
{
    return ((struct fake *)ctx)->n;
}

static const char *fake_name(void *ctx, size_t i)
{
    return ((struct fake *)ctx)->names[i];
}

static const struct tb_dataset_ops fake_ops = {
    .load = fake_load,
    .count = fake_count,
    .sample_name = fake_name,
};

static void fake_init(struct fake *f, size_t n, uint32_t w, uint32_t h)
{
    memset(f, 0, sizeof *f);
    f->n = n;
    f->w = w;
    f->h = h;
    for (size_t i = 0; i < n; i++)
        snprintf(f->names[i], sizeof f->names[i], "city/%03zu.png", i);
    pthread_mutex_init(&f->mu, NULL);
}

static struct tb_data_settings settings(int workers, int prefetch, bool augment)
{
    struct tb_data_settings s = { 0 };
    s.workers = workers;
    s.prefetch = prefetch;
    s.augment = augment;
    s.aug = (struct tb_augment){ 0, 0, 0.5f, 2.0f, true, 0.25f, 0.5f, 0.15f, 1.3f };
    if (!augment)
        s.aug = (struct tb_augment){ 0, 0, 1.0f, 1.0f, false, 0.0f, 0.0f, 0.15f, 1.3f };
    return s;
}

/* The gscnn model's inputs, made by its prepare() in the loader's threads: opened once,
 * closed by main. */
static struct tb_instance g_model;
static struct tb_batch_spec g_spec;

static const struct tb_batch_spec *gscnn_inputs(void)
{
    static const struct tb_model_feed feeds[] = { { "canny", TB_F32, 1, NULL }, { "edges", TB_U8, 1, NULL } };
    if (!g_model.h) {
        struct tb_err err;
        ck_assert_msg(tb_instance_open(TB_KIND_MODEL, "gscnn", NULL, "", &g_model, &err) == TB_OK, "%s", err.msg);
        g_spec =
            (struct tb_batch_spec){ 2, feeds, g_model.ops.model->prepare, g_model.ops.model->free_work, g_model.ctx };
    }
    return &g_spec;
}

static struct tb_data_loader *open_loader(struct fake *f, const struct tb_data_settings *s, bool train, int batch,
                                          int rank, int world, uint32_t w, uint32_t h)
{
    const struct tb_data_loader_config c = {
        .ops = &fake_ops,
        .ctx = f,
        .what = "fake split",
        .train = train,
        .batch = batch,
        .rank = rank,
        .world = world,
        .seed = 7,
        .width = w,
        .height = h,
        .set = s,
        .spec = gscnn_inputs(),
    };
    struct tb_data_loader *l;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_data_loader_open(&c, &l, &err) == TB_OK, "%s", err.msg);
    return l;
}

/* The sample a slot holds: its most common label other than 255 (-1: none). */
static int slot_sample(const struct tb_batch *b, int j)
{
    const size_t plane = (size_t)b->w * (size_t)b->h;
    size_t count[256] = { 0 };
    for (size_t p = 0; p < plane; p++)
        count[b->labels[(size_t)j * plane + p]]++;
    int best = -1;
    for (int v = 0; v < 255; v++)
        if (count[v] && (best < 0 || count[v] > count[best]))
            best = v;
    return best;
}

/* Everything the loader produced for batches begin..end-1, concatenated. */
struct dump {
    unsigned char *bytes;
    size_t n;
};

static void dump_range(struct tb_data_loader *l, uint64_t begin, uint64_t end, struct dump *d)
{
    tb_data_loader_start(l, begin, end);
    d->bytes = NULL;
    d->n = 0;
    for (uint64_t k = begin; k < end; k++) {
        struct tb_loaded lb;
        struct tb_err err;
        tb_err_clear(&err);
        ck_assert_msg(tb_data_loader_next(l, &lb, &err) == TB_OK, "batch %llu: %s", (unsigned long long)k, err.msg);
        ck_assert_uint_eq(lb.k, k);
        const struct tb_batch *b = lb.b;
        const size_t pix = (size_t)b->n * (size_t)b->w * (size_t)b->h;
        const size_t add = pix * (3 * sizeof(float) + sizeof(float) + 2);
        d->bytes = realloc(d->bytes, d->n + add);
        ck_assert_ptr_nonnull(d->bytes);
        unsigned char *p = d->bytes + d->n;
        memcpy(p, b->image, pix * 3 * sizeof(float));
        const void *canny = tb_batch_feed(b, "canny"), *edges = tb_batch_feed(b, "edges");
        ck_assert(canny && edges);
        memcpy(p + pix * 3 * sizeof(float), canny, pix * sizeof(float));
        memcpy(p + pix * 4 * sizeof(float), b->labels, pix);
        memcpy(p + pix * 4 * sizeof(float) + pix, edges, pix);
        d->n += add;
    }
}

/* ------------------------------------------------------------------ tests */

/* Augmented training batches are byte for byte the same with 0, 1 or 3 workers and any
 * prefetch depth, over two epochs. */
START_TEST(same_batches_whatever_the_workers)
{
    struct fake f;
    fake_init(&f, 12, 40, 30);
    f.vary = true;
    struct dump ref = { 0 };
    const int workers[] = { 0, 1, 3, 3 }, prefetch[] = { 1, 1, 1, 4 };
    for (int c = 0; c < 4; c++) {
        struct tb_data_settings s = settings(workers[c], prefetch[c], true);
        struct tb_data_loader *l = open_loader(&f, &s, true, 4, 0, 1, 32, 24);
        ck_assert_uint_eq(tb_data_loader_batches(l), 3);
        struct dump d;
        dump_range(l, 0, 6, &d);
        tb_data_loader_close(l);
        if (c == 0) {
            ref = d;
            continue;
        }
        ck_assert_uint_eq(d.n, ref.n);
        ck_assert_msg(memcmp(d.bytes, ref.bytes, d.n) == 0, "batches differ with %d workers, prefetch %d", workers[c],
                      prefetch[c]);
        free(d.bytes);
    }
    /* Another seed gives other batches: the comparison above could fail. */
    struct tb_data_settings s = settings(2, 2, true);
    const struct tb_data_loader_config c = {
        .ops = &fake_ops,
        .ctx = &f,
        .what = "fake",
        .train = true,
        .batch = 4,
        .rank = 0,
        .world = 1,
        .seed = 8,
        .width = 32,
        .height = 24,
        .spec = gscnn_inputs(),
        .set = &s,
    };
    struct tb_data_loader *l;
    struct tb_err err;
    ck_assert_int_eq(tb_data_loader_open(&c, &l, &err), TB_OK);
    struct dump d;
    dump_range(l, 0, 6, &d);
    tb_data_loader_close(l);
    ck_assert_uint_eq(d.n, ref.n);
    ck_assert(memcmp(d.bytes, ref.bytes, d.n) != 0);
    free(d.bytes);
    free(ref.bytes);
}
END_TEST

/* Each training epoch holds every sample once (the last partial batch dropped), in an
 * order that changes from epoch to epoch; without augmentation a sample of the crop's
 * size arrives unchanged. */
START_TEST(epochs_cover_the_split)
{
    struct fake f;
    fake_init(&f, 14, 16, 16);
    struct tb_data_settings s = settings(2, 2, false);
    struct tb_data_loader *l = open_loader(&f, &s, true, 4, 0, 1, 16, 16);
    ck_assert_uint_eq(tb_data_loader_batches(l), 3); /* 14 / 4: 2 samples left out */
    tb_data_loader_start(l, 0, 6);
    int order[2][12];
    for (int e = 0; e < 2; e++) {
        int seen[14] = { 0 };
        for (int k = 0; k < 3; k++) {
            struct tb_loaded lb;
            struct tb_err err;
            ck_assert_int_eq(tb_data_loader_next(l, &lb, &err), TB_OK);
            ck_assert_int_eq(lb.count, 4);
            ck_assert_int_eq(lb.nskipped, 0);
            for (int j = 0; j < 4; j++) {
                int i = slot_sample(lb.b, j);
                ck_assert_int_ge(i, 0);
                ck_assert_int_lt(i, 14);
                seen[i]++;
                order[e][k * 4 + j] = i;
                /* Unchanged: pixel (3, 2) of sample i normalised. */
                const size_t plane = 16 * 16;
                float want = ((float)(uint8_t)(i * 37 + 3 * 5) / 255.0f - tb_image_mean[0]) / tb_image_std[0];
                float got = lb.b->image[(size_t)j * 3 * plane + 2 * 16 + 3];
                ck_assert_msg(got > want - 1e-5f && got < want + 1e-5f, "sample %d: %g, want %g", i, got, want);
            }
        }
        int total = 0;
        for (int i = 0; i < 14; i++) {
            ck_assert_int_le(seen[i], 1);
            total += seen[i];
        }
        ck_assert_int_eq(total, 12);
    }
    ck_assert(memcmp(order[0], order[1], sizeof order[0]) != 0);
    tb_data_loader_close(l);
}
END_TEST

/* Two ranks take disjoint halves of every global batch; together they cover the epoch.
 * Validation shards the same way, keeping the short last batch. */
START_TEST(ranks_take_disjoint_shares)
{
    struct fake f;
    fake_init(&f, 16, 8, 8);
    struct tb_data_settings s = settings(1, 2, false);
    int owner[16];
    for (int e = 0; e < 2; e++) {
        for (int i = 0; i < 16; i++)
            owner[i] = -1;
        for (int r = 0; r < 2; r++) {
            struct tb_data_loader *l = open_loader(&f, &s, true, 2, r, 2, 8, 8);
            ck_assert_uint_eq(tb_data_loader_batches(l), 4); /* 16 / (2 x 2) */
            tb_data_loader_start(l, (uint64_t)e * 4, (uint64_t)e * 4 + 4);
            for (int k = 0; k < 4; k++) {
                struct tb_loaded lb;
                struct tb_err err;
                ck_assert_int_eq(tb_data_loader_next(l, &lb, &err), TB_OK);
                for (int j = 0; j < 2; j++) {
                    int i = slot_sample(lb.b, j);
                    ck_assert_msg(owner[i] == -1, "epoch %d: sample %d given to rank %d and rank %d", e, i, owner[i],
                                  r);
                    owner[i] = r;
                }
            }
            tb_data_loader_close(l);
        }
        for (int i = 0; i < 16; i++)
            ck_assert_int_ne(owner[i], -1);
    }

    /* Validation: 10 samples, batch 3, 2 ranks: rank 0 gets 0-2 and 6-8, rank 1 3-5 and
     * 9 (one that counts; the rest of its last batch ignored). */
    fake_init(&f, 10, 8, 8);
    const int want[2][2][3] = { { { 0, 1, 2 }, { 6, 7, 8 } }, { { 3, 4, 5 }, { 9, -1, -1 } } };
    for (int r = 0; r < 2; r++) {
        struct tb_data_loader *l = open_loader(&f, &s, false, 3, r, 2, 8, 8);
        ck_assert_uint_eq(tb_data_loader_batches(l), 2);
        tb_data_loader_start(l, 0, 2);
        for (int k = 0; k < 2; k++) {
            struct tb_loaded lb;
            struct tb_err err;
            ck_assert_int_eq(tb_data_loader_next(l, &lb, &err), TB_OK);
            ck_assert_int_eq(lb.count, r == 1 && k == 1 ? 1 : 3);
            for (int j = 0; j < 3; j++)
                ck_assert_int_eq(slot_sample(lb.b, j), want[r][k][j]);
        }
        tb_data_loader_close(l);
    }
}
END_TEST

/* Data parallelism's premise: the ranks' batches of a step, in rank order, are the one
 * batch a single process with the global batch gets at that step: the same samples in
 * the same places, augmented the same way (the images are compared byte for byte). */
START_TEST(rank_shares_make_the_global_batch)
{
    struct fake f;
    fake_init(&f, 24, 8, 8);
    struct tb_data_settings s = settings(1, 2, true);
    const int per_rank[] = { 3, 2 }, worlds[] = { 2, 4 };
    for (int t = 0; t < 2; t++) {
        const int W = worlds[t], B = per_rank[t], G = W * B;
        const uint64_t steps = 24 / (uint64_t)G;
        struct tb_data_loader *one = open_loader(&f, &s, true, G, 0, 1, 8, 8);
        struct tb_data_loader *rank[4];
        for (int r = 0; r < W; r++) {
            rank[r] = open_loader(&f, &s, true, B, r, W, 8, 8);
            ck_assert_uint_eq(tb_data_loader_batches(rank[r]), steps);
            tb_data_loader_start(rank[r], 0, 2 * steps);
        }
        tb_data_loader_start(one, 0, 2 * steps);
        const size_t plane = 8 * 8;
        for (uint64_t k = 0; k < 2 * steps; k++) {
            struct tb_loaded g;
            struct tb_err err;
            ck_assert_int_eq(tb_data_loader_next(one, &g, &err), TB_OK);
            for (int r = 0; r < W; r++) {
                struct tb_loaded lb;
                ck_assert_int_eq(tb_data_loader_next(rank[r], &lb, &err), TB_OK);
                for (int j = 0; j < B; j++) {
                    const int gj = r * B + j;
                    ck_assert_msg(lb.index[j] == g.index[gj],
                                  "world %d, step %" PRIu64 ": rank %d place %d holds %zu, the global batch %zu", W, k,
                                  r, j, lb.index[j], g.index[gj]);
                    ck_assert(memcmp(lb.b->image + (size_t)j * 3 * plane, g.b->image + (size_t)gj * 3 * plane,
                                     3 * plane * sizeof(float)) == 0);
                    ck_assert(memcmp(lb.b->labels + (size_t)j * plane, g.b->labels + (size_t)gj * plane, plane) == 0);
                }
            }
        }
        for (int r = 0; r < W; r++)
            tb_data_loader_close(rank[r]);
        tb_data_loader_close(one);
    }
}
END_TEST

/* Batches k.. of a range started at k are those of a range started at 0: a resumed run
 * sees what an unbroken one would have. */
START_TEST(a_resumed_range_matches)
{
    struct fake f;
    fake_init(&f, 9, 20, 20);
    struct tb_data_settings s = settings(2, 2, true);
    struct tb_data_loader *l = open_loader(&f, &s, true, 3, 0, 1, 16, 16);
    struct dump all, tail;
    dump_range(l, 0, 7, &all);
    dump_range(l, 4, 7, &tail);
    ck_assert_uint_eq(tail.n * 7, all.n * 3);
    ck_assert(memcmp(all.bytes + all.n / 7 * 4, tail.bytes, tail.n) == 0);
    /* Restarting while batches are being prepared is fine too. */
    tb_data_loader_start(l, 0, 7);
    struct tb_loaded lb;
    struct tb_err err;
    ck_assert_int_eq(tb_data_loader_next(l, &lb, &err), TB_OK);
    tb_data_loader_close(l);
    free(all.bytes);
    free(tail.bytes);
}
END_TEST

/* on_bad_sample = fail: the batch holding the bad sample returns its error, naming it;
 * the batches before it arrive. */
START_TEST(a_bad_sample_fails_by_name)
{
    struct fake f;
    fake_init(&f, 8, 8, 8);
    bool bad[8] = { false };
    bad[5] = true;
    f.bad = bad;
    struct tb_data_settings s = settings(2, 3, false);
    struct tb_data_loader *l = open_loader(&f, &s, false, 2, 0, 1, 8, 8);
    tb_data_loader_start(l, 0, 4);
    struct tb_loaded lb;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_data_loader_next(l, &lb, &err), TB_OK);
    ck_assert_int_eq(tb_data_loader_next(l, &lb, &err), TB_OK);
    ck_assert_int_eq(tb_data_loader_next(l, &lb, &err), TB_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "fake split") && strstr(err.msg, "city/005.png: corrupt"), "%s", err.msg);
    tb_data_loader_close(l);
}
END_TEST

/* on_bad_sample = skip: training replaces a bad sample by the next index and reports it,
 * identically with any number of workers; validation leaves its slot ignored. Skipping
 * gives up, naming the last, when too many fail in a row. */
START_TEST(bad_samples_are_skipped_and_reported)
{
    struct fake f;
    fake_init(&f, 8, 8, 8);
    bool bad[8] = { false };
    bad[2] = bad[3] = true;
    f.bad = bad;
    struct dump ref = { 0 };
    for (int workers = 0; workers <= 2; workers += 2) {
        struct tb_data_settings s = settings(workers, 2, false);
        s.skip_bad = true;
        struct tb_data_loader *l = open_loader(&f, &s, true, 4, 0, 1, 8, 8);
        tb_data_loader_start(l, 0, 2);
        int skipped = 0, seen[8] = { 0 };
        struct dump d = { 0 };
        for (int k = 0; k < 2; k++) {
            struct tb_loaded lb;
            struct tb_err err;
            ck_assert_int_eq(tb_data_loader_next(l, &lb, &err), TB_OK);
            ck_assert_int_eq(lb.count, 4);
            for (int m = 0; m < lb.nskipped; m++)
                ck_assert_msg(strstr(lb.skipped[m], "city/002.png") || strstr(lb.skipped[m], "city/003.png"), "%s",
                              lb.skipped[m]);
            skipped += lb.nskipped;
            for (int j = 0; j < 4; j++) {
                int i = slot_sample(lb.b, j);
                ck_assert(i != 2 && i != 3);
                seen[i]++;
            }
            d.bytes = realloc(d.bytes, d.n + 4 * 64);
            memcpy(d.bytes + d.n, lb.b->labels, 4 * 64);
            d.n += 4 * 64;
        }
        /* Sample 2 is replaced by 3, which is bad too, then by 4; sample 3 by 4: three
         * skips in all, and sample 4 three times (itself and both replacements). */
        ck_assert_int_eq(skipped, 3);
        ck_assert_int_eq(seen[4], 3);
        tb_data_loader_close(l);
        if (!ref.bytes) {
            ref = d;
        } else {
            ck_assert(d.n == ref.n && memcmp(d.bytes, ref.bytes, d.n) == 0);
            free(d.bytes);
        }
    }
    free(ref.bytes);

    struct tb_data_settings s = settings(1, 2, false);
    s.skip_bad = true;
    struct tb_data_loader *l = open_loader(&f, &s, false, 4, 0, 1, 8, 8);
    tb_data_loader_start(l, 0, 2);
    struct tb_loaded lb;
    struct tb_err err;
    ck_assert_int_eq(tb_data_loader_next(l, &lb, &err), TB_OK);
    ck_assert_int_eq(lb.nskipped, 2);
    ck_assert_int_eq(slot_sample(lb.b, 1), 1);
    ck_assert_int_eq(slot_sample(lb.b, 2), -1); /* all ignore */
    ck_assert_int_eq(slot_sample(lb.b, 3), -1);
    tb_data_loader_close(l);

    bool all_bad[8];
    for (int i = 0; i < 8; i++)
        all_bad[i] = true;
    f.bad = all_bad;
    l = open_loader(&f, &s, true, 2, 0, 1, 8, 8);
    tb_data_loader_start(l, 0, 1);
    tb_err_clear(&err);
    ck_assert_int_eq(tb_data_loader_next(l, &lb, &err), TB_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "8 samples in a row could not be read"), "%s", err.msg);
    /* The last failure quoted in full (it was formatted into the message it replaced: empty). */
    ck_assert_msg(strstr(err.msg, "(the last: city/") && strstr(err.msg, ".png: corrupt (test))"), "%s", err.msg);
    tb_data_loader_close(l);
}
END_TEST

/* Validation takes the images as decoded only when they are all of one size: another
 * size is a configuration error naming the sample and val_size; with val_size set they
 * are resized. */
START_TEST(validation_sizes)
{
    struct fake f;
    fake_init(&f, 4, 10, 8);
    f.vary = true;
    struct tb_data_settings s = settings(1, 1, false);
    s.skip_bad = true; /* a wrong size is not a bad file: never skipped */
    struct tb_data_loader *l = open_loader(&f, &s, false, 2, 0, 1, 10, 8);
    tb_data_loader_start(l, 0, 2);
    struct tb_loaded lb;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_data_loader_next(l, &lb, &err), TB_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "city/001.png is 11x8") && strstr(err.msg, "val_size"), "%s", err.msg);
    tb_data_loader_close(l);

    s.val_w = 12;
    s.val_h = 6;
    l = open_loader(&f, &s, false, 2, 0, 1, 12, 6);
    tb_data_loader_start(l, 0, 2);
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(tb_data_loader_next(l, &lb, &err), TB_OK);
        ck_assert_int_eq(lb.b->w, 12);
        for (int j = 0; j < 2; j++)
            ck_assert_int_eq(slot_sample(lb.b, j), 2 * k + j);
        for (int p = 0; p < 2 * 12 * 6; p++)
            ck_assert_int_ne(lb.b->labels[p], 255);
    }
    tb_data_loader_close(l);
}
END_TEST

static size_t pinned_live, pinned_calls;

static void *pinned_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    pinned_live++;
    pinned_calls++;
    return malloc(bytes);
}

static void pinned_free(void *ctx, void *p)
{
    (void)ctx;
    pinned_live--;
    free(p);
}

/* Batches live in the backend's pinned memory when it has some. */
START_TEST(batches_in_pinned_memory)
{
    struct fake f;
    fake_init(&f, 4, 8, 8);
    struct tb_data_settings s = settings(1, 3, false);
    const struct tb_host_allocator host = { pinned_alloc, pinned_free, NULL };
    const struct tb_data_loader_config c = {
        .ops = &fake_ops,
        .ctx = &f,
        .what = "fake",
        .train = true,
        .batch = 2,
        .rank = 0,
        .world = 1,
        .seed = 1,
        .width = 8,
        .height = 8,
        .set = &s,
        .host = &host,
        .spec = gscnn_inputs(),
    };
    struct tb_data_loader *l;
    struct tb_err err;
    ck_assert_int_eq(tb_data_loader_open(&c, &l, &err), TB_OK);
    ck_assert_uint_eq(pinned_calls, 4 * 4); /* prefetch + 1 batches of 4 buffers: image, labels, canny, edges */
    tb_data_loader_start(l, 0, 2);
    struct tb_loaded lb;
    ck_assert_int_eq(tb_data_loader_next(l, &lb, &err), TB_OK);
    tb_data_loader_close(l);
    ck_assert_uint_eq(pinned_live, 0);
}
END_TEST

/* The loader's [dataset] keys: defaults, and the values a key table cannot refuse. */
START_TEST(settings_from_the_section)
{
    const char *cases[][2] = {
        { "", NULL },
        { "dataset.val_size=1024x512", NULL },
        { "dataset.val_size=1024", "val_size = '1024': expected WIDTHxHEIGHT" },
        { "dataset.val_size=0x5", "val_size = '0x5'" },
        { "dataset.scale_min=3", "scale_min = 3 is more than scale_max = 2" },
        { "dataset.blur_sigma_max=0.1", "blur_sigma_min = 0.15 is more than blur_sigma_max = 0.1" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct tb_err err;
        tb_err_clear(&err);
        struct tb_config *cfg = tb_config_new("t.ini");
        ck_assert_ptr_nonnull(cfg);
        if (cases[i][0][0])
            ck_assert_int_eq(tb_config_set(cfg, cases[i][0], &err), TB_OK);
        struct tb_section *sec;
        ck_assert_msg(tb_section_build(cfg, "dataset", tb_data_keys, "trainbig", NULL, &sec, &err) == TB_OK, "%s",
                      err.msg);
        struct tb_data_settings s;
        int rc = tb_data_settings_read(sec, &s, &err);
        if (!cases[i][1]) {
            ck_assert_msg(rc == TB_OK, "%s: %s", cases[i][0], err.msg);
            ck_assert_int_eq(s.workers, 2);
            ck_assert(s.aug.scale_min == 0.5f && s.aug.scale_max == 2.0f && s.aug.flip);
            ck_assert(!s.skip_bad && s.crop == 0);
            if (i == 1)
                ck_assert(s.val_w == 1024 && s.val_h == 512);
        } else {
            ck_assert_int_eq(rc, TB_ERR_CONFIG);
            ck_assert_msg(strstr(err.msg, cases[i][1]), "%s: %s", cases[i][0], err.msg);
            ck_assert_msg(strstr(err.msg, "--set"), "%s: where it was set: %s", cases[i][0], err.msg);
        }
        tb_section_free(sec);
        tb_config_free(cfg);
    }
}
END_TEST

static Suite *dataloader_suite(void)
{
    Suite *s = suite_create("dataloader");
    TCase *tc = tcase_create("loader");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, same_batches_whatever_the_workers);
    tcase_add_test(tc, epochs_cover_the_split);
    tcase_add_test(tc, ranks_take_disjoint_shares);
    tcase_add_test(tc, rank_shares_make_the_global_batch);
    tcase_add_test(tc, a_resumed_range_matches);
    tcase_add_test(tc, a_bad_sample_fails_by_name);
    tcase_add_test(tc, bad_samples_are_skipped_and_reported);
    tcase_add_test(tc, validation_sizes);
    tcase_add_test(tc, batches_in_pinned_memory);
    tcase_add_test(tc, settings_from_the_section);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(dataloader_suite());
    /* Threads and fork do not mix: run the tests in this process. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tb_instance_close(&g_model);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
