/* seed_checkpoint DIR: writes the seeds of corpus/checkpoint/ (fuzz.mk builds it; run by
 * hand when the checkpoint format changes): checkpoints of fuzz_engine.h's model, with
 * and without momentum, one written for another model, and plain safetensors files. */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "core/train/checkpoint.h"
#include "core/train/safetensors_internal.h"
#include "fuzz_engine.h"

static int save(const char *dir, const char *name, struct fuzz_engine *f, const char *model, struct tb_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct tb_ckpt_info info = { 2, 17, 7, 0.005, model, "[train]\nbatch = 2\n", "[run]\nname = fuzz\n" };
    return tb_checkpoint_save(AT_FDCWD, path, path, &f->e, &info, err);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: seed_checkpoint DIR\n");
        return 2;
    }
    struct fuzz_engine f;
    struct tb_err err;
    tb_err_clear(&err);
    fuzz_engine_init(&f);
    int rc = save(argv[1], "momentum.safetensors", &f, FUZZ_MODEL, &err);
    f.params[0].momentum.data = NULL;
    if (!rc)
        rc = save(argv[1], "plain.safetensors", &f, FUZZ_MODEL, &err);
    if (!rc)
        rc = save(argv[1], "other-model.safetensors", &f, "model = other\n", &err);
    const float v[6] = { 1, -2, 3.5f, 0, 1e-3f, 7 };
    const struct tb_st_tensor t[] = { { "a", { 1, 2, 1, 3 }, v }, { "b.empty", { 0, 1, 1, 1 }, v } };
    const char *meta[] = { "format", "something-else", "note", "x" };
    char path[4096];
    snprintf(path, sizeof path, "%s/tensors.safetensors", argv[1]);
    if (!rc)
        rc = tb_safetensors_write(path, t, 2, meta, 2, &err);
    snprintf(path, sizeof path, "%s/empty.safetensors", argv[1]);
    if (!rc)
        rc = tb_safetensors_write(path, NULL, 0, NULL, 0, &err);
    if (rc)
        fprintf(stderr, "seed_checkpoint: %s\n", err.msg);
    return rc ? 1 : 0;
}
