/* backends/cpu/cpu_eltwise.c: not written yet; every row below is empty, so op_prepare refuses the op. */
#include "cpu_internal.h"

const struct tb_cpu_kernel tb_cpu_relu_kernel = { 0 };
const struct tb_cpu_kernel tb_cpu_sigmoid_kernel = { 0 };
const struct tb_cpu_kernel tb_cpu_add_kernel = { 0 };
const struct tb_cpu_kernel tb_cpu_mul_kernel = { 0 };
const struct tb_cpu_kernel tb_cpu_dropout_kernel = { 0 };
