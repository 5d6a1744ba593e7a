/* trainbig: the command. Parses argv and calls the core; all the work is in libtrainbig.
 * Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error. */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#include "core/dist/world.h"
#include "core/config/ini.h"
#include "core/config/keys.h"
#include "core/util/kind.h"
#include "core/util/log_control.h"
#include "core/util/printable.h"
#include "core/config/loader.h"
#include "core/config/setup.h"
#include "tools/data_report_internal.h"
#include "tools/fit_internal.h"
#include "tools/plot_internal.h"
#include "tools/probe_internal.h"
#include "tools/predict_internal.h"
#include "tools/study_internal.h"
#include "tools/usage.h"
#include "core/train/trainer.h"

enum { EXIT_USAGE = 2 };

static int usage_error(const char *fmt, const char *arg, const char *cmd)
{
    /* fmt holds one "%s", for arg, which the user gave: printed safe */
    const char *at = strstr(fmt, "%s");
    fprintf(stderr, "trainbig: %.*s", (int)(at - fmt), fmt);
    tb_fputs_printable(arg, stderr);
    fprintf(stderr, "%s\nTry 'trainbig %s--help'.\n", at + 2, cmd ? cmd : "");
    return EXIT_USAGE;
}

static void print_error(const struct tb_err *err)
{
    char msg[4 * sizeof err->msg];
    const char *p = tb_printable(msg, sizeof msg, err->msg); /* it may quote a user's or a file's bytes */
    while (*p) {
        const char *nl = strchr(p, '\n');
        int n = nl ? (int)(nl - p) : (int)strlen(p);
        const struct tb_comm *w = tb_comm_world();
        if (w->size > 1)
            fprintf(stderr, "trainbig: rank %d of %d: error: %.*s\n", w->rank, w->size, n, p);
        else
            fprintf(stderr, "trainbig: error: %.*s\n", n, p);
        p += n + (nl ? 1 : 0);
    }
}

/* Options shared by train and config. */
struct run_args {
    const char *config;
    const char **sets;
    int nsets;
    const char *resume;                      /* train only */
    const char *checkpoint, *input, *output; /* predict only */
    int show;                                /* data only: --show N DIR */
    const char *vary;                        /* fit only: --vary batch|crop */
    const char *show_dir;
};

static int parse_run_args(const char *cmd, const char *usage, int argc, char **argv, struct run_args *a)
{
    static const struct option opts[] = {
        { "set", required_argument, NULL, 's' },
        { "resume", required_argument, NULL, 'r' },
        { "checkpoint", required_argument, NULL, 'c' },
        { "input", required_argument, NULL, 'i' },
        { "output", required_argument, NULL, 'o' },
        { "show", required_argument, NULL, 'S' },
        { "vary", required_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    a->sets = calloc((size_t)argc + 1, sizeof *a->sets);
    if (!a->sets)
        return 1;
    char cmdsp[32];
    snprintf(cmdsp, sizeof cmdsp, "%s ", cmd);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":hs:", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            a->sets[a->nsets++] = optarg;
            break;
        case 'r':
            if (strcmp(cmd, "train") != 0)
                return usage_error("unknown option '%s'", argv[optind - 1], cmdsp);
            a->resume = optarg;
            break;
        case 'c':
        case 'i':
        case 'o':
            if (strcmp(cmd, "predict") != 0)
                return usage_error("unknown option '%s'", argv[optind - 1], cmdsp);
            *(c == 'c' ? &a->checkpoint : c == 'i' ? &a->input : &a->output) = optarg;
            break;
        case 'S': {
            if (strcmp(cmd, "data") != 0)
                return usage_error("unknown option '%s'", argv[optind - 1], cmdsp);
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || end == optarg || n < 1 || n > 100000)
                return usage_error("--show %s: N must be a number of samples, 1 to 100000", optarg, cmdsp);
            if (optind >= argc || argv[optind][0] == '-')
                return usage_error("--show %s: missing DIR (where the pictures go)", optarg, cmdsp);
            a->show = (int)n;
            a->show_dir = argv[optind++];
            break;
        }
        case 'V':
            if (strcmp(cmd, "fit") != 0)
                return usage_error("unknown option '%s'", argv[optind - 1], cmdsp);
            if (strcmp(optarg, "batch") != 0 && strcmp(optarg, "crop") != 0)
                return usage_error("--vary %s: allowed are batch and crop", optarg, cmdsp);
            a->vary = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return -1;
        case ':':
            return usage_error(strncmp(argv[optind - 1], "--s", 3) == 0
                                   ? "option '%s' needs a value: --set SECTION.KEY=VALUE"
                                   : "option '%s' needs a value",
                               argv[optind - 1], cmdsp);
        default:
            return usage_error("unknown option '%s'", argv[optind - 1], cmdsp);
        }
    }
    if (optind >= argc)
        return usage_error("%s: missing CONFIG (the INI file to use)", cmd, cmdsp);
    if (argc - optind > 1)
        return usage_error("unexpected argument '%s': give one CONFIG", argv[optind + 1], cmdsp);
    a->config = argv[optind];
    if (strcmp(cmd, "fit") == 0 && !a->vary)
        return usage_error("%s: missing --vary batch|crop (what to make as large as fits)", cmd, cmdsp);
    if (strcmp(cmd, "predict") == 0) {
        if (!a->checkpoint)
            return usage_error("%s: missing --checkpoint CHECKPOINT (written by trainbig train)", cmd, cmdsp);
        if (!a->input)
            return usage_error("%s: missing --input IMAGE.png", cmd, cmdsp);
        if (!a->output)
            return usage_error("%s: missing --output OUT.png", cmd, cmdsp);
    }
    return 0;
}

