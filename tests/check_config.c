/* tests/check_config.c: tests of core/config/config.c (reading an INI file and --set), core/config/section.c
 * (a section validated against its key table, the typed getters) and core/config/setup.c (the
 * whole configuration resolved: sections checked, plugins found, the effective
 * configuration printed and read back), and of core/util/error.c (the messages they all carry). */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <trainbig/error.h>
#include <trainbig/keys.h>
#include <unistd.h>

#include "core/config/ini.h"
#include "core/config/keys_internal.h"
#include "core/config/section_internal.h"
#include "core/config/setup_internal.h"
#include "core/util/printable.h"
#include "tests/testutil.h"

/* The dataset plugins the build has: taco only with jansson. */
#ifdef HAVE_JANSSON
#define DATASETS "cityscapes, synthetic, taco, testdata"
#else
#define DATASETS "cityscapes, synthetic, testdata"
#endif

/* ------------------------------------------------------------------ helpers */

static char real_tmpdir[PATH_MAX]; /* test_tmpdir(), resolved (the loader resolves INI dirs) */
static char cwd[PATH_MAX];

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    ck_assert_int_ge(n, 0);
    return s;
}

/* Checks that every NULL-terminated needle in ap occurs in text. */
static void expect_all(const char *text, int line, va_list ap)
{
    for (const char *n; (n = va_arg(ap, const char *));)
        ck_assert_msg(strstr(text, n), "line %d: expected \"%s\" in:\n%s", line, n, text);
}

/* Line i (0-based) of text, malloc'ed; NULL past the end. */
static char *line_at(const char *text, size_t i)
{
    const char *p = text;
    for (; i && p; i--) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    if (!p || !*p)
        return NULL;
    return strndup(p, strcspn(p, "\n"));
}

/* The one line of a multi-line message that contains needle; fails when there is none
 * or more than one. */
static char *the_line_with(const char *msg, const char *needle)
{
    char *found = NULL;
    for (size_t i = 0;; i++) {
        char *l = line_at(msg, i);
        if (!l)
            break;
        if (strstr(l, needle)) {
            ck_assert_msg(!found, "\"%s\" occurs on more than one line of:\n%s", needle, msg);
            found = l;
        } else {
            free(l);
        }
    }
    ck_assert_msg(found, "no line contains \"%s\" in:\n%s", needle, msg);
    return found;
}

static char *ini(const char *name, const char *text)
{
    return test_write_file(name, text);
}

static struct tb_config *load_ok_at(const char *path, int line)
{
    struct tb_config *c = (struct tb_config *)1;
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_config_load(path, &c, &err);
    ck_assert_msg(rc == TB_OK, "line %d: loading %s failed (%d): %s", line, path, rc, err.msg);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(err.count, 0);
    return c;
}
#define load_ok(path) load_ok_at((path), __LINE__)

/* Loads path, expecting TB_ERR_CONFIG with nlines message lines containing the needles. */
static void load_fails_at(const char *path, int nlines, struct tb_err *err, int line, ...)
{
    struct tb_config *c = (struct tb_config *)1;
    tb_err_clear(err);
    int rc = tb_config_load(path, &c, err);
    ck_assert_msg(rc == TB_ERR_CONFIG, "line %d: loading %s gave %d, want TB_ERR_CONFIG: %s", line, path, rc, err->msg);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(err->status, TB_ERR_CONFIG);
    ck_assert_msg(err->count == nlines && test_count_lines(err->msg) == (size_t)nlines,
                  "line %d: want %d message lines, got %d: %s", line, nlines, err->count, err->msg);
    va_list ap;
    va_start(ap, line);
    expect_all(err->msg, line, ap);
    va_end(ap);
}
#define load_fails(path, nlines, err, ...) load_fails_at((path), (nlines), (err), __LINE__, __VA_ARGS__, (char *)NULL)

static void set_ok(struct tb_config *c, const char *arg)
{
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_config_set(c, arg, &err);
    ck_assert_msg(rc == TB_OK, "--set %s failed (%d): %s", arg, rc, err.msg);
}

static const char *value_of(const struct tb_config *c, const char *section, const char *key)
{
    const struct tb_entry *e = tb_config_find(c, section, key);
    ck_assert_msg(e, "no entry %s.%s", section, key);
    return e->value;
}

/* "FILE:LINE" for path. */
static char *at(const char *path, int line)
{
    return xasprintf("%s:%d", path, line);
}

/* ------------------------------------------------------------------ tb_config_load */

START_TEST(load_missing_file)
{
    struct tb_err err;
    char *path = xasprintf("%s/does-not-exist/run.ini", test_tmpdir());
    load_fails(path, 1, &err, path, "cannot open the configuration", "No such file or directory");
    ck_assert_msg(strncmp(err.msg, path, strlen(path)) == 0, "the message starts with the file: %s", err.msg);
    free(path);
}
END_TEST

START_TEST(load_directory_is_not_a_file)
{
    struct tb_err err;
    load_fails(test_tmpdir(), 1, &err, test_tmpdir());
}
END_TEST

START_TEST(load_stray_line)
{
    struct tb_err err;
    char *path = ini("stray.ini", "[run]\nname = x\nthis is junk\nseed = 2\n");
    char *where = at(path, 3);
    load_fails(path, 1, &err, where, "'this is junk'", "neither a [section] header nor key = value");
    ck_assert_msg(strncmp(err.msg, where, strlen(where)) == 0, "starts with FILE:LINE: %s", err.msg);
    free(where);
    free(path);
}
END_TEST

START_TEST(load_key_before_section)
{
    struct tb_err err;
    char *path = ini("early.ini", "; a comment first\n\nseed = 1\n[run]\nname = x\n");
    char *where = at(path, 3);
    load_fails(path, 1, &err, where, "key 'seed' comes before any [section] header");
    free(where);
    free(path);
}
END_TEST

START_TEST(load_key_set_twice)
{
    struct tb_err err;
    char *path = ini("twice.ini", "[train]\nbatch = 2\n\nlr = 0.1\nBatch = 4\n");
    char *where = at(path, 5);
    load_fails(path, 1, &err, where, "[train] batch is set twice", "lines 2 and 5");
    free(where);
    free(path);

    /* The same key in two [train] blocks is still set twice; other sections may reuse it. */
    path =
        ini("twice2.ini", "[train]\nbatch = 2\n[run]\nbatch_x = 1\n[train]\nlr = 1\nbatch = 3\n[model]\nbatch = 3\n");
    where = at(path, 7);
    load_fails(path, 1, &err, where, "[train] batch is set twice", "lines 2 and 7");
    free(where);
    free(path);
}
END_TEST

START_TEST(load_unclosed_section)
{
    struct tb_err err;
    char *path = ini("unclosed.ini", "[run]\nname = x\n[backend\nthreads = 2\n");
    char *where = at(path, 3);
    load_fails(path, 1, &err, where, "section header '[backend' has no closing ']'");
    free(where);
    free(path);
}
END_TEST

START_TEST(load_other_syntax_errors)
{
    struct tb_err err;
    char *path = ini("empty-section.ini", "[run]\n[ ]\nx = 1\n");
    char *where = at(path, 2);
    load_fails(path, 1, &err, where, "empty section name");
    free(where);
    free(path);

    path = ini("no-key.ini", "[run]\n = 5\n");
    where = at(path, 2);
    load_fails(path, 1, &err, where, "has no key before '='");
    free(where);
    free(path);

    char *text = malloc(1200);
    ck_assert_ptr_nonnull(text);
    strcpy(text, "[run]\nname = ");
    size_t o = strlen(text);
    memset(text + o, 'x', 1100);
    strcpy(text + o + 1100, "\n");
    path = ini("long.ini", text);
    where = at(path, 2);
    load_fails(path, 1, &err, where, "line is longer than 1000 characters");
    free(where);
    free(path);
    free(text);
}
END_TEST

START_TEST(load_many_errors_at_once)
{
    struct tb_err err;
    char *path = ini("many.ini", "stray\n"       /* 1: before any section, and no '=' */
                                 "seed = 1\n"    /* 2: key before any section */
                                 "[run]\n"       /* 3 */
                                 "name = a\n"    /* 4 */
                                 "[train\n"      /* 5: unclosed */
                                 "[run]\n"       /* 6 */
                                 "name = b\n"    /* 7: set twice (4 and 7) */
                                 "junk here\n"); /* 8: stray */
    load_fails(path, 5, &err, "stray");
    static const struct {
        int line;
        const char *what;
    } want[] = {
        { 1, "'stray' is neither" },          { 2, "key 'seed' comes before any [section]" },
        { 5, "'[train' has no closing ']'" }, { 7, "[run] name is set twice (lines 4 and 7)" },
        { 8, "'junk here' is neither" },
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        char *l = line_at(err.msg, i);
        char *prefix = xasprintf("%s:%d: ", path, want[i].line);
        ck_assert_msg(l && strncmp(l, prefix, strlen(prefix)) == 0, "line %zu should start with %s: %s", i, prefix,
                      l ? l : "(none)");
        ck_assert_contains(l, want[i].what);
        free(prefix);
        free(l);
    }
    free(path);
}
END_TEST

