/* bench/loader: what one loader thread spends per training sample, against decoding alone.
 * A benchmark, not a test.
 *
 * It writes a 2048x1024 street-like RGB PNG (smooth gradients, texture, noise and shapes,
 * so that it compresses like a photograph, not like a flat picture) and its 8-bit label
 * PNG (a few regions) to a temporary directory, then on this one thread times
 *   (a) decoding: tb_image_read_rgb + tb_image_read_label, per sample;
 *   (b) decoding, the training augmentation (a fresh draw per sample with the reference's
 *       settings: scale 0.5-2.0, a CROP x CROP crop, flip, jitter 0.25, blur with
 *       probability 0.5 and sigma 0.15-1.3) and tb_batch_put into a one-image batch
 *       (normalisation, and the gscnn model's prepare(): Canny edges, edge targets):
 *       everything the model needs.
 * Each is the median of REPS runs over SAMPLES samples. The breakdown times the stages
 * separately: the augmentation's stages as differences of runs of tb_augment_apply on the
 * same draw with the later stages switched off.
 *
 *   ./bench/loader [SAMPLES [CROP]]      (default: 16 samples, crop 800) */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <trainbig/clock.h>
#include <trainbig/image.h>
#include <unistd.h>

#include "core/data/augment.h"
#include "core/config/setup.h"
#include "core/data/batch.h"
#include "core/data/png_write.h"

enum { WIDTH = 2048, HEIGHT = 1024, REPS = 5 };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The temporary directory and its two files, removed at exit whatever happens. */
static char tmp_dir[4096], image_path[4200], label_path[4200];

static void cleanup(void)
{
    if (image_path[0])
        unlink(image_path);
    if (label_path[0])
        unlink(label_path);
    if (tmp_dir[0])
        rmdir(tmp_dir);
}

static void die(const char *what, const struct tb_err *err)
{
    fprintf(stderr, "bench/loader: %s: %s\n", what, err->msg);
    exit(1);
}

/* ------------------------------------------------------------------ the picture */

static uint64_t noise_state = 88172645463325252ull;

static uint32_t noise(void)
{
    noise_state ^= noise_state << 13;
    noise_state ^= noise_state >> 7;
    noise_state ^= noise_state << 17;
    return (uint32_t)(noise_state >> 32);
}

/* Cityscapes train ids of the regions, and a base colour for each. */
enum { ROAD = 0, SIDEWALK = 1, BUILDING = 2, POLE = 5, VEGETATION = 8, SKY = 10, CAR = 13, IGNORE = 255 };

static void base_colour(uint8_t label, float rgb[3])
{
    static const struct {
        uint8_t label;
        float rgb[3];
    } table[] = {
        { ROAD, { 110, 105, 112 } }, { SIDEWALK, { 170, 150, 160 } }, { BUILDING, { 120, 100, 85 } },
        { POLE, { 80, 80, 80 } },    { VEGETATION, { 70, 120, 40 } }, { SKY, { 120, 170, 230 } },
        { CAR, { 30, 40, 120 } },    { IGNORE, { 20, 20, 20 } },
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].label == label) {
            memcpy(rgb, table[i].rgb, sizeof table[i].rgb);
            return;
        }
    rgb[0] = rgb[1] = rgb[2] = 128;
}

/* A street scene: sky, a row of buildings of varying height, trees, a road narrowing to
 * the horizon with sidewalks, cars, poles, and the ego vehicle's bonnet (ignored). */
