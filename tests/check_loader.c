/* check_loader: plugin search order, refusals, lookup by name, auto selection, listing. */
#include "config.h"

#include <check.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <trainbig/trainbig.h>
#include <unistd.h>

#include "core/config/loader.h"
#include "core/util/kind.h"
#include "testutil.h"

static const char *test_plugins; /* $TB_TEST_PLUGINS */
static const char *builddir;     /* $TB_BUILDDIR */

static void setup(void)
{
    test_plugins = getenv("TB_TEST_PLUGINS");
    builddir = getenv("TB_BUILDDIR");
    ck_assert_msg(test_plugins && builddir, "run through make check (TB_TEST_PLUGINS and TB_BUILDDIR unset)");
    unsetenv("TRAINBIG_PLUGIN_PATH");
    setenv("TRAINBIG_LOG", "error", 1);
}

/* A new empty directory under the test's temporary directory. */
static char *new_dir(const char *name)
{
    char *d = test_path(name);
    ck_assert_int_eq(mkdir(d, 0755), 0);
    return d;
}

/* dir/link_name -> target_file: a test plugin's file name, or an absolute path. */
static void link_plugin(const char *dir, const char *link_name, const char *target_file)
{
    char *target, *link;
    if (target_file[0] == '/')
        target = strdup(target_file);
    else
        ck_assert_int_ge(asprintf(&target, "%s/%s", test_plugins, target_file), 0);
    ck_assert_int_ge(asprintf(&link, "%s/%s", dir, link_name), 0);
    ck_assert_int_eq(symlink(target, link), 0);
    free(target);
    free(link);
}

static char *test_plugin(const char *file)
{
    char *p;
    ck_assert_int_ge(asprintf(&p, "%s/%s", test_plugins, file), 0);
    return p;
}

/* Opens a test plugin that must be refused; returns the message. */
static const char *refusal(const char *file, int want_kind, struct tb_err *err)
{
    char *path = test_plugin(file);
    struct tb_plugin_handle *h = (void *)1;
    tb_err_clear(err);
    int rc = tb_plugin_open(path, want_kind, &h, err);
    ck_assert_int_eq(rc, TB_ERR_PLUGIN);
    ck_assert_ptr_null(h);
    ck_assert_contains(err->msg, path); /* every refusal names the file */
    free(path);
    return err->msg;
}

/* ------------------------------------------------------------------ directories */

START_TEST(dirs_env_first_then_build_tree_then_install)
{
    setenv("TRAINBIG_PLUGIN_PATH", "/nonexistent/a:/nonexistent/b", 1);
    struct tb_dirs d;
    ck_assert_int_eq(tb_plugin_dirs(&d), 0);
    ck_assert_uint_ge(d.n, 4);
    ck_assert_str_eq(d.dir[0], "/nonexistent/a");
    ck_assert_str_eq(d.dir[1], "/nonexistent/b");
    /* These tests link the uninstalled libtrainbig, so the build tree comes next... */
    char swapdir[PATH_MAX * 2];
    snprintf(swapdir, sizeof swapdir, "%s/plugins/swap/.libs", builddir);
    size_t swap_at = d.n;
    for (size_t i = 0; i < d.n; i++)
        if (strcmp(d.dir[i], swapdir) == 0)
            swap_at = i;
    ck_assert_msg(swap_at < d.n - 1, "build-tree plugin directory %s missing or last in %s", swapdir, tb_dirs_text(&d));
    /* ...and the install directory comes last. */
    ck_assert_contains(d.dir[d.n - 1], "/trainbig/plugins");
    tb_dirs_free(&d);
}
END_TEST

START_TEST(dirs_empty_entries_ignored)
{
    setenv("TRAINBIG_PLUGIN_PATH", "::/x::", 1);
    struct tb_dirs d;
    ck_assert_int_eq(tb_plugin_dirs(&d), 0);
    ck_assert_str_eq(d.dir[0], "/x");
    ck_assert_str_ne(d.dir[1], "");
    tb_dirs_free(&d);
}
END_TEST

/* ------------------------------------------------------------------ one file */

