/* dataloader.c: worker threads that turn samples into batches ahead of the training loop.
 *
 * The ring holds prefetch + 1 batches: the one the training loop is using and prefetch
 * being filled. Workers claim samples one at a time, in batch order, under one mutex: a
 * claim is (batch k, slot j) and the dataset index it maps to. Everything after the claim
 * (decode, augment, normalise, Canny, edge targets) runs without the lock and writes only
 * slot j of batch k's buffers, so nothing about the result depends on which worker did it
 * or when. The training loop waits only when the next batch is not complete. */
#include "config.h"

#include "core/data/dataloader.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/random.h>

/* Bad samples in a row before skipping gives up: past this the dataset, not a file, is
 * likely what is wrong. */
enum { MAX_SKIP_RUN = 64 };

uint64_t tb_data_sample_seed(uint64_t seed, uint64_t epoch, size_t index)
{
    uint64_t s = seed * 0x9E6C63D0676A9A99ull ^ (epoch + 1) * 0xD6E8FEB86659FD93ull;
    s = tb_splitmix64(&s) ^ ((uint64_t)index + 1) * 0xA3B195354A39B70Dull;
    return tb_splitmix64(&s);
}

void tb_data_shuffle(size_t *order, size_t n, uint64_t seed, uint64_t epoch)
{
    uint64_t state = seed * 0xD1B54A32D192ED03ull ^ (epoch + 1) * 0x8CB92BA72F3D8DD7ull;
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(tb_splitmix64(&state) % i);
        size_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}

/* ------------------------------------------------------------------ the loader */

struct slot {
    struct tb_batch b;
    uint64_t k;  /* the batch it holds, UINT64_MAX: none */
    int pending; /* samples of batch k not finished */
    int count;
    bool failed;
    int fail_j;
    struct tb_err err;
    char **skipped;
    int nskipped, skipped_cap;
    size_t *index; /* [batch]: the sample in each place, SIZE_MAX for none */
};

struct worker {
    struct tb_data_loader *l;
    pthread_t thread;
    struct tb_sample raw, out;
    struct tb_augment_work aw;
    struct tb_batch_work bw;
    struct tb_err err;
    char *skips[MAX_SKIP_RUN]; /* this sample's skipped files, handed to the slot */
    int nskips;
};

struct tb_data_loader {
    struct tb_data_loader_config cfg;
    struct tb_data_settings set;
    struct tb_augment aug; /* with the crop size */
    char *what;
    size_t n;           /* samples in the split */
    uint64_t per_epoch; /* batches per epoch */

    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* workers wait for claimable samples */
    pthread_cond_t done_cv; /* next() waits for a batch, start() for idle workers */
    struct slot *slots;
    int nslots;
    uint64_t end;     /* batches of the current range */
    uint64_t claim_k; /* the next sample to claim: (claim_k, claim_j) */
    int claim_j;
    uint64_t next_k;   /* the batch next() returns next */
    uint64_t released; /* batches below this have left the training loop */
    int inflight;      /* claimed samples not finished */
    bool quit;
    size_t *order; /* training: the order of order_epoch */
    uint64_t order_epoch;
    bool order_valid;

    struct worker *workers;
    int nworkers, started;
    struct worker inline_worker; /* workers = 0: next() does the work */
};

uint64_t tb_data_loader_batches(const struct tb_data_loader *l)
{
    return l->per_epoch;
}

/* Claims the next sample, under the lock. False when none can be claimed now. */
static bool claim(struct tb_data_loader *l, uint64_t *k, int *j, size_t *index, bool *present)
{
    if (l->claim_k >= l->end || l->claim_k >= l->released + (uint64_t)l->nslots)
        return false;
    *k = l->claim_k;
    *j = l->claim_j;
    const int B = l->cfg.batch;
    const uint64_t W = (uint64_t)l->cfg.world, R = (uint64_t)l->cfg.rank;
    struct slot *s = &l->slots[*k % (uint64_t)l->nslots];
    if (*j == 0) {
        s->k = *k;
        s->pending = B;
        s->failed = false;
        tb_err_clear(&s->err);
        for (int i = 0; i < s->nskipped; i++)
            free(s->skipped[i]);
        s->nskipped = 0;
        if (l->cfg.train) {
            s->count = B;
        } else {
            uint64_t first = (*k * W + R) * (uint64_t)B;
            s->count = first >= l->n ? 0 : (int)(l->n - first < (uint64_t)B ? l->n - first : (uint64_t)B);
        }
    }
    if (l->cfg.train) {
        const uint64_t epoch = *k / l->per_epoch, step = *k % l->per_epoch;
        if (!l->order_valid || l->order_epoch != epoch) {
            tb_data_shuffle(l->order, l->n, l->cfg.seed, epoch);
            l->order_epoch = epoch;
            l->order_valid = true;
        }
        *index = l->order[(step * W + R) * (uint64_t)B + (uint64_t)*j];
        *present = true;
    } else {
        uint64_t pos = (*k * W + R) * (uint64_t)B + (uint64_t)*j;
        *present = pos < l->n;
        *index = *present ? (size_t)pos : 0;
    }
    if (++l->claim_j == B) {
        l->claim_j = 0;
        l->claim_k++;
    }
    l->inflight++;
    return true;
}