/* A command that runs on a CONFIG: its arguments, and the configuration loaded,
 * overridden and resolved. */
struct run_cmd {
    struct run_args a;
    struct tb_config *cfg;
    struct tb_setup *setup;
};

/* Parses the arguments, then loads, overrides and resolves CONFIG (every problem
 * printed). Returns -1 when the command should go on (then run_cmd_close() it), else the
 * exit code to return (help printed, or an error). */
static int run_cmd_open(struct run_cmd *c, const char *cmd, const char *usage, int argc, char **argv)
{
    memset(c, 0, sizeof *c);
    int urc = parse_run_args(cmd, usage, argc, argv, &c->a);
    if (urc) {
        free(c->a.sets);
        return urc < 0 ? 0 : urc;
    }
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_config_load(c->a.config, &c->cfg, &err);
    for (int i = 0; rc == TB_OK && i < c->a.nsets; i++)
        rc = tb_config_set(c->cfg, c->a.sets[i], &err);
    if (rc == TB_OK)
        rc = tb_setup_resolve(c->cfg, &c->setup, &err);
    if (rc) {
        print_error(&err);
        tb_config_free(c->cfg);
        free(c->a.sets);
        return tb_exit_code(rc);
    }
    return -1;
}

static void run_cmd_close(struct run_cmd *c)
{
    tb_setup_free(c->setup);
    tb_config_free(c->cfg);
    free(c->a.sets);
}

static volatile sig_atomic_t stop_requested;

/* First signal: ask the trainer to stop after the step. Second: the default action. */
static void on_stop_signal(int sig)
{
    if (stop_requested) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    stop_requested = sig; /* the exit status says which */
}

/* The end of a run that may be one rank of several: a failing rank ends the whole job
 * (MPI_Abort), so that no other rank waits for it in a collective; a finished one leaves
 * MPI. */
static int end_ranks(int code)
{
    if (code != 0)
        tb_comm_abort(code);
    tb_comm_fini();
    return code;
}

static int cmd_train(int argc, char **argv)
{
    struct tb_err err;
    tb_err_clear(&err);
    /* Under mpirun: join the other ranks first, so that every message names its rank. */
    if (tb_comm_init(&err) != TB_OK) {
        print_error(&err);
        return tb_exit_code(err.status);
    }
    const struct tb_comm *world = tb_comm_world();
    tb_log_set_rank(world->rank, world->size);
    struct run_cmd c;
    int code = run_cmd_open(&c, "train", tb_usage_train, argc, argv);
    if (code >= 0)
        return end_ranks(code);
    tb_log(TB_LOG_INFO, "%s: configuration is valid", c.a.config);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    bool stopped = false;
    const struct tb_train_request req = { c.a.config, c.a.sets, c.a.nsets, c.a.resume, &stop_requested, &stopped };
    int rc = tb_train(c.setup, &req, &err);
    if (rc)
        print_error(&err);
    run_cmd_close(&c);
    /* Stopped on a signal with its checkpoint written: 128 + the signal, as a shell
     * reports a process the signal ended, so that scripts and schedulers do not take
     * the run for finished. (Under mpirun the rank that saw the signal decides.) */
    if (stopped) {
        tb_comm_fini();
        return 128 + (stop_requested > 0 ? (int)stop_requested : SIGTERM);
    }
    return end_ranks(tb_exit_code(rc));
}