START_TEST(open_good_plugin)
{
    char *path = test_plugin("backend-testgood.so");
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_plugin_open(path, TB_KIND_BACKEND, &h, &err), TB_OK);
    ck_assert_str_eq(h->p->name, "testgood");
    ck_assert_int_eq(h->p->kind, TB_KIND_BACKEND);
    ck_assert_str_eq(h->p->version, "1.2.3");
    ck_assert_uint_eq(h->p->abi_major, TB_ABI_MAJOR);
    ck_assert_str_eq(h->path, path);
    char why[128] = "";
    ck_assert_int_eq(h->p->ops.head->score(why, sizeof why), 5);
    ck_assert_str_eq(why, "test backend, always usable");
    tb_plugin_close(h);
    /* Any kind accepted when none is asked for. */
    ck_assert_int_eq(tb_plugin_open(path, 0, &h, &err), TB_OK);
    tb_plugin_close(h);
    free(path);
}
END_TEST

START_TEST(refuses_newer_abi_major)
{
    struct tb_err err;
    const char *m = refusal("backend-abimajor.so", TB_KIND_BACKEND, &err);
    char plugin_abi[32], own_abi[32];
    snprintf(plugin_abi, sizeof plugin_abi, "ABI %d.%d", TB_ABI_MAJOR + 1, TB_ABI_MINOR);
    snprintf(own_abi, sizeof own_abi, "ABI %d.%d", TB_ABI_MAJOR, TB_ABI_MINOR);
    ck_assert_contains(m, plugin_abi);
    ck_assert_contains(m, own_abi);
}
END_TEST

START_TEST(refuses_newer_abi_minor)
{
    struct tb_err err;
    const char *m = refusal("backend-abiminor.so", TB_KIND_BACKEND, &err);
    char plugin_abi[32], own_abi[32];
    snprintf(plugin_abi, sizeof plugin_abi, "ABI %d.%d", TB_ABI_MAJOR, TB_ABI_MINOR + 1);
    snprintf(own_abi, sizeof own_abi, "ABI %d.%d", TB_ABI_MAJOR, TB_ABI_MINOR);
    ck_assert_contains(m, plugin_abi);
    ck_assert_contains(m, own_abi);
}
END_TEST

START_TEST(refuses_wrong_kind)
{
    struct tb_err err;
    const char *m = refusal("backend-wrongkind.so", TB_KIND_BACKEND, &err);
    ck_assert_contains(m, "is a swap plugin");
    ck_assert_contains(m, "[backend] needs a backend plugin");
}
END_TEST

START_TEST(refuses_missing_entry_symbol)
{
    struct tb_err err;
    const char *m = refusal("backend-noentry.so", 0, &err);
    ck_assert_contains(m, "does not export the symbol 'trainbig_plugin'");
}
END_TEST

START_TEST(refuses_unloadable_with_dlerror)
{
    struct tb_err err;
    const char *m = refusal("backend-unloadable.so", 0, &err);
    ck_assert_contains(m, "cannot load the plugin");
    /* dlerror() names the symbol that could not be resolved. */
    ck_assert_contains(m, "tb_test_symbol_that_does_not_exist");
}
END_TEST

START_TEST(refuses_bad_key_table)
{
    struct tb_err err;
    const char *m = refusal("backend-badkeys.so", 0, &err);
    ck_assert_contains(m, "key 'threads' has a bad default 'zero'");
}
END_TEST

START_TEST(refuses_non_elf_file)
{
    char *path = test_write_file("backend-text.so", "this is not a shared object\n");
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_plugin_open(path, 0, &h, &err), TB_ERR_PLUGIN);
    ck_assert_contains(err.msg, path);
    ck_assert_contains(err.msg, "cannot load the plugin: ");
    ck_assert_contains(err.msg, "backend-text.so"); /* dlerror's own text names it too */
    free(path);
}
END_TEST

START_TEST(refuses_missing_file)
{
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_plugin_open("/nonexistent/backend-x.so", 0, &h, &err), TB_ERR_PLUGIN);
    ck_assert_contains(err.msg, "/nonexistent/backend-x.so: no such plugin file");
}
END_TEST

/* ------------------------------------------------------------------ by name */