/* Decodes sample `index` and makes it the batch's size in w->out. */
static int make_sample(struct worker *w, uint64_t k, size_t index, const struct tb_sample **ready, struct tb_err *err)
{
    struct tb_data_loader *l = w->l;
    int rc = l->cfg.ops->load(l->cfg.ctx, index, &w->raw, err);
    if (rc)
        return rc;
    const char *name = l->cfg.ops->sample_name(l->cfg.ctx, index);
    if (l->cfg.train) {
        struct tb_augment_draw d;
        tb_augment_draw(&l->aug, tb_data_sample_seed(l->cfg.seed, k / l->per_epoch, index), w->raw.width, w->raw.height,
                        &d);
        rc = tb_augment_apply(&l->aug, &d, &w->raw, &w->out, &w->aw, err);
        *ready = &w->out;
    } else if (l->set.val_w) {
        rc = tb_augment_resize(&w->raw, l->set.val_w, l->set.val_h, &w->out, err);
        *ready = &w->out;
    } else {
        if (w->raw.width != l->cfg.width || w->raw.height != l->cfg.height)
            return tb_err_set(err, TB_ERR_CONFIG,
                              "sample %s is %ux%u, but validation takes the images as decoded, at the first one's "
                              "size %ux%u: set [dataset] val_size (e.g. val_size = %ux%u) to resize them all",
                              name, w->raw.width, w->raw.height, l->cfg.width, l->cfg.height, l->cfg.width,
                              l->cfg.height);
        *ready = &w->raw;
    }
    if (rc)
        return tb_err_prefix(err, "sample %s", name);
    return TB_OK;
}

/* Fills slot j of the batch in s. With on_bad_sample = skip, a sample that cannot be read
 * is replaced by the next index (training) or left ignored (validation), and noted. */
static int produce(struct worker *w, struct slot *s, uint64_t k, int j, size_t index, bool present)
{
    struct tb_data_loader *l = w->l;
    struct tb_err *err = &w->err;
    tb_err_clear(err);
    w->nskips = 0;
    s->index[j] = SIZE_MAX;
    if (!present)
        return tb_batch_put_ignored(&s->b, j, &w->bw, err);
    for (int attempt = 0;; attempt++) {
        const struct tb_sample *ready = NULL;
        tb_err_clear(err);
        int rc = make_sample(w, k, index, &ready, err);
        if (rc == TB_OK) {
            s->index[j] = index;
            return tb_batch_put(&s->b, j, ready, l->cfg.ops->sample_name(l->cfg.ctx, index), &w->bw, err);
        }
        if (rc != TB_ERR_RUNTIME || !l->set.skip_bad)
            return rc;
        if (w->nskips < MAX_SKIP_RUN) {
            char *m = NULL;
            if (asprintf(&m, "%s", err->msg) >= 0)
                w->skips[w->nskips++] = m;
        }
        if (!l->cfg.train)
            return tb_batch_put_ignored(&s->b, j, &w->bw, err);
        if (attempt + 1 >= MAX_SKIP_RUN || (size_t)attempt + 1 >= l->n)
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "%d samples in a row could not be read (the last: %s); is [dataset] right?", attempt + 1,
                              err->msg);
        index = (index + 1) % l->n;
    }
}

