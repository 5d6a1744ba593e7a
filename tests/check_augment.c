/* check_augment: the training augmentation and the validation resize (augment.c).
 *
 * Geometry: the identity is a copy; a flip mirrors image and labels alike; a crop is the
 * window it names; under scaling, labels and image stay aligned (on an image whose colour
 * is a function of its label, every pixel inside a label region has that label's colour)
 * and the window outside the scaled image is padding. Draws: reproducible from the seed,
 * different across seeds, within their ranges, each setting drawn whatever the others.
 * Colour: brightness, contrast, saturation and hue against values worked out by hand;
 * blur keeps constants and the mean, spreads a peak and leaves labels alone. */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/augment.h"

/* ------------------------------------------------------------------ helpers */

static uint64_t rng = 0x243F6A8885A308D3ull;

static uint32_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

static void sample_new(struct tb_sample *s, uint32_t w, uint32_t h)
{
    struct tb_err err;
    memset(s, 0, sizeof *s);
    ck_assert_int_eq(tb_sample_reserve(s, w, h, &err), TB_OK);
}

/* Random bytes, labels in 0..18. */
static void sample_random(struct tb_sample *s, uint32_t w, uint32_t h)
{
    sample_new(s, w, h);
    for (size_t i = 0; i < (size_t)w * h * 3; i++)
        s->image[i] = (uint8_t)next_random();
    for (size_t i = 0; i < (size_t)w * h; i++)
        s->label[i] = (uint8_t)(next_random() % 19);
}

static void sample_fill(struct tb_sample *s, uint32_t w, uint32_t h, uint8_t r, uint8_t g, uint8_t b)
{
    sample_new(s, w, h);
    for (size_t i = 0; i < (size_t)w * h; i++) {
        s->image[3 * i] = r;
        s->image[3 * i + 1] = g;
        s->image[3 * i + 2] = b;
        s->label[i] = 7;
    }
}

/* Settings that change nothing: crop w x h, scale 1, no flip, jitter or blur. */
static struct tb_augment plain_settings(uint32_t w, uint32_t h)
{
    return (struct tb_augment){ .crop_w = w, .crop_h = h, .scale_min = 1, .scale_max = 1 };
}

/* A draw that changes nothing. */
static struct tb_augment_draw plain_draw(void)
{
    return (struct tb_augment_draw){
        .scale = 1, .brightness = 1, .contrast = 1, .saturation = 1, .hue = 0, .order = { 0, 1, 2, 3 }
    };
}

static struct tb_augment_work work; /* reused across calls, as the loader does */

static void apply(const struct tb_augment *a, const struct tb_augment_draw *d, const struct tb_sample *in,
                  struct tb_sample *out)
{
    struct tb_err err;
    ck_assert_int_eq(tb_augment_apply(a, d, in, out, &work, &err), TB_OK);
    ck_assert_uint_eq(out->width, a->crop_w);
    ck_assert_uint_eq(out->height, a->crop_h);
}

static void teardown(void)
{
    tb_augment_work_free(&work);
}

static const uint8_t *px(const struct tb_sample *s, uint32_t x, uint32_t y)
{
    return s->image + ((size_t)y * s->width + x) * 3;
}

static uint8_t label_at(const struct tb_sample *s, uint32_t x, uint32_t y)
{
    return s->label[(size_t)y * s->width + x];
}

/* ------------------------------------------------------------------ geometry */