START_TEST(find_by_name_in_env_path)
{
    setenv("TRAINBIG_PLUGIN_PATH", test_plugins, 1);
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_plugin_find(TB_KIND_BACKEND, "testgood", &h, &err), TB_OK);
    ck_assert_str_eq(h->p->name, "testgood");
    ck_assert_contains(h->path, test_plugins);
    tb_plugin_close(h);
}
END_TEST

START_TEST(find_shipped_plugin_in_build_tree)
{
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_plugin_find(TB_KIND_SWAP, "none", &h, &err), TB_OK);
    char expect[PATH_MAX * 2];
    snprintf(expect, sizeof expect, "%s/plugins/swap/.libs/swap-none.so", builddir);
    ck_assert_str_eq(h->path, expect);
    tb_plugin_close(h);
}
END_TEST

START_TEST(find_follows_search_order)
{
    char *a = new_dir("order-a");
    link_plugin(a, "backend-testgood.so", "backend-testgood.so");
    char path[PATH_MAX * 3];
    snprintf(path, sizeof path, "%s/plugins/swap/.libs/swap-none.so", builddir);
    link_plugin(a, "swap-none.so", path);
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);

    snprintf(path, sizeof path, "%s:%s", a, test_plugins);
    setenv("TRAINBIG_PLUGIN_PATH", path, 1);
    ck_assert_int_eq(tb_plugin_find(TB_KIND_BACKEND, "testgood", &h, &err), TB_OK);
    ck_assert_contains(h->path, a);
    tb_plugin_close(h);

    snprintf(path, sizeof path, "%s:%s", test_plugins, a);
    setenv("TRAINBIG_PLUGIN_PATH", path, 1);
    ck_assert_int_eq(tb_plugin_find(TB_KIND_BACKEND, "testgood", &h, &err), TB_OK);
    char *original = test_plugin("backend-testgood.so");
    ck_assert_str_eq(h->path, original);
    free(original);
    tb_plugin_close(h);

    /* TRAINBIG_PLUGIN_PATH comes before the build tree. */
    setenv("TRAINBIG_PLUGIN_PATH", a, 1);
    ck_assert_int_eq(tb_plugin_find(TB_KIND_SWAP, "none", &h, &err), TB_OK);
    ck_assert_contains(h->path, a);
    tb_plugin_close(h);
    free(a);
}
END_TEST

START_TEST(find_unknown_name_lists_available)
{
    setenv("TRAINBIG_PLUGIN_PATH", test_plugins, 1);
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_plugin_find(TB_KIND_BACKEND, "tesgood", &h, &err), TB_ERR_PLUGIN);
    ck_assert_ptr_null(h);
    ck_assert_contains(err.msg, "no backend plugin named 'tesgood'");
    ck_assert_contains(err.msg, "did you mean 'testgood'?");
    ck_assert_contains(err.msg, "available backend plugins: ");
    ck_assert_contains(err.msg, "testfast");
    ck_assert_contains(err.msg, "testzero");
    ck_assert_contains(err.msg, test_plugins); /* where it looked */

    tb_err_clear(&err);
    ck_assert_int_eq(tb_plugin_find(TB_KIND_MODEL, "zzzzzzzz", &h, &err), TB_ERR_PLUGIN);
    ck_assert_contains(err.msg, "available model plugins: gscnn, testmodel");
    ck_assert_not_contains(err.msg, "did you mean");
}
END_TEST

START_TEST(find_refuses_file_named_for_another_plugin)
{
    char *a = new_dir("misnamed");
    link_plugin(a, "backend-other.so", "backend-testgood.so");
    setenv("TRAINBIG_PLUGIN_PATH", a, 1);
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_plugin_find(TB_KIND_BACKEND, "other", &h, &err), TB_ERR_PLUGIN);
    ck_assert_contains(err.msg, "named for 'other' but the plugin calls itself 'testgood'");
    free(a);
}
END_TEST

START_TEST(find_reports_broken_file_of_that_name)
{
    setenv("TRAINBIG_PLUGIN_PATH", test_plugins, 1);
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    /* A broken file that has the name asked for is reported, not skipped. */
    ck_assert_int_eq(tb_plugin_find(TB_KIND_BACKEND, "abimajor", &h, &err), TB_ERR_PLUGIN);
    ck_assert_contains(err.msg, "backend-abimajor.so: built for plugin ABI");
}
END_TEST