static int cmd_predict(int argc, char **argv)
{
    struct run_cmd c;
    int code = run_cmd_open(&c, "predict", tb_usage_predict, argc, argv);
    if (code >= 0)
        return code;
    const struct tb_predict_request req = { c.a.checkpoint, c.a.input, c.a.output };
    struct tb_err err;
    int rc = tb_predict(c.setup, &req, &err);
    if (rc)
        print_error(&err);
    run_cmd_close(&c);
    return tb_exit_code(rc);
}

static int cmd_fit(int argc, char **argv)
{
    struct run_cmd c;
    int code = run_cmd_open(&c, "fit", tb_usage_fit, argc, argv);
    if (code >= 0)
        return code;
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_fit(c.a.config, c.setup->slot[TB_SEC_SWAP].plugin->p->name, (const char *const *)c.a.sets, c.a.nsets,
                    c.a.vary, stdout, &err);
    if (rc)
        print_error(&err);
    run_cmd_close(&c);
    return tb_exit_code(rc);
}

/* How this program was run (main's argv[0]): the study's scaling benchmark runs it again. */
static const char *program_path = "trainbig";

static int cmd_study(int argc, char **argv)
{
    static const struct option opts[] = {
        { "set", required_argument, NULL, 's' },
        { "out", required_argument, NULL, 'o' },
        { "scale", required_argument, NULL, 'S' },
        { "only", required_argument, NULL, 'O' },
        { "backend", required_argument, NULL, 'B' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct tb_study_request rq = { .out = "study", .scale = TB_STUDY_SMALL, .self = program_path };
    bool scale_given = false, sim = false;
    char backend_set[300];
    const char **sets = calloc((size_t)argc + 2, sizeof *sets);
    if (!sets)
        return 1;
    optind = 1;
    opterr = 0;
    int c, nsets = 0, code = -1;
    while (code < 0 && (c = getopt_long(argc, argv, ":hs:o:", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            sets[nsets++] = optarg;
            break;
        case 'o':
            rq.out = optarg;
            break;
        case 'B':
            snprintf(backend_set, sizeof backend_set, "backend.plugin=%.280s", optarg);
            sets[nsets++] = backend_set;
            sim = strcmp(optarg, "sim") == 0;
            break;
        case 'S':
            scale_given = true;
            if (strcmp(optarg, "small") == 0)
                rq.scale = TB_STUDY_SMALL;
            else if (strcmp(optarg, "reference") == 0)
                rq.scale = TB_STUDY_REFERENCE;
            else if (strcmp(optarg, "test") == 0)
                rq.scale = TB_STUDY_TEST;
            else
                code = usage_error("--scale %s: allowed are small, reference and test", optarg, "study ");
            break;
        case 'O':
            for (const char *p = optarg; code < 0 && *p;) {
                char *end;
                const long n = strtol(p, &end, 10);
                if (end == p || n < 1 || n > TB_STUDY_COUNT || (*end && *end != ','))
                    code = usage_error("--only %s: a comma-separated list of benchmarks, 1 to 5", optarg, "study ");
                else
                    rq.only |= 1u << n;
                p = *end ? end + 1 : end;
            }
            break;
        case 'h':
            fputs(tb_usage_study, stdout);
            code = 0;
            break;
        case ':':
            code = usage_error("option '%s' needs a value", argv[optind - 1], "study ");
            break;
        default:
            code = usage_error("unknown option '%s'", argv[optind - 1], "study ");
        }
    }
    if (code < 0 && optind >= argc)
        code = usage_error("%s: missing CONFIG (the INI file to use)", "study", "study ");
    if (code < 0 && argc - optind > 1)
        code = usage_error("unexpected argument '%s': give one CONFIG", argv[optind + 1], "study ");
    if (code >= 0) {
        free(sets);
        return code;
    }
    rq.config = argv[optind];
    rq.sets = sets;
    if (sim && !scale_given) /* a modelled GPU runs the study's own sizes in minutes */
        rq.scale = TB_STUDY_REFERENCE;
    setenv("TRAINBIG_LOG", "warn", 0); /* hundreds of runs: their setup lines would drown the progress */
    rq.nsets = nsets;
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_study(&rq, &err);
    if (rc)
        print_error(&err);
    free(sets);
    return tb_exit_code(rc);
}

static int cmd_probe(int argc, char **argv)
{
    struct run_cmd c;
    int code = run_cmd_open(&c, "probe", tb_usage_probe, argc, argv);
    if (code >= 0)
        return code;
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_probe(c.setup, (size_t)64 << 20, stdout, &err);
    if (rc)
        print_error(&err);
    run_cmd_close(&c);
    return tb_exit_code(rc);
}

static int cmd_data(int argc, char **argv)
{
    struct run_cmd c;
    int code = run_cmd_open(&c, "data", tb_usage_data, argc, argv);
    if (code >= 0)
        return code;
    struct tb_err err;
    tb_err_clear(&err);
    size_t bad = 0;
    char missing[64] = "";
    int rc = c.a.show ? tb_data_show(c.setup, c.a.show, c.a.show_dir, stdout, &err)
                      : tb_data_report(c.setup, stdout, &bad, missing, sizeof missing, &err);
    if (rc)
        print_error(&err);
    if (!rc && bad)
        fprintf(stderr, "trainbig: error: %s: %zu samples cannot be read (listed above)\n", c.a.config, bad);
    if (!rc && strstr(missing, "train"))
        fprintf(stderr, "trainbig: error: %s: the train split is not available (see above)\n", c.a.config);
    if (!rc && strstr(missing, "val"))
        fprintf(stderr,
                "trainbig: error: %s: the val split is not available (see above), and training validates on it: "
                "add it, or train without validation (--set train.val_every=0)\n",
                c.a.config);
    run_cmd_close(&c);
    return rc ? tb_exit_code(rc) : bad || missing[0] ? 1 : 0;
}

static int cmd_plot(int argc, char **argv)
{
    static const struct option opts[] = {
        { "out", required_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *out = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case 'h':
            fputs(tb_usage_plot, stdout);
            return 0;
        case ':':
            return usage_error("option '%s' needs a value", argv[optind - 1], "plot ");
        default:
            return usage_error("unknown option '%s'", argv[optind - 1], "plot ");
        }
    }
    if (optind >= argc)
        return usage_error("%s", "plot needs RUN_DIR, a run directory of trainbig train", "plot ");
    if (optind + 1 < argc)
        return usage_error("unexpected argument '%s'", argv[optind + 1], "plot ");
    if (out && !*out)
        return usage_error("%s", "--out needs a directory", "plot ");
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_plot(argv[optind], out, stdout, &err);
    if (rc)
        print_error(&err);
    return tb_exit_code(rc);
}

static int cmd_config(int argc, char **argv)
{
    struct run_cmd c;
    int code = run_cmd_open(&c, "config", tb_usage_config, argc, argv);
    if (code >= 0)
        return code;
    tb_setup_print(c.setup, stdout);
    run_cmd_close(&c);
    return 0;
}

static void print_plugin(const struct tb_plugin_handle *h)
{
    const struct tb_plugin *p = h->p;
    printf("%s %s %s (ABI %u.%u)\n", tb_kind_name(p->kind), p->name, p->version, p->abi_major, p->abi_minor);
    printf("    file: %s\n", h->path);
    printf("    %s\n", p->description);
    size_t n = tb_keys_count(p->keys);
    if (n == 0) {
        printf("    keys: plugin only\n");
        return;
    }
    printf("    keys:\n");
    for (size_t i = 0; i < n; i++) {
        const struct tb_key *k = &p->keys[i];
        char allowed[600], def[300];
        tb_key_describe(k, allowed, sizeof allowed);
        if (k->def)
            snprintf(def, sizeof def, "default '%s'", k->def);
        else
            snprintf(def, sizeof def, "required");
        printf("      %-18s %-6s %s; %s\n", k->name, tb_key_type_name(k->type), def, allowed);
        printf("      %-18s %s\n", "", k->help);
    }
}

static int cmd_plugins(int argc, char **argv)
{
    static const struct option opts[] = {
        { "kind", required_argument, NULL, 'k' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int kind = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hk:", opts, NULL)) != -1) {
        switch (c) {
        case 'k':
            kind = tb_kind_from_name(optarg);
            if (!kind)
                return usage_error("--kind %s: allowed kinds are backend, platform, model, dataset, swap", optarg,
                                   "plugins ");
            break;
        case 'h':
            fputs(tb_usage_plugins, stdout);
            return 0;
        case ':':
            return usage_error("option '%s' needs a value", argv[optind - 1], "plugins ");
        default:
            return usage_error("unknown option '%s'", argv[optind - 1], "plugins ");
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind], "plugins ");

    struct tb_dirs dirs;
    struct tb_plugin_list l;
    if (tb_plugin_dirs(&dirs) || tb_plugin_list(kind, &l)) {
        fprintf(stderr, "trainbig: error: out of memory\n");
        return 1;
    }
    printf("plugin search path: %s\n", tb_dirs_text(&dirs));
    tb_dirs_free(&dirs);
    if (l.n == 0)
        printf("\nno %s%splugins found\n", kind ? tb_kind_name(kind) : "", kind ? " " : "");
    for (size_t i = 0; i < l.n; i++) {
        printf("\n");
        print_plugin(l.items[i]);
    }
    if (l.nnotes) {
        printf("\nnot listed:\n");
        for (size_t i = 0; i < l.nnotes; i++)
            printf("  %s\n", l.notes[i]);
    }
    tb_plugin_list_free(&l);
    return 0;
}

static int cmd_version(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(tb_usage_version, stdout);
        return 0;
    }
    if (argc > 1)
        return usage_error("unexpected argument '%s'", argv[1], "version ");
    struct tb_dirs dirs;
    if (tb_plugin_dirs(&dirs)) {
        fprintf(stderr, "trainbig: error: out of memory\n");
        return 1;
    }
    printf("trainbig %s\n", TB_VERSION);
    printf("plugin ABI %d.%d\n", TB_ABI_MAJOR, TB_ABI_MINOR);
    printf("features: %s\n", TB_BUILD_FEATURES);
    printf("plugin search path: %s\n", tb_dirs_text(&dirs));
    tb_dirs_free(&dirs);
    return 0;
}

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} commands[] = {
    { "train", cmd_train, tb_usage_train },
    { "predict", cmd_predict, tb_usage_predict },
    { "data", cmd_data, tb_usage_data },
    { "fit", cmd_fit, tb_usage_fit },
    { "probe", cmd_probe, tb_usage_probe },
    { "study", cmd_study, tb_usage_study }, /* figures: a build with PLplot */
    { "plot", cmd_plot, tb_usage_plot },    /* figures: a build with PLplot and jansson */
    { "config", cmd_config, tb_usage_config },
    { "plugins", cmd_plugins, tb_usage_plugins },
    { "version", cmd_version, tb_usage_version },
    { "help", NULL, tb_usage_help },
};

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 0 && argv[0][0])
        program_path = argv[0];
    if (argc < 2) {
        fputs(tb_usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        fputs(tb_usage_main, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0)
        return cmd_version(1, argv + 1);
    if (strcmp(cmd, "help") == 0) {
        if (argc < 3 || strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0) {
            fputs(tb_usage_main, stdout);
            return 0;
        }
        const struct command *c = find_command(argv[2]);
        if (!c)
            return usage_error("help: unknown command '%s'", argv[2], NULL);
        fputs(c->usage, stdout);
        return 0;
    }
    const struct command *c = find_command(cmd);
    if (!c || !c->run) {
        const char *names[sizeof commands / sizeof commands[0]];
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            names[i] = commands[i].name;
        const char *near = tb_nearest(cmd, names, sizeof names / sizeof names[0]);
        char fmt[96] = "unknown command '%s'";
        if (near) /* one of names[]: no '%' in it */
            snprintf(fmt, sizeof fmt, "unknown command '%%s'; did you mean '%s'?", near);
        return usage_error(fmt, cmd, NULL);
    }
    return c->run(argc - 1, argv + 1);
}