START_TEST(identity_is_exact)
{
    struct tb_sample in, out = { 0 };
    sample_random(&in, 37, 23);
    const struct tb_augment a = plain_settings(37, 23);
    const struct tb_augment_draw d = plain_draw();
    apply(&a, &d, &in, &out);
    ck_assert_mem_eq(out.image, in.image, (size_t)37 * 23 * 3);
    ck_assert_mem_eq(out.label, in.label, (size_t)37 * 23);
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

/* Drawn jitter factors that happen to be neutral, in any order, change nothing either. */
START_TEST(neutral_steps_in_any_order)
{
    struct tb_sample in, out = { 0 };
    sample_random(&in, 20, 9);
    const struct tb_augment a = plain_settings(20, 9);
    struct tb_augment_draw d = plain_draw();
    const uint8_t order[4] = { 3, 1, 0, 2 };
    memcpy(d.order, order, sizeof order);
    d.sigma = 1; /* no blur: d.blur is false */
    apply(&a, &d, &in, &out);
    ck_assert_mem_eq(out.image, in.image, (size_t)20 * 9 * 3);
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

START_TEST(flip_mirrors_image_and_labels)
{
    struct tb_sample in, out = { 0 };
    sample_random(&in, 31, 12);
    const struct tb_augment a = plain_settings(31, 12);
    struct tb_augment_draw d = plain_draw();
    d.flip = true;
    apply(&a, &d, &in, &out);
    for (uint32_t y = 0; y < 12; y++)
        for (uint32_t x = 0; x < 31; x++) {
            ck_assert_mem_eq(px(&out, x, y), px(&in, 30 - x, y), 3);
            ck_assert_uint_eq(label_at(&out, x, y), label_at(&in, 30 - x, y));
        }
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

/* At scale 1 the output is the named window, flipped or not. */
START_TEST(crop_is_the_window)
{
    struct tb_sample in, out = { 0 };
    sample_random(&in, 40, 30);
    const struct tb_augment a = plain_settings(16, 11);
    struct tb_augment_draw d = plain_draw();
    d.off_x = 9;
    d.off_y = 17;
    for (int flip = 0; flip < 2; flip++) {
        d.flip = flip;
        apply(&a, &d, &in, &out);
        for (uint32_t y = 0; y < 11; y++)
            for (uint32_t x = 0; x < 16; x++) {
                const uint32_t sx = 9 + (flip ? 15 - x : x);
                ck_assert_mem_eq(px(&out, x, y), px(&in, sx, 17 + y), 3);
                ck_assert_uint_eq(label_at(&out, x, y), label_at(&in, sx, 17 + y));
            }
    }
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

/* Rectangular regions of 7 to 12 pixels, label = region number, colour a function of the
 * label. */
static const uint8_t region_colour[][3] = {
    { 200, 10, 10 }, { 10, 200, 10 }, { 10, 10, 200 }, { 250, 250, 0 }, { 0, 250, 250 },
    { 250, 0, 250 }, { 90, 90, 90 },  { 160, 80, 0 },  { 0, 80, 160 },
};
enum { REGIONS = sizeof region_colour / sizeof region_colour[0] };

static void sample_regions(struct tb_sample *s, uint32_t w, uint32_t h)
{
    static const uint32_t xs[] = { 0, 9, 16, 28, 37, 45, 57, 64, 73 }, ys[] = { 0, 8, 19, 27, 36, 43, 51 };
    sample_new(s, w, h);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            uint32_t bx = 0, by = 0;
            while (bx + 1 < sizeof xs / sizeof xs[0] && xs[bx + 1] <= x)
                bx++;
            while (by + 1 < sizeof ys / sizeof ys[0] && ys[by + 1] <= y)
                by++;
            const uint8_t l = (uint8_t)((bx + 2 * by) % REGIONS);
            s->label[(size_t)y * w + x] = l;
            memcpy(s->image + ((size_t)y * w + x) * 3, region_colour[l], 3);
        }
}

/* Every output pixel whose 3x3 neighbourhood has one label L, not padding, has L's colour
 * exactly (bilinear weights sum to one; with rectangular regions the image pixels it
 * blends are inside L there). Returns how many pixels were checked. */
static size_t check_aligned(const struct tb_sample *out)
{
    size_t checked = 0;
    for (uint32_t y = 1; y + 1 < out->height; y++)
        for (uint32_t x = 1; x + 1 < out->width; x++) {
            const uint8_t l = label_at(out, x, y);
            bool interior = l != 255;
            for (int dy = -1; dy <= 1 && interior; dy++)
                for (int dx = -1; dx <= 1; dx++)
                    interior &= label_at(out, x + dx, y + dy) == l;
            if (!interior)
                continue;
            ck_assert_msg(l < REGIONS, "label %d at (%u,%u)", l, x, y);
            const uint8_t *p = px(out, x, y);
            ck_assert_msg(!memcmp(p, region_colour[l], 3), "(%u,%u): label %d but colour %d,%d,%d", x, y, l, p[0], p[1],
                          p[2]);
            checked++;
        }
    return checked;
}

START_TEST(labels_follow_the_image_when_scaled)
{
    struct tb_sample in, out = { 0 };
    sample_regions(&in, 80, 60);
    const struct tb_augment a = plain_settings(64, 48);
    struct tb_augment_draw d = plain_draw();
    static const struct {
        float scale;
        int32_t off_x, off_y;
        bool flip;
    } cases[] = { { 2, 37, 21, false },
                  { 2, 80, 60, true },
                  { 0.5f, -10, -5, false },
                  { 0.5f, -24, 0, true },
                  { 1.37f, 20, 9, true } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        d.scale = cases[i].scale;
        d.off_x = cases[i].off_x;
        d.off_y = cases[i].off_y;
        d.flip = cases[i].flip;
        apply(&a, &d, &in, &out);
        const size_t checked = check_aligned(&out);
        ck_assert_msg(checked > 300, "case %zu: only %zu pixels inside regions", i, checked);
    }
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

/* The same on the draws themselves: scale 0.5 to 2, flips, windows in and around. */
START_TEST(labels_follow_the_image_for_drawn_geometry)
{
    struct tb_sample in, out = { 0 };
    sample_regions(&in, 80, 60);
    const struct tb_augment a = { .crop_w = 56, .crop_h = 40, .scale_min = 0.5f, .scale_max = 2, .flip = true };
    for (uint64_t seed = 0; seed < 40; seed++) {
        struct tb_augment_draw d;
        tb_augment_draw(&a, seed, 80, 60, &d);
        apply(&a, &d, &in, &out);
        ck_assert_uint_gt(check_aligned(&out), 100);
    }
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

/* 40x30 at scale 0.5 is 20x15; a 32x24 window at (-5, -4) holds it at (5, 4) and is padding
 * elsewhere: the mean colour and label 255, exactly. */
START_TEST(padding_outside_the_scaled_image)
{
    struct tb_sample in, out = { 0 };
    sample_fill(&in, 40, 30, 3, 200, 40);
    const struct tb_augment a = plain_settings(32, 24);
    struct tb_augment_draw d = plain_draw();
    d.scale = 0.5f;
    d.off_x = -5;
    d.off_y = -4;
    ck_assert_uint_eq(tb_augment_pad_rgb[0], 124);
    ck_assert_uint_eq(tb_augment_pad_rgb[1], 116);
    ck_assert_uint_eq(tb_augment_pad_rgb[2], 104);
    for (int flip = 0; flip < 2; flip++) {
        d.flip = flip;
        apply(&a, &d, &in, &out);
        for (uint32_t y = 0; y < 24; y++)
            for (uint32_t x = 0; x < 32; x++) {
                /* flipped, column x shows what column 31 - x shows unflipped */
                const uint32_t sx = flip ? 31 - x : x;
                const bool image = sx >= 5 && sx < 25 && y >= 4 && y < 19;
                const uint8_t *p = px(&out, x, y);
                if (image) {
                    ck_assert_msg(p[0] == 3 && p[1] == 200 && p[2] == 40, "(%u,%u) flip %d", x, y, flip);
                    ck_assert_uint_eq(label_at(&out, x, y), 7);
                } else {
                    ck_assert_msg(!memcmp(p, tb_augment_pad_rgb, 3), "(%u,%u) flip %d: not padding", x, y, flip);
                    ck_assert_uint_eq(label_at(&out, x, y), 255);
                }
            }
    }
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

/* A window entirely off the image is all padding. */
START_TEST(window_off_the_image)
{
    struct tb_sample in, out = { 0 };
    sample_random(&in, 10, 10);
    const struct tb_augment a = plain_settings(8, 8);
    struct tb_augment_draw d = plain_draw();
    d.off_x = 50;
    apply(&a, &d, &in, &out);
    for (uint32_t i = 0; i < 64; i++) {
        ck_assert_mem_eq(out.image + 3 * i, tb_augment_pad_rgb, 3);
        ck_assert_uint_eq(out.label[i], 255);
    }
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

/* ------------------------------------------------------------------ draws */

static const struct tb_augment reference = {
    .crop_w = 800,
    .crop_h = 800,
    .scale_min = 0.5f,
    .scale_max = 2.0f,
    .flip = true,
    .jitter = 0.25f,
    .blur_prob = 0.5f,
    .blur_sigma_min = 0.15f,
    .blur_sigma_max = 1.3f,
};

static bool draws_equal(const struct tb_augment_draw *a, const struct tb_augment_draw *b)
{
    return a->scale == b->scale && a->off_x == b->off_x && a->off_y == b->off_y && a->flip == b->flip &&
           a->brightness == b->brightness && a->contrast == b->contrast && a->saturation == b->saturation &&
           a->hue == b->hue && !memcmp(a->order, b->order, 4) && a->blur == b->blur && a->sigma == b->sigma;
}

START_TEST(same_seed_same_sample)
{
    struct tb_sample in, out1 = { 0 }, out2 = { 0 };
    sample_random(&in, 90, 70);
    struct tb_augment a = reference;
    a.crop_w = 64;
    a.crop_h = 48;
    a.blur_prob = 1;
    struct tb_augment_draw d1, d2;
    tb_augment_draw(&a, 1234, 90, 70, &d1);
    tb_augment_draw(&a, 1234, 90, 70, &d2);
    ck_assert(draws_equal(&d1, &d2));
    apply(&a, &d1, &in, &out1);
    apply(&a, &d2, &in, &out2);
    ck_assert_mem_eq(out1.image, out2.image, (size_t)64 * 48 * 3);
    ck_assert_mem_eq(out1.label, out2.label, (size_t)64 * 48);
    tb_sample_release(&in);
    tb_sample_release(&out1);
    tb_sample_release(&out2);
}
END_TEST

START_TEST(different_seeds_differ)
{
    struct tb_augment_draw d[16];
    for (uint64_t s = 0; s < 16; s++)
        tb_augment_draw(&reference, s, 2048, 1024, &d[s]);
    for (int i = 0; i < 16; i++)
        for (int j = i + 1; j < 16; j++) {
            ck_assert_msg(d[i].scale != d[j].scale, "seeds %d and %d draw the same scale", i, j);
            ck_assert_msg(d[i].brightness != d[j].brightness, "seeds %d and %d draw the same brightness", i, j);
        }
}
END_TEST

static bool offset_valid(int32_t off, uint32_t in, float scale, uint32_t crop)
{
    long scaled = lround((double)in * scale);
    if (scaled < 1)
        scaled = 1;
    if (scaled >= (long)crop)
        return off >= 0 && off <= scaled - (long)crop;
    return off <= 0 && off >= scaled - (long)crop;
}

/* 2000 draws of the reference settings on a 2048x1024 image and on a small one (whose
 * scaled image is narrower than the window): every value in its range, flips and blurs
 * about half the time (binomial standard deviation 22: the bounds are 4.5 of it). */
START_TEST(draws_stay_in_range)
{
    static const uint32_t sizes[2][2] = { { 2048, 1024 }, { 500, 300 } };
    for (int k = 0; k < 2; k++) {
        const uint32_t w = sizes[k][0], h = sizes[k][1];
        int flips = 0, blurs = 0, negative = 0;
        float scale_lo = 10, scale_hi = 0;
        for (uint64_t seed = 0; seed < 2000; seed++) {
            struct tb_augment_draw d;
            tb_augment_draw(&reference, seed * 7919 + (uint64_t)k, w, h, &d);
            ck_assert(d.scale >= 0.5f && d.scale <= 2.0f);
            scale_lo = fminf(scale_lo, d.scale);
            scale_hi = fmaxf(scale_hi, d.scale);
            ck_assert_msg(offset_valid(d.off_x, w, d.scale, 800), "seed %llu: off_x %d at scale %g",
                          (unsigned long long)seed, d.off_x, d.scale);
            ck_assert_msg(offset_valid(d.off_y, h, d.scale, 800), "seed %llu: off_y %d at scale %g",
                          (unsigned long long)seed, d.off_y, d.scale);
            negative += d.off_x < 0 || d.off_y < 0;
            flips += d.flip;
            blurs += d.blur;
            ck_assert(d.brightness >= 0.75f && d.brightness <= 1.25f);
            ck_assert(d.contrast >= 0.75f && d.contrast <= 1.25f);
            ck_assert(d.saturation >= 0.75f && d.saturation <= 1.25f);
            ck_assert(d.hue >= -0.25f && d.hue <= 0.25f);
            ck_assert(d.sigma >= 0.15f && d.sigma <= 1.3f);
            int seen = 0;
            for (int i = 0; i < 4; i++) {
                ck_assert_uint_lt(d.order[i], 4);
                seen |= 1 << d.order[i];
            }
            ck_assert_int_eq(seen, 15);
        }
        ck_assert_msg(flips > 900 && flips < 1100, "%d flips in 2000", flips);
        ck_assert_msg(blurs > 900 && blurs < 1100, "%d blurs in 2000", blurs);
        ck_assert(scale_lo < 0.55f && scale_hi > 1.95f);
        if (k == 1) /* 500 x 0.5 = 250 < 800: the image sits inside the window */
            ck_assert_int_gt(negative, 100);
    }
}
END_TEST

/* Settings that are off give neutral values, and turning one setting off or on leaves the
 * other draws as they were. */
START_TEST(settings_do_not_shift_other_draws)
{
    struct tb_augment off = reference;
    off.flip = false;
    off.jitter = 0;
    off.blur_prob = 0;
    for (uint64_t seed = 0; seed < 200; seed++) {
        struct tb_augment_draw d, e;
        tb_augment_draw(&reference, seed, 2048, 1024, &d);
        tb_augment_draw(&off, seed, 2048, 1024, &e);
        ck_assert(!e.flip && !e.blur);
        ck_assert(e.brightness == 1 && e.contrast == 1 && e.saturation == 1 && e.hue == 0);
        ck_assert(d.scale == e.scale && d.off_x == e.off_x && d.off_y == e.off_y && d.sigma == e.sigma);
        ck_assert_mem_eq(d.order, e.order, 4);
    }
}
END_TEST

/* ------------------------------------------------------------------ colour */

/* The single pixel of a 1x1 sample after draw d. */
static void colour_of(const struct tb_augment_draw *d, uint8_t r, uint8_t g, uint8_t b, uint8_t result[3])
{
    struct tb_sample in, out = { 0 };
    sample_fill(&in, 1, 1, r, g, b);
    const struct tb_augment a = plain_settings(1, 1);
    apply(&a, d, &in, &out);
    memcpy(result, out.image, 3);
    tb_sample_release(&in);
    tb_sample_release(&out);
}

START_TEST(brightness_scales)
{
    struct tb_augment_draw d = plain_draw();
    uint8_t c[3];
    d.brightness = 0.5f;
    colour_of(&d, 128, 128, 128, c);
    ck_assert(c[0] == 64 && c[1] == 64 && c[2] == 64);
    d.brightness = 1.5f;
    colour_of(&d, 100, 200, 10, c);
    ck_assert(c[0] == 150 && c[1] == 255 && c[2] == 15); /* clamped at 255 */
}
END_TEST

/* Contrast 0 leaves the mean grey everywhere; 2 doubles distances from it. */
START_TEST(contrast_blends_with_the_mean_grey)
{
    struct tb_sample in, out = { 0 };
    sample_new(&in, 2, 1);
    const uint8_t pixels[6] = { 100, 100, 100, 200, 200, 200 }; /* mean grey 150 */
    memcpy(in.image, pixels, 6);
    memset(in.label, 0, 2);
    const struct tb_augment a = plain_settings(2, 1);
    struct tb_augment_draw d = plain_draw();
    d.contrast = 0;
    apply(&a, &d, &in, &out);
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq(out.image[i], 150);
    d.contrast = 2;
    apply(&a, &d, &in, &out);
    ck_assert_uint_eq(out.image[0], 50);
    ck_assert_uint_eq(out.image[3], 250);
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

START_TEST(saturation_zero_is_grey)
{
    struct tb_augment_draw d = plain_draw();
    uint8_t c[3];
    d.saturation = 0;
    colour_of(&d, 200, 30, 90, c);
    /* 0.299 * 200 + 0.587 * 30 + 0.114 * 90 = 87.67 */
    ck_assert(c[0] == 88 && c[1] == 88 && c[2] == 88);
}
END_TEST

START_TEST(hue_rotates)
{
    struct tb_augment_draw d = plain_draw();
    uint8_t c[3];
    d.hue = 0.5f; /* half a turn: red to cyan */
    colour_of(&d, 255, 0, 0, c);
    ck_assert_msg(c[0] <= 2 && c[1] >= 253 && c[2] >= 253, "%d,%d,%d", c[0], c[1], c[2]);
    d.hue = 1.0f / 3; /* a third: red to green, green to blue */
    colour_of(&d, 255, 0, 0, c);
    ck_assert_msg(c[0] <= 1 && c[1] >= 254 && c[2] <= 1, "%d,%d,%d", c[0], c[1], c[2]);
    colour_of(&d, 0, 255, 0, c);
    ck_assert_msg(c[0] <= 1 && c[1] <= 1 && c[2] >= 254, "%d,%d,%d", c[0], c[1], c[2]);
    d.hue = -1.0f / 6; /* a sixth back: red to magenta */
    colour_of(&d, 255, 0, 0, c);
    ck_assert_msg(c[0] >= 254 && c[1] <= 1 && c[2] >= 254, "%d,%d,%d", c[0], c[1], c[2]);
    d.hue = 0.25f; /* a quarter: orange (hue 30 degrees) to 120: green */
    colour_of(&d, 200, 100, 0, c);
    ck_assert_msg(c[0] <= 1 && c[1] >= 199 && c[1] <= 201 && c[2] <= 1, "%d,%d,%d", c[0], c[1], c[2]);
    /* grey has no hue; value and chroma are kept */
    d.hue = 0.3f;
    colour_of(&d, 77, 77, 77, c);
    ck_assert(c[0] == 77 && c[1] == 77 && c[2] == 77);
    colour_of(&d, 180, 60, 120, c);
    const int hi = c[0] > c[1] ? (c[0] > c[2] ? c[0] : c[2]) : (c[1] > c[2] ? c[1] : c[2]);
    const int lo = c[0] < c[1] ? (c[0] < c[2] ? c[0] : c[2]) : (c[1] < c[2] ? c[1] : c[2]);
    ck_assert_msg(abs(hi - 180) <= 1 && abs(lo - 60) <= 1, "%d,%d,%d", c[0], c[1], c[2]);
}
END_TEST

/* On a whole image with every step on, results stay within 0..255 and the order matters
 * (brightness 2 then contrast 0.5 is not contrast 0.5 then brightness 2 once clamped). */
START_TEST(steps_run_in_order)
{
    struct tb_sample in, out1 = { 0 }, out2 = { 0 };
    sample_random(&in, 33, 17);
    const struct tb_augment a = plain_settings(33, 17);
    struct tb_augment_draw d = plain_draw();
    d.brightness = 2;
    d.contrast = 0.5f;
    const uint8_t bc[4] = { 0, 1, 2, 3 }, cb[4] = { 1, 0, 2, 3 };
    memcpy(d.order, bc, 4);
    apply(&a, &d, &in, &out1);
    memcpy(d.order, cb, 4);
    apply(&a, &d, &in, &out2);
    ck_assert(memcmp(out1.image, out2.image, (size_t)33 * 17 * 3) != 0);
    tb_sample_release(&in);
    tb_sample_release(&out1);
    tb_sample_release(&out2);
}
END_TEST

/* ------------------------------------------------------------------ blur */

static struct tb_augment_draw blur_draw(float sigma)
{
    struct tb_augment_draw d = plain_draw();
    d.blur = true;
    d.sigma = sigma;
    return d;
}

START_TEST(blur_keeps_a_constant_image)
{
    struct tb_sample in, out = { 0 };
    sample_fill(&in, 45, 21, 17, 140, 251);
    const struct tb_augment a = plain_settings(45, 21);
    static const float sigmas[] = { 0.15f, 0.7f, 1.3f, 4 };
    for (size_t i = 0; i < sizeof sigmas / sizeof sigmas[0]; i++) {
        const struct tb_augment_draw d = blur_draw(sigmas[i]);
        apply(&a, &d, &in, &out);
        ck_assert_mem_eq(out.image, in.image, (size_t)45 * 21 * 3);
    }
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

static double mean_of(const uint8_t *p, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += p[i];
    return s / (double)n;
}

/* The mean survives (edges clamped, weights normalised: only rounding moves it); the
 * labels are not blurred. */
START_TEST(blur_keeps_the_mean_and_the_labels)
{
    struct tb_sample in, out = { 0 };
    sample_random(&in, 64, 50);
    const struct tb_augment a = plain_settings(64, 50);
    const struct tb_augment_draw d = blur_draw(1.3f);
    apply(&a, &d, &in, &out);
    const size_t n = (size_t)64 * 50 * 3;
    const double before = mean_of(in.image, n), after = mean_of(out.image, n);
    ck_assert_msg(fabs(before - after) < 1.0, "mean %g before, %g after", before, after);
    ck_assert(memcmp(out.image, in.image, n) != 0);
    ck_assert_mem_eq(out.label, in.label, (size_t)64 * 50);
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

START_TEST(blur_spreads_a_peak)
{
    struct tb_sample in, out = { 0 };
    sample_fill(&in, 21, 21, 0, 0, 0);
    memset(in.image + (10 * 21 + 10) * 3, 255, 3);
    const struct tb_augment a = plain_settings(21, 21);
    const struct tb_augment_draw d = blur_draw(1);
    apply(&a, &d, &in, &out);
    const uint8_t *peak = px(&out, 10, 10), *beside = px(&out, 11, 10), *below = px(&out, 10, 11);
    ck_assert_uint_lt(peak[0], 255);
    ck_assert_uint_gt(peak[0], 0);
    ck_assert_uint_gt(beside[1], 0);
    ck_assert_uint_lt(beside[1], peak[1]);
    ck_assert_uint_eq(beside[2], below[2]); /* the same kernel along both axes */
    ck_assert_uint_eq(px(&out, 9, 10)[0], beside[0]);
    ck_assert_uint_eq(px(&out, 0, 0)[0], 0); /* radius 3: far pixels untouched */
    /* sigma 1: the centre weight is 1 / (2 pi) of the total in two dimensions */
    ck_assert_msg(abs((int)peak[0] - 41) <= 1, "peak %d", peak[0]);
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

/* Scratch grown by a larger sample and a wider kernel, and kept for a smaller one. */
START_TEST(work_grows_and_is_reused)
{
    struct tb_sample in, out = { 0 };
    sample_random(&in, 120, 90);
    static const uint32_t sides[][2] = { { 8, 8 }, { 100, 70 }, { 16, 90 }, { 120, 3 } };
    static const float sigmas[] = { 0.2f, 3, 8, 0.5f };
    for (int i = 0; i < 4; i++) {
        struct tb_augment a = reference;
        a.crop_w = sides[i][0];
        a.crop_h = sides[i][1];
        struct tb_augment_draw d;
        tb_augment_draw(&a, (uint64_t)i, 120, 90, &d);
        d.blur = true;
        d.sigma = sigmas[i];
        apply(&a, &d, &in, &out);
    }
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

/* ------------------------------------------------------------------ resize */

START_TEST(resize_same_size_copies)
{
    struct tb_sample in, out = { 0 };
    struct tb_err err;
    sample_random(&in, 19, 11);
    ck_assert_int_eq(tb_augment_resize(&in, 19, 11, &out, &err), TB_OK);
    ck_assert_mem_eq(out.image, in.image, (size_t)19 * 11 * 3);
    ck_assert_mem_eq(out.label, in.label, (size_t)19 * 11);
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

/* Twice the size: labels are the nearest input pixel's, exactly (x / 2, y / 2); the image
 * blends neighbours, 3/4 of the nearer, so a pixel lies between its two sources. */
START_TEST(resize_doubles)
{
    struct tb_sample in, out = { 0 };
    struct tb_err err;
    sample_random(&in, 13, 9);
    ck_assert_int_eq(tb_augment_resize(&in, 26, 18, &out, &err), TB_OK);
    ck_assert_uint_eq(out.width, 26);
    ck_assert_uint_eq(out.height, 18);
    for (uint32_t y = 0; y < 18; y++)
        for (uint32_t x = 0; x < 26; x++)
            ck_assert_uint_eq(label_at(&out, x, y), label_at(&in, x / 2, y / 2));
    /* corners: only the corner pixel contributes (positions clamped) */
    ck_assert_mem_eq(px(&out, 0, 0), px(&in, 0, 0), 3);
    ck_assert_mem_eq(px(&out, 25, 17), px(&in, 12, 8), 3);
    /* along the top row, output 3 is 3/4 of input 1 and 1/4 of input 2 */
    for (int c = 0; c < 3; c++) {
        const double want = 0.75 * px(&in, 1, 0)[c] + 0.25 * px(&in, 2, 0)[c];
        ck_assert_msg(fabs(px(&out, 3, 0)[c] - want) <= 1, "%d against %g", px(&out, 3, 0)[c], want);
    }
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

/* Half the size, non-uniformly: 2x2 blocks of one colour stay that colour. */
START_TEST(resize_halves)
{
    struct tb_sample in, out = { 0 };
    struct tb_err err;
    sample_new(&in, 16, 12);
    for (uint32_t y = 0; y < 12; y++)
        for (uint32_t x = 0; x < 16; x++) {
            const uint8_t v = (uint8_t)(30 * ((x / 2 + y / 2) % 5));
            memset(in.image + ((size_t)y * 16 + x) * 3, v, 3);
            in.label[(size_t)y * 16 + x] = (uint8_t)((x / 2 + y / 2) % 5);
        }
    ck_assert_int_eq(tb_augment_resize(&in, 8, 6, &out, &err), TB_OK);
    for (uint32_t y = 0; y < 6; y++)
        for (uint32_t x = 0; x < 8; x++) {
            const uint8_t l = (uint8_t)((x + y) % 5);
            ck_assert_uint_eq(label_at(&out, x, y), l);
            ck_assert_uint_eq(px(&out, x, y)[1], 30 * l);
        }
    tb_sample_release(&in);
    tb_sample_release(&out);
}
END_TEST

static Suite *augment_suite(void)
{
    Suite *s = suite_create("augment");
    TCase *tc = tcase_create("geometry");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, identity_is_exact);
    tcase_add_test(tc, neutral_steps_in_any_order);
    tcase_add_test(tc, flip_mirrors_image_and_labels);
    tcase_add_test(tc, crop_is_the_window);
    tcase_add_test(tc, labels_follow_the_image_when_scaled);
    tcase_add_test(tc, labels_follow_the_image_for_drawn_geometry);
    tcase_add_test(tc, padding_outside_the_scaled_image);
    tcase_add_test(tc, window_off_the_image);
    suite_add_tcase(s, tc);
    tc = tcase_create("draws");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, same_seed_same_sample);
    tcase_add_test(tc, different_seeds_differ);
    tcase_add_test(tc, draws_stay_in_range);
    tcase_add_test(tc, settings_do_not_shift_other_draws);
    suite_add_tcase(s, tc);
    tc = tcase_create("colour");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, brightness_scales);
    tcase_add_test(tc, contrast_blends_with_the_mean_grey);
    tcase_add_test(tc, saturation_zero_is_grey);
    tcase_add_test(tc, hue_rotates);
    tcase_add_test(tc, steps_run_in_order);
    tcase_add_test(tc, blur_keeps_a_constant_image);
    tcase_add_test(tc, blur_keeps_the_mean_and_the_labels);
    tcase_add_test(tc, blur_spreads_a_peak);
    tcase_add_test(tc, work_grows_and_is_reused);
    suite_add_tcase(s, tc);
    tc = tcase_create("resize");
    tcase_add_test(tc, resize_same_size_copies);
    tcase_add_test(tc, resize_doubles);
    tcase_add_test(tc, resize_halves);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(augment_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