/* ------------------------------------------------------------------ auto */

START_TEST(auto_picks_highest_nonzero_score)
{
    setenv("TRAINBIG_PLUGIN_PATH", test_plugins, 1);
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    char why[2048];
    ck_assert_int_eq(tb_plugin_auto(TB_KIND_BACKEND, &h, why, sizeof why, &err), TB_OK);
    /* The broken plugins claim 1000 but are refused before they are scored. */
    ck_assert_str_eq(h->p->name, "testfast");
    ck_assert_contains(why, "chose 'testfast' with score 7 (test score 7)");
    ck_assert_contains(why, "testgood 5 (test backend, always usable)");
    ck_assert_contains(why, "testzero 0 (test score 0)");
    ck_assert_contains(why, "testnoscore (no score()");
    ck_assert_contains(why, "abimajor (refused)");
    tb_plugin_close(h);
}
END_TEST

START_TEST(auto_skips_unusable_candidates)
{
    char *a = new_dir("unusable");
    link_plugin(a, "backend-testzero.so", "backend-testzero.so");
    link_plugin(a, "backend-testnoscore.so", "backend-testnoscore.so");
    setenv("TRAINBIG_PLUGIN_PATH", a, 1);
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    char why[2048];
    /* Score 0 and no score() are never chosen: the build tree's cpu backend (score 1) is. */
    ck_assert_int_eq(tb_plugin_auto(TB_KIND_BACKEND, &h, why, sizeof why, &err), TB_OK);
    ck_assert_str_eq(h->p->name, "cpu");
    ck_assert_contains(why, "chose 'cpu' with score 1");
    ck_assert_contains(why, "testzero 0 (test score 0)");
    ck_assert_contains(why, "testnoscore (no score()");
    tb_plugin_close(h);
    free(a);
}
END_TEST

START_TEST(auto_fails_when_nothing_scores)
{
#if defined(__x86_64__)
    /* Shadow the build tree's x86-pcie platform with a broken file of the same name: the
     * only platform left, power9-nvlink, scores 0 on x86. */
    char *a = new_dir("no-platform");
    link_plugin(a, "platform-x86-pcie.so", "backend-testzero.so");
    setenv("TRAINBIG_PLUGIN_PATH", a, 1);
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    char why[2048];
    ck_assert_int_eq(tb_plugin_auto(TB_KIND_PLATFORM, &h, why, sizeof why, &err), TB_ERR_PLUGIN);
    ck_assert_ptr_null(h);
    ck_assert_contains(err.msg, "no usable platform plugin for 'auto'");
    ck_assert_contains(err.msg, "x86-pcie (refused)");
    ck_assert_contains(err.msg, "power9-nvlink 0 (not a POWER9 CPU");
    ck_assert_contains(err.msg, "name one with plugin = NAME");
    free(a);
#endif
}
END_TEST

START_TEST(auto_platform_on_this_machine)
{
    /* The shipped platforms score themselves from /proc/cpuinfo: exactly one of them
     * must claim an x86 or POWER9 machine. */
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    char why[2048];
    ck_assert_int_eq(tb_plugin_auto(TB_KIND_PLATFORM, &h, why, sizeof why, &err), TB_OK);
#if defined(__x86_64__)
    ck_assert_str_eq(h->p->name, "x86-pcie");
    ck_assert_contains(why, "power9-nvlink 0 (not a POWER9 CPU");
#endif
    tb_plugin_close(h);
}
END_TEST

/* ------------------------------------------------------------------ listing */

static bool listed(const struct tb_plugin_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i]->p->name, name) == 0)
            return true;
    return false;
}

static const char *note_with(const struct tb_plugin_list *l, const char *needle)
{
    for (size_t i = 0; i < l->nnotes; i++)
        if (strstr(l->notes[i], needle))
            return l->notes[i];
    return NULL;
}