static void make_scene(uint8_t *rgb, uint8_t *label)
{
    const int horizon = HEIGHT * 45 / 100;
    int roof[WIDTH];
    for (int x = 0, h = 0; x < WIDTH; x++) {
        if (x % 160 == 0)
            h = HEIGHT / 10 + (int)(noise() % (HEIGHT / 4));
        roof[x] = horizon - h;
    }
    for (int y = 0; y < HEIGHT; y++)
        for (int x = 0; x < WIDTH; x++) {
            uint8_t l = y < roof[x] ? SKY : BUILDING;
            if (y >= horizon) {
                /* the road widens linearly below the horizon */
                const int half = WIDTH / 16 + (y - horizon) * WIDTH / (HEIGHT - horizon) / 2;
                const int dist = abs(x - WIDTH / 2);
                l = dist < half ? ROAD : dist < half + WIDTH / 12 ? SIDEWALK : VEGETATION;
            }
            label[(size_t)y * WIDTH + x] = l;
        }
    /* trees (discs), poles and cars (rectangles) */
    for (int i = 0; i < 10; i++) {
        const int cx = (int)(noise() % WIDTH), cy = horizon - (int)(noise() % (HEIGHT / 6)),
                  r = 40 + (int)(noise() % 80);
        for (int y = cy - r; y <= cy + r; y++)
            for (int x = cx - r; x <= cx + r; x++)
                if (y >= 0 && y < HEIGHT && x >= 0 && x < WIDTH && (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r)
                    label[(size_t)y * WIDTH + x] = VEGETATION;
    }
    for (int i = 0; i < 8; i++) {
        const int x0 = (int)(noise() % WIDTH), y1 = horizon + 40 + (int)(noise() % (HEIGHT / 3));
        for (int y = y1 - 300 < 0 ? 0 : y1 - 300; y < y1; y++)
            for (int x = x0; x < x0 + 10 && x < WIDTH; x++)
                label[(size_t)y * WIDTH + x] = POLE;
    }
    for (int i = 0; i < 6; i++) {
        const int y1 = horizon + 60 + (int)(noise() % (HEIGHT / 3)), size = 60 + (y1 - horizon);
        const int x0 = (int)(noise() % (WIDTH - 2 * size));
        for (int y = y1 - size / 2; y < y1; y++)
            for (int x = x0; x < x0 + size * 2; x++)
                label[(size_t)y * WIDTH + x] = CAR;
    }
    for (int y = HEIGHT * 92 / 100; y < HEIGHT; y++)
        for (int x = 0; x < WIDTH; x++)
            label[(size_t)y * WIDTH + x] = IGNORE;

    /* colour: the region's base, a smooth shading across the picture, a texture of a few
     * sines, and per-pixel noise (the sum of two uniforms, +-12) */
    for (int y = 0; y < HEIGHT; y++)
        for (int x = 0; x < WIDTH; x++) {
            float base[3];
            base_colour(label[(size_t)y * WIDTH + x], base);
            const float shade = 0.75f + 0.35f * (float)x / WIDTH - 0.15f * (float)y / HEIGHT;
            const float texture =
                10.0f * sinf((float)x * 0.05f) * sinf((float)y * 0.07f) + 6.0f * sinf((float)(x + 2 * y) * 0.013f);
            const int n = (int)(noise() % 13) + (int)(noise() % 13) - 12;
            for (int c = 0; c < 3; c++) {
                float v = base[c] * shade + texture + (float)n + (float)c * 2;
                rgb[((size_t)y * WIDTH + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* ------------------------------------------------------------------ the runs */

struct bench {
    const char *image_path, *label_path;
    int samples;
    struct tb_augment aug;
    struct tb_sample decoded, augmented;
    struct tb_augment_work work;
    struct tb_batch batch;
    struct tb_batch_work batch_work;
};

static void decode(struct bench *b)
{
    struct tb_err err;
    if (tb_image_read_rgb(b->image_path, &b->decoded, &err) || tb_image_read_label(b->label_path, &b->decoded, &err))
        die("decoding", &err);
}

static void augment(struct bench *b, const struct tb_augment_draw *d)
{
    struct tb_err err;
    if (tb_augment_apply(&b->aug, d, &b->decoded, &b->augmented, &b->work, &err))
        die("augmenting", &err);
}

static void put(struct bench *b)
{
    struct tb_err err;
    if (tb_batch_put(&b->batch, 0, &b->augmented, "bench", &b->batch_work, &err))
        die("tb_batch_put", &err);
}

/* Seconds per sample of decoding alone. */
static double run_decode(struct bench *b)
{
    double t0 = tb_now();
    for (int i = 0; i < b->samples; i++)
        decode(b);
    return (tb_now() - t0) / b->samples;
}

/* Seconds per sample of everything a loader thread does. */
static double run_full(struct bench *b)
{
    double t0 = tb_now();
    for (int i = 0; i < b->samples; i++) {
        decode(b);
        struct tb_augment_draw d;
        tb_augment_draw(&b->aug, (uint64_t)i, b->decoded.width, b->decoded.height, &d);
        augment(b, &d);
        put(b);
    }
    return (tb_now() - t0) / b->samples;
}

enum { DECODE, RESAMPLE, JITTER, BLUR, PUT, STAGES };

/* Seconds per sample of each stage, on the same draws as run_full. */
static void run_stages(struct bench *b, double stage[STAGES])
{
    memset(stage, 0, STAGES * sizeof *stage);
    for (int i = 0; i < b->samples; i++) {
        double t0 = tb_now();
        decode(b);
        double t1 = tb_now();
        struct tb_augment_draw full, plain, unblurred;
        tb_augment_draw(&b->aug, (uint64_t)i, b->decoded.width, b->decoded.height, &full);
        unblurred = full;
        unblurred.blur = false;
        plain = unblurred;
        plain.brightness = plain.contrast = plain.saturation = 1;
        plain.hue = 0;
        augment(b, &plain);
        double t2 = tb_now();
        augment(b, &unblurred);
        double t3 = tb_now();
        augment(b, &full);
        double t4 = tb_now();
        put(b);
        double t5 = tb_now();
        stage[DECODE] += t1 - t0;
        stage[RESAMPLE] += t2 - t1;
        stage[JITTER] += (t3 - t2) - (t2 - t1);
        stage[BLUR] += (t4 - t3) - (t3 - t2);
        stage[PUT] += t5 - t4;
    }
    for (int s = 0; s < STAGES; s++)
        stage[s] /= b->samples;
}

int main(int argc, char **argv)
{
    const int samples = argc > 1 ? atoi(argv[1]) : 16, crop = argc > 2 ? atoi(argv[2]) : 800;
    if (argc > 3 || samples < 1 || crop < 1 || crop > 8192) {
        fprintf(stderr, "usage: bench/loader [SAMPLES [CROP]]   (SAMPLES >= 1, 1 <= CROP <= 8192)\n");
        return 2;
    }

    char dir[4096];
    snprintf(dir, sizeof dir, "%s/trainbig-loader-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("bench/loader: mkdtemp");
        return 1;
    }
    snprintf(tmp_dir, sizeof tmp_dir, "%s", dir);
    snprintf(image_path, sizeof image_path, "%s/street.png", dir);
    snprintf(label_path, sizeof label_path, "%s/street_labels.png", dir);
    atexit(cleanup);

    struct tb_err err;
    uint8_t *rgb = malloc((size_t)WIDTH * HEIGHT * 3), *label = malloc((size_t)WIDTH * HEIGHT);
    if (!rgb || !label) {
        fprintf(stderr, "bench/loader: out of memory\n");
        return 1;
    }
    make_scene(rgb, label);
    int rc = tb_png_write_rgb(image_path, rgb, WIDTH, HEIGHT, &err);
    if (!rc)
        rc = tb_png_write_gray(label_path, label, WIDTH, HEIGHT, &err);
    free(rgb);
    free(label);
    if (rc)
        die("writing the pictures", &err);
    const long image_bytes = file_size(image_path), label_bytes = file_size(label_path);

    struct bench b = {
        .image_path = image_path,
        .label_path = label_path,
        .samples = samples,
        .aug = { .crop_w = (uint32_t)crop,
                 .crop_h = (uint32_t)crop,
                 .scale_min = 0.5f,
                 .scale_max = 2.0f,
                 .flip = true,
                 .jitter = 0.25f,
                 .blur_prob = 0.5f,
                 .blur_sigma_min = 0.15f,
                 .blur_sigma_max = 1.3f },
    };
    /* G-SCNN's own inputs, as its graph declares them, made by its prepare(). */
    struct tb_instance model;
    if (tb_instance_open(TB_KIND_MODEL, "gscnn", NULL, "", &model, &err))
        die("the gscnn model", &err);
    static const struct tb_model_feed gscnn_feeds[] = { { "canny", TB_F32, 1, NULL }, { "edges", TB_U8, 1, NULL } };
    const struct tb_batch_spec spec = { 2, gscnn_feeds, model.ops.model->prepare, model.ops.model->free_work,
                                        model.ctx };
    if (!spec.prepare) {
        tb_err_set(&err, TB_ERR_PLUGIN, "it has no prepare()");
        die("the gscnn model", &err);
    }
    if (tb_batch_init(&b.batch, 1, crop, crop, &spec, NULL, &err))
        die("tb_batch_init", &err);

    /* one warm-up pass: buffers sized, files in the page cache */
    run_full(&b);

    double dec[REPS], full[REPS], stages[STAGES][REPS];
    for (int r = 0; r < REPS; r++) {
        dec[r] = run_decode(&b);
        full[r] = run_full(&b);
        double s[STAGES];
        run_stages(&b, s);
        for (int k = 0; k < STAGES; k++)
            stages[k][r] = s[k];
    }
    const double t_dec = median(dec, REPS), t_full = median(full, REPS);
    double t_stage[STAGES];
    for (int k = 0; k < STAGES; k++)
        t_stage[k] = median(stages[k], REPS);

    printf("bench/loader: %d samples of %dx%d (RGB PNG %.2f MB, %.0f%% of raw; label PNG %.0f kB), crop %dx%d,\n"
           "one thread, median of %d runs\n",
           samples, WIDTH, HEIGHT, image_bytes / 1e6, 100.0 * image_bytes / (WIDTH * HEIGHT * 3.0), label_bytes / 1e3,
           crop, crop, REPS);
    printf("  decode:                     %7.1f samples/s per worker (%6.2f ms/sample)\n", 1 / t_dec, 1e3 * t_dec);
    printf("  decode + augment + batch:   %7.1f samples/s per worker (%6.2f ms/sample)\n", 1 / t_full, 1e3 * t_full);
    printf("  ratio (decode + augment + batch) / decode: %.2f\n", t_full / t_dec);
    printf("augmentation adds %.0f%% over decoding (target <= 50%%)\n", 100 * (t_full - t_dec) / t_dec);
    printf("breakdown, ms per sample:\n");
    static const char *names[STAGES] = { "decode", "resample+crop+flip", "jitter", "blur (about half the samples)",
                                         "batch_put (Canny+normalise+edges)" };
    for (int k = 0; k < STAGES; k++)
        printf("  %-34s %6.2f\n", names[k], 1e3 * t_stage[k]);

    tb_batch_work_free(&b.batch_work);
    tb_batch_fini(&b.batch);
    tb_instance_close(&model);
    tb_augment_work_free(&b.work);
    tb_sample_release(&b.decoded);
    tb_sample_release(&b.augmented);
    return 0;
}
