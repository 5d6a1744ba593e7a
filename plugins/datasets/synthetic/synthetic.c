/* datasets/synthetic: procedural street scenes in the Cityscapes label space, so that
 * trainbig trains, validates and benchmarks on a fresh machine with no dataset.
 *
 * Each sample is drawn back to front from its own random stream (seed, split, index):
 * sky with a colour gradient above a horizon; buildings with window grids rising from
 * it; vegetation crowns; a perspective road between sidewalks, with terrain or a wall or
 * fence at the sides; poles carrying traffic signs or lights; cars and the odd bus on the
 * road; persons on the sidewalks. Every class has its own colour family and texture
 * (value noise), a global light level scales the scene, and per-pixel noise is added
 * last. The label is the class painted last at each pixel. The 19 Cityscapes classes and
 * their palette are exposed; rider, truck, train, motorcycle and bicycle never occur.
 *
 * Everything is a pure function of (seed, split, index, pixel): load() is thread-safe,
 * and the same settings give the same bytes on every machine. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#include "plugins/datasets/cityscapes_classes.h"

enum {
    ROAD,
    SIDEWALK,
    BUILDING,
    WALL,
    FENCE,
    POLE,
    TRAFFIC_LIGHT,
    TRAFFIC_SIGN,
    VEGETATION,
    TERRAIN,
    SKY,
    PERSON,
    RIDER,
    CAR,
    TRUCK,
    BUS,
    TRAIN,
    MOTORCYCLE,
    BICYCLE,
    NCLASSES
};
_Static_assert((int)NCLASSES == (int)TB_CITYSCAPES_CLASSES, "the scene classes are Cityscapes' trainIds");

static const struct tb_key synthetic_keys[] = {
    { "width", TB_KEY_INT, "128", "16..8192", "image width, pixels" },
    { "height", TB_KEY_INT, "128", "16..8192", "image height, pixels" },
    { "train_count", TB_KEY_INT, "256", "1..1000000", "images in the train split" },
    { "val_count", TB_KEY_INT, "32", "1..1000000", "images in the val split" },
    { "test_count", TB_KEY_INT, "32", "1..1000000", "images in the test split" },
    { "seed", TB_KEY_INT, "1", "0..", "scenes are a function of the seed, the split and the index" },
    TB_KEYS_END,
};

enum { NAME_LEN = 40 }; /* "synthetic/train/000000", room for any size_t */

struct synthetic {
    const struct tb_section *cfg; /* the core's, valid until the run ends */
    int width, height;
    size_t count;
    uint64_t seed; /* mixed with the split */
    char *names;   /* count names of NAME_LEN bytes, made once at open_split */
};

/* ------------------------------------------------------------------ random numbers */

struct rng {
    uint64_t s;
};

static uint64_t next(struct rng *r)
{
    return tb_splitmix64(&r->s);
}

/* Uniform in [lo, hi). */
static double uni(struct rng *r, double lo, double hi)
{
    return lo + (hi - lo) * (double)(next(r) >> 11) * (1.0 / 9007199254740992.0);
}

static int irange(struct rng *r, int lo, int hi) /* [lo, hi] */
{
    return hi <= lo ? lo : lo + (int)(next(r) % (uint64_t)(hi - lo + 1));
}

/* Smooth value noise in [0, 1) on a lattice of `cell` pixels. */
static double hash01(uint64_t key, int x, int y)
{
    return (double)(tb_mix64(key ^ ((uint64_t)(uint32_t)x << 32 | (uint32_t)y)) >> 11) * (1.0 / 9007199254740992.0);
}

static double value_noise(uint64_t key, int x, int y, int cell)
{
    const int cx = x / cell, cy = y / cell;
    const double fx = (double)(x % cell) / cell, fy = (double)(y % cell) / cell;
    const double a = hash01(key, cx, cy), b = hash01(key, cx + 1, cy), c = hash01(key, cx, cy + 1),
                 d = hash01(key, cx + 1, cy + 1);
    const double sx = fx * fx * (3 - 2 * fx), sy = fy * fy * (3 - 2 * fy);
    return (a * (1 - sx) + b * sx) * (1 - sy) + (c * (1 - sx) + d * sx) * sy;
}

/* ------------------------------------------------------------------ painting */

struct canvas {
    int w, h;
    uint8_t *rgb, *label;
    uint64_t key; /* this sample's texture key */
    double light;
};

/* Paints pixel (x, y) with class c and colour base (RGB) textured by noise of amplitude
 * amp at scale cell. */
