/* backends/cpu/cpu_conv.c: not written yet; every row below is empty, so op_prepare refuses the op. */
#include "cpu_internal.h"

const struct tb_cpu_kernel tb_cpu_conv2d_kernel = { 0 };