START_TEST(load_comments_quotes_case)
{
    char *path = ini("good.ini", "; comment\n"
                                 "# another\n"
                                 "[Run]\n"                           /* 3 */
                                 "NAME = hello ; trailing comment\n" /* 4 */
                                 "Seed = 7 # trailing\n"             /* 5 */
                                 "   ; indented comment\n"
                                 "\n"
                                 "[BACKEND]\n"                       /* 8 */
                                 "label = \"a;b # c\"\n"             /* 9 */
                                 "other = 'single quoted'\n"         /* 10 */
                                 "spaced = \"  keep  \" ; comment\n" /* 11 */
                                 "empty =\n"                         /* 12 */
                                 "empty2 = \"\"\n"                   /* 13 */
                                 "  indented   =   v  \n"            /* 14 */
                                 "eq = a=b\n"                        /* 15 */
                                 "crlf = x\r\n");                    /* 16 */
    struct tb_config *c = load_ok(path);
    ck_assert_str_eq(c->path, path);
    ck_assert_str_eq(c->dir, real_tmpdir);
    ck_assert_uint_eq(c->nsections, 2);
    ck_assert_str_eq(c->sections[0].name, "run");
    ck_assert_int_eq(c->sections[0].line, 3);
    ck_assert_str_eq(c->sections[1].name, "backend");
    ck_assert_int_eq(c->sections[1].line, 8);
    ck_assert_uint_eq(c->nentries, 10);

    ck_assert_str_eq(value_of(c, "run", "name"), "hello");
    ck_assert_str_eq(value_of(c, "run", "seed"), "7");
    ck_assert_str_eq(value_of(c, "backend", "label"), "a;b # c");
    ck_assert_str_eq(value_of(c, "backend", "other"), "single quoted");
    ck_assert_str_eq(value_of(c, "backend", "spaced"), "  keep  ");
    ck_assert_str_eq(value_of(c, "backend", "empty"), "");
    ck_assert_str_eq(value_of(c, "backend", "empty2"), "");
    ck_assert_str_eq(value_of(c, "backend", "indented"), "v");
    ck_assert_str_eq(value_of(c, "backend", "eq"), "a=b");
    ck_assert_str_eq(value_of(c, "backend", "crlf"), "x");
    ck_assert_ptr_null(tb_config_find(c, "Run", "name")); /* stored lower case */
    ck_assert_ptr_null(tb_config_find(c, "run", "label"));

    const struct tb_entry *e = tb_config_find(c, "run", "seed");
    ck_assert_int_eq(e->origin, TB_ORIGIN_FILE);
    ck_assert_int_eq(e->line, 5);
    ck_assert_int_eq(tb_config_find(c, "backend", "crlf")->line, 16);
    char where[PATH_MAX + 64];
    tb_config_where(c, e, where, sizeof where);
    char *want = at(path, 5);
    ck_assert_str_eq(where, want);
    free(want);
    tb_config_section_where(c, &c->sections[1], where, sizeof where);
    want = at(path, 8);
    ck_assert_str_eq(where, want);
    free(want);
    tb_config_where(c, NULL, where, sizeof where);
    ck_assert_str_eq(where, path);

    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(load_relative_path_gets_absolute_dir)
{
    char *path = ini("rel.ini", "[dataset]\nroot = data\n");
    char here[PATH_MAX];
    ck_assert_ptr_nonnull(getcwd(here, sizeof here));
    ck_assert_int_eq(chdir(test_tmpdir()), 0);
    struct tb_config *c = load_ok("rel.ini");
    struct tb_config *c2 = load_ok("./rel.ini");
    ck_assert_int_eq(chdir(here), 0);
    ck_assert_str_eq(c->path, "rel.ini");
    ck_assert_str_eq(c->dir, real_tmpdir);
    ck_assert_str_eq(c2->dir, real_tmpdir);
    tb_config_free(c);
    tb_config_free(c2);
    free(path);
}
END_TEST

/* ------------------------------------------------------------------ tb_config_set */

START_TEST(set_overrides_file_value)
{
    char *path = ini("set.ini", "[train]\nbatch = 2\nlr = 0.1\n");
    struct tb_config *c = load_ok(path);
    size_t n = c->nentries;
    set_ok(c, "train.batch=8");
    ck_assert_uint_eq(c->nentries, n);
    const struct tb_entry *e = tb_config_find(c, "train", "batch");
    ck_assert_str_eq(e->value, "8");
    ck_assert_int_eq(e->origin, TB_ORIGIN_SET);
    ck_assert_str_eq(e->set_arg, "train.batch=8");
    char where[PATH_MAX + 64];
    tb_config_where(c, e, where, sizeof where);
    char *want = xasprintf("%s: --set train.batch=8", path);
    ck_assert_str_eq(where, want);
    free(want);

    /* A later --set wins over an earlier one. */
    set_ok(c, " TRAIN . Batch = 16 ");
    e = tb_config_find(c, "train", "batch");
    ck_assert_str_eq(e->value, "16");
    ck_assert_str_eq(e->set_arg, " TRAIN . Batch = 16 ");
    ck_assert_uint_eq(c->nentries, n);
    /* Untouched entries keep their origin. */
    ck_assert_int_eq(tb_config_find(c, "train", "lr")->origin, TB_ORIGIN_FILE);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(set_new_section_and_key)
{
    char *path = ini("set2.ini", "[train]\nbatch = 2\n");
    struct tb_config *c = load_ok(path);
    set_ok(c, "report.csv=out.csv");
    set_ok(c, "train.lr=0.5");
    set_ok(c, "report.jsonl=a=b"); /* the value may hold '=' */
    ck_assert_uint_eq(c->nsections, 2);
    ck_assert_str_eq(c->sections[1].name, "report");
    ck_assert_int_eq(c->sections[1].line, 0);
    char where[PATH_MAX + 64];
    tb_config_section_where(c, &c->sections[1], where, sizeof where);
    char *want = xasprintf("%s: --set report.csv=out.csv", path);
    ck_assert_str_eq(where, want);
    free(want);
    ck_assert_str_eq(value_of(c, "report", "csv"), "out.csv");
    ck_assert_str_eq(value_of(c, "report", "jsonl"), "a=b");
    ck_assert_str_eq(value_of(c, "train", "lr"), "0.5");
    ck_assert_int_eq(tb_config_find(c, "train", "lr")->line, 0);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(set_malformed)
{
    char *path = ini("set3.ini", "[train]\nbatch = 2\n");
    struct tb_config *c = load_ok(path);
    static const struct {
        const char *arg;
        const char *why;
    } bad[] = {
        { "a=b", "expected section.key=value" },        { "a.b", "expected section.key=value" },
        { "ab", "expected section.key=value" },         { "a=b.c", "expected section.key=value" },
        { ".b=c", "section and key must be names" },    { "a.=c", "section and key must be names" },
        { "a b.c=d", "section and key must be names" }, { "a.b.c=d", "section and key must be names" },
        { "a.b-c=d", "section and key must be names" }, { "", "expected section.key=value" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct tb_err err;
        tb_err_clear(&err);
        ck_assert_msg(tb_config_set(c, bad[i].arg, &err) == TB_ERR_CONFIG, "--set '%s' was accepted", bad[i].arg);
        ck_assert_int_eq(err.status, TB_ERR_CONFIG);
        ck_assert_contains(err.msg, path);
        char *quoted = xasprintf("--set %s:", bad[i].arg);
        ck_assert_contains(err.msg, quoted);
        free(quoted);
        ck_assert_contains(err.msg, bad[i].why);
        ck_assert_contains(err.msg, "--set train.batch=4"); /* an example of the right form */
    }
    /* Nothing was added. */
    ck_assert_uint_eq(c->nentries, 1);
    ck_assert_uint_eq(c->nsections, 1);
    ck_assert_str_eq(value_of(c, "train", "batch"), "2");
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(set_strips_quotes)
{
    char *path = ini("set4.ini", "[run]\n");
    struct tb_config *c = load_ok(path);
    set_ok(c, "run.name=\"my run; #1\"");
    ck_assert_str_eq(value_of(c, "run", "name"), "my run; #1");
    set_ok(c, "run.output='out dir'");
    ck_assert_str_eq(value_of(c, "run", "output"), "out dir");
    set_ok(c, "run.seed=\"\"");
    ck_assert_str_eq(value_of(c, "run", "seed"), "");
    set_ok(c, "run.log_level=\"debug'"); /* unmatched: kept */
    ck_assert_str_eq(value_of(c, "run", "log_level"), "\"debug'");
    set_ok(c, "run.epochs=\"");
    ck_assert_str_eq(value_of(c, "run", "epochs"), "\"");
    tb_config_free(c);
    free(path);
}
END_TEST

/* ------------------------------------------------------------------ tb_section_build */

static const struct tb_key all_keys[] = {
    { "threads", TB_KEY_INT, "1", "1..64", "worker threads" },
    { "scale", TB_KEY_FLOAT, "0.5", "0..1", "a fraction" },
    { "fast", TB_KEY_BOOL, "no", NULL, "a switch" },
    { "device_memory", TB_KEY_SIZE, "0", "..1T", "memory cap; 0 = none" },
    { "mode", TB_KEY_ENUM, "eager", "eager|lazy|auto", "a choice" },
    { "label", TB_KEY_STRING, "", NULL, "free text" },
    { "cache", TB_KEY_PATH, "", NULL, "a file" },
    { "tags", TB_KEY_LIST, "", NULL, "any words" },
    { "colors", TB_KEY_LIST, "red", "red|green|blue", "some colours" },
    { "root", TB_KEY_PATH, NULL, NULL, "where the data is" },
    TB_KEYS_END,
};

static struct tb_section *build_ok_at(const struct tb_config *c, const char *name, const struct tb_key *keys,
                                      const char *const *skip, int line)
{
    struct tb_section *s = (struct tb_section *)1;
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_section_build(c, name, keys, "test plugin 'x'", skip, &s, &err);
    ck_assert_msg(rc == TB_OK, "line %d: building [%s] failed (%d): %s", line, name, rc, err.msg);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(err.count, 0);
    return s;
}
#define build_ok(c, name, keys, skip) build_ok_at((c), (name), (keys), (skip), __LINE__)

static void build_fails_at(const struct tb_config *c, const struct tb_key *keys, const char *const *skip, int nlines,
                           struct tb_err *err, int line, ...)
{
    struct tb_section *s = (struct tb_section *)1;
    tb_err_clear(err);
    int rc = tb_section_build(c, "backend", keys, "test plugin 'x'", skip, &s, err);
    ck_assert_msg(rc == TB_ERR_CONFIG, "line %d: building gave %d, want TB_ERR_CONFIG: %s", line, rc, err->msg);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(err->status, TB_ERR_CONFIG);
    ck_assert_msg(err->count == nlines && test_count_lines(err->msg) == (size_t)nlines,
                  "line %d: want %d message lines, got %d: %s", line, nlines, err->count, err->msg);
    va_list ap;
    va_start(ap, line);
    expect_all(err->msg, line, ap);
    va_end(ap);
}
#define build_fails(c, keys, skip, nlines, err, ...) \
    build_fails_at((c), (keys), (skip), (nlines), (err), __LINE__, __VA_ARGS__, (char *)NULL)

START_TEST(section_typed_values)
{
    char *path = ini("sec.ini", "[backend]\n"                /* 1 */
                                "threads = 8\n"              /* 2 */
                                "scale = 0.25\n"             /* 3 */
                                "fast = On\n"                /* 4 */
                                "device_memory = 1.5G\n"     /* 5 */
                                "mode = LAZY\n"              /* 6 */
                                "label = \"hello; world\"\n" /* 7 */
                                "cache = data/cache.bin\n"   /* 8 */
                                "tags = a, b , c\n"          /* 9 */
                                "colors = green,blue\n"      /* 10 */
                                "root = /abs/root\n"         /* 11 */
                                "[other]\n"
                                "threads = not-checked-here\n");
    struct tb_config *c = load_ok(path);
    struct tb_section *s = build_ok(c, "backend", all_keys, NULL);
    ck_assert_str_eq(tb_section_name(s), "backend");
    ck_assert_int_eq(tb_section_int(s, "threads"), 8);
    ck_assert_double_eq(tb_section_float(s, "scale"), 0.25);
    ck_assert(tb_section_bool(s, "fast"));
    ck_assert_uint_eq(tb_section_size(s, "device_memory"), UINT64_C(1610612736));
    ck_assert_int_eq(tb_section_enum(s, "mode"), 1);
    ck_assert_str_eq(tb_section_string(s, "mode"), "lazy");
    ck_assert_str_eq(tb_section_string(s, "label"), "hello; world");
    char *cache = xasprintf("%s/data/cache.bin", real_tmpdir);
    ck_assert_str_eq(tb_section_string(s, "cache"), cache);
    free(cache);
    ck_assert_str_eq(tb_section_string(s, "root"), "/abs/root");
    const char *const *items = NULL;
    ck_assert_uint_eq(tb_section_list(s, "tags", &items), 3);
    ck_assert_str_eq(items[0], "a");
    ck_assert_str_eq(items[1], "b");
    ck_assert_str_eq(items[2], "c");
    ck_assert_uint_eq(tb_section_list(s, "colors", NULL), 2);
    ck_assert_uint_eq(tb_section_list(s, "colors", &items), 2);
    ck_assert_str_eq(items[1], "blue");

    static const char *const keys[] = { "threads", "scale", "fast", "device_memory", "mode",
                                        "label",   "cache", "tags", "colors",        "root" };
    for (int i = 0; i < 10; i++) {
        char *want = at(path, i + 2);
        ck_assert_str_eq(tb_section_origin(s, keys[i]), want);
        free(want);
    }
    ck_assert_str_eq(tb_section_origin(s, "nope"), "unknown");
    ck_assert_str_eq(tb_section_text(s, 3), "1.5G");
    tb_section_free(s);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(section_defaults)
{
    char *path = ini("defaults.ini", "[backend]\nroot = r\n");
    struct tb_config *c = load_ok(path);
    struct tb_section *s = build_ok(c, "backend", all_keys, NULL);
    ck_assert_int_eq(tb_section_int(s, "threads"), 1);
    ck_assert_double_eq(tb_section_float(s, "scale"), 0.5);
    ck_assert(!tb_section_bool(s, "fast"));
    ck_assert_uint_eq(tb_section_size(s, "device_memory"), 0);
    ck_assert_int_eq(tb_section_enum(s, "mode"), 0);
    ck_assert_str_eq(tb_section_string(s, "mode"), "eager");
    ck_assert_str_eq(tb_section_string(s, "label"), "");
    ck_assert_str_eq(tb_section_string(s, "cache"), ""); /* empty means "not set" */
    ck_assert_uint_eq(tb_section_list(s, "tags", NULL), 0);
    ck_assert_str_eq(tb_section_text(s, 7), "");
    const char *const *items;
    ck_assert_uint_eq(tb_section_list(s, "colors", &items), 1);
    ck_assert_str_eq(items[0], "red");
    char *root = xasprintf("%s/r", real_tmpdir);
    ck_assert_str_eq(tb_section_string(s, "root"), root);
    free(root);
    for (size_t i = 0; i < 9; i++)
        ck_assert_str_eq(tb_section_origin(s, all_keys[i].name), "default");
    char *want = at(path, 2);
    ck_assert_str_eq(tb_section_origin(s, "root"), want);
    free(want);
    tb_section_free(s);

    /* A table without keys gives an empty section. */
    struct tb_section *e = build_ok(c, "model", NULL, NULL);
    ck_assert_str_eq(tb_section_name(e), "model");
    ck_assert_uint_eq(e->nkeys, 0);
    tb_section_free(e);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(section_set_origin_and_paths)
{
    char *path = ini("setsec.ini", "[backend]\nthreads = 2\nroot = data\n");
    struct tb_config *c = load_ok(path);
    set_ok(c, "backend.threads=16");
    set_ok(c, "backend.cache=rel/c.bin");
    set_ok(c, "backend.label=x");
    set_ok(c, "backend.tags=p,q");
    struct tb_section *s = build_ok(c, "backend", all_keys, NULL);
    ck_assert_int_eq(tb_section_int(s, "threads"), 16);
    /* Which --set, so that a plugin's message about the value names it. */
    ck_assert_str_eq(tb_section_origin(s, "threads"), "--set backend.threads=16");
    ck_assert_str_eq(tb_section_origin(s, "cache"), "--set backend.cache=rel/c.bin");
    ck_assert_str_eq(tb_section_origin(s, "tags"), "--set backend.tags=p,q");
    ck_assert_uint_eq(tb_section_list(s, "tags", NULL), 2);
    /* --set: relative to the working directory, written in the file: to its directory. */
    char *want = xasprintf("%s/rel/c.bin", cwd);
    ck_assert_str_eq(tb_section_string(s, "cache"), want);
    free(want);
    want = xasprintf("%s/data", real_tmpdir);
    ck_assert_str_eq(tb_section_string(s, "root"), want);
    free(want);
    want = at(path, 3);
    ck_assert_str_eq(tb_section_origin(s, "root"), want);
    free(want);
    tb_section_free(s);

    set_ok(c, "backend.cache=/abs/c.bin");
    s = build_ok(c, "backend", all_keys, NULL);
    ck_assert_str_eq(tb_section_string(s, "cache"), "/abs/c.bin");
    tb_section_free(s);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(section_unknown_key)
{
    struct tb_err err;
    char *path = ini("unknown.ini", "[backend]\nroot = r\nthraeds = 4\n");
    struct tb_config *c = load_ok(path);
    char *where = at(path, 3);
    build_fails(c, all_keys, NULL, 1, &err, where, "[backend]", "unknown key 'thraeds'", "(= '4')", "test plugin 'x'",
                "did you mean 'threads'?", "known keys: threads, scale, fast, device_memory, mode");
    ck_assert_msg(strncmp(err.msg, where, strlen(where)) == 0, "starts with FILE:LINE: %s", err.msg);
    free(where);
    tb_config_free(c);
    free(path);

    /* Nothing close: no suggestion, but the list of keys. */
    path = ini("unknown2.ini", "[backend]\nroot = r\nbatch_size = 4\n");
    c = load_ok(path);
    build_fails(c, all_keys, NULL, 1, &err, "unknown key 'batch_size'", "known keys: threads");
    ck_assert_not_contains(err.msg, "did you mean");
    tb_config_free(c);
    free(path);

    /* An unknown key from --set names the argument. */
    path = ini("unknown3.ini", "[backend]\nroot = r\n");
    c = load_ok(path);
    set_ok(c, "backend.colours=red");
    char *set = xasprintf("%s: --set backend.colours=red", path);
    build_fails(c, all_keys, NULL, 1, &err, set, "unknown key 'colours'", "did you mean 'colors'?");
    free(set);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(section_skip_keys)
{
    char *path = ini("skip.ini", "[backend]\nplugin = whatever\nroot = r\nplugn = x\n");
    struct tb_config *c = load_ok(path);
    static const char *const skip[] = { "plugin", NULL };
    struct tb_err err;
    /* "plugin" itself is the caller's; a misspelt one is still unknown, and listed keys
     * include the skipped one. */
    build_fails(c, all_keys, skip, 1, &err, "unknown key 'plugn'", "did you mean 'plugin'?",
                "known keys: plugin, threads");
    ck_assert_not_contains(err.msg, "unknown key 'plugin'");
    tb_config_free(c);
    free(path);

    path = ini("skip2.ini", "[backend]\nplugin = whatever\nroot = r\n");
    c = load_ok(path);
    struct tb_section *s = build_ok(c, "backend", all_keys, skip);
    ck_assert_uint_eq(s->nkeys, 10);
    tb_section_free(s);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(section_bad_values)
{
    struct tb_err err;
    char *path = ini("bad.ini", "[backend]\n"
                                "root = r\n"
                                "threads = many\n"       /* 3 */
                                "scale = 2\n"            /* 4 */
                                "fast = perhaps\n"       /* 5 */
                                "device_memory = 2T\n"   /* 6 */
                                "mode = turbo\n"         /* 7 */
                                "colors = red, purple\n" /* 8 */
                                "tags = a,,b\n");        /* 9 */
    struct tb_config *c = load_ok(path);
    build_fails(c, all_keys, NULL, 7, &err, path);
    static const struct {
        int line;
        const char *what;
    } want[] = {
        { 3, "[backend] threads = 'many': not an integer; allowed: an integer in 1..64" },
        { 4, "[backend] scale = '2': out of range; allowed: a number in 0..1" },
        { 5, "[backend] fast = 'perhaps': not a yes/no value; allowed: yes or no" },
        { 6, "[backend] device_memory = '2T': out of range; allowed: a size in bytes" },
        { 7, "[backend] mode = 'turbo': not an allowed value; allowed: one of: eager, lazy, auto" },
        { 9, "[backend] tags = 'a,,b': empty list item" }, /* table order: tags before colors */
        { 8, "[backend] colors = 'red, purple': unknown item 'purple'; allowed: a comma-separated list of: red, green, "
             "blue" },
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        char *l = line_at(err.msg, i);
        char *prefix = xasprintf("%s:%d: ", path, want[i].line);
        ck_assert_msg(l && strncmp(l, prefix, strlen(prefix)) == 0, "line %zu should start with %s: %s", i, prefix,
                      l ? l : "(none)");
        ck_assert_contains(l, want[i].what);
        free(prefix);
        free(l);
    }
    ck_assert_contains(err.msg, "<= 1T");
    ck_assert_not_contains(err.msg, "a bug in the key table");
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(section_out_of_range_from_set)
{
    struct tb_err err;
    char *path = ini("range.ini", "[backend]\nroot = r\nthreads = 4\n");
    struct tb_config *c = load_ok(path);
    set_ok(c, "backend.threads=65");
    char *where = xasprintf("%s: --set backend.threads=65: [backend] threads = '65': out of range", path);
    build_fails(c, all_keys, NULL, 1, &err, where, "an integer in 1..64");
    free(where);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(section_required_missing)
{
    struct tb_err err;
    char *path = ini("req.ini", "[backend]\nthreads = 2\n");
    struct tb_config *c = load_ok(path);
    build_fails(c, all_keys, NULL, 1, &err, path, "[backend] root is required by test plugin 'x'",
                "(where the data is)", "set it to a path");
    tb_config_free(c);
    free(path);

    /* A section the file never mentions still gets its required keys checked. */
    path = ini("req2.ini", "[run]\nname = x\n");
    c = load_ok(path);
    build_fails(c, all_keys, NULL, 1, &err, "[backend] root is required");
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(section_bad_default_named)
{
    static const struct tb_key bad[] = {
        { "threads", TB_KEY_INT, "zero", "1..8", "h" },
        TB_KEYS_END,
    };
    struct tb_err err;
    char *path = ini("baddef.ini", "[backend]\n");
    struct tb_config *c = load_ok(path);
    build_fails(c, bad, NULL, 1, &err, "[backend] threads = 'zero': not an integer",
                "(this is the default: a bug in the key table)");
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(section_all_problems_at_once)
{
    struct tb_err err;
    char *path = ini("all.ini", "[backend]\nthraeds = 4\nscale = -1\nzzz = 1\n");
    struct tb_config *c = load_ok(path);
    build_fails(c, all_keys, NULL, 4, &err, "unknown key 'thraeds'", "unknown key 'zzz'", "scale = '-1'",
                "root is required");
    char *l = the_line_with(err.msg, "thraeds");
    char *where = at(path, 2);
    ck_assert_contains(l, where);
    free(where);
    free(l);
    l = the_line_with(err.msg, "zzz");
    where = at(path, 4);
    ck_assert_contains(l, where);
    free(where);
    free(l);
    tb_config_free(c);
    free(path);
}
END_TEST

/* A getter asked for the wrong type, or a key its table lacks, is a bug: it aborts. */
static struct tb_section *getter_section(void)
{
    char *path = ini("getter.ini", "[backend]\nroot = r\n");
    struct tb_config *c = load_ok(path);
    free(path);
    /* The abort's own message is expected: keep it out of the test log. */
    ck_assert_ptr_nonnull(freopen("/dev/null", "w", stderr));
    return build_ok(c, "backend", all_keys, NULL); /* c leaks: the test process aborts */
}

START_TEST(getter_wrong_type_aborts)
{
    struct tb_section *s = getter_section();
    (void)tb_section_int(s, "scale");
}
END_TEST

START_TEST(getter_unknown_key_aborts)
{
    struct tb_section *s = getter_section();
    (void)tb_section_bool(s, "no_such_key");
}
END_TEST

START_TEST(getter_string_of_list_aborts)
{
    struct tb_section *s = getter_section();
    (void)tb_section_string(s, "tags");
}
END_TEST

/* ------------------------------------------------------------------ tb_setup_resolve */

static const char *test_plugins; /* $TB_TEST_PLUGINS */
static const char *builddir;     /* $TB_BUILDDIR */

/* Every test: its temporary directory (resolved, as the loader resolves INI dirs) and
 * the working directory. */
static void common_setup(void)
{
    ck_assert_ptr_nonnull(realpath(test_tmpdir(), real_tmpdir));
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
}

static void resolve_setup(void)
{
    common_setup();
    test_plugins = getenv("TB_TEST_PLUGINS");
    builddir = getenv("TB_BUILDDIR");
    ck_assert_msg(test_plugins && builddir, "TB_TEST_PLUGINS and TB_BUILDDIR must be set (run through make check)");
    setenv("TRAINBIG_PLUGIN_PATH", test_plugins, 1);
}

static void resolve_teardown(void)
{
    unsetenv("TRAINBIG_PLUGIN_PATH");
}

/* The valid [model] and [dataset] every resolving config needs. */
#define MODEL_AND_DATA "[model]\nplugin = testmodel\n[dataset]\nplugin = testdata\nroot = data\n"

static struct tb_setup *resolve_ok_at(const struct tb_config *c, int line)
{
    struct tb_setup *s = (struct tb_setup *)1;
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_setup_resolve(c, &s, &err);
    ck_assert_msg(rc == TB_OK, "line %d: resolving %s failed (%d): %s", line, c->path, rc, err.msg);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(err.count, 0);
    for (int i = 0; i < TB_SEC_COUNT; i++) {
        ck_assert_ptr_nonnull(s->slot[i].section);
        ck_assert_msg(!s->slot[i].kind || s->slot[i].plugin, "[%s] has no plugin", s->slot[i].name);
    }
    return s;
}
#define resolve_ok(c) resolve_ok_at((c), __LINE__)

static void resolve_fails_at(const struct tb_config *c, int status, int nlines, struct tb_err *err, int line, ...)
{
    struct tb_setup *s = (struct tb_setup *)1;
    tb_err_clear(err);
    int rc = tb_setup_resolve(c, &s, err);
    ck_assert_msg(rc == status, "line %d: resolving gave %d, want %d: %s", line, rc, status, err->msg);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(err->status, status);
    ck_assert_msg(err->count == nlines && test_count_lines(err->msg) == (size_t)nlines,
                  "line %d: want %d message lines, got %d: %s", line, nlines, err->count, err->msg);
    va_list ap;
    va_start(ap, line);
    expect_all(err->msg, line, ap);
    va_end(ap);
}
#define resolve_fails(c, status, nlines, err, ...) \
    resolve_fails_at((c), (status), (nlines), (err), __LINE__, __VA_ARGS__, (char *)NULL)

static const char full_ini[] = "[run]\n"               /* 1 */
                               "name = unit\n"         /* 2 */
                               "seed = 42\n"           /* 3 */
                               "[backend]\n"           /* 4 */
                               "plugin = testgood\n"   /* 5 */
                               "threads = 4\n"         /* 6 */
                               "mode = Auto\n"         /* 7 */
                               "cache = c.bin\n"       /* 8 */
                               "label = \"a;b # c\"\n" /* 9 */
                               "tags = x, y,z\n"       /* 10 */
                               "[model]\n"             /* 11 */
                               "plugin = testmodel\n"  /* 12 */
                               "width = 128\n"         /* 13 */
                               "[dataset]\n"           /* 14 */
                               "plugin = testdata\n"   /* 15 */
                               "root = data\n"         /* 16 */
                               "[train]\n"             /* 17 */
                               "batch = 8\n"           /* 18 */
                               "lr = 0.5\n";           /* 19 */

/* Every key of the core's tables is bound, once, to a field of its type that holds every
 * value the key allows; no binding names a key the table lacks. */
START_TEST(core_keys_bound_to_fields)
{
    const struct {
        const struct tb_key *keys;
        const struct tb_binding *bind;
    } tables[] = { { tb_run_keys, tb_run_bindings },
                   { tb_train_keys, tb_train_bindings },
                   { tb_report_keys, tb_report_bindings },
                   { tb_data_keys, tb_data_bindings },
                   { tb_model_core_keys, tb_model_core_bindings } };
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        size_t nbind = 0;
        for (const struct tb_binding *b = tables[t].bind; b->key; b++, nbind++) {
            const struct tb_key *k = tb_keys_find(tables[t].keys, b->key);
            ck_assert_msg(k, "binding of '%s' names no key of its table", b->key);
            char why[300];
            ck_assert_msg(tb_binding_fits(b, k, why, sizeof why), "%s", why);
            for (const struct tb_binding *c = tables[t].bind; c != b; c++)
                ck_assert_msg(strcmp(c->key, b->key) != 0, "key '%s' bound twice", b->key);
        }
        ck_assert_uint_eq(nbind, tb_keys_count(tables[t].keys));
    }
    /* The check can fail: an open range on an int field, or a size on a float. */
    const struct tb_key open = { "epochs", TB_KEY_INT, "1", "1..", "h" };
    const struct tb_binding to_int = { "epochs", TB_FIELD_INT, 0 }, to_float = { "epochs", TB_FIELD_FLOAT, 0 };
    char why[300];
    ck_assert(!tb_binding_fits(&to_int, &open, why, sizeof why));
    ck_assert_contains(why, "key 'epochs' allows '1..', more than its field holds");
    ck_assert(!tb_binding_fits(&to_float, &open, why, sizeof why));
    const struct tb_key ok = { "epochs", TB_KEY_INT, "1", "1..2147483647", "h" };
    ck_assert(tb_binding_fits(&to_int, &ok, why, sizeof why));
}
END_TEST

START_TEST(resolve_full_config)
{
    char *path = ini("full.ini", full_ini);
    struct tb_config *c = load_ok(path);
    set_ok(c, "train.momentum=0.5");
    struct tb_setup *s = resolve_ok(c);
    ck_assert_ptr_eq(s->cfg, c);
    static const char *const names[] = { "run", "backend", "platform", "model", "dataset", "swap", "train", "report" };
    for (int i = 0; i < TB_SEC_COUNT; i++) {
        ck_assert_str_eq(s->slot[i].name, names[i]);
        ck_assert_str_eq(tb_section_name(s->slot[i].section), names[i]);
    }
    ck_assert_str_eq(s->slot[TB_SEC_BACKEND].plugin->p->name, "testgood");
    ck_assert_str_eq(s->slot[TB_SEC_MODEL].plugin->p->name, "testmodel");
    ck_assert_str_eq(s->slot[TB_SEC_DATASET].plugin->p->name, "testdata");
    ck_assert_str_eq(s->slot[TB_SEC_SWAP].plugin->p->name, "none");
    ck_assert_ptr_null(s->slot[TB_SEC_RUN].plugin);
    ck_assert_ptr_null(s->slot[TB_SEC_TRAIN].plugin);

    char *want = at(path, 5);
    ck_assert_str_eq(s->slot[TB_SEC_BACKEND].plugin_origin, want);
    free(want);
    ck_assert_ptr_null(s->slot[TB_SEC_BACKEND].plugin_note);
    ck_assert_str_eq(s->slot[TB_SEC_SWAP].plugin_origin, "default");
    ck_assert_str_eq(s->slot[TB_SEC_PLATFORM].plugin_origin, "default");
    ck_assert_ptr_nonnull(s->slot[TB_SEC_PLATFORM].plugin_note);
    ck_assert_contains(s->slot[TB_SEC_PLATFORM].plugin_note, "auto: chose '");

    const struct tb_section *run = s->slot[TB_SEC_RUN].section;
    ck_assert_str_eq(tb_section_string(run, "name"), "unit");
    ck_assert_int_eq(tb_section_int(run, "seed"), 42);
    ck_assert_int_eq(tb_section_int(run, "epochs"), 1);
    ck_assert_str_eq(tb_section_origin(run, "epochs"), "default");

    const struct tb_section *be = s->slot[TB_SEC_BACKEND].section;
    ck_assert_int_eq(tb_section_int(be, "threads"), 4);
    ck_assert_int_eq(tb_section_enum(be, "mode"), 2);
    ck_assert_str_eq(tb_section_string(be, "mode"), "auto");
    ck_assert_str_eq(tb_section_string(be, "label"), "a;b # c");
    ck_assert_uint_eq(tb_section_list(be, "tags", NULL), 3);
    ck_assert_double_eq(tb_section_float(be, "scale"), 0.5);
    want = xasprintf("%s/c.bin", real_tmpdir);
    ck_assert_str_eq(tb_section_string(be, "cache"), want);
    free(want);
    want = at(path, 6);
    ck_assert_str_eq(tb_section_origin(be, "threads"), want);
    free(want);

    ck_assert_int_eq(tb_section_int(s->slot[TB_SEC_MODEL].section, "width"), 128);
    const struct tb_section *ds = s->slot[TB_SEC_DATASET].section;
    want = xasprintf("%s/data", real_tmpdir);
    ck_assert_str_eq(tb_section_string(ds, "root"), want);
    free(want);
    ck_assert_int_eq(tb_section_int(ds, "samples"), 4);

    const struct tb_section *tr = s->slot[TB_SEC_TRAIN].section;
    ck_assert_int_eq(tb_section_int(tr, "batch"), 8);
    ck_assert_double_eq(tb_section_float(tr, "lr"), 0.5);
    ck_assert_double_eq(tb_section_float(tr, "momentum"), 0.5);
    ck_assert_str_eq(tb_section_origin(tr, "momentum"), "--set train.momentum=0.5");
    ck_assert_double_eq(tb_section_float(tr, "weight_decay"), 1e-4);
    ck_assert_str_eq(tb_section_origin(tr, "weight_decay"), "default");
    ck_assert_str_eq(tb_section_string(s->slot[TB_SEC_REPORT].section, "csv"), "");

    /* The same values, bound once into the typed settings. */
    const struct tb_settings *st = &s->settings;
    ck_assert_str_eq(st->run.name, "unit");
    ck_assert_int_eq(st->run.seed, 42);
    ck_assert_int_eq(st->run.epochs, 1);
    ck_assert_int_eq(st->train.batch, 8);
    ck_assert_double_eq(st->train.lr, 0.5);
    ck_assert_double_eq(st->train.momentum, 0.5);
    ck_assert_double_eq(st->train.weight_decay, 1e-4);
    ck_assert_int_eq(st->train.lr_policy, TB_LR_POLY);
    ck_assert_uint_eq(st->train.allreduce_bucket, 25u << 20);
    ck_assert_str_eq(st->report.csv, "");
    ck_assert_int_eq(st->report.progress, TB_PROGRESS_AUTO);
    ck_assert_int_eq(st->data.workers, 2);
    ck_assert(st->data.aug.scale_min == 0.5f && st->data.aug.blur_sigma_max == 1.3f && st->data.aug.flip);
    ck_assert(st->sync_bn);

    tb_setup_free(s);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(resolve_unknown_section)
{
    struct tb_err err;
    char *text = xasprintf("%s[modle]\nwidth = 3\n", full_ini);
    char *path = ini("unknown-section.ini", text);
    struct tb_config *c = load_ok(path);
    char *where = at(path, 20);
    resolve_fails(c, TB_ERR_CONFIG, 1, &err, where, "unknown section [modle]", "did you mean [model]?",
                  "known sections: run, backend, platform, model, dataset, swap, train, report");
    tb_config_free(c);
    free(where);
    free(path);
    free(text);

    /* Nothing close; and one made by --set names the argument. */
    path = ini("unknown-section2.ini", full_ini);
    c = load_ok(path);
    set_ok(c, "frobnicate.x=1");
    set_ok(c, "trian.batch=4");
    resolve_fails(c, TB_ERR_CONFIG, 2, &err, "unknown section [frobnicate]; known sections: run,",
                  "--set trian.batch=4: unknown section [trian]; did you mean [train]?");
    char *l = the_line_with(err.msg, "[frobnicate]");
    ck_assert_not_contains(l, "did you mean");
    ck_assert_contains(l, "--set frobnicate.x=1");
    free(l);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(resolve_model_missing)
{
    struct tb_err err;
    char *path = ini("nomodel.ini", "[backend]\nplugin = testgood\n[dataset]\nplugin = testdata\nroot = d\n");
    struct tb_config *c = load_ok(path);
    resolve_fails(c, TB_ERR_CONFIG, 1, &err,
                  "[model] plugin is required: name a model plugin (available: gscnn, testmodel)");
    ck_assert_msg(strncmp(err.msg, path, strlen(path)) == 0, "the message starts with the file: %s", err.msg);
    tb_config_free(c);
    free(path);

    /* An empty value is no better than none. */
    path = ini("nomodel2.ini", "[model]\nplugin =\n[dataset]\nplugin = testdata\nroot = d\n");
    c = load_ok(path);
    char *where = at(path, 2);
    resolve_fails(c, TB_ERR_CONFIG, 1, &err, where, "[model] plugin is required", "(available: gscnn, testmodel)");
    free(where);
    tb_config_free(c);
    free(path);

    /* Both missing: two lines. */
    path = ini("nomodel3.ini", "[run]\nseed = 1\n");
    c = load_ok(path);
    resolve_fails(c, TB_ERR_CONFIG, 2, &err,
                  "[model] plugin is required: name a model plugin (available: gscnn, testmodel)",
                  "[dataset] plugin is required: name a dataset plugin (available: " DATASETS ")");
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(resolve_plugin_typo)
{
    struct tb_err err;
    char *path = ini("typo.ini", "[backend]\nplugin = testgod\nthreads = 2\n" MODEL_AND_DATA);
    struct tb_config *c = load_ok(path);
    char *where = at(path, 2);
    resolve_fails(c, TB_ERR_PLUGIN, 1, &err, where, "[backend] plugin = 'testgod'", "no backend plugin named 'testgod'",
                  "did you mean 'testgood'?", "available backend plugins:", "testfast", test_plugins);
    free(where);
    tb_config_free(c);
    free(path);

    /* A plugin of another kind by name is not found either. */
    path = ini("typo2.ini", "[model]\nplugin = testgood\n[dataset]\nplugin = testdata\nroot = d\n");
    c = load_ok(path);
    resolve_fails(c, TB_ERR_PLUGIN, 1, &err, "[model] plugin = 'testgood'", "no model plugin named 'testgood'",
                  "available model plugins: gscnn, testmodel");
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(resolve_auto_backend)
{
    char *path = ini("auto.ini", "[backend]\nplugin = auto\n" MODEL_AND_DATA);
    struct tb_config *c = load_ok(path);
    struct tb_setup *s = resolve_ok(c);
    const struct tb_setup_slot *b = &s->slot[TB_SEC_BACKEND];
    ck_assert_str_eq(b->plugin->p->name, "testfast"); /* 7 beats testgood's 5; broken ones never win */
    ck_assert_ptr_nonnull(b->plugin_note);
    ck_assert_contains(b->plugin_note, "auto: chose 'testfast' with score 7");
    ck_assert_contains(b->plugin_note, "testgood 5");
    ck_assert_contains(b->plugin_note, "testzero 0");
    ck_assert_contains(b->plugin_note, "testnoscore (no score()");
    ck_assert_contains(b->plugin_note, "abimajor (refused)");
    ck_assert_uint_eq(b->section->nkeys, 0);

    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    ck_assert_ptr_nonnull(f);
    tb_setup_print(s, f);
    fclose(f);
    char *sec = strstr(out, "\n[backend]\n");
    ck_assert_ptr_nonnull(sec);
    char *l = line_at(sec + 1, 1);
    ck_assert_ptr_nonnull(l);
    ck_assert_msg(strncmp(l, "plugin = testfast ", 18) == 0, "printed: %s", l);
    ck_assert_contains(l, "; auto: chose 'testfast'");
    free(l);
    free(out);
    tb_setup_free(s);
    tb_config_free(c);
    free(path);

    /* No [backend] at all: auto by default. */
    path = ini("auto2.ini", MODEL_AND_DATA);
    c = load_ok(path);
    s = resolve_ok(c);
    ck_assert_str_eq(s->slot[TB_SEC_BACKEND].plugin->p->name, "testfast");
    ck_assert_str_eq(s->slot[TB_SEC_BACKEND].plugin_origin, "default");
    tb_setup_free(s);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(resolve_auto_not_for_model)
{
    struct tb_err err;
    char *path = ini("automodel.ini", "[model]\nplugin = auto\n[dataset]\nplugin = auto\nroot = d\n");
    struct tb_config *c = load_ok(path);
    char *l2 = at(path, 2), *l4 = at(path, 4);
    resolve_fails(c, TB_ERR_CONFIG, 2, &err, l2, l4,
                  "[model] plugin = 'auto': only [backend] and [platform] choose by score; name a model plugin "
                  "(available: gscnn, testmodel)",
                  "[dataset] plugin = 'auto': only [backend] and [platform]", "(available: " DATASETS ")");
    free(l2);
    free(l4);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(resolve_plugin_by_absolute_path)
{
    char *so = xasprintf("%s/backend-testgood.so", test_plugins);
    char *text = xasprintf("[backend]\nplugin = %s\nthreads = 3\n" MODEL_AND_DATA, so);
    char *path = ini("abs.ini", text);
    struct tb_config *c = load_ok(path);
    struct tb_setup *s = resolve_ok(c);
    ck_assert_str_eq(s->slot[TB_SEC_BACKEND].plugin->p->name, "testgood");
    ck_assert_str_eq(s->slot[TB_SEC_BACKEND].plugin->path, so);
    ck_assert_int_eq(tb_section_int(s->slot[TB_SEC_BACKEND].section, "threads"), 3);
    tb_setup_free(s);
    tb_config_free(c);

    /* Found by path even where the search path has no plugins. */
    unsetenv("TRAINBIG_PLUGIN_PATH");
    char *text2 = xasprintf("[backend]\nplugin = %s\n[model]\nplugin = %s/model-testmodel.so\n[dataset]\nplugin = "
                            "%s/dataset-testdata.so\nroot = d\n",
                            so, test_plugins, test_plugins);
    char *path2 = ini("abs2.ini", text2);
    c = load_ok(path2);
    s = resolve_ok(c);
    ck_assert_str_eq(s->slot[TB_SEC_MODEL].plugin->p->name, "testmodel");
    tb_setup_free(s);
    tb_config_free(c);
    free(text2);
    free(path2);
    free(path);
    free(text);
    free(so);
}
END_TEST

START_TEST(resolve_plugin_by_relative_path)
{
    /* <tmpdir>/plugdir -> the test plugins; the working directory has no plugdir. */
    char *link = xasprintf("%s/plugdir", test_tmpdir());
    unlink(link);
    ck_assert_int_eq(symlink(test_plugins, link), 0);
    struct stat st;
    ck_assert_int_ne(stat("plugdir", &st), 0);

    char *path = ini("relplug.ini", "[backend]\nplugin = plugdir/backend-testgood.so\n" MODEL_AND_DATA);
    struct tb_config *c = load_ok(path);
    struct tb_setup *s = resolve_ok(c);
    ck_assert_str_eq(s->slot[TB_SEC_BACKEND].plugin->p->name, "testgood");
    char *want = xasprintf("%s/plugdir/backend-testgood.so", real_tmpdir);
    ck_assert_str_eq(s->slot[TB_SEC_BACKEND].plugin->path, want);
    free(want);
    tb_setup_free(s);
    tb_config_free(c);
    free(path);

    /* A relative path that does not exist is reported as joined to the INI's directory. */
    struct tb_err err;
    path = ini("relplug2.ini", "[backend]\nplugin = nothere/backend-x.so\n" MODEL_AND_DATA);
    c = load_ok(path);
    want = xasprintf("%s/nothere/backend-x.so", real_tmpdir);
    char *where = at(path, 2);
    resolve_fails(c, TB_ERR_PLUGIN, 1, &err, where, "[backend] plugin = 'nothere/backend-x.so'", want,
                  "no such plugin file");
    free(where);
    free(want);
    tb_config_free(c);
    free(path);
    free(link);
}
END_TEST

START_TEST(resolve_plugin_wrong_kind_by_path)
{
    struct tb_err err;
    char *so = xasprintf("%s/plugins/swap/.libs/swap-none.so", builddir);
    char *text = xasprintf("[backend]\nplugin = %s\n" MODEL_AND_DATA, so);
    char *path = ini("wrongkind.ini", text);
    struct tb_config *c = load_ok(path);
    char *where = at(path, 2);
    resolve_fails(c, TB_ERR_PLUGIN, 1, &err, where, "[backend] plugin = '", so,
                  "is a swap plugin ('none'), but [backend] needs a backend plugin");
    free(where);
    tb_config_free(c);
    free(path);
    free(text);
    free(so);

    so = xasprintf("%s/backend-testgood.so", test_plugins);
    text = xasprintf("[model]\nplugin = %s\n[dataset]\nplugin = testdata\nroot = d\n", so);
    path = ini("wrongkind2.ini", text);
    c = load_ok(path);
    resolve_fails(c, TB_ERR_PLUGIN, 1, &err, "[model] plugin = '",
                  "is a backend plugin ('testgood'), but [model] needs a model plugin");
    tb_config_free(c);
    free(path);
    free(text);
    free(so);
}
END_TEST

START_TEST(resolve_plugin_keys_checked)
{
    struct tb_err err;
    char *path = ini("pkeys.ini", "[backend]\nplugin = testgood\nthreads = 100\ntheads = 2\n"
                                  "[model]\nplugin = testmodel\n[dataset]\nplugin = testdata\n");
    struct tb_config *c = load_ok(path);
    char *l3 = at(path, 3), *l4 = at(path, 4);
    resolve_fails(c, TB_ERR_CONFIG, 3, &err, "[dataset] root is required by dataset plugin 'testdata'");
    char *l = the_line_with(err.msg, "threads = '100'");
    ck_assert_contains(l, l3);
    ck_assert_contains(l, "out of range; allowed: an integer in 1..64");
    free(l);
    l = the_line_with(err.msg, "unknown key 'theads'");
    ck_assert_contains(l, l4);
    ck_assert_contains(l, "for backend plugin 'testgood'");
    ck_assert_contains(l, "did you mean 'threads'?");
    ck_assert_contains(l, "known keys: plugin, threads,");
    free(l);
    free(l3);
    free(l4);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(resolve_plugin_from_set)
{
    char *path = ini("setplug.ini", "[backend]\nplugin = testgod\n" MODEL_AND_DATA);
    struct tb_config *c = load_ok(path);
    set_ok(c, "backend.plugin=testgood");
    set_ok(c, "swap.plugin=none");
    struct tb_setup *s = resolve_ok(c);
    ck_assert_str_eq(s->slot[TB_SEC_BACKEND].plugin->p->name, "testgood");
    ck_assert_str_eq(s->slot[TB_SEC_BACKEND].plugin_origin, "--set backend.plugin=testgood");
    ck_assert_str_eq(s->slot[TB_SEC_SWAP].plugin_origin, "--set swap.plugin=none");
    tb_setup_free(s);
    tb_config_free(c);
    free(path);
}
END_TEST

START_TEST(resolve_all_errors_together)
{
    struct tb_err err;
    char *path = ini("everything.ini", "[run]\n"             /* 1 */
                                       "seed = -5\n"         /* 2: out of range */
                                       "[backend]\n"         /* 3 */
                                       "plugin = testgod\n"  /* 4: typo */
                                       "[dataset]\n"         /* 5 */
                                       "plugin = testdata\n" /* 6 */
                                       "samples = 9\n"       /* 7: out of range; root missing */
                                       "[train]\n"           /* 8 */
                                       "bacth = 4\n"         /* 9: unknown key */
                                       "[modle]\n"           /* 10: unknown section */
                                       "width = 3\n");       /* [model] missing */
    struct tb_config *c = load_ok(path);
    resolve_fails(c, TB_ERR_CONFIG, 7, &err, path);
    static const struct {
        const char *needle;
        int line; /* 0: the file without a line */
        const char *what;
    } want[] = {
        { "[modle]", 10, "did you mean [model]?" },
        { "seed = '-5'", 2, "out of range; allowed: an integer in 0..2147483647" },
        { "plugin = 'testgod'", 4, "did you mean 'testgood'?" },
        { "[model] plugin is required", 0, "available: gscnn, testmodel" },
        { "root is required", 0, "dataset plugin 'testdata'" },
        { "samples = '9'", 7, "an integer in 1..8" },
        { "unknown key 'bacth'", 9, "did you mean 'batch'?" },
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        char *l = the_line_with(err.msg, want[i].needle);
        char *prefix = want[i].line ? xasprintf("%s:%d: ", path, want[i].line) : xasprintf("%s: ", path);
        ck_assert_msg(strncmp(l, prefix, strlen(prefix)) == 0, "\"%s\" should start with \"%s\"", l, prefix);
        ck_assert_contains(l, want[i].what);
        free(prefix);
        free(l);
    }
    /* The plugin error keeps its own status in the line, the whole is a config error. */
    ck_assert_int_eq(err.status, TB_ERR_CONFIG);
    tb_config_free(c);
    free(path);
}
END_TEST

/* ------------------------------------------------------------------ tb_setup_print */

static char *print_setup(const struct tb_setup *s)
{
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    ck_assert_ptr_nonnull(f);
    tb_setup_print(s, f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_ptr_nonnull(out);
    return out;
}

/* The printed line "key = ..." of [section], malloc'ed, or NULL. */
/* The line at p with the comment lines that continue its origin (";   " each), joined
 * by spaces as the origin was cut; allocated. Every printed line is checked to be one
 * the INI reader takes (at most 1000 characters). */
static char *joined_line(const char *p)
{
    size_t n = strcspn(p, "\n");
    ck_assert_uint_le(n, 1000);
    char *l = strndup(p, n);
    for (p += n; p[0] == '\n' && strncmp(p + 1, ";   ", 4) == 0; p += n + 1) {
        n = strcspn(p + 1, "\n");
        ck_assert_uint_le(n, 1000);
        char *more = xasprintf("%s %.*s", l, (int)n - 4, p + 5);
        free(l);
        l = more;
    }
    return l;
}

static char *printed_line(const char *text, const char *section, const char *key)
{
    char hdr[128];
    snprintf(hdr, sizeof hdr, "\n[%s]\n", section);
    const char *p = strstr(text, hdr);
    if (!p)
        return NULL;
    p += strlen(hdr);
    size_t klen = strlen(key);
    while (*p && *p != '[') {
        size_t n = strcspn(p, "\n");
        if (strncmp(p, key, klen) == 0 && (p[klen] == ' ' || p[klen] == '='))
            return joined_line(p);
        p += n + (p[n] == '\n');
    }
    return NULL;
}

/* Lines in [section] that set a key (not comments, not blank). */
static size_t printed_keys(const char *text, const char *section)
{
    char hdr[128];
    snprintf(hdr, sizeof hdr, "\n[%s]\n", section);
    const char *p = strstr(text, hdr);
    ck_assert_msg(p, "no [%s] in:\n%s", section, text);
    p += strlen(hdr);
    size_t count = 0;
    while (*p && *p != '[') {
        size_t n = strcspn(p, "\n");
        if (n && *p != ';')
            count++;
        p += n + (p[n] == '\n');
    }
    return count;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

START_TEST(print_every_key_with_origin)
{
    char *path = ini("print.ini", full_ini);
    struct tb_config *c = load_ok(path);
    set_ok(c, "train.momentum=0.75");
    set_ok(c, "report.progress=no");
    struct tb_setup *s = resolve_ok(c);
    char *out = print_setup(s);
    ck_assert_contains(out, path);

    for (int i = 0; i < TB_SEC_COUNT; i++) {
        const struct tb_setup_slot *slot = &s->slot[i];
        const struct tb_section *sec = slot->section;
        ck_assert_uint_eq(printed_keys(out, slot->name), sec->nkeys + (slot->plugin ? 1 : 0));
        if (slot->plugin) {
            char *l = printed_line(out, slot->name, "plugin");
            ck_assert_msg(l, "[%s] plugin not printed:\n%s", slot->name, out);
            char *want = xasprintf("plugin = %s ", slot->plugin->p->name);
            ck_assert_msg(strncmp(l, want, strlen(want)) == 0, "[%s]: %s", slot->name, l);
            ck_assert_contains(l, slot->plugin_note ? slot->plugin_note : slot->plugin_origin);
            free(want);
            free(l);
        }
        for (size_t k = 0; k < sec->nkeys; k++) {
            const char *key = sec->keys[k].name;
            char *l = printed_line(out, slot->name, key);
            ck_assert_msg(l, "[%s] %s not printed:\n%s", slot->name, key, out);
            char *suffix = xasprintf(" ; %s", sec->origins[k]);
            ck_assert_msg(ends_with(l, suffix), "[%s] %s: \"%s\" should end with \"%s\"", slot->name, key, l, suffix);
            const char *o = sec->origins[k];
            ck_assert_msg(strcmp(o, "default") == 0 || strncmp(o, "--set ", 6) == 0 ||
                              (strncmp(o, path, strlen(path)) == 0 && o[strlen(path)] == ':'),
                          "odd origin %s", o);
            free(suffix);
            free(l);
        }
    }

    /* Spot checks: each kind of origin, values as parsed. */
    char *l = printed_line(out, "backend", "threads");
    ck_assert_msg(strncmp(l, "threads = 4 ", 12) == 0, "%s", l);
    char *want = xasprintf("; %s:6", path);
    ck_assert_msg(ends_with(l, want), "%s", l);
    free(want);
    free(l);
    l = printed_line(out, "backend", "mode");
    ck_assert_msg(strncmp(l, "mode = auto ", 12) == 0, "%s", l);
    free(l);
    l = printed_line(out, "backend", "label");
    ck_assert_msg(strncmp(l, "label = \"a;b # c\" ", 18) == 0, "%s", l);
    free(l);
    l = printed_line(out, "backend", "tags");
    ck_assert_msg(strncmp(l, "tags = x, y, z ", 15) == 0, "%s", l);
    free(l);
    l = printed_line(out, "train", "momentum");
    ck_assert_msg(strncmp(l, "momentum = 0.75 ", 16) == 0 && ends_with(l, "; --set train.momentum=0.75"), "%s", l);
    free(l);
    l = printed_line(out, "train", "weight_decay");
    ck_assert_msg(strncmp(l, "weight_decay = 1e-4 ", 20) == 0 && ends_with(l, "; default"), "%s", l);
    free(l);
    l = printed_line(out, "swap", "plugin");
    ck_assert_msg(strncmp(l, "plugin = none ", 14) == 0 && ends_with(l, "; default"), "%s", l);
    free(l);
    l = printed_line(out, "report", "progress");
    ck_assert_msg(strncmp(l, "progress = no ", 14) == 0 && ends_with(l, "; --set report.progress=no"), "%s", l);
    free(l);

    free(out);
    tb_setup_free(s);
    tb_config_free(c);
    free(path);
}
END_TEST

/* Prints s to <tmpdir>/<subdir>/printed.ini and loads it again. */
static struct tb_config *reload_printed(const struct tb_setup *s, const char *subdir, char **printed_path)
{
    char *dir = xasprintf("%s/%s", test_tmpdir(), subdir);
    mkdir(dir, 0755);
    char *out = print_setup(s);
    char *name = xasprintf("%s/printed.ini", subdir);
    *printed_path = test_write_file(name, out);
    free(name);
    free(out);
    free(dir);
    return load_ok(*printed_path);
}

/* Every value of a equals the one of b, and every plugin is the same. */
static void same_setup(const struct tb_setup *a, const struct tb_setup *b, const char *b_path)
{
    for (int i = 0; i < TB_SEC_COUNT; i++) {
        const struct tb_setup_slot *x = &a->slot[i], *y = &b->slot[i];
        if (x->plugin)
            ck_assert_str_eq(x->plugin->p->name, y->plugin->p->name);
        ck_assert_uint_eq(x->section->nkeys, y->section->nkeys);
        for (size_t k = 0; k < x->section->nkeys; k++) {
            const char *key = x->section->keys[k].name;
            /* Lists compare by items: the printed text joins them with ", ". */
            if (x->section->keys[k].type != TB_KEY_LIST)
                ck_assert_msg(strcmp(tb_section_text(x->section, k), tb_section_text(y->section, k)) == 0,
                              "[%s] %s: \"%s\" before, \"%s\" after the round trip", x->name, key,
                              tb_section_text(x->section, k), tb_section_text(y->section, k));
            const struct tb_value *u = &x->section->values[k], *v = &y->section->values[k];
            ck_assert_uint_eq(u->nitems, v->nitems);
            for (size_t j = 0; j < u->nitems; j++)
                ck_assert_str_eq(u->items[j], v->items[j]);
            /* Every key was written out, so none is a default now. */
            const char *o = y->section->origins[k];
            ck_assert_msg(strncmp(o, b_path, strlen(b_path)) == 0, "[%s] %s comes from %s after the round trip",
                          x->name, key, o);
        }
    }
}

START_TEST(print_round_trip)
{
    char *path = ini("trip.ini", full_ini);
    struct tb_config *c = load_ok(path);
    set_ok(c, "train.momentum=0.75");
    set_ok(c, "run.name=\"  it's ; #x  \"");   /* needs \" quotes */
    set_ok(c, "backend.label=say \"hi\"; #1"); /* needs ' quotes */
    set_ok(c, "report.csv=out/epochs.csv");    /* relative to the working directory */
    set_ok(c, "backend.colors=Blue, green");
    struct tb_setup *s = resolve_ok(c);

    char *printed;
    struct tb_config *c2 = reload_printed(s, "elsewhere", &printed);
    struct tb_setup *s2 = resolve_ok(c2);
    same_setup(s, s2, printed);
    ck_assert_str_eq(tb_section_string(s2->slot[TB_SEC_RUN].section, "name"), "it's ; #x"); /* values are trimmed */
    ck_assert_str_eq(tb_section_string(s2->slot[TB_SEC_BACKEND].section, "label"), "say \"hi\"; #1");
    ck_assert_double_eq(tb_section_float(s2->slot[TB_SEC_TRAIN].section, "momentum"), 0.75);

    /* And the second print is the first one, but for the origins. */
    char *p1 = print_setup(s2);
    char *printed2;
    struct tb_config *c3 = reload_printed(s2, "again", &printed2);
    struct tb_setup *s3 = resolve_ok(c3);
    same_setup(s2, s3, printed2);

    tb_setup_free(s3);
    tb_config_free(c3);
    free(printed2);
    free(p1);
    tb_setup_free(s2);
    tb_config_free(c2);
    free(printed);
    tb_setup_free(s);
    tb_config_free(c);
    free(path);
}
END_TEST

/* A value that starts with a quote, or holds both quote characters, still survives. */
START_TEST(print_round_trip_quote_chars)
{
    char *path = ini("quotes.ini", full_ini);
    struct tb_config *c = load_ok(path);
    set_ok(c, "run.name=\"a\" b");
    set_ok(c, "backend.label='x");
    struct tb_setup *s = resolve_ok(c);
    ck_assert_str_eq(tb_section_string(s->slot[TB_SEC_RUN].section, "name"), "\"a\" b");
    char *printed;
    struct tb_config *c2 = reload_printed(s, "quotes", &printed);
    struct tb_setup *s2 = resolve_ok(c2);
    same_setup(s, s2, printed);
    tb_setup_free(s2);
    tb_config_free(c2);
    free(printed);
    tb_setup_free(s);
    tb_config_free(c);
    free(path);
}
END_TEST

/* ------------------------------------------------------------------ errors */

/* A string of n copies of c, allocated. */
static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

START_TEST(error_long_message_kept_whole)
{
    /* A message of 3000 bytes fits the buffer and is kept to its last byte: the hint that
     * ends it (what to do) is what a cut would lose first. */
    char *body = repeat('p', 3000);
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_err_set(&err, TB_ERR_PLUGIN, "searched %s; name one", body), TB_ERR_PLUGIN);
    ck_assert_uint_eq(strlen(err.msg), 3000 + strlen("searched ; name one"));
    ck_assert_contains(err.msg, "; name one");
    ck_assert_int_eq(err.count, 1);
    ck_assert_int_eq(err.status, TB_ERR_PLUGIN);

    /* The same through tb_err_add, after a first line. */
    tb_err_clear(&err);
    tb_err_add(&err, TB_ERR_CONFIG, "first");
    tb_err_add(&err, TB_ERR_PLUGIN, "%s!", body);
    ck_assert_uint_eq(strlen(err.msg), strlen("first\n") + 3001);
    ck_assert_int_eq(err.msg[strlen(err.msg) - 1], '!');
    ck_assert_int_eq(err.status, TB_ERR_CONFIG); /* the first status stays */
    free(body);
}
END_TEST

START_TEST(error_message_longer_than_buffer_says_it_was_cut)
{
    char *body = repeat('x', 2 * TB_ERR_MSG_MAX);
    struct tb_err err;
    tb_err_clear(&err);
    tb_err_set(&err, TB_ERR_CONFIG, "start %s", body);
    size_t len = strlen(err.msg);
    ck_assert_uint_lt(len, TB_ERR_MSG_MAX);
    ck_assert(strncmp(err.msg, "start xxx", 9) == 0);
    const char *mark = strstr(err.msg, " [message cut: ");
    ck_assert_ptr_nonnull(mark);
    size_t kept = (size_t)(mark - err.msg), cut = 0;
    ck_assert_int_eq(sscanf(mark, " [message cut: %zu more bytes]", &cut), 1);
    ck_assert_uint_eq(kept + cut, strlen("start ") + 2 * TB_ERR_MSG_MAX); /* nothing unaccounted */
    ck_assert_int_eq(err.msg[len - 1], ']');
    ck_assert_int_eq(err.count, 1);
    free(body);
}
END_TEST

START_TEST(error_lines_past_the_buffer_are_counted)
{
    struct tb_err err;
    tb_err_clear(&err);
    const int lines = 400; /* 400 lines of ~20 bytes: twice the buffer */
    for (int i = 0; i < lines; i++)
        tb_err_add(&err, TB_ERR_CONFIG, "problem number %04d", i);
    ck_assert_int_eq(err.count, lines);
    ck_assert_uint_lt(strlen(err.msg), TB_ERR_MSG_MAX);
    const char *tail = strstr(err.msg, "\n(and ");
    ck_assert_ptr_nonnull(tail);
    int more = 0;
    ck_assert_int_eq(sscanf(tail, "\n(and %d more)", &more), 1);
    size_t shown = 0;
    for (const char *p = err.msg; p < tail; p++)
        shown += *p == '\n';
    shown++; /* the first line */
    ck_assert_int_eq((int)shown + more, lines);
    ck_assert(strncmp(err.msg, "problem number 0000\n", 20) == 0);
}
END_TEST

START_TEST(error_set_may_quote_its_own_message)
{
    struct tb_err err;
    tb_err_clear(&err);
    tb_err_set(&err, TB_ERR_RUNTIME, "inner");
    tb_err_set(&err, TB_ERR_CONFIG, "outer (the last: %s)", err.msg);
    ck_assert_str_eq(err.msg, "outer (the last: inner)");
    ck_assert_int_eq(err.status, TB_ERR_CONFIG);
    ck_assert_int_eq(err.count, 1);
    ck_assert_int_eq(tb_err_set(NULL, TB_ERR_PLUGIN, "nowhere"), TB_ERR_PLUGIN);
}
END_TEST

START_TEST(error_prefix_on_a_full_message_says_it_was_cut)
{
    struct tb_err err;
    tb_err_clear(&err);
    tb_err_set(&err, TB_ERR_CONFIG, "short");
    tb_err_prefix(&err, "file.ini");
    ck_assert_str_eq(err.msg, "file.ini: short");

    char *body = repeat('y', TB_ERR_MSG_MAX - 100); /* fits alone, not with the prefix */
    tb_err_set(&err, TB_ERR_CONFIG, "%s", body);
    ck_assert_uint_eq(strlen(err.msg), TB_ERR_MSG_MAX - 100);
    char *prefix = repeat('f', 200);
    tb_err_prefix(&err, "%s", prefix);
    ck_assert_uint_lt(strlen(err.msg), TB_ERR_MSG_MAX);
    ck_assert(strncmp(err.msg, prefix, 200) == 0 && strncmp(err.msg + 200, ": yyy", 5) == 0);
    const char *mark = strstr(err.msg, " [message cut: ");
    ck_assert_ptr_nonnull(mark);
    size_t cut = 0;
    ck_assert_int_eq(sscanf(mark, " [message cut: %zu more bytes]", &cut), 1);
    ck_assert_uint_eq((size_t)(mark - err.msg) - 202 + cut, TB_ERR_MSG_MAX - 100);
    free(prefix);
    free(body);
}
END_TEST

/* ------------------------------------------------------------------ main */

/* What a message quotes is printed as it is where a terminal shows it as text, and as \xNN
 * where a terminal would act on it or could not show it. */
START_TEST(printable_escapes_what_a_terminal_acts_on)
{
    char out[128];
    static const struct {
        const char *in, *want;
    } cases[] = {
        { "plain 1.5G, tab\tand\nnewline", "plain 1.5G, tab\tand\nnewline" },
        { "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
        { "a\x1b[2Jb\x1b]0;x\x07", "a\\x1b[2Jb\\x1b]0;x\\x07" },
        { "cr\rdel\x7f", "cr\\x0ddel\\x7f" },
        { "c1 \xc2\x9b" "31m", "c1 \\xc2\\x9b31m" },                   /* CSI as UTF-8 */
        { "bad \xff\xfe \xc3", "bad \\xff\\xfe \\xc3" },              /* not UTF-8; cut short */
        { "over \xc0\xaf \xe0\x80\xaf", "over \\xc0\\xaf \\xe0\\x80\\xaf" }, /* overlong '/' */
        { "sur \xed\xa0\x80", "sur \\xed\\xa0\\x80" },                  /* a surrogate */
        { "big \xf4\x90\x80\x80", "big \\xf4\\x90\\x80\\x80" },        /* past U+10FFFF */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        ck_assert_str_eq(tb_printable(out, sizeof out, cases[k].in), cases[k].want);
    /* the worst case fits 4x, and a short buffer cuts before a character, never inside */
    ck_assert_str_eq(tb_printable(out, 13, "\x01\x02\x03"), "\\x01\\x02\\x03");
    ck_assert_str_eq(tb_printable(out, 12, "\x01\x02\x03"), "\\x01\\x02");
    ck_assert_str_eq(tb_printable(out, 4, "ab\xe2\x82\xac"), "ab");
    ck_assert_str_eq(tb_printable(out, 1, "abc"), "");
}
END_TEST

int main(void)
{
    /* Quiet logs: only errors. */
    setenv("TRAINBIG_LOG", "error", 1);
    unsetenv("TRAINBIG_PLUGIN_PATH");
    const char *fork_mode = getenv("CK_FORK");
    bool forking = !fork_mode || strcmp(fork_mode, "no") != 0;

    Suite *s = suite_create("config");

    TCase *tc = tcase_create("load");
    tcase_add_checked_fixture(tc, common_setup, NULL);
    tcase_add_test(tc, load_missing_file);
    tcase_add_test(tc, load_directory_is_not_a_file);
    tcase_add_test(tc, load_stray_line);
    tcase_add_test(tc, load_key_before_section);
    tcase_add_test(tc, load_key_set_twice);
    tcase_add_test(tc, load_unclosed_section);
    tcase_add_test(tc, load_other_syntax_errors);
    tcase_add_test(tc, load_many_errors_at_once);
    tcase_add_test(tc, load_comments_quotes_case);
    tcase_add_test(tc, load_relative_path_gets_absolute_dir);
    suite_add_tcase(s, tc);

    tc = tcase_create("set");
    tcase_add_checked_fixture(tc, common_setup, NULL);
    tcase_add_test(tc, set_overrides_file_value);
    tcase_add_test(tc, set_new_section_and_key);
    tcase_add_test(tc, set_malformed);
    tcase_add_test(tc, set_strips_quotes);
    suite_add_tcase(s, tc);

    tc = tcase_create("section");
    tcase_add_checked_fixture(tc, common_setup, NULL);
    tcase_add_test(tc, section_typed_values);
    tcase_add_test(tc, section_defaults);
    tcase_add_test(tc, section_set_origin_and_paths);
    tcase_add_test(tc, section_unknown_key);
    tcase_add_test(tc, section_skip_keys);
    tcase_add_test(tc, section_bad_values);
    tcase_add_test(tc, section_out_of_range_from_set);
    tcase_add_test(tc, section_required_missing);
    tcase_add_test(tc, section_bad_default_named);
    tcase_add_test(tc, section_all_problems_at_once);
    if (forking) { /* an abort can only be caught in a child */
        tcase_add_test_raise_signal(tc, getter_wrong_type_aborts, SIGABRT);
        tcase_add_test_raise_signal(tc, getter_unknown_key_aborts, SIGABRT);
        tcase_add_test_raise_signal(tc, getter_string_of_list_aborts, SIGABRT);
    }
    suite_add_tcase(s, tc);

    tc = tcase_create("resolve");
    tcase_add_checked_fixture(tc, resolve_setup, resolve_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, resolve_full_config);
    tcase_add_test(tc, core_keys_bound_to_fields);
    tcase_add_test(tc, resolve_unknown_section);
    tcase_add_test(tc, resolve_model_missing);
    tcase_add_test(tc, resolve_plugin_typo);
    tcase_add_test(tc, resolve_auto_backend);
    tcase_add_test(tc, resolve_auto_not_for_model);
    tcase_add_test(tc, resolve_plugin_by_absolute_path);
    tcase_add_test(tc, resolve_plugin_by_relative_path);
    tcase_add_test(tc, resolve_plugin_wrong_kind_by_path);
    tcase_add_test(tc, resolve_plugin_keys_checked);
    tcase_add_test(tc, resolve_plugin_from_set);
    tcase_add_test(tc, resolve_all_errors_together);
    suite_add_tcase(s, tc);

    tc = tcase_create("print");
    tcase_add_checked_fixture(tc, resolve_setup, resolve_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, print_every_key_with_origin);
    tcase_add_test(tc, print_round_trip);
    tcase_add_test(tc, print_round_trip_quote_chars);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, error_long_message_kept_whole);
    tcase_add_test(tc, error_message_longer_than_buffer_says_it_was_cut);
    tcase_add_test(tc, error_lines_past_the_buffer_are_counted);
    tcase_add_test(tc, error_set_may_quote_its_own_message);
    tcase_add_test(tc, error_prefix_on_a_full_message_says_it_was_cut);
    tcase_add_test(tc, printable_escapes_what_a_terminal_acts_on);
    suite_add_tcase(s, tc);

    return test_run_suite(s);
}
