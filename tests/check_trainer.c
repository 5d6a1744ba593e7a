/* check_trainer: the trainer's checkpoints on a small G-SCNN over synthetic data.
 *
 * A run of 2 epochs writes a checkpoint after each. Resuming from the one after epoch 1
 * and training epoch 2 again must give exactly the weights, buffers and momentum of the
 * run that never stopped; so must a run stopped after its first step (the stop a signal
 * requests) and resumed. Truncated, corrupt and other-model checkpoints are refused
 * naming the file and the difference, and `keep` prunes old checkpoints. */
#include "config.h"

#include <check.h>
#include <math.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <trainbig/trainbig.h>
#include <unistd.h>

#include "core/config/ini.h"
#include "core/train/report_internal.h"
#include "core/train/safetensors_internal.h"
#include "core/config/setup_internal.h"
#include "core/train/trainer.h"
#include "core/util/hash_internal.h"
#include "testutil.h"

static const char *straight_dir(void);

/* The suite runs without forking (main): OpenMP's threads do not survive fork(), and the
 * straight run is made once for all tests. */
static void setup(void)
{
    ck_assert_msg(getenv("TB_BUILDDIR"), "run through make check (TB_BUILDDIR unset)");
    unsetenv("TRAINBIG_PLUGIN_PATH");
    setenv("TRAINBIG_LOG", "error", 1);
    straight_dir();
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* 8 images of 32x32, batch 2: 4 steps per epoch of a narrow network. */
static const char base_config[] = "[run]\n"
                                  "name = run\n"
                                  "seed = 3\n"
                                  "epochs = 2\n"
                                  "[backend]\n"
                                  "plugin = cpu\n"
                                  "threads = 2\n"
                                  "[model]\n"
                                  "plugin = gscnn\n"
                                  "width = 0.125\n"
                                  "shape_width = 0.25\n"
                                  "blocks = 1,1,1,1,1,1\n"
                                  "[dataset]\n"
                                  "plugin = synthetic\n"
                                  "width = 32\n"
                                  "height = 32\n"
                                  "train_count = 8\n"
                                  "val_count = 2\n"
                                  "[train]\n"
                                  "batch = 2\n"
                                  "lr = 0.002\n"
                                  "val_every = 0\n"
                                  "keep = 5\n"
                                  "[report]\n"
                                  "progress = no\n";

/* Trains with base_config and the overrides sets (NULL-terminated) under output dir
 * `out`; returns tb_train's status, err filled. */
static int train(const char *out, const char *const *sets, const char *resume, bool stop_at_once, struct tb_err *err)
{
    char *path = test_write_file("run.ini", base_config);
    struct tb_config *cfg;
    ck_assert_msg(tb_config_load(path, &cfg, err) == TB_OK, "%s", err->msg);
    char set[4200];
    snprintf(set, sizeof set, "run.output=%s", out);
    ck_assert_msg(tb_config_set(cfg, set, err) == TB_OK, "%s", err->msg);
    for (int i = 0; sets && sets[i]; i++)
        ck_assert_msg(tb_config_set(cfg, sets[i], err) == TB_OK, "%s", err->msg);
    struct tb_setup *s;
    ck_assert_msg(tb_setup_resolve(cfg, &s, err) == TB_OK, "%s", err->msg);
    volatile sig_atomic_t stop = stop_at_once;
    const struct tb_train_request req = { path, NULL, 0, resume, &stop, NULL };
    int rc = tb_train(s, &req, err);
    tb_setup_free(s);
    tb_config_free(cfg);
    free(path);
    return rc;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    ck_assert_msg(in && out, "copy %s to %s", from, to);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    ck_assert_int_eq(fclose(out), 0);
}

/* Every tensor of a is in b with the same shape and the same bytes, and the counts match. */
static void assert_same_tensors(const char *a_path, const char *b_path)
{
    struct tb_err err;
    struct tb_safetensors *a, *b;
    ck_assert_msg(tb_safetensors_read(a_path, &a, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_safetensors_read(b_path, &b, &err) == TB_OK, "%s", err.msg);
    ck_assert_uint_eq(tb_safetensors_count(a), tb_safetensors_count(b));
    size_t momenta = 0;
    for (size_t i = 0; i < tb_safetensors_count(a); i++) {
        struct tb_shape sa, sb;
        const float *da;
        const char *name = tb_safetensors_at(a, i, &sa, &da);
        const float *db = tb_safetensors_find(b, name, &sb);
        ck_assert_msg(db, "%s missing from %s", name, b_path);
        ck_assert(memcmp(&sa, &sb, sizeof sa) == 0);
        size_t n = tb_shape_elems(sa);
        for (size_t k = 0; k < n; k++)
            if (memcmp(&da[k], &db[k], sizeof *da) != 0)
                ck_abort_msg("%s[%zu]: %.9g vs %.9g", name, k, da[k], db[k]);
        momenta += strncmp(name, "momentum/", 9) == 0;
    }
    ck_assert_uint_gt(momenta, 100);
    ck_assert_str_eq(tb_safetensors_meta(a, "iteration"), tb_safetensors_meta(b, "iteration"));
    tb_safetensors_free(a);
    tb_safetensors_free(b);
}

/* The straight run, shared by the tests below (built once per process). */
static const char *straight_dir(void)
{
    static char *dir;
    if (!dir) {
        char *out = test_path("straight");
        struct tb_err err;
        ck_assert_msg(train(out, NULL, NULL, false, &err) == TB_OK, "%s", err.msg);
        ck_assert_int_ge(asprintf(&dir, "%s/run", out), 0);
        free(out);
    }
    return dir;
}

START_TEST(resume_after_epoch_is_bit_identical)
{
    const char *straight = straight_dir();
    char *e1 = NULL, *e2 = NULL, *resumed_dir = test_path("resumed"), *copy = NULL, *end = NULL;
    ck_assert_int_ge(asprintf(&e1, "%s/epoch-0001.safetensors", straight), 0);
    ck_assert_int_ge(asprintf(&e2, "%s/epoch-0002.safetensors", straight), 0);
    ck_assert_msg(exists(e1) && exists(e2), "the straight run wrote no checkpoints per epoch");
    ck_assert_int_eq(mkdir(resumed_dir, 0777), 0);
    ck_assert_int_ge(asprintf(&copy, "%s/epoch-0001.safetensors", resumed_dir), 0);
    copy_file(e1, copy);
    struct tb_err err;
    ck_assert_msg(train(test_tmpdir(), NULL, copy, false, &err) == TB_OK, "%s", err.msg);
    ck_assert_int_ge(asprintf(&end, "%s/epoch-0002.safetensors", resumed_dir), 0);
    ck_assert_msg(exists(end), "the resumed run wrote no %s", end);
    assert_same_tensors(e2, end);
    free(e1);
    free(e2);
    free(copy);
    free(end);
    free(resumed_dir);
}
END_TEST

START_TEST(stop_and_resume_mid_epoch_is_bit_identical)
{
    const char *straight = straight_dir();
    char *out = test_path("stopped"), *ckpt = NULL, *end = NULL, *e2 = NULL;
    struct tb_err err;
    /* Stop requested before the first step: the step finishes, then a checkpoint. The
     * three runs use 2 (the straight one), 3 and 0 loader threads: the batches, augmented,
     * are the same. */
    static const char *const three[] = { "dataset.workers=3", NULL }, *const none[] = { "dataset.workers=0", NULL };
    ck_assert_msg(train(out, three, NULL, true, &err) == TB_OK, "%s", err.msg);
    ck_assert_int_ge(asprintf(&ckpt, "%s/run/epoch-0001-step-000001.safetensors", out), 0);
    ck_assert_msg(exists(ckpt), "no checkpoint %s after a stop", ckpt);
    ck_assert_msg(train(out, none, ckpt, false, &err) == TB_OK, "%s", err.msg);
    ck_assert_int_ge(asprintf(&end, "%s/run/epoch-0002.safetensors", out), 0);
    ck_assert_int_ge(asprintf(&e2, "%s/epoch-0002.safetensors", straight), 0);
    assert_same_tensors(e2, end);
    free(out);
    free(ckpt);
    free(end);
    free(e2);
}
END_TEST

/* A copy of the straight run's last checkpoint, changed by `damage`, must be refused. */
static void refused(const char *name, void (*damage)(const char *path), const char *const *sets, const char *want1,
                    const char *want2)
{
    char *src = NULL, *dir = test_path(name), *copy = NULL;
    ck_assert_int_ge(asprintf(&src, "%s/epoch-0001.safetensors", straight_dir()), 0);
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    ck_assert_int_ge(asprintf(&copy, "%s/epoch-0001.safetensors", dir), 0);
    copy_file(src, copy);
    if (damage)
        damage(copy);
    struct tb_err err;
    ck_assert_int_ne(train(test_tmpdir(), sets, copy, false, &err), TB_OK);
    ck_assert_contains(err.msg, copy);
    ck_assert_contains(err.msg, want1);
    if (want2)
        ck_assert_contains(err.msg, want2);
    free(src);
    free(dir);
    free(copy);
}

static void truncate_half(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(truncate(path, st.st_size / 2), 0);
}

/* Flips one bit near the end, in the tensors' bytes (the header is at the start). */
static void flip_bit(const char *path)
{
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, -100, SEEK_END), 0);
    int c = fgetc(f);
    ck_assert_int_ne(c, EOF);
    ck_assert_int_eq(fseek(f, -100, SEEK_END), 0);
    fputc(c ^ 0x10, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* Changes one digit of the "iteration" metadata, keeping the file's length: a resumed run
 * would start at another step with every tensor as it was. */
static void edit_iteration(const char *path)
{
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    char head[4096];
    size_t n = fread(head, 1, sizeof head - 1, f);
    head[n] = '\0';
    char *key = NULL;
    for (size_t i = 8; i + 11 < n && !key; i++) /* past the 8-byte length */
        if (memcmp(head + i, "\"iteration\"", 11) == 0)
            key = head + i;
    ck_assert_ptr_nonnull(key);
    char *digit = key + 11;
    while (*digit && (*digit < '0' || *digit > '9'))
        digit++;
    ck_assert(*digit);
    ck_assert_int_eq(fseek(f, digit - head, SEEK_SET), 0);
    fputc(*digit == '9' ? '8' : *digit + 1, f);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(edited_metadata_refused)
{
    refused("edited", edit_iteration, NULL, "corrupt", "tensors and metadata do not match its checksum");
}
END_TEST

/* Rewrites a checkpoint as trainbig-checkpoint-1 wrote it: the same tensors and metadata,
 * the checksum over the tensors only. The metadata's share is restated from the format
 * (checkpoint.h): FNV-1a of key, NUL, value, times the golden ratio constant, summed. */
static void as_format_1(const char *path)
{
    static const char *const keys[] = { "format", "trainbig_version", "epoch",  "iteration",  "seed", "lr",
                                        "model",  "training",         "config", "config_hash" };
    struct tb_safetensors *st;
    struct tb_err err;
    ck_assert_msg(tb_safetensors_read(path, &st, &err) == TB_OK, "%s", err.msg);
    char old_sum[17], new_sum[17];
    snprintf(old_sum, sizeof old_sum, "%s", tb_safetensors_meta(st, "checksum"));
    uint64_t sum = strtoull(old_sum, NULL, 16);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = tb_safetensors_meta(st, keys[i]);
        ck_assert_ptr_nonnull(v);
        uint64_t h = tb_fnv1a(keys[i], strlen(keys[i]) + 1, TB_FNV1A_INIT);
        sum -= tb_fnv1a(v, strlen(v), h) * TB_GOLDEN64;
    }
    tb_safetensors_free(st);
    snprintf(new_sum, sizeof new_sum, "%016" PRIx64, sum);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    static char head[1 << 16];
    size_t n = fread(head, 1, sizeof head - 1, f);
    head[n] = '\0';
    char *fmt = memmem(head, n, "trainbig-checkpoint-2", 21), *cs = memmem(head, n, old_sum, 16);
    ck_assert(fmt && cs);
    fmt[20] = '1';
    memcpy(cs, new_sum, 16);
    ck_assert_int_eq(fseek(f, 0, SEEK_SET), 0);
    ck_assert_uint_eq(fwrite(head, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* A checkpoint of the previous format resumes as before, to the same weights. */
START_TEST(format_1_checkpoint_resumes)
{
    char *e1 = NULL, *e2 = NULL, *dir = test_path("format1"), *copy = NULL, *end = NULL;
    ck_assert_int_ge(asprintf(&e1, "%s/epoch-0001.safetensors", straight_dir()), 0);
    ck_assert_int_ge(asprintf(&e2, "%s/epoch-0002.safetensors", straight_dir()), 0);
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    ck_assert_int_ge(asprintf(&copy, "%s/epoch-0001.safetensors", dir), 0);
    copy_file(e1, copy);
    as_format_1(copy);
    struct tb_err err;
    ck_assert_msg(train(test_tmpdir(), NULL, copy, false, &err) == TB_OK, "%s", err.msg);
    ck_assert_int_ge(asprintf(&end, "%s/epoch-0002.safetensors", dir), 0);
    assert_same_tensors(e2, end);
    free(e1);
    free(e2);
    free(dir);
    free(copy);
    free(end);
}
END_TEST

/* Lines of file that start with (or, for JSONL, hold) `what`. */
static int count_lines(const char *path, const char *what, bool anywhere)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f, "%s", path);
    char line[16384];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += anywhere ? strstr(line, what) != NULL : strncmp(line, what, strlen(what)) == 0;
    fclose(f);
    return n;
}

/* A run killed while writing epoch 2's checkpoint leaves that epoch's rows (reported
 * first, before this was reordered) and the checkpoint's temporary file: the resumed run
 * reports epoch 2 once and removes the file. */
START_TEST(resume_after_a_kill_reports_each_epoch_once)
{
    char *dir = test_path("killed"), *src = NULL, *dst = NULL, *stale = NULL, *ckpt = NULL;
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    static const char *const files[] = { "epoch-0001.safetensors", "epochs.csv", "epochs.jsonl" };
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_ge(asprintf(&src, "%s/%s", straight_dir(), files[i]), 0);
        ck_assert_int_ge(asprintf(&dst, "%s/%s", dir, files[i]), 0);
        copy_file(src, dst);
        free(src);
        free(dst);
    }
    pid_t dead = fork(); /* a process number no process holds any more */
    ck_assert_int_ge(dead, 0);
    if (dead == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    ck_assert_int_ge(asprintf(&stale, "%s/epoch-0002.safetensors.tmp.%ld", dir, (long)dead), 0);
    FILE *sf = fopen(stale, "w");
    ck_assert_ptr_nonnull(sf);
    fputs("partial", sf);
    ck_assert_int_eq(fclose(sf), 0);
    ck_assert_int_ge(asprintf(&ckpt, "%s/epoch-0001.safetensors", dir), 0);
    ck_assert_int_ge(asprintf(&src, "%s/epochs.csv", dir), 0);
    ck_assert_int_eq(count_lines(src, "2,", false), 1); /* the straight run's row of epoch 2 */
    struct tb_err err;
    ck_assert_msg(train(test_tmpdir(), NULL, ckpt, false, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(!exists(stale), "%s was left", stale);
    ck_assert_int_eq(count_lines(src, "epoch,", false), 1);
    ck_assert_int_eq(count_lines(src, "1,", false), 1);
    ck_assert_int_eq(count_lines(src, "2,", false), 1);
    ck_assert_int_ge(asprintf(&dst, "%s/epochs.jsonl", dir), 0);
    ck_assert_int_eq(count_lines(dst, "{\"epoch\":1,", true), 1);
    ck_assert_int_eq(count_lines(dst, "{\"epoch\":2,", true), 1);
    free(dir);
    free(src);
    free(dst);
    free(stale);
    free(ckpt);
}
END_TEST

/* A report that cannot be written stops the run by name before any step. */
START_TEST(unwritable_report_refused)
{
    static const char *const full[] = { "report.csv=/dev/full", NULL };
    char *out = test_path("full"), *rundir = NULL;
    struct tb_err err;
    ck_assert_int_ne(train(out, full, NULL, false, &err), TB_OK);
    ck_assert_contains(err.msg, "/dev/full: cannot write the csv report ([report] csv): No space left on device");
    /* The failed run leaves no directory behind that would push the next to run.2. */
    ck_assert_int_ge(asprintf(&rundir, "%s/run", out), 0);
    ck_assert_msg(!exists(rundir), "%s was left", rundir);
    free(rundir);
    free(out);
}
END_TEST

START_TEST(truncated_checkpoint_refused)
{
    refused("truncated", truncate_half, NULL, "safetensors", NULL);
}
END_TEST

START_TEST(corrupt_checkpoint_refused)
{
    refused("corrupt", flip_bit, NULL, "corrupt", "checksum");
}
END_TEST

START_TEST(other_model_refused)
{
    static const char *const wider[] = { "model.shape_width=0.5", NULL };
    refused("other-model", NULL, wider, "another model configuration", "shape_width");
}
END_TEST

START_TEST(keep_prunes_old_checkpoints)
{
    char *out = test_path("keep"), *e1 = NULL, *e2 = NULL;
    static const char *const sets[] = { "train.keep=1", NULL };
    struct tb_err err;
    ck_assert_msg(train(out, sets, NULL, false, &err) == TB_OK, "%s", err.msg);
    ck_assert_int_ge(asprintf(&e1, "%s/run/epoch-0001.safetensors", out), 0);
    ck_assert_int_ge(asprintf(&e2, "%s/run/epoch-0002.safetensors", out), 0);
    ck_assert_msg(!exists(e1), "%s kept with keep = 1", e1);
    ck_assert_msg(exists(e2), "%s missing", e2);
    free(out);
    free(e1);
    free(e2);
}
END_TEST

/* The sum of column `name` of a run's epochs.csv. */
static double csv_column_sum(const char *csv, const char *name)
{
    FILE *f = fopen(csv, "r");
    ck_assert_msg(f, "no %s", csv);
    char line[4096];
    int col = -1;
    double sum = 0;
    for (int row = 0; fgets(line, sizeof line, f); row++) {
        int c = 0;
        for (char *tok = line, *end; tok; tok = end ? end + 1 : NULL, c++) {
            end = strchr(tok, ',');
            if (end)
                *end = '\0';
            tok[strcspn(tok, "\n")] = '\0';
            if (row == 0 && strcmp(tok, name) == 0)
                col = c;
            else if (row > 0 && c == col)
                sum += strtod(tok, NULL);
        }
        ck_assert_msg(col >= 0, "%s has no column %s", csv, name);
    }
    fclose(f);
    return sum;
}

/* The number after "key": in the last line of a run's epochs.jsonl (its last epoch). */
static double jsonl_last(const char *jsonl, const char *key)
{
    FILE *f = fopen(jsonl, "r");
    ck_assert_msg(f != NULL, "%s", jsonl);
    char *line = NULL, *last = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        free(last);
        last = strdup(line);
    }
    free(line);
    fclose(f);
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *at = last ? strstr(last, pat) : NULL;
    ck_assert_msg(at != NULL, "%s: no %s in its last line", jsonl, key);
    const double v = strtod(at + strlen(pat), NULL);
    free(last);
    return v;
}

/* Large model support changes no value: the same training with device memory capped
 * below its footprint (160x160 images: about 112 MiB uncapped, 50 MiB here) under the
 * lru and the prefetch policies, which must swap, and the hybrid policy, which must
 * recompute (and, told of copies far cheaper than any rebuild, must not), ends with exactly
 * the weights, buffers and momentum of the uncapped run. Under `none` the capped run stops
 * with an out-of-memory error that names the [swap] setting that would make it fit. */
START_TEST(capped_swapping_is_bit_identical)
{
    static const char *const free_run[] = { "dataset.width=160", "dataset.height=160", NULL };
    static const char *const lru_run[] = { "dataset.width=160", "dataset.height=160", "backend.device_memory=50M",
                                           "swap.plugin=lru",   "swap.min_size=64K",  NULL };
    static const char *const none_run[] = { "dataset.width=160", "dataset.height=160", "backend.device_memory=50M",
                                            NULL };
    static const char *const prefetch_run[] = { "dataset.width=160",         "dataset.height=160",
                                                "backend.device_memory=50M", "swap.plugin=prefetch",
                                                "swap.min_size=64K",         NULL };
    char *a = test_path("uncapped"), *c = test_path("none");
    char *ea = NULL, *csv = NULL;
    struct tb_err err;
    ck_assert_msg(train(a, free_run, NULL, false, &err) == TB_OK, "%s", err.msg);
    ck_assert_int_ge(asprintf(&ea, "%s/run/epoch-0002.safetensors", a), 0);
    /* The planner is told of a slow link (copies still run at this machine's speed), so
     * that hidden swaps run out and recomputing becomes the cheaper way to make room. */
    static const char *const hybrid_run[] = { "dataset.width=160",         "dataset.height=160",
                                              "backend.device_memory=50M", "swap.plugin=hybrid",
                                              "swap.min_size=64K",         "platform.plugin=x86-pcie",
                                              "platform.h2d_gbps=0.1",     "platform.d2h_gbps=0.1",
                                              "platform.duplex_gbps=0",    NULL };
    /* No swap allowed (min_size), and copies far cheaper than any rebuild: once it plans
     * from timed steps, hybrid leaves the room to be made by moving tensors out on demand. */
    static const char *const cheap_copies_run[] = { "dataset.width=160",         "dataset.height=160",
                                                    "backend.device_memory=50M", "swap.plugin=hybrid",
                                                    "swap.min_size=1G",          "platform.plugin=x86-pcie",
                                                    "platform.h2d_gbps=1000",    "platform.d2h_gbps=1000",
                                                    "platform.duplex_gbps=0",    NULL };
    const char *const *runs[4] = { lru_run, prefetch_run, hybrid_run, cheap_copies_run };
    static const char *const names[4] = { "lru", "prefetch", "hybrid", "cheap-copies" };
    for (int k = 0; k < 4; k++) {
        char *b = test_path(names[k]), *eb = NULL;
        ck_assert_msg(train(b, runs[k], NULL, false, &err) == TB_OK, "%s: %s", b, err.msg);
        ck_assert_int_ge(asprintf(&eb, "%s/run/epoch-0002.safetensors", b), 0);
        assert_same_tensors(ea, eb);
        ck_assert_int_ge(asprintf(&csv, "%s/run/epochs.csv", b), 0);
        if (k < 2) {
            ck_assert_msg(csv_column_sum(csv, "swaps_out") > 0, "the capped %s run did not swap", b);
            ck_assert(csv_column_sum(csv, "swap_in_bytes") > 0);
            ck_assert(csv_column_sum(csv, "recomputes") == 0);
            if (k == 1) {
                /* Once its plan is made from timed steps (the last epoch), prefetch leaves
                 * room for what is not a transient tensor (parameters, the backend's
                 * scratch): 2 or fewer allocations a step had to make room on demand here
                 * (on every ISA path), against 8 to 11 when the plan left it out. */
                char *jsonl = NULL;
                ck_assert_int_ge(asprintf(&jsonl, "%s/run/epochs.jsonl", b), 0);
                const double evicting = jsonl_last(jsonl, "evicting_allocs"), steps = jsonl_last(jsonl, "steps");
                ck_assert_msg(steps > 0 && evicting <= 4 * steps,
                              "%s: %.0f allocations in %.0f steps made room on demand", jsonl, evicting, steps);
                free(jsonl);
            }
        } else if (k == 3) {
            char *jsonl = NULL;
            ck_assert_int_ge(asprintf(&jsonl, "%s/run/epochs.jsonl", b), 0);
            const double recomputes = jsonl_last(jsonl, "recomputes"), steps = jsonl_last(jsonl, "steps");
            ck_assert_msg(steps > 0 && recomputes == 0, "%s: %.0f ops re-run in the last epoch", jsonl, recomputes);
            ck_assert(jsonl_last(jsonl, "swaps_out") > 0); /* moved out on demand instead */
            free(jsonl);
        } else {
            /* The hybrid run recomputed (and may also have swapped). */
            ck_assert_msg(csv_column_sum(csv, "recomputes") > 0, "the capped hybrid run did not recompute");
            ck_assert(csv_column_sum(csv, "recompute_bytes") > 0);
            ck_assert(csv_column_sum(csv, "drop_bytes") > 0);
            ck_assert(csv_column_sum(csv, "recomputed_share") > 0);
            /* Rebuilds nest at most two deep (a dropped read, itself rebuilt from what is
             * on the device): priced one level deep, chains planned without that bound
             * nested 23 deep here and re-ran 16 times as many ops. */
            char *jsonl = NULL;
            ck_assert_int_ge(asprintf(&jsonl, "%s/run/epochs.jsonl", b), 0);
            const double nesting = jsonl_last(jsonl, "rebuild_nesting");
            ck_assert_msg(nesting >= 1 && nesting <= 2, "%s: rebuilds nested %.0f deep", jsonl, nesting);
            free(jsonl);
        }
        free(csv);
        free(eb);
        free(b);
    }
    ck_assert_int_ge(asprintf(&csv, "%s/run/epochs.csv", a), 0);
    ck_assert(csv_column_sum(csv, "swaps_out") == 0);
    tb_err_clear(&err);
    ck_assert_int_eq(train(c, none_run, NULL, false, &err), TB_ERR_NOMEM);
    ck_assert_msg(strstr(err.msg, "out of device memory at ") && strstr(err.msg, "set [swap] plugin = lru"), "%s",
                  err.msg);
    free(a);
    free(c);
    free(ea);
    free(csv);
}
END_TEST

/* The same at [train] precision = bf16, whose activations are bf16 tensors (half the
 * bytes to move) and whose ops run widened or on oneDNN's bf16 convolutions: capped under
 * lru (swapping) and hybrid (recomputing), the weights, buffers and momentum end bit for
 * bit as uncapped; and the precision took effect (the losses are not fp32's). */
START_TEST(capped_bf16_is_bit_identical)
{
    static const char *const free_run[] = { "dataset.width=160", "dataset.height=160", "train.precision=bf16", NULL };
    static const char *const fp32_run[] = { "dataset.width=160", "dataset.height=160", NULL };
    static const char *const lru_run[] = { "dataset.width=160",         "dataset.height=160", "train.precision=bf16",
                                           "backend.device_memory=56M", "swap.plugin=lru",    "swap.min_size=64K",
                                           NULL };
    static const char *const hybrid_run[] = { "dataset.width=160",         "dataset.height=160",
                                              "train.precision=bf16",      "backend.device_memory=56M",
                                              "swap.plugin=hybrid",        "swap.min_size=64K",
                                              "platform.plugin=x86-pcie",  "platform.h2d_gbps=0.1",
                                              "platform.d2h_gbps=0.1",     "platform.duplex_gbps=0",
                                              NULL };
    char *a = test_path("bf16"), *f = test_path("fp32"), *ea = NULL, *csv = NULL, *csv32 = NULL;
    struct tb_err err;
    ck_assert_msg(train(a, free_run, NULL, false, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(train(f, fp32_run, NULL, false, &err) == TB_OK, "%s", err.msg);
    ck_assert_int_ge(asprintf(&ea, "%s/run/epoch-0002.safetensors", a), 0);
    ck_assert_int_ge(asprintf(&csv, "%s/run/epochs.csv", a), 0);
    ck_assert_int_ge(asprintf(&csv32, "%s/run/epochs.csv", f), 0);
    const double loss = csv_column_sum(csv, "loss"), loss32 = csv_column_sum(csv32, "loss");
    ck_assert_msg(isfinite(loss) && loss != loss32, "bf16 losses %g, fp32's %g", loss, loss32);
    const char *const *runs[2] = { lru_run, hybrid_run };
    static const char *const names[2] = { "bf16-lru", "bf16-hybrid" };
    static const char *const column[2] = { "swaps_out", "recomputes" };
    for (int k = 0; k < 2; k++) {
        char *b = test_path(names[k]), *eb = NULL, *cb = NULL;
        ck_assert_msg(train(b, runs[k], NULL, false, &err) == TB_OK, "%s: %s", b, err.msg);
        ck_assert_int_ge(asprintf(&eb, "%s/run/epoch-0002.safetensors", b), 0);
        assert_same_tensors(ea, eb);
        ck_assert_int_ge(asprintf(&cb, "%s/run/epochs.csv", b), 0);
        ck_assert_msg(csv_column_sum(cb, column[k]) > 0, "the capped %s run had no %s", names[k], column[k]);
        free(cb);
        free(eb);
        free(b);
    }
    free(a);
    free(f);
    free(ea);
    free(csv);
    free(csv32);
}
END_TEST

/* The manual's word for a column: the name as a whole word of text. */
static bool has_word(const char *text, const char *word)
{
    const size_t n = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
        const bool left = p == text || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'));
        const bool right = !(p[n] == '_' || (p[n] >= 'a' && p[n] <= 'z'));
        if (left && right)
            return true;
    }
    return false;
}

/* Every epochs.csv column of the table (report_columns.c, the swap counters') is named
 * once, and the manual's [report] csv entry lists it; JSON members are unique in their
 * object. */
START_TEST(report_columns_documented)
{
    const char *src = getenv("TB_SRCDIR");
    ck_assert_msg(src, "run through make check (TB_SRCDIR unset)");
    char *path;
    ck_assert_int_ge(asprintf(&path, "%s/doc/trainbig.ini.5", src), 0);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f, "%s: cannot open", path);
    static char man[1 << 20];
    const size_t n = fread(man, 1, sizeof man - 1, f);
    fclose(f);
    man[n] = '\0';
    char *a = strstr(man, "\n.B csv \\fIpath\\fP"), *z = a ? strstr(a, "\n.B jsonl \\fIpath\\fP") : NULL;
    ck_assert_msg(a && z, "%s: no [report] csv entry before jsonl's", path);
    *z = '\0';
    const char *names[64], *json[64], *groups[64];
    size_t nn = 0, nj = 0;
    for (size_t k = 0; k < tb_report_ncolumns; k++) {
        const struct tb_report_column *c = &tb_report_columns[k];
        json[nj] = c->json ? c->json : c->csv;
        groups[nj++] = c->group;
        if (c->kind == TB_COL_TERMS) {
            ck_assert_msg(strstr(a, "loss_\\fIterm\\fP"), "%s: [report] csv does not list loss_TERM", path);
        } else if (c->kind == TB_COL_SWAP) {
            nj--;
            for (size_t i = 0; i < tb_swap_ncounters; i++) {
                if (tb_swap_counters[i].csv)
                    names[nn++] = tb_swap_counters[i].csv;
                if (tb_swap_counters[i].json) {
                    json[nj] = tb_swap_counters[i].json;
                    groups[nj++] = c->group;
                }
            }
        } else {
            names[nn++] = c->csv;
        }
        ck_assert_uint_lt(nn, 64);
        ck_assert_uint_lt(nj, 64);
    }
    ck_assert_uint_gt(nn, 20);
    for (size_t i = 0; i < nn; i++) {
        ck_assert_msg(has_word(a, names[i]), "%s: [report] csv does not list the column %s", path, names[i]);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(names[i], names[j]) != 0, "two epochs.csv columns are called %s", names[i]);
    }
    for (size_t i = 0; i < nj; i++)
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(json[i], json[j]) != 0 ||
                              (groups[i] != groups[j] && (!groups[i] || !groups[j] || strcmp(groups[i], groups[j]))),
                          "two epochs.jsonl members of one object are called %s", json[i]);
    /* The check can fail. */
    ck_assert(!has_word(a, "swap_out"));
    ck_assert(has_word("a, swap_out_bytes, b", "swap_out_bytes"));
    free(path);
}
END_TEST

static Suite *trainer_suite(void)
{
    Suite *s = suite_create("trainer");
    TCase *tc = tcase_create("checkpoints");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, resume_after_epoch_is_bit_identical);
    tcase_add_test(tc, stop_and_resume_mid_epoch_is_bit_identical);
    tcase_add_test(tc, truncated_checkpoint_refused);
    tcase_add_test(tc, corrupt_checkpoint_refused);
    tcase_add_test(tc, edited_metadata_refused);
    tcase_add_test(tc, format_1_checkpoint_resumes);
    tcase_add_test(tc, resume_after_a_kill_reports_each_epoch_once);
    tcase_add_test(tc, unwritable_report_refused);
    tcase_add_test(tc, other_model_refused);
    tcase_add_test(tc, keep_prunes_old_checkpoints);
    suite_add_tcase(s, tc);
    tc = tcase_create("swap");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, capped_swapping_is_bit_identical);
    tcase_add_test(tc, capped_bf16_is_bit_identical);
    suite_add_tcase(s, tc);
    tc = tcase_create("reports");
    tcase_add_test(tc, report_columns_documented);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(trainer_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int rc = srunner_ntests_failed(sr) ? EXIT_FAILURE : EXIT_SUCCESS;
    srunner_free(sr);
    nftw(test_tmpdir(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); /* checkpoints are megabytes */
    return rc;
}