START_TEST(list_all_kinds_with_notes)
{
    char *a = new_dir("listing");
    link_plugin(a, "backend-testgood.so", "backend-testgood.so"); /* shadows the original */
    link_plugin(a, "dataset-foo.so", "backend-testgood.so");      /* misnamed */
    char path[PATH_MAX * 3];
    snprintf(path, sizeof path, "%s:%s", a, test_plugins);
    setenv("TRAINBIG_PLUGIN_PATH", path, 1);

    struct tb_plugin_list l;
    ck_assert_int_eq(tb_plugin_list(0, &l), 0);
    ck_assert(listed(&l, "testgood"));
    ck_assert(listed(&l, "testfast"));
    ck_assert(listed(&l, "testmodel"));
    ck_assert(listed(&l, "testdata"));
    ck_assert(listed(&l, "none"));     /* build tree */
    ck_assert(listed(&l, "x86-pcie")); /* build tree */
    ck_assert(!listed(&l, "abimajor"));
    ck_assert(!listed(&l, "foo"));
    ck_assert_ptr_nonnull(note_with(&l, "refused: "));
    ck_assert_ptr_nonnull(note_with(&l, "backend-abimajor.so: built for plugin ABI"));
    ck_assert_ptr_nonnull(note_with(&l, "backend-unloadable.so: cannot load"));
    ck_assert_ptr_nonnull(note_with(&l, "backend-noentry.so: not a trainbig plugin"));
    ck_assert_ptr_nonnull(note_with(&l, "dataset-foo.so: not found by name: rename it to backend-testgood.so"));
    const char *shadow = note_with(&l, "shadowed: ");
    ck_assert_ptr_nonnull(shadow);
    ck_assert_contains(shadow, test_plugins);
    /* The first of a name wins: testgood comes from directory a. */
    for (size_t i = 0; i < l.n; i++)
        if (strcmp(l.items[i]->p->name, "testgood") == 0)
            ck_assert_contains(l.items[i]->path, a);
    tb_plugin_list_free(&l);
    free(a);
}
END_TEST

START_TEST(list_agrees_with_lookup_when_first_file_is_refused)
{
    /* A refused file shadows a good one of the same name later in the path, for lookup
     * by name and for the listing alike. */
    char *a = new_dir("refused-first");
    link_plugin(a, "backend-testgood.so", "backend-abimajor.so");
    char path[PATH_MAX * 3];
    snprintf(path, sizeof path, "%s:%s", a, test_plugins);
    setenv("TRAINBIG_PLUGIN_PATH", path, 1);

    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_plugin_find(TB_KIND_BACKEND, "testgood", &h, &err), TB_ERR_PLUGIN);
    ck_assert_contains(err.msg, "built for plugin ABI");

    struct tb_plugin_list l;
    ck_assert_int_eq(tb_plugin_list(TB_KIND_BACKEND, &l), 0);
    ck_assert(!listed(&l, "testgood"));
    const char *refused = note_with(&l, "refused: ");
    ck_assert_ptr_nonnull(refused);
    ck_assert_contains(refused, a);
    const char *shadow = note_with(&l, "shadowed: ");
    ck_assert_ptr_nonnull(shadow);
    ck_assert_contains(shadow, "backend-testgood.so (by ");
    ck_assert_contains(shadow, a);
    /* Only files named for the kind asked for are described; one of them holds a swap
     * plugin, and is described with the name to give it. */
    ck_assert_ptr_null(note_with(&l, "/swap-"));
    ck_assert_ptr_nonnull(note_with(&l, "backend-wrongkind.so: not found by name: rename it to swap-wrongkind.so"));
    tb_plugin_list_free(&l);
    free(a);
}
END_TEST

START_TEST(list_one_kind)
{
    setenv("TRAINBIG_PLUGIN_PATH", test_plugins, 1);
    struct tb_plugin_list l;
    ck_assert_int_eq(tb_plugin_list(TB_KIND_MODEL, &l), 0);
    /* The test model, and gscnn from the build tree. */
    ck_assert_uint_eq(l.n, 2);
    for (size_t i = 0; i < l.n; i++)
        ck_assert_int_eq((int)l.items[i]->p->kind, TB_KIND_MODEL);
    ck_assert(strcmp(l.items[0]->p->name, "testmodel") == 0 || strcmp(l.items[1]->p->name, "testmodel") == 0);
    ck_assert(strcmp(l.items[0]->p->name, "gscnn") == 0 || strcmp(l.items[1]->p->name, "gscnn") == 0);
    tb_plugin_list_free(&l);
}
END_TEST

