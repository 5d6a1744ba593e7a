/* core/train/safetensors_internal.h: reading and writing safetensors files (safetensors.c), the
 * format of trainbig's checkpoints.
 *
 * A file is an 8-byte little-endian header length, a JSON header naming each tensor's
 * dtype, shape and byte range, and the tensors' bytes. trainbig writes F32 tensors with
 * 4-dimensional shapes (N, C, H, W, as the engine holds them) and string metadata under
 * "__metadata__". Writing is atomic: a temporary file in the same directory, fsync,
 * rename over the target, fsync of the directory; a crash leaves the old file or the new
 * one, never a mix. Reading checks everything before trusting any of it: header length,
 * JSON syntax, dtypes, shapes against byte ranges, ranges covering the data exactly, the
 * file size; any failure names the file and what is wrong. It takes tensors stored as F32,
 * BF16 or F16 (as PyTorch saves them in each precision), the 16-bit ones converted exactly
 * to float, so a model's weights load whatever precision they were saved in. */
#ifndef TB_CORE_SAFETENSORS_INTERNAL_H
#define TB_CORE_SAFETENSORS_INTERNAL_H

#include <stddef.h>
#include <trainbig/error.h>
#include <trainbig/tensor.h>

/* One tensor to write: host data, f32, tb_shape_elems(shape) values. */
struct tb_st_tensor {
    const char *name;
    struct tb_shape shape;
    const float *data;
};

/* Writes n tensors and the metadata pairs meta[0] = meta[1], meta[2] = meta[3], ... (nmeta
 * pairs) to path, atomically. Names must be unique and must not contain '"' or '\\'. */
int tb_safetensors_write(const char *path, const struct tb_st_tensor *t, size_t n, const char *const *meta,
                         size_t nmeta, struct tb_err *err);
/* The same to name in the directory open as dirfd, which messages call path. */
int tb_safetensors_write_at(int dirfd, const char *name, const char *path, const struct tb_st_tensor *t, size_t n,
                            const char *const *meta, size_t nmeta, struct tb_err *err);

/* A file read and checked; owns its bytes. */
struct tb_safetensors;

int tb_safetensors_read(const char *path, struct tb_safetensors **out, struct tb_err *err);
void tb_safetensors_free(struct tb_safetensors *st);

size_t tb_safetensors_count(const struct tb_safetensors *st);
/* Tensor i's name, shape and f32 data (owned by st); NULL name past the end. */
const char *tb_safetensors_at(const struct tb_safetensors *st, size_t i, struct tb_shape *shape, const float **data);
/* The tensor named name, or NULL. */
const float *tb_safetensors_find(const struct tb_safetensors *st, const char *name, struct tb_shape *shape);
/* A metadata value, or NULL. Owned by st. */
const char *tb_safetensors_meta(const struct tb_safetensors *st, const char *key);

#endif