/* Records the outcome of (k, j) in its slot, under the lock. */
static void finish(struct tb_data_loader *l, struct worker *w, struct slot *s, int j, int rc)
{
    if (rc && (!s->failed || j < s->fail_j)) {
        s->failed = true;
        s->fail_j = j;
        s->err = w->err;
    }
    for (int i = 0; i < w->nskips; i++) {
        if (s->nskipped == s->skipped_cap) {
            int cap = s->skipped_cap ? 2 * s->skipped_cap : 8;
            char **p = realloc(s->skipped, (size_t)cap * sizeof *p);
            if (!p) {
                free(w->skips[i]);
                continue;
            }
            s->skipped = p;
            s->skipped_cap = cap;
        }
        s->skipped[s->nskipped++] = w->skips[i];
    }
    w->nskips = 0;
    s->pending--;
    l->inflight--;
    pthread_cond_broadcast(&l->done_cv);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct tb_data_loader *l = w->l;
    pthread_mutex_lock(&l->mu);
    while (!l->quit) {
        uint64_t k;
        int j;
        size_t index;
        bool present;
        if (!claim(l, &k, &j, &index, &present)) {
            pthread_cond_wait(&l->work_cv, &l->mu);
            continue;
        }
        struct slot *s = &l->slots[k % (uint64_t)l->nslots];
        pthread_mutex_unlock(&l->mu);
        int rc = produce(w, s, k, j, index, present);
        pthread_mutex_lock(&l->mu);
        finish(l, w, s, j, rc);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void worker_free(struct worker *w)
{
    tb_sample_release(&w->raw);
    tb_sample_release(&w->out);
    tb_augment_work_free(&w->aw);
    tb_batch_work_free(&w->bw);
    for (int i = 0; i < w->nskips; i++)
        free(w->skips[i]);
    w->nskips = 0;
}

void tb_data_loader_close(struct tb_data_loader *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->quit = true;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->started; i++)
        pthread_join(l->workers[i].thread, NULL);
    for (int i = 0; i < l->nworkers; i++)
        worker_free(&l->workers[i]);
    worker_free(&l->inline_worker);
    for (int i = 0; l->slots && i < l->nslots; i++) {
        tb_batch_fini(&l->slots[i].b);
        for (int m = 0; m < l->slots[i].nskipped; m++)
            free(l->slots[i].skipped[m]);
        free(l->slots[i].skipped);
        free(l->slots[i].index);
    }
    free(l->slots);
    free(l->workers);
    free(l->order);
    free(l->what);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->done_cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int tb_data_loader_open(const struct tb_data_loader_config *cfg, struct tb_data_loader **out, struct tb_err *err)
{
    *out = NULL;
    struct tb_data_loader *l = calloc(1, sizeof *l);
    if (!l)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    l->cfg = *cfg;
    l->set = *cfg->set;
    l->cfg.set = &l->set;
    l->cfg.host = NULL;
    l->what = strdup(cfg->what ? cfg->what : "dataset");
    l->n = cfg->ops->count(cfg->ctx);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work_cv, NULL);
    pthread_cond_init(&l->done_cv, NULL);
    l->aug = l->set.aug;
    l->aug.crop_w = cfg->width;
    l->aug.crop_h = cfg->height;
    const uint64_t per_step = (uint64_t)cfg->batch * (uint64_t)cfg->world;
    if (!l->what) {
        tb_data_loader_close(l);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    if (cfg->batch < 1 || cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world || cfg->width < 1 ||
        cfg->height < 1 || l->n == 0) {
        tb_data_loader_close(l);
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "%s: internal error: a data loader for batch %d, rank %d of %d, %ux%u, %zu samples",
                          cfg->what, cfg->batch, cfg->rank, cfg->world, cfg->width, cfg->height, l->n);
    }
    l->per_epoch = cfg->train ? l->n / per_step : (l->n + per_step - 1) / per_step;
    if (l->per_epoch == 0) {
        uint64_t n = l->n;
        tb_data_loader_close(l);
        return tb_err_set(err, TB_ERR_CONFIG,
                          "%s has %" PRIu64 " samples, fewer than one batch of %" PRIu64 " (%d per rank x %d ranks)",
                          cfg->what, n, per_step, cfg->batch, cfg->world);
    }
    l->nslots = l->set.prefetch + 1;
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    l->order = cfg->train ? malloc(l->n * sizeof *l->order) : NULL;
    l->nworkers = l->set.workers;
    l->workers = l->nworkers ? calloc((size_t)l->nworkers, sizeof *l->workers) : NULL;
    if (!l->slots || (cfg->train && !l->order) || (l->nworkers && !l->workers)) {
        tb_data_loader_close(l);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < l->nslots; i++) {
        l->slots[i].k = UINT64_MAX;
        l->slots[i].index = malloc((size_t)cfg->batch * sizeof *l->slots[i].index);
        if (!l->slots[i].index) {
            tb_data_loader_close(l);
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        }
        int rc =
            tb_batch_init(&l->slots[i].b, cfg->batch, (int)cfg->height, (int)cfg->width, cfg->spec, cfg->host, err);
        if (rc) {
            tb_data_loader_close(l);
            return rc;
        }
    }
    l->inline_worker.l = l;
    for (int i = 0; i < l->nworkers; i++) {
        l->workers[i].l = l;
        int e = pthread_create(&l->workers[i].thread, NULL, worker_main, &l->workers[i]);
        if (e) {
            tb_data_loader_close(l);
            return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot start data loader thread %d of %d: %s", cfg->what, i + 1,
                              cfg->set->workers, strerror(e));
        }
        l->started++;
    }
    *out = l;
    return TB_OK;
}