START_TEST(list_one_kind_opens_only_its_files)
{
    /* A backend in a file named for a swap plugin: the swap listing opens it and says how
     * to rename it; the backend listing does not open files named for other kinds, so it
     * neither lists nor describes the backend in a file named for a dataset. */
    char *a = new_dir("one-kind");
    link_plugin(a, "swap-stray.so", "backend-testgood.so");
    link_plugin(a, "dataset-bar.so", "backend-testgood.so");
    char path[PATH_MAX * 3];
    snprintf(path, sizeof path, "%s:%s", a, test_plugins);
    setenv("TRAINBIG_PLUGIN_PATH", path, 1);

    struct tb_plugin_list l;
    ck_assert_int_eq(tb_plugin_list(TB_KIND_SWAP, &l), 0);
    ck_assert(!listed(&l, "testgood"));
    ck_assert(listed(&l, "none"));
    ck_assert_ptr_nonnull(note_with(&l, "swap-stray.so: not found by name: rename it to backend-testgood.so"));
    ck_assert_ptr_null(note_with(&l, "dataset-bar.so"));
    ck_assert_ptr_null(note_with(&l, "backend-unloadable.so"));
    tb_plugin_list_free(&l);

    ck_assert_int_eq(tb_plugin_list(TB_KIND_BACKEND, &l), 0);
    ck_assert(listed(&l, "testgood"));
    ck_assert_ptr_null(note_with(&l, "dataset-bar.so"));
    ck_assert_ptr_null(note_with(&l, "swap-stray.so"));
    ck_assert_ptr_nonnull(note_with(&l, "backend-unloadable.so: cannot load"));
    for (size_t i = 0; i < l.n; i++)
        ck_assert_int_eq((int)l.items[i]->p->kind, TB_KIND_BACKEND);
    tb_plugin_list_free(&l);

    /* The listing of all kinds still finds both misnamed files. */
    ck_assert_int_eq(tb_plugin_list(0, &l), 0);
    ck_assert_ptr_nonnull(note_with(&l, "dataset-bar.so: not found by name"));
    ck_assert_ptr_nonnull(note_with(&l, "swap-stray.so: not found by name"));
    tb_plugin_list_free(&l);
    free(a);
}
END_TEST

START_TEST(kind_names_round_trip)
{
    for (int k = TB_KIND_FIRST; k <= TB_KIND_LAST; k++)
        ck_assert_int_eq(tb_kind_from_name(tb_kind_name(k)), k);
    ck_assert_ptr_null(tb_kind_name(0));
    ck_assert_ptr_null(tb_kind_name(TB_KIND_LAST + 1));
    ck_assert_int_eq(tb_kind_from_name("backends"), 0);
}
END_TEST

/* Descriptors made in the test, checked as tb_plugin_open checks a file's. */
static int fake_create(const struct tb_section *sec, void **ctx, struct tb_err *err)
{
    (void)sec;
    (void)err;
    *ctx = NULL;
    return TB_OK;
}

static void fake_destroy(void *ctx)
{
    (void)ctx;
}

static uint64_t fake_failed_bytes(void *ctx, int device)
{
    (void)ctx;
    (void)device;
    return 1;
}

static uint64_t fake_scratch_bytes(void *ctx, const void *state, bool backward)
{
    (void)ctx;
    (void)state;
    (void)backward;
    return 2;
}

static int fake_open_split(void *ctx, const char *split, struct tb_err *err)
{
    (void)ctx;
    (void)split;
    (void)err;
    return TB_OK;
}

static int adopt(const struct tb_plugin *p, struct tb_plugin_handle **h, struct tb_err *err)
{
    tb_err_clear(err);
    return tb_plugin_adopt(p, "made.so", 0, h, err);
}

#define DESCRIPTOR(major, minor, kind_, member, vtable)                                              \
    (struct tb_plugin)                                                                               \
    {                                                                                                \
        .abi_major = (major), .abi_minor = (minor), .kind = (kind_), .name = "made", .version = "0", \
        .description = "a test descriptor", .ops.member = (vtable)                                   \
    }

/* A plugin of this major is read whole: its vtable is copied to the core's, every member
 * up to the last, and what it left NULL stays NULL. */