static void put(struct canvas *cv, int x, int y, int c, const double *base, double amp, int cell)
{
    if (x < 0 || y < 0 || x >= cv->w || y >= cv->h)
        return;
    const size_t i = (size_t)y * cv->w + x;
    const double t = amp * (value_noise(cv->key + (uint64_t)c * 7919u, x, y, cell) - 0.5);
    for (int k = 0; k < 3; k++) {
        double v = (base[k] + t) * cv->light;
        cv->rgb[i * 3 + k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    cv->label[i] = (uint8_t)c;
}

static void rect(struct canvas *cv, int x0, int y0, int x1, int y1, int c, const double *base, double amp, int cell)
{
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++)
            put(cv, x, y, c, base, amp, cell);
}

static void ellipse(struct canvas *cv, double cx, double cy, double rx, double ry, int c, const double *base,
                    double amp, int cell)
{
    for (int y = (int)(cy - ry); y <= (int)(cy + ry) + 1; y++)
        for (int x = (int)(cx - rx); x <= (int)(cx + rx) + 1; x++) {
            const double dx = (x + 0.5 - cx) / rx, dy = (y + 0.5 - cy) / ry;
            if (dx * dx + dy * dy <= 1.0)
                put(cv, x, y, c, base, amp, cell);
        }
}

/* A colour near base (each channel +- spread). */
static void jitter(struct rng *r, const double *base, double spread, double *out)
{
    for (int k = 0; k < 3; k++)
        out[k] = base[k] + uni(r, -spread, spread);
}

/* A street scene's geometry, drawn layer by layer, far to near, each layer's random draws
 * in a fixed order (the same seed makes the same scene). */
struct scene {
    struct canvas *cv;
    struct rng *r;
    double s;                     /* sizes scale with the image: W / 128 */
    int horizon;                  /* the first row below the sky */
    double vx, road_half, walk_w; /* the vanishing point; the road's and a sidewalk's width at the bottom */
};

/* The sky, the ground below the horizon, the road to the vanishing point with its
 * sidewalks and lane markings; sets where the road runs. */
static void draw_ground(struct scene *sc)
{
    const int W = sc->cv->w, H = sc->cv->h, horizon = sc->horizon;
    const double s = sc->s;
    struct canvas *cv = sc->cv;
    struct rng *r = sc->r;
    double col[3];
    /* sky: a vertical gradient */
    static const double sky_top[3] = { 60, 110, 200 }, sky_low[3] = { 170, 200, 230 };
    for (int y = 0; y < horizon; y++) {
        const double t = (double)y / (horizon > 1 ? horizon - 1 : 1);
        double c[3];
        for (int k = 0; k < 3; k++)
            c[k] = sky_top[k] * (1 - t) + sky_low[k] * t;
        rect(cv, 0, y, W, y + 1, SKY, c, 12, 16);
    }

    /* ground: terrain everywhere below the horizon, then the road and sidewalks */
    static const double terrain[3] = { 120, 150, 70 }, road[3] = { 80, 80, 85 }, walk[3] = { 175, 160, 150 };
    jitter(r, terrain, 15, col);
    rect(cv, 0, horizon, W, H, TERRAIN, col, 40, 6);
    const double vx = sc->vx = W * uni(r, 0.35, 0.65); /* vanishing point */
    const double road_half = sc->road_half = W * uni(r, 0.3, 0.45);
    const double walk_w = sc->walk_w = W * uni(r, 0.12, 0.25);
    double rc[3], wc[3];
    jitter(r, road, 10, rc);
    jitter(r, walk, 15, wc);
    for (int y = horizon; y < H; y++) {
        const double t = (double)(y - horizon + 1) / (H - horizon); /* 0 at the horizon, 1 at the bottom */
        const double half = road_half * t, ww = walk_w * t;
        rect(cv, (int)(vx - half - ww), y, (int)(vx - half), y + 1, SIDEWALK, wc, 30, 3);
        rect(cv, (int)(vx + half), y, (int)(vx + half + ww), y + 1, SIDEWALK, wc, 30, 3);
        rect(cv, (int)(vx - half), y, (int)(vx + half) + 1, y + 1, ROAD, rc, 14, 5);
    }
    /* lane markings are road too: lighter dashes */
    static const double mark[3] = { 200, 200, 200 };
    for (int y = horizon + 2; y < H; y += 6) {
        const double t = (double)(y - horizon + 1) / (H - horizon);
        if ((y / 6) % 2)
            rect(cv, (int)(vx - 1.2 * s * t), y, (int)(vx + 1.2 * s * t) + 1, y + (int)(3 * t) + 1, ROAD, mark, 10, 4);
    }
}

/* Buildings along both sides, from the horizon up, with windows. */
static void draw_buildings(const struct scene *sc)
{
    const int W = sc->cv->w, horizon = sc->horizon;
    const double s = sc->s, vx = sc->vx;
    struct canvas *cv = sc->cv;
    struct rng *r = sc->r;
    double col[3];
    /* buildings along both sides, from the horizon up */
    static const double bld[4][3] = { { 150, 130, 110 }, { 110, 105, 100 }, { 170, 160, 140 }, { 120, 90, 80 } };
    for (int side = 0; side < 2; side++) {
        int x = side ? (int)(vx + W * 0.05) : 0;
        const int x_end = side ? W : (int)(vx - W * 0.05);
        while (x < x_end) {
            const int bw = (int)(s * irange(r, 14, 34));
            const int top = (int)(horizon * uni(r, 0.05, 0.75));
            const int bottom = horizon + (int)(s * irange(r, 2, 8));
            jitter(r, bld[irange(r, 0, 3)], 15, col);
            rect(cv, x, top, x + bw, bottom, BUILDING, col, 25, 8);
            /* windows: darker, still building */
            double win[3] = { col[0] * 0.45, col[1] * 0.5, col[2] * 0.6 };
            const int step = (int)(5 * s) > 3 ? (int)(5 * s) : 3;
            for (int wy = top + step / 2; wy + step / 2 < bottom - 2; wy += step)
                for (int wx = x + step / 2; wx + step / 2 < x + bw; wx += step)
                    rect(cv, wx, wy, wx + step / 2, wy + step / 2, BUILDING, win, 10, 4);
            x += bw + (int)(s * irange(r, 0, 6));
        }
    }
}

/* A wall or a fence on one side, between the buildings and the sidewalk (two scenes in
 * three). */
static void draw_wall(const struct scene *sc)
{
    const int W = sc->cv->w, horizon = sc->horizon;
    const double s = sc->s, vx = sc->vx, road_half = sc->road_half;
    struct canvas *cv = sc->cv;
    struct rng *r = sc->r;
    double col[3];
    /* a wall or a fence on one side, between the buildings and the sidewalk */
    if (irange(r, 0, 2) > 0) {
        const int kind = irange(r, 0, 1) ? WALL : FENCE;
        const int side = irange(r, 0, 1);
        const int x0 = side ? (int)(vx + road_half * 0.6) : 0, x1 = side ? W : (int)(vx - road_half * 0.6);
        const int y1 = horizon + (int)(s * 4), y0 = y1 - (int)(s * irange(r, 6, 12));
        static const double wall[3] = { 160, 150, 135 }, fence[3] = { 140, 110, 80 };
        jitter(r, kind == WALL ? wall : fence, 12, col);
        if (kind == WALL)
            rect(cv, x0, y0, x1, y1, WALL, col, 35, 3);
        else
            for (int x = x0; x < x1; x++) /* slats */
                if (x % 4 != 3)
                    rect(cv, x, y0, x + 1, y1, FENCE, col, 20, 2);
    }
}

/* Trees: crowns of vegetation. */
static void draw_trees(const struct scene *sc)
{
    const int W = sc->cv->w, H = sc->cv->h, horizon = sc->horizon;
    const double s = sc->s;
    struct canvas *cv = sc->cv;
    struct rng *r = sc->r;
    double col[3];
    /* trees: crowns of vegetation */
    static const double leaf[3] = { 60, 120, 40 };
    const int ntrees = irange(r, 1, 5);
    for (int i = 0; i < ntrees; i++) {
        jitter(r, leaf, 20, col);
        const double cx = uni(r, 0, W), cy = horizon - uni(r, 0.05, 0.4) * H, rad = s * uni(r, 7, 18);
        ellipse(cv, cx, cy, rad, rad * uni(r, 0.8, 1.2), VEGETATION, col, 70, 3);
    }
}

/* Poles with signs or lights, on the sidewalks. */
static void draw_poles(const struct scene *sc)
{
    const int H = sc->cv->h, horizon = sc->horizon;
    const double s = sc->s, vx = sc->vx, road_half = sc->road_half, walk_w = sc->walk_w;
    struct canvas *cv = sc->cv;
    struct rng *r = sc->r;
    /* poles with signs or lights, on the sidewalks */
    static const double pole[3] = { 90, 90, 95 }, sign[3] = { 210, 200, 40 }, lamp[3] = { 40, 40, 40 };
    const int npoles = irange(r, 1, 4);
    for (int i = 0; i < npoles; i++) {
        const int side = irange(r, 0, 1);
        const double t = uni(r, 0.3, 0.9);
        const int yb = horizon + (int)(t * (H - horizon));
        const double half = road_half * t, ww = walk_w * t;
        const int xp = (int)(side ? vx + half + ww * 0.5 : vx - half - ww * 0.5);
        const int ph = (int)(H * 0.45 * t) + 4, pw = (int)(1 + 1.5 * s * t);
        rect(cv, xp, yb - ph, xp + pw, yb, POLE, pole, 10, 2);
        const int bs = (int)(4 + 5 * s * t);
        if (irange(r, 0, 1))
            rect(cv, xp - bs / 2, yb - ph - bs, xp + pw + bs / 2, yb - ph, TRAFFIC_SIGN, sign, 20, 2);
        else {
            rect(cv, xp - 1, yb - ph - 2 * bs, xp + pw + 1, yb - ph, TRAFFIC_LIGHT, lamp, 10, 2);
            static const double red[3] = { 230, 40, 30 };
            rect(cv, xp, yb - ph - 2 * bs + 1, xp + pw, yb - ph - 2 * bs + 1 + bs / 2, TRAFFIC_LIGHT, red, 10, 2);
        }
    }
}

/* Vehicles on the road, far ones first. */
static void draw_vehicles(const struct scene *sc)
{
    const int H = sc->cv->h, horizon = sc->horizon;
    const double s = sc->s, vx = sc->vx, road_half = sc->road_half;
    struct canvas *cv = sc->cv;
    struct rng *r = sc->r;
    double col[3];
    /* vehicles on the road, far ones first */
    const int ncars = irange(r, 1, 4);
    double ts[4];
    for (int i = 0; i < ncars; i++)
        ts[i] = uni(r, 0.15, 1.0);
    for (int i = 0; i < ncars; i++) /* sort by distance: painter's order */
        for (int j = i + 1; j < ncars; j++)
            if (ts[j] < ts[i]) {
                double u = ts[i];
                ts[i] = ts[j];
                ts[j] = u;
            }
    static const double paints[5][3] = {
        { 30, 40, 140 }, { 160, 20, 20 }, { 200, 200, 205 }, { 20, 20, 25 }, { 90, 110, 60 }
    };
    for (int i = 0; i < ncars; i++) {
        const double t = ts[i];
        const int yb = horizon + (int)(t * (H - horizon));
        const double half = road_half * t;
        const bool bus = irange(r, 0, 5) == 0;
        const int cw = (int)(s * t * (bus ? 36 : 26)) + 3, ch = (int)(s * t * (bus ? 30 : 14)) + 2;
        const int cx = (int)(vx + uni(r, -0.7, 0.7) * half) - cw / 2;
        static const double bus_paint[3] = { 30, 90, 120 };
        jitter(r, bus ? bus_paint : paints[irange(r, 0, 4)], 12, col);
        const int cls = bus ? BUS : CAR;
        rect(cv, cx, yb - ch, cx + cw, yb, cls, col, 20, 4);
        double glass[3] = { 60, 70, 80 };
        rect(cv, cx + cw / 6, yb - ch + ch / 8, cx + cw - cw / 6, yb - ch + ch / 2, cls, glass, 15, 3);
        double tyre[3] = { 15, 15, 15 };
        ellipse(cv, cx + cw * 0.2, yb - 1, cw * 0.12 + 1, ch * 0.15 + 1, cls, tyre, 5, 2);
        ellipse(cv, cx + cw * 0.8, yb - 1, cw * 0.12 + 1, ch * 0.15 + 1, cls, tyre, 5, 2);
    }
}

/* Persons on the sidewalks. */
static void draw_people(const struct scene *sc)
{
    const int H = sc->cv->h, horizon = sc->horizon;
    const double s = sc->s, vx = sc->vx, road_half = sc->road_half, walk_w = sc->walk_w;
    struct canvas *cv = sc->cv;
    struct rng *r = sc->r;
    /* persons on the sidewalks */
    const int npeople = irange(r, 0, 4);
    static const double skin[3] = { 220, 180, 150 };
    for (int i = 0; i < npeople; i++) {
        const int side = irange(r, 0, 1);
        const double t = uni(r, 0.3, 1.0);
        const int yb = horizon + (int)(t * (H - horizon));
        const double half = road_half * t, ww = walk_w * t;
        const double px = side ? vx + half + uni(r, 0.1, 0.9) * ww : vx - half - uni(r, 0.1, 0.9) * ww;
        const double ph = s * t * 26 + 4, pw = ph * 0.3;
        double cloth[3] = { uni(r, 20, 200), uni(r, 20, 200), uni(r, 20, 200) };
        rect(cv, (int)(px - pw / 2), (int)(yb - ph * 0.85), (int)(px + pw / 2) + 1, yb, PERSON, cloth, 25, 3);
        ellipse(cv, px, yb - ph * 0.9, pw * 0.35 + 0.5, ph * 0.1 + 0.5, PERSON, skin, 10, 2);
    }
}

static void draw_scene(struct canvas *cv, struct rng *r)
{
    struct scene sc = { cv, r, cv->w / 128.0, 0, 0, 0, 0 };
    sc.horizon = (int)(cv->h * uni(r, 0.36, 0.5));
    draw_ground(&sc);
    draw_buildings(&sc);
    draw_wall(&sc);
    draw_trees(&sc);
    draw_poles(&sc);
    draw_vehicles(&sc);
    draw_people(&sc);
}

/* ------------------------------------------------------------------ the plugin */

static int synthetic_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    struct synthetic *d = calloc(1, sizeof *d);
    if (!d)
        return tb_err_set(err, TB_ERR_NOMEM, "synthetic: out of memory");
    d->cfg = cfg;
    d->width = (int)tb_section_int(cfg, "width");
    d->height = (int)tb_section_int(cfg, "height");
    *ctx = d;
    return TB_OK;
}

