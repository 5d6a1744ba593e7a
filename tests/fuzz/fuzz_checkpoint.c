/* fuzz_checkpoint: safetensors files (core/train/safetensors.c) and trainbig checkpoints
 * in them (core/train/checkpoint.c): the header's JSON, dtypes, shapes against byte
 * ranges, metadata; then a checkpoint's format, checksum, model text, counters and
 * tensors against a small engine (fuzz_engine.h), loaded when everything checks. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/train/checkpoint.h"
#include "core/train/safetensors_internal.h"
#include "fuzz_engine.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile float fuzz_sink;

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

/* What a reader may rely on once a file is read: every tensor's bytes lie in the file. */
static void inspect(const struct tb_safetensors *st, size_t file_size)
{
    unsigned __int128 total = 0;
    for (size_t i = 0; i < tb_safetensors_count(st); i++) {
        struct tb_shape shape;
        const float *values;
        const char *name = tb_safetensors_at(st, i, &shape, &values);
        check(name != NULL && tb_safetensors_find(st, name, NULL) != NULL);
        check(shape.n >= 0 && shape.c >= 0 && shape.h >= 0 && shape.w >= 0);
        unsigned __int128 n =
            (unsigned __int128)(uint64_t)shape.n * (uint64_t)shape.c * (uint64_t)shape.h * (uint64_t)shape.w;
        total += n * sizeof(float);
        check(total <= file_size);
        float sum = 0; /* every value read: ASan checks the bytes are there */
        for (size_t k = 0; k < (size_t)n; k++)
            sum += values[k];
        fuzz_sink = sum;
    }
    check(tb_safetensors_at(st, tb_safetensors_count(st), NULL, NULL) == NULL);
    (void)tb_safetensors_meta(st, "format");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char path[32];
    int fd = fuzz_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    struct tb_err err;
    tb_err_clear(&err);
    struct tb_safetensors *st = NULL;
    if (tb_safetensors_read(path, &st, &err) == TB_OK) {
        inspect(st, size);
        tb_safetensors_free(st);

        static struct fuzz_engine f;
        fuzz_engine_init(&f);
        struct tb_ckpt_info info = { .model = FUZZ_MODEL };
        char *training = NULL;
        tb_err_clear(&err);
        (void)tb_checkpoint_load(path, &f.e, false, &info, &training, &err);
        free(training);
    }
    fuzz_file_close(fd);
    return 0;
}