void tb_data_loader_start(struct tb_data_loader *l, uint64_t begin, uint64_t end)
{
    pthread_mutex_lock(&l->mu);
    l->end = 0; /* no new claims */
    while (l->inflight > 0)
        pthread_cond_wait(&l->done_cv, &l->mu);
    for (int i = 0; i < l->nslots; i++)
        l->slots[i].k = UINT64_MAX;
    l->end = end;
    l->claim_k = begin;
    l->claim_j = 0;
    l->next_k = begin;
    l->released = begin;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
}

int tb_data_loader_next(struct tb_data_loader *l, struct tb_loaded *out, struct tb_err *err)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&l->mu);
    const uint64_t k = l->next_k;
    if (k >= l->end) {
        pthread_mutex_unlock(&l->mu);
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "%s: internal error: batch %" PRIu64 " asked for past the end (%" PRIu64 ")", l->what, k,
                          l->end);
    }
    l->released = k; /* the batch handed out before is free again */
    pthread_cond_broadcast(&l->work_cv);
    struct slot *s = &l->slots[k % (uint64_t)l->nslots];
    if (l->nworkers == 0) {
        uint64_t ck;
        int j;
        size_t index;
        bool present;
        while (claim(l, &ck, &j, &index, &present)) {
            struct slot *cs = &l->slots[ck % (uint64_t)l->nslots];
            pthread_mutex_unlock(&l->mu);
            int rc = produce(&l->inline_worker, cs, ck, j, index, present);
            pthread_mutex_lock(&l->mu);
            finish(l, &l->inline_worker, cs, j, rc);
            if (ck == k && j == l->cfg.batch - 1)
                break;
        }
    }
    while (!(s->k == k && s->pending == 0))
        pthread_cond_wait(&l->done_cv, &l->mu);
    l->next_k = k + 1;
    pthread_mutex_unlock(&l->mu);
    if (s->failed) {
        tb_err_clear(err);
        tb_err_set(err, s->err.status, "%s", s->err.msg);
        return tb_err_prefix(err, "%s", l->what);
    }
    out->k = k;
    out->b = &s->b;
    out->count = s->count;
    out->nskipped = s->nskipped;
    out->skipped = (const char *const *)s->skipped;
    out->index = s->index;
    return TB_OK;
}

int tb_data_image_size(const struct tb_dataset_ops *ops, void *ctx, const struct tb_data_settings *set, bool train,
                       uint32_t *w, uint32_t *h, struct tb_err *err)
{
    const uint32_t fw = train ? set->crop : set->val_w, fh = train ? set->crop : set->val_h;
    if (fw) {
        *w = fw;
        *h = fh;
        return TB_OK;
    }
    struct tb_sample s = { 0 };
    const size_t n = ops->count(ctx);
    int rc = TB_ERR_RUNTIME;
    size_t i = 0;
    for (; i < n && i < MAX_SKIP_RUN; i++) {
        tb_err_clear(err);
        rc = ops->load(ctx, i, &s, err);
        if (rc == TB_OK) {
            *w = s.width;
            *h = s.height;
            break;
        }
        if (rc != TB_ERR_RUNTIME || !set->skip_bad)
            break;
    }
    tb_sample_release(&s);
    if (rc == TB_OK)
        return TB_OK;
    if (n == 0)
        return tb_err_set(err, TB_ERR_CONFIG, "the split has no samples");
    /* The sample's own error first: it is the cause, the size only why it was read. */
    return tb_err_set(err, rc,
                      "%s (its first sample is read for the size of the %s batches: fix or remove that file, or set "
                      "[dataset] on_bad_sample = skip; [dataset] %s sets the size without reading)",
                      err->msg, train ? "training" : "validation", train ? "crop" : "val_size");
}
