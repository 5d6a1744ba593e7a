/* backends/cpu/cpu_pool.c: not written yet; every row below is empty, so op_prepare refuses the op. */
#include "cpu_internal.h"

const struct tb_cpu_kernel tb_cpu_maxpool_kernel = { 0 };
const struct tb_cpu_kernel tb_cpu_avgpool_kernel = { 0 };