static int synthetic_open_split(void *ctx, const char *split, struct tb_err *err)
{
    static const char *const splits[3] = { "train", "val", "test" };
    static const char *const count_keys[3] = { "train_count", "val_count", "test_count" };
    struct synthetic *d = ctx;
    int which = -1;
    for (int k = 0; k < 3; k++)
        if (strcmp(split, splits[k]) == 0)
            which = k;
    if (which < 0)
        return tb_err_set(err, TB_ERR_CONFIG, "synthetic: no split '%s' (train, val and test exist)", split);
    const size_t count = (size_t)tb_section_int(d->cfg, count_keys[which]);
    d->names = malloc(count * NAME_LEN);
    if (!d->names)
        return tb_err_set(err, TB_ERR_NOMEM, "synthetic: out of memory for %zu sample names", count);
    d->count = count;
    d->seed = tb_mix64((uint64_t)tb_section_int(d->cfg, "seed") * 3 + (uint64_t)which);
    for (size_t i = 0; i < d->count; i++)
        snprintf(d->names + i * NAME_LEN, NAME_LEN, "synthetic/%s/%06zu", split, i);
    return TB_OK;
}

static void synthetic_close(void *ctx)
{
    struct synthetic *d = ctx;
    if (d)
        free(d->names);
    free(d);
}