START_TEST(vtable_copied_whole)
{
    for (int k = TB_KIND_FIRST; k <= TB_KIND_LAST; k++)
        ck_assert_uint_ne(tb_vtable_size(k, TB_ABI_MINOR), 0);
    ck_assert_uint_eq(tb_vtable_size(TB_KIND_BACKEND, TB_ABI_MINOR), sizeof(struct tb_backend_ops));
    ck_assert_uint_eq(tb_vtable_size(TB_KIND_DATASET, 0), sizeof(struct tb_dataset_ops));
    ck_assert_uint_eq(tb_vtable_size(TB_KIND_LAST + 1, 0), 0);

    static const struct tb_backend_ops ops = {
        .head = { .create = fake_create, .destroy = fake_destroy },
        .alloc_failed_bytes = fake_failed_bytes,
        .op_scratch_bytes = fake_scratch_bytes, /* the last member */
    };
    const struct tb_plugin p = DESCRIPTOR(TB_ABI_MAJOR, TB_ABI_MINOR, TB_KIND_BACKEND, backend, &ops);
    struct tb_plugin_handle *h;
    struct tb_err err;
    ck_assert_msg(adopt(&p, &h, &err) == TB_OK, "%s", err.msg);
    ck_assert_ptr_ne(h->p->ops.backend, &ops); /* the core's copy */
    ck_assert_ptr_eq(h->p->ops.head, &h->p->ops.backend->head);
    ck_assert_ptr_eq(h->p->ops.head->create, fake_create);
    ck_assert_ptr_null(h->p->ops.head->score);
    ck_assert_ptr_eq(h->p->ops.backend->alloc_failed_bytes, fake_failed_bytes);
    ck_assert_ptr_eq(h->p->ops.backend->op_scratch_bytes, fake_scratch_bytes);
    ck_assert_ptr_null(h->p->ops.backend->op_describe);
    void *ctx = (void *)&ops;
    ck_assert_int_eq(tb_plugin_create(h->p, NULL, &ctx, &err), TB_OK);
    ck_assert_ptr_null(ctx); /* fake_create's */
    tb_plugin_destroy(h->p, ctx);
    tb_plugin_close(h);
}
END_TEST

/* A plugin of ABI 1 has a vtable of another layout: it is refused, naming the file, its
 * ABI and what to do, never read. */
START_TEST(refuses_abi_1_plugin)
{
    static const struct tb_backend_ops ops = { .head = { .create = fake_create, .destroy = fake_destroy } };
    const struct tb_plugin p = DESCRIPTOR(1, 16, TB_KIND_BACKEND, backend, &ops);
    struct tb_plugin_handle *h = (void *)&ops;
    struct tb_err err;
    ck_assert_int_eq(adopt(&p, &h, &err), TB_ERR_PLUGIN);
    ck_assert_ptr_null(h);
    ck_assert_contains(err.msg, "made.so: built for plugin ABI 1.16");
    char own[64];
    snprintf(own, sizeof own, "this trainbig has ABI %d.%d", TB_ABI_MAJOR, TB_ABI_MINOR);
    ck_assert_contains(err.msg, own);
    ck_assert_contains(err.msg, "rebuild the plugin against this trainbig's SDK");
}
END_TEST

/* The head's create and destroy are every kind's; a kind's own required members are named
 * when they are missing. */
