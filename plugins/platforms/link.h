/* platforms/link.h: what the shipped platform plugins share: a link described by keys,
 * and a look at the machine (CPU, NVIDIA GPUs, how they attach, their NUMA node) for
 * score() and for numa_node = -1. Compiled into each platform plugin with hidden
 * visibility (the plugins stay one-symbol objects), and into tests/check_platform. */
#ifndef TB_PLATFORMS_LINK_H
#define TB_PLATFORMS_LINK_H

#include <stdbool.h>
#include <trainbig/trainbig.h>

/* Ranges of the keys both platforms declare (key tables need literals). Bandwidths and
 * compute rates are bounded above so that a value written in bytes/s or FLOP/s instead
 * of GB/s or TFLOP/s is caught. */
#define PLAT_GBPS_RANGE "0.001..10000"
#define PLAT_DUPLEX_RANGE "0..10000"
#define PLAT_LATENCY_RANGE "0..100000"
#define PLAT_TFLOPS_RANGE "0.001..100000"
#define PLAT_NUMA_RANGE "-1..1023"
/* The accelerator's keys: its memory in bytes (a size: 16G), bandwidth in GB/s, 16-bit
 * rates in TFLOP/s (0: it has no such units). */
#define PLAT_MEMORY_RANGE "1M..64T"
#define PLAT_MEM_GBPS_RANGE "0.001..100000"
#define PLAT_16BIT_RANGE "0..100000"
#define PLAT_PER_NODE_RANGE "1..1024"
#define PLAT_RING_GBPS_RANGE "0.001..100000"
#define PLAT_PAIR_GBPS_RANGE "0..100000"
/* accel_efficiency: a fraction; above 1 only for fast convolution algorithms, and a
 * percentage (70) is caught. The default is TB_ACCEL_EFFICIENCY_DEFAULT's. */
#define PLAT_EFFICIENCY_RANGE "0.01..2"
#define PLAT_EFFICIENCY_DEFAULT "0.7"
#define PLAT_EFFICIENCY_HELP                                                                                         \
    "fraction of accel_tflops the GPU achieves on large fp32 3x3 convolutions (cuDNN, training); emulate_link "     \
    "compares this CPU's achieved convolution rate with accel_tflops x this (the platform's comment says where its "  \
    "default comes from; see trainbig.ini(5))"

/* create/destroy/link/accel/env_defaults of a platform whose every value is a key:
 * h2d_gbps, d2h_gbps, duplex_gbps, latency_us, accel_tflops, accel_efficiency, accel_name,
 * accel_memory, accel_mem_gbps, accel_fp16_tflops, accel_bf16_tflops, numa_node, nccl_env,
 * swap_defaults (and swap_defaults' list, plat_swap_defaults).
 * plat_create logs through self (the calling plugin's descriptor). */
int plat_create(const struct tb_plugin *self, const struct tb_section *cfg, void **ctx, struct tb_err *err);
void plat_destroy(void *ctx);
void plat_link(void *ctx, struct tb_link *out);
void plat_accel(void *ctx, struct tb_accel *out);
const char *const *plat_env_defaults(void *ctx);
const char *const *plat_swap_defaults(void *ctx);

/* What /proc and /sys say about this machine. */
enum plat_cpu { PLAT_CPU_UNKNOWN, PLAT_CPU_X86, PLAT_CPU_POWER9, PLAT_CPU_POWER, PLAT_CPU_OTHER };

struct plat_machine {
    enum plat_cpu cpu;
    char cpu_model[128]; /* "AMD EPYC 7B13", "POWER9, altivec supported"; "" = unknown */
    char machine[64];    /* POWER's machine line ("PowerNV 8335-GTG"); "" elsewhere */
    int gpus;            /* NVIDIA GPUs on the PCI bus or listed by the driver */
    int gpus_nvlink;     /* of those, attached to the CPU over NVLink (a POWER9 NPU) */
    bool driver;         /* the NVIDIA driver lists GPUs in /proc/driver/nvidia/gpus */
    char gpu_bus[32];    /* PCI address of the first GPU (lowest address) */
    char gpu_model[96];  /* its model as the driver names it; "" without the driver */
    int gpu_node;        /* NUMA node of its PCI device; -1 = unknown or no GPU */
    bool nodes_differ;   /* the GPUs are not all on gpu_node */
};

/* Fills *m from the files under root ("" = this machine's /proc and /sys; tests pass a
 * directory laid out the same way). Never fails: what cannot be read stays unknown. */
void plat_probe(const char *root, struct plat_machine *m);

/* "AMD EPYC 7B13" or "POWER9, altivec supported, PowerNV 8335-GTG", or "model unknown". */
void plat_cpu_text(const struct plat_machine *m, char *buf, size_t size);

/* The link classes' score()s, on a probed machine (score() probes this one). */
int plat_score_power9(const struct plat_machine *m, char *why, size_t why_size);
int plat_score_x86_pcie(const struct plat_machine *m, char *why, size_t why_size);

/* The presets' score()s: their class's score plus 5 on the machine itself (recognised by
 * its CPU model, an AC922's machine type 8335-GT*, or the GPU the driver names), 0
 * elsewhere: chosen only by name. */
int plat_score_ac922(const struct plat_machine *m, char *why, size_t why_size);
int plat_score_dgx_station(const struct plat_machine *m, char *why, size_t why_size);
int plat_score_p3_8xlarge(const struct plat_machine *m, char *why, size_t why_size);
/* The GPU presets' (an x86 host whose driver names that GPU). */
int plat_score_h100_sxm(const struct plat_machine *m, char *why, size_t why_size);
int plat_score_h200(const struct plat_machine *m, char *why, size_t why_size);
int plat_score_rtx4090(const struct plat_machine *m, char *why, size_t why_size);

/* numa_node = -1: the node of the first GPU, -1 without one; why says which. */
int plat_auto_numa_node(const struct plat_machine *m, char *why, size_t why_size);

#endif