static size_t synthetic_count(void *ctx)
{
    return ((struct synthetic *)ctx)->count;
}

static const char *synthetic_name(void *ctx, size_t i)
{
    const struct synthetic *d = ctx;
    return d->names + i * NAME_LEN;
}

static int synthetic_load(void *ctx, size_t i, struct tb_sample *out, struct tb_err *err)
{
    const struct synthetic *d = ctx;
    int rc = tb_sample_reserve(out, (uint32_t)d->width, (uint32_t)d->height, err);
    if (rc)
        return rc;
    struct rng r = { tb_mix64(d->seed ^ tb_mix64((uint64_t)i + 1)) };
    struct canvas cv = { d->width, d->height, out->image, out->label, next(&r), uni(&r, 0.75, 1.15) };
    draw_scene(&cv, &r);
    /* sensor noise */
    const size_t n = (size_t)d->width * d->height * 3;
    for (size_t k = 0; k < n; k++) {
        const int v = out->image[k] + (int)(tb_mix64(cv.key ^ (k * TB_GOLDEN64)) % 13) - 6;
        out->image[k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    return TB_OK;
}

static size_t synthetic_classes(void *ctx, const struct tb_class **out)
{
    (void)ctx;
    *out = tb_cityscapes_classes;
    return NCLASSES;
}

static const struct tb_dataset_ops synthetic_ops = {
    .head = { .create = synthetic_create, .destroy = synthetic_close },
    .open_split = synthetic_open_split,
    .count = synthetic_count,
    .sample_name = synthetic_name,
    .load = synthetic_load,
    .classes = synthetic_classes,
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_DATASET,
    .name = "synthetic",
    .version = TB_VERSION,
    .description = "procedural street scenes in the Cityscapes classes, any size and count, seeded (no files)",
    .keys = synthetic_keys,
    .ops.dataset = &synthetic_ops,
};