START_TEST(refuses_missing_required_members)
{
    struct tb_plugin_handle *h;
    struct tb_err err;
    static const struct tb_swap_ops no_destroy = { .head = { .create = fake_create } };
    struct tb_plugin p = DESCRIPTOR(TB_ABI_MAJOR, TB_ABI_MINOR, TB_KIND_SWAP, swap, &no_destroy);
    ck_assert_int_eq(adopt(&p, &h, &err), TB_ERR_PLUGIN);
    ck_assert_contains(err.msg, "made.so: swap plugin 'made' lacks a required member of its vtable "
                                "(head.create/head.destroy)");

    static const struct tb_model_ops no_build = { .head = { .create = fake_create, .destroy = fake_destroy } };
    p = DESCRIPTOR(TB_ABI_MAJOR, TB_ABI_MINOR, TB_KIND_MODEL, model, &no_build);
    ck_assert_int_eq(adopt(&p, &h, &err), TB_ERR_PLUGIN);
    ck_assert_contains(err.msg, "model plugin 'made' lacks a required member of its vtable (build)");

    static const struct tb_platform_ops no_link = { .head = { .create = fake_create, .destroy = fake_destroy } };
    p = DESCRIPTOR(TB_ABI_MAJOR, TB_ABI_MINOR, TB_KIND_PLATFORM, platform, &no_link);
    ck_assert_int_eq(adopt(&p, &h, &err), TB_ERR_PLUGIN);
    ck_assert_contains(err.msg, "(link)");

    /* A dataset of ABI 1 shape: no open_split, so its splits could never be opened. */
    static const struct tb_dataset_ops no_split = { .head = { .create = fake_create, .destroy = fake_destroy } };
    p = DESCRIPTOR(TB_ABI_MAJOR, TB_ABI_MINOR, TB_KIND_DATASET, dataset, &no_split);
    ck_assert_int_eq(adopt(&p, &h, &err), TB_ERR_PLUGIN);
    ck_assert_contains(err.msg, "dataset plugin 'made' lacks a required member of its vtable (open_split)");
    static const struct tb_dataset_ops no_count = { .head = { .create = fake_create, .destroy = fake_destroy },
                                                    .open_split = fake_open_split };
    p = DESCRIPTOR(TB_ABI_MAJOR, TB_ABI_MINOR, TB_KIND_DATASET, dataset, &no_count);
    ck_assert_int_eq(adopt(&p, &h, &err), TB_ERR_PLUGIN);
    ck_assert_contains(err.msg, "(count)");

    /* A backend needs only its head to load (its compute members are checked where a graph
     * is to run on it). */
    static const struct tb_backend_ops head_only = { .head = { .create = fake_create, .destroy = fake_destroy } };
    p = DESCRIPTOR(TB_ABI_MAJOR, TB_ABI_MINOR, TB_KIND_BACKEND, backend, &head_only);
    ck_assert_msg(adopt(&p, &h, &err) == TB_OK, "%s", err.msg);
    tb_plugin_close(h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("directories");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, dirs_env_first_then_build_tree_then_install);
    tcase_add_test(tc, dirs_empty_entries_ignored);
    tcase_add_test(tc, kind_names_round_trip);
    suite_add_tcase(s, tc);

    tc = tcase_create("open");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, open_good_plugin);
    tcase_add_test(tc, refuses_newer_abi_major);
    tcase_add_test(tc, refuses_newer_abi_minor);
    tcase_add_test(tc, refuses_wrong_kind);
    tcase_add_test(tc, vtable_copied_whole);
    tcase_add_test(tc, refuses_abi_1_plugin);
    tcase_add_test(tc, refuses_missing_required_members);
    tcase_add_test(tc, refuses_missing_entry_symbol);
    tcase_add_test(tc, refuses_unloadable_with_dlerror);
    tcase_add_test(tc, refuses_bad_key_table);
    tcase_add_test(tc, refuses_non_elf_file);
    tcase_add_test(tc, refuses_missing_file);
    suite_add_tcase(s, tc);

    tc = tcase_create("find");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, find_by_name_in_env_path);
    tcase_add_test(tc, find_shipped_plugin_in_build_tree);
    tcase_add_test(tc, find_follows_search_order);
    tcase_add_test(tc, find_unknown_name_lists_available);
    tcase_add_test(tc, find_refuses_file_named_for_another_plugin);
    tcase_add_test(tc, find_reports_broken_file_of_that_name);
    suite_add_tcase(s, tc);

    tc = tcase_create("auto");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, auto_picks_highest_nonzero_score);
    tcase_add_test(tc, auto_skips_unusable_candidates);
    tcase_add_test(tc, auto_fails_when_nothing_scores);
    tcase_add_test(tc, auto_platform_on_this_machine);
    suite_add_tcase(s, tc);

    tc = tcase_create("list");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, list_all_kinds_with_notes);
    tcase_add_test(tc, list_one_kind);
    tcase_add_test(tc, list_one_kind_opens_only_its_files);
    tcase_add_test(tc, list_agrees_with_lookup_when_first_file_is_refused);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
