/* make_fixtures: writes a small Cityscapes or TACO tree (tests/fixtures.h) into a
 * directory, for the shell tests and for trying the dataset plugins by hand.
 *
 *   make_fixtures [--size WxH] cityscapes DIR
 *   make_fixtures [--clean] taco DIR
 *   make_fixtures --size WxH grey-png FILE     one grey RGB picture, up to 65535x65535
 *
 * Exit status: 0 written, 1 a write failed, 2 usage, 77 this build cannot write that
 * format (no libspng for Cityscapes, no TurboJPEG for TACO). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fixtures.h"

static int usage(void)
{
    fputs("usage: make_fixtures [--size WxH] cityscapes DIR\n"
          "       make_fixtures [--clean] taco DIR\n"
          "       make_fixtures --size WxH grey-png FILE\n"
          "Writes a small dataset tree in the real format into DIR (created if needed).\n"
          "--size: the Cityscapes frames' size (default 128x64); --clean: a TACO tree without\n"
          "its corrupt and missing images.\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
    unsigned w = FIXTURE_CS_WIDTH, h = FIXTURE_CS_HEIGHT;
    bool clean = false, sized = false;
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--clean") == 0)
            clean = true;
        else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
            char end;
            if (sscanf(argv[++i], "%ux%u%c", &w, &h, &end) != 2 || w == 0 || h == 0 || w > 65535 || h > 65535) {
                fprintf(stderr, "make_fixtures: --size %s: expected WxH, e.g. 128x64\n", argv[i]);
                return 2;
            }
            sized = true;
        } else
            return usage();
    }
    if (argc - i != 2)
        return usage();
    const char *kind = argv[i], *dir = argv[i + 1];
    if (strcmp(kind, "grey-png") == 0) {
        /* A picture too big to predict on (host_memory.c's check), cheap to write. */
        if (clean || !sized)
            return usage();
        if (!fixture_have_cityscapes()) {
            fputs("make_fixtures: built without libspng: cannot write PNG files\n", stderr);
            return 77;
        }
        uint8_t *rgb = malloc((size_t)w * h * 3);
        if (!rgb) {
            fputs("make_fixtures: out of memory\n", stderr);
            return 1;
        }
        memset(rgb, 128, (size_t)w * h * 3);
        int rc = fixture_png(dir, rgb, w, h, true);
        free(rgb);
        return rc ? 1 : 0;
    }
    if (strcmp(kind, "cityscapes") == 0) {
        if (clean || w > 8192 || h > 8192)
            return usage();
        if (!fixture_have_cityscapes()) {
            fputs("make_fixtures: built without libspng: cannot write Cityscapes PNG files\n", stderr);
            return 77;
        }
        if (!fixture_cs_fits(w, h)) {
            fprintf(stderr, "make_fixtures: --size %ux%u: too small to hold every label id\n", w, h);
            return 2;
        }
        return fixture_mkdirs(dir) || fixture_cityscapes(dir, w, h) ? 1 : 0;
    }
    if (strcmp(kind, "taco") == 0) {
        if (sized)
            return usage();
        if (!fixture_have_taco()) {
            fputs("make_fixtures: built without TurboJPEG: cannot write TACO JPEG files\n", stderr);
            return 77;
        }
        return fixture_mkdirs(dir) || fixture_taco(dir, clean) ? 1 : 0;
    }
    return usage();
}
