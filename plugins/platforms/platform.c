/* platforms/platform.c: the shipped platform plugins, one source. A platform is data: its
 * name, description, score() and its keys' defaults, one row below per platform. The
 * build compiles this file once per plugin with TB_PLATFORM set to the row's number
 * (Makefile.am: -DTB_PLATFORM=...), so each plugin is one .so exporting one
 * trainbig_plugin; the behaviour is link.c's, shared by all of them.
 *
 * The help of the keys names where the defaults come from; each row's comment says why. */
#include <stdio.h>

#include "link.h"

#define TB_PLATFORM_POWER9_NVLINK 1
#define TB_PLATFORM_X86_PCIE 2
#define TB_PLATFORM_AC922 3
#define TB_PLATFORM_DGX_STATION 4
#define TB_PLATFORM_P3_8XLARGE 5
#define TB_PLATFORM_H100_SXM 6
#define TB_PLATFORM_H200 7
#define TB_PLATFORM_RTX4090 8

/* The study's three machines are presets: the link classes' rows above with the machine's
 * name, description and a score that is above its class's only on that machine (its
 * CPU model, or an AC922's machine type), so `plugin = auto` prefers the preset where it
 * runs and names it in reports; elsewhere a preset is chosen by name, to emulate it. */
#if TB_PLATFORM == TB_PLATFORM_AC922
#define TB_PLATFORM_CLASS TB_PLATFORM_POWER9_NVLINK
#elif TB_PLATFORM == TB_PLATFORM_DGX_STATION || TB_PLATFORM == TB_PLATFORM_P3_8XLARGE ||                          \
    TB_PLATFORM == TB_PLATFORM_H100_SXM || TB_PLATFORM == TB_PLATFORM_H200 || TB_PLATFORM == TB_PLATFORM_RTX4090
#define TB_PLATFORM_CLASS TB_PLATFORM_X86_PCIE
#else
#define TB_PLATFORM_CLASS TB_PLATFORM
#endif

/* Both classes' accelerator: the study's, a V100 SXM2 16 GB (NVIDIA Tesla V100 datasheet:
 * 16 GB HBM2 at 900 GB/s, 15.7 TFLOP/s fp32, 125 TFLOP/s on its tensor cores, fp16 with
 * fp32 accumulation; Volta has no bf16). accel_memory = 15G is an estimate of what one
 * process may use: CUDA reports about 15.8 GiB in all on a 16 GB V100, and the context
 * with cuDNN's and cuBLAS's handles holds some 0.5-0.8 GiB of it; `trainbig probe` with
 * the cuda backend on the machine prints what is left. */
#define PLAT_ACCEL_NAME "V100 SXM2 16 GB"
#define PLAT_ACCEL_MEMORY "15G"
#define PLAT_ACCEL_MEM_GBPS "900"
#define PLAT_ACCEL_FP16 "125"
#define PLAT_ACCEL_BF16 "0"
#define PLAT_EFFICIENCY PLAT_EFFICIENCY_DEFAULT
/* Between the nodes of the study's machines: InfiniBand EDR, 4 lanes of 25.78 Gb/s = 100 Gb/s
 * = 12.5 GB/s per direction, one port per node in the ring, ~2 us end to end (adapter,
 * switch, wire), as in the clusters of the scaling studies the study cites. */
#define PLAT_NET_GBPS "12.5"
#define PLAT_NET_NOTE "InfiniBand EDR: 12.5"
#define PLAT_NET_LATENCY "2"

#if TB_PLATFORM_CLASS == TB_PLATFORM_POWER9_NVLINK

/* platform/power9-nvlink: an IBM AC922, POWER9 CPUs with NVLink 2.0 to the GPUs.
 *
 * Where the defaults come from:
 *   h2d_gbps, d2h_gbps = 68: measured between CPU and GPU on a 4-GPU AC922 in the study
 *     this project reproduces (issue 6). The wire's nominal rate is 75 GB/s per direction:
 *     in the 4-GPU AC922 each V100 has 3 NVLink 2.0 links to its POWER9, each 25 GB/s
 *     per direction (IBM Redpaper REDP-5472, "IBM Power System AC922 Introduction and
 *     Technical Overview": 150 GB/s both ways per GPU).
 *   duplex_gbps = 60: an estimate, not a measurement we could find published. NVLink has
 *     separate lanes per direction, so the wire allows the one-direction rate each way at
 *     once; what costs is the host side, whose memory then feeds one stream and absorbs
 *     the other (a POWER9 socket's DDR4 peaks near 170 GB/s). 60 is ~88% of the measured
 *     one-direction figure; measure your machine and set it.
 *   latency_us = 7: the fixed cost of one copy is the driver's and the copy engine's setup,
 *     not the wire's: NVIDIA's gdrcopy README puts cudaMemcpy's overhead at 6-7 us. We
 *     know of no published figure that differs for NVLink, so the same as x86-pcie.
 *   accel_tflops = 15.7: V100 SXM2 fp32 peak (NVIDIA V100 datasheet), the AC922's GPU.
 *   accel_efficiency = 0.7: an assumption, not a measurement: the fraction of that peak
 *     cuDNN reaches on the large fp32 3x3 convolutions that make most of G-SCNN's work.
 *     fp32 ResNet-50 training on one V100 is commonly reported at roughly 350-400
 *     images/s, 55-65% of the peak over the whole step (~25 GFLOP per image, non-conv ops
 *     included); the large convolutions alone run above that average. bench/step
 *     --backend cuda on a V100 prints the achieved rate: set its share here.
 *   nccl_env = NCCL_P2P_LEVEL=NVL: NCCL's documented level "use P2P when GPUs are
 *     connected through NVLink"; in the 4-GPU AC922 the two GPUs of a socket are joined
 *     by NVLink, and GPUs on different sockets talk through the host.
 *   gpus_per_node = 4, peer_gbps = 64, peer_latency_us = 3.4: the 4-GPU AC922. The two
 *     GPUs of a socket are joined by 3 NVLink 2.0 bricks (75 GB/s per direction), but a
 *     ring over all four crosses between the sockets, GPU -> POWER9 -> X-bus -> POWER9 ->
 *     GPU, and the X-bus SMP link, ~64 GB/s per direction, is its slowest hop. The latency
 *     is NCCL's own cost model for one ring step over NVLink, Simple protocol (NVIDIA/nccl
 *     src/graph/tuning.cc, hwLat).
 *   pair_gbps = 75: a ring over the two GPUs of one socket never crosses the X-bus: 3
 *     NVLink 2.0 bricks at 25 GB/s per direction each (IBM Redpaper REDP-5472, the AC922
 *     technical overview).
 *   net_gbps = 12.5, net_latency_us = 2: InfiniBand EDR (above).
 *   swap_defaults = min_size=256K: on NVLink the link is rarely what a step waits for
 *     (bench/lms: lru and prefetch both within a few percent at the reference network's
 *     balance), so more, smaller tensors may move and more fits, though a 256K copy
 *     spends only 36% of its time moving data (3.9 us at 68 GB/s, plus 7 us fixed). */
#define PLAT_NAME "power9-nvlink"
#define PLAT_DESCRIPTION "IBM AC922: POWER9 host, GPUs on NVLink 2.0 to the CPU"
#define PLAT_SCORE plat_score_power9
#define PLAT_GBPS "68"
#define PLAT_GBPS_NOTE "AC922 measured: ~68"
#define PLAT_DUPLEX "60"
#define PLAT_LATENCY "7"
#define PLAT_TFLOPS "15.7"
#define PLAT_TFLOPS_NOTE "V100 SXM2: 15.7"
#define PLAT_NCCL_ENV "NCCL_P2P_LEVEL=NVL"
#define PLAT_SWAP_DEFAULTS "min_size=256K"
#define PLAT_PER_NODE "4"
#define PLAT_PEER_GBPS "64"
#define PLAT_PEER_NOTE "the X-bus between an AC922's sockets: ~64"
#define PLAT_PEER_LATENCY "3.4"
#define PLAT_PAIR_GBPS "75"

#elif TB_PLATFORM_CLASS == TB_PLATFORM_X86_PCIE

/* platform/x86-pcie: an x86 server with GPUs on PCIe 3.0 x16, like the DGX Station of the
 * study: about 12 GB/s per direction to a GPU on the CPU's own NUMA node (far less across
 * sockets).
 *
 * Where the defaults come from:
 *   h2d_gbps, d2h_gbps = 12: measured on the DGX Station in the study this project
 *     reproduces (issue 6). PCIe 3.0 x16's nominal rate is 15.75 GB/s per direction
 *     (8 GT/s x 16 lanes x 128/130 encoding).
 *   duplex_gbps = 10: an estimate, not a measurement we could find published. PCIe has
 *     separate lanes per direction, but each direction's data needs acknowledgements and
 *     flow-control credits sent on the other's lanes, and the host's memory serves both
 *     streams, so copies both ways at once each lose some speed; 10 is ~83% of the
 *     one-direction figure. Measure your machine and set it.
 *   latency_us = 7: NVIDIA's gdrcopy README: "a cudaMemcpy can incur in a 6-7us
 *     overhead" (driver and copy-engine setup per copy).
 *   accel_tflops = 15.7: V100 SXM2 fp32 peak (NVIDIA V100 datasheet), the DGX Station's
 *     GPU.
 *   accel_efficiency = 0.7: an assumption, not a measurement: the fraction of that peak
 *     cuDNN reaches on the large fp32 3x3 convolutions that make most of G-SCNN's work.
 *     fp32 ResNet-50 training on one V100 is commonly reported at roughly 350-400
 *     images/s, 55-65% of the peak over the whole step (~25 GFLOP per image, non-conv ops
 *     included); the large convolutions alone run above that average. bench/step
 *     --backend cuda on a V100 prints the achieved rate: set its share here.
 *   nccl_env = NCCL_P2P_LEVEL=PHB: NCCL's documented level "use P2P when GPUs are on the
 *     same NUMA node", through the CPU's PCIe host bridge, not across sockets.
 *   gpus_per_node = 4, peer_gbps = 12, peer_latency_us = 5.7: GPU-to-GPU traffic over
 *     PCIe 3.0 at the rate measured to the host; NCCL's cost model charges 5.7 us per ring
 *     step over PCI (tuning.cc, hwLat). GPUs on different sockets would cross QPI/UPI,
 *     slower still; where NVLink joins the GPUs (a DGX Station, a p3.8xlarge) this is
 *     pessimistic: set peer_gbps.
 *   net_gbps = 12.5, net_latency_us = 2: InfiniBand EDR (above).
 *   swap_defaults = min_size=1M: on PCIe the link is what swapping waits for, so each
 *     copy should move data most of its time: a 1M copy does for 93% of it (87 us at
 *     12 GB/s, plus 7 us fixed); smaller tensors stay on the device. */
#define PLAT_NAME "x86-pcie"
#define PLAT_DESCRIPTION "x86 host, GPUs on PCIe 3.0 x16 (DGX Station class)"
#define PLAT_SCORE plat_score_x86_pcie
#define PLAT_GBPS "12"
#define PLAT_GBPS_NOTE "PCIe 3.0 x16: ~12"
#define PLAT_DUPLEX "10"
#define PLAT_LATENCY "7"
#define PLAT_TFLOPS "15.7"
#define PLAT_TFLOPS_NOTE "V100 SXM2: 15.7"
#define PLAT_NCCL_ENV "NCCL_P2P_LEVEL=PHB"
#define PLAT_SWAP_DEFAULTS "min_size=1M"
#define PLAT_PER_NODE "4"
#define PLAT_PEER_GBPS "12"
#define PLAT_PEER_NOTE "PCIe 3.0 x16 between GPUs: ~12"
#define PLAT_PEER_LATENCY "5.7"
#define PLAT_PAIR_GBPS "0"

#else
#error "TB_PLATFORM must name a platform of platform.c (the build defines it)"
#endif

#if TB_PLATFORM == TB_PLATFORM_AC922

/* platform/ac922: the study's IBM Power System AC922 (8335-GTG/GTH/GTX/GTW): two POWER9
 * sockets, four V100 SXM2 (16 or 32 GB), each GPU on three NVLink 2.0 links to its
 * POWER9 (IBM Redpaper REDP-5472). Its link is power9-nvlink's: the 68 GB/s each way were
 * measured on this machine in the study. The IBM LMS overheads the study reports here:
 * 43% at 600x600 and 30% at 700x700 (G-SCNN, batch 8). */
#undef PLAT_NAME
#undef PLAT_DESCRIPTION
#undef PLAT_SCORE
#define PLAT_NAME "ac922"
#define PLAT_DESCRIPTION "the study's IBM AC922: 2 POWER9, 4 V100 SXM2 each on NVLink 2.0 x3 to the CPU (preset)"
#define PLAT_SCORE plat_score_ac922

#elif TB_PLATFORM == TB_PLATFORM_DGX_STATION

/* platform/dgx-station: the study's NVIDIA DGX Station: one Xeon E5-2698 v4 (20 cores),
 * four V100 joined to each other by NVLink and to the host by PCIe 3.0 (NVIDIA DGX
 * Station datasheet). Its link is x86-pcie's: the 12 GB/s each way were measured on this
 * machine in the study. IBM LMS overheads there: 106% at 600x600, 73% at 700x700. */
#undef PLAT_NAME
#undef PLAT_DESCRIPTION
#undef PLAT_SCORE
#define PLAT_NAME "dgx-station"
#define PLAT_DESCRIPTION "the study's NVIDIA DGX Station: Xeon E5-2698 v4, 4 V100 on PCIe 3.0 to the CPU (preset)"
#define PLAT_SCORE plat_score_dgx_station

#elif TB_PLATFORM == TB_PLATFORM_P3_8XLARGE

/* platform/p3.8xlarge: the study's AWS EC2 p3.8xlarge: 32 vCPUs of a Xeon E5-2686 v4,
 * four V100 SXM2 16 GB joined to each other by NVLink, to the host by PCIe 3.0 (AWS EC2
 * P3 instance documentation). No host-to-GPU rate measured on it is at hand: these are
 * x86-pcie's (the DGX Station's measured 12 GB/s, the same PCIe 3.0 x16 class; nominal
 * 15.75). It is a virtual machine, and the study measured larger IBM LMS overheads on it
 * than on the DGX Station at 700x700 (105% at 600x600 and 91% at 700x700, against
 * 106% and 73%): run `trainbig probe` on
 * the instance and set h2d_gbps, d2h_gbps and duplex_gbps to what it prints. Between
 * instances its network is 10 Gigabit Ethernet (AWS's instance table): net_gbps = 1.25, and
 * net_latency_us = 30 is an estimate for NCCL over TCP sockets, not a measurement. */
#undef PLAT_NET_GBPS
#undef PLAT_NET_NOTE
#undef PLAT_NET_LATENCY
#define PLAT_NET_GBPS "1.25"
#define PLAT_NET_NOTE "10 Gigabit Ethernet: 1.25"
#define PLAT_NET_LATENCY "30"
#undef PLAT_NAME
#undef PLAT_DESCRIPTION
#undef PLAT_SCORE
#undef PLAT_GBPS_NOTE
#define PLAT_GBPS_NOTE "assumed: the DGX Station's ~12"
#define PLAT_NAME "p3.8xlarge"
#define PLAT_DESCRIPTION "the study's AWS p3.8xlarge: Xeon E5-2686 v4, 4 V100 SXM2 on PCIe 3.0 to the CPU (preset)"
#define PLAT_SCORE plat_score_p3_8xlarge

#elif TB_PLATFORM == TB_PLATFORM_H100_SXM || TB_PLATFORM == TB_PLATFORM_H200

/* platform/h100-sxm and platform/h200: the GPUs rented for training today, in HGX/DGX
 * servers: x86 hosts, each GPU on PCIe 5.0 x16 to the host and on NVLink 4 (NVSwitch) to
 * the others.
 *
 * Where the defaults come from:
 *   h2d_gbps, d2h_gbps = 48: an estimate. PCIe 5.0 x16's nominal rate is 63.0 GB/s per
 *     direction (32 GT/s x 16 lanes x 128/130); the study measured 12 of PCIe 3.0's
 *     15.75 on the DGX Station (76%), and 76% of 63 is 48. Run `trainbig probe` there.
 *   duplex_gbps = 40, latency_us = 7: as x86-pcie's, scaled (83% of one direction).
 *   accel_tflops = 67: H100 SXM5 fp32 (NVIDIA H100 datasheet: 67 TFLOP/s); the H200 has
 *     the same GH100 and clocks (NVIDIA H200 datasheet: 67).
 *   accel_efficiency = 0.45: measured, not assumed: bench/step --backend cuda --size
 *     reference on an H100 80GB HBM3 ran G-SCNN's fp32 convolutions at 44% of that peak
 *     (README, 2026-11-24; cuDNN 9.19, TF32 off).
 *   accel_mem_gbps: 3350 (H100 SXM5, HBM3) and 4800 (H200, HBM3e), the datasheets'.
 *   accel_fp16_tflops, accel_bf16_tflops = 989: the datasheets' dense tensor-core rates
 *     (1979 is with 2:4 sparsity, which training does not use).
 *   accel_memory: 78G of the H100's 80 GB (CUDA reports 79.6 GiB in all) and 139G of the
 *     H200's 141 GB (140.4 GiB), less about 1 GiB for the context and libraries'
 *     handles: estimates; `trainbig probe` on the machine prints what is left.
 *   nccl_env = NCCL_P2P_LEVEL=NVL: the GPUs of a node talk over NVLink.
 *   gpus_per_node = 8, peer_gbps = 450, peer_latency_us = 3.4: an HGX board's eight GPUs
 *     on NVLink 4 through NVSwitch, 900 GB/s per GPU both directions together (the H100
 *     and H200 datasheets); the latency is NCCL's model for a ring step over NVLink.
 *   net_gbps = 50, net_latency_us = 2: one 400 Gb/s InfiniBand NDR port per GPU (DGX
 *     H100 datasheet: eight ConnectX-7), ~2 us end to end as for EDR.
 *   swap_defaults = min_size=1M: a 1M copy moves data 75% of its time at 48 GB/s. */
#undef PLAT_GBPS
#undef PLAT_GBPS_NOTE
#undef PLAT_DUPLEX
#undef PLAT_TFLOPS
#undef PLAT_TFLOPS_NOTE
#undef PLAT_NCCL_ENV
#undef PLAT_ACCEL_NAME
#undef PLAT_ACCEL_MEMORY
#undef PLAT_ACCEL_MEM_GBPS
#undef PLAT_ACCEL_FP16
#undef PLAT_ACCEL_BF16
#undef PLAT_EFFICIENCY
#undef PLAT_NAME
#undef PLAT_DESCRIPTION
#undef PLAT_SCORE
#define PLAT_GBPS "48"
#define PLAT_GBPS_NOTE "PCIe 5.0 x16: ~48, estimated"
#define PLAT_DUPLEX "40"
#define PLAT_TFLOPS "67"
#define PLAT_NCCL_ENV "NCCL_P2P_LEVEL=NVL"
#define PLAT_ACCEL_FP16 "989"
#define PLAT_ACCEL_BF16 "989"
#define PLAT_EFFICIENCY "0.45"
#undef PLAT_PER_NODE
#undef PLAT_PEER_GBPS
#undef PLAT_PEER_NOTE
#undef PLAT_PEER_LATENCY
#undef PLAT_NET_GBPS
#undef PLAT_NET_NOTE
#define PLAT_PER_NODE "8"
#define PLAT_PEER_GBPS "450"
#define PLAT_PEER_NOTE "NVLink 4 through NVSwitch: 450"
#define PLAT_PEER_LATENCY "3.4"
#define PLAT_NET_GBPS "50"
#define PLAT_NET_NOTE "InfiniBand NDR, one port per GPU: 50"
#if TB_PLATFORM == TB_PLATFORM_H100_SXM
#define PLAT_TFLOPS_NOTE "H100 SXM5: 67"
#define PLAT_ACCEL_NAME "H100 SXM5 80 GB"
#define PLAT_ACCEL_MEMORY "78G"
#define PLAT_ACCEL_MEM_GBPS "3350"
#define PLAT_NAME "h100-sxm"
#define PLAT_DESCRIPTION "x86 host, H100 SXM5 80 GB GPUs on PCIe 5.0 x16 to the CPU, NVLink between them (preset)"
#define PLAT_SCORE plat_score_h100_sxm
#else
#define PLAT_TFLOPS_NOTE "H200: 67"
#define PLAT_ACCEL_NAME "H200 141 GB"
#define PLAT_ACCEL_MEMORY "139G"
#define PLAT_ACCEL_MEM_GBPS "4800"
#define PLAT_NAME "h200"
#define PLAT_DESCRIPTION "x86 host, H200 141 GB GPUs on PCIe 5.0 x16 to the CPU, NVLink between them (preset)"
#define PLAT_SCORE plat_score_h200
#endif

#elif TB_PLATFORM == TB_PLATFORM_RTX4090

/* platform/rtx4090: a workstation with a consumer card, GeForce RTX 4090 24 GB, on
 * PCIe 4.0 x16 (no NVLink).
 *
 * Where the defaults come from:
 *   h2d_gbps, d2h_gbps = 24: an estimate: PCIe 4.0 x16's nominal 31.5 GB/s per direction
 *     at the 76% the study measured on PCIe 3.0. duplex_gbps = 20 (83%), latency_us = 7.
 *   accel_tflops = 82.6, accel_mem_gbps = 1008, accel_fp16_tflops = accel_bf16_tflops =
 *     165.2: NVIDIA's Ada Lovelace architecture whitepaper for the RTX 4090 (fp32; GDDR6X
 *     bandwidth; dense 16-bit tensor rates with fp32 accumulation, 330.4 with sparsity).
 *   accel_efficiency = 0.7: an assumption, as for the V100.
 *   accel_memory = 23G of its 24 GB (CUDA reports 24.0 GiB in all, and a desktop's
 *     display takes some too): an estimate; `trainbig probe` prints what is left.
 *   nccl_env = NCCL_P2P_LEVEL=PHB, swap_defaults = min_size=1M: as x86-pcie's.
 *   gpus_per_node = 1: one card. With more, they talk over PCIe 4.0 (no NVLink on the
 *     RTX 4090): peer_gbps = 24, as to the host, peer_latency_us = 5.7 as x86-pcie's.
 *   net_gbps = 1.25, net_latency_us = 30: 10 Gigabit Ethernet between workstations; the
 *     latency an estimate for NCCL over TCP sockets, not a measurement. */
#undef PLAT_GBPS
#undef PLAT_GBPS_NOTE
#undef PLAT_DUPLEX
#undef PLAT_TFLOPS
#undef PLAT_TFLOPS_NOTE
#undef PLAT_ACCEL_NAME
#undef PLAT_ACCEL_MEMORY
#undef PLAT_ACCEL_MEM_GBPS
#undef PLAT_ACCEL_FP16
#undef PLAT_ACCEL_BF16
#undef PLAT_NAME
#undef PLAT_DESCRIPTION
#undef PLAT_SCORE
#define PLAT_GBPS "24"
#define PLAT_GBPS_NOTE "PCIe 4.0 x16: ~24, estimated"
#define PLAT_DUPLEX "20"
#define PLAT_TFLOPS "82.6"
#define PLAT_TFLOPS_NOTE "RTX 4090: 82.6"
#define PLAT_ACCEL_NAME "GeForce RTX 4090 24 GB"
#define PLAT_ACCEL_MEMORY "23G"
#define PLAT_ACCEL_MEM_GBPS "1008"
#define PLAT_ACCEL_FP16 "165.2"
#define PLAT_ACCEL_BF16 "165.2"
#undef PLAT_PER_NODE
#undef PLAT_PEER_GBPS
#undef PLAT_PEER_NOTE
#undef PLAT_NET_GBPS
#undef PLAT_NET_NOTE
#undef PLAT_NET_LATENCY
#define PLAT_PER_NODE "1"
#define PLAT_PEER_GBPS "24"
#define PLAT_PEER_NOTE "PCIe 4.0 x16 between cards: ~24, estimated"
#define PLAT_NET_GBPS "1.25"
#define PLAT_NET_NOTE "10 Gigabit Ethernet: 1.25"
#define PLAT_NET_LATENCY "30"
#define PLAT_NAME "rtx4090"
#define PLAT_DESCRIPTION "x86 workstation, a GeForce RTX 4090 24 GB on PCIe 4.0 x16 to the CPU (preset)"
#define PLAT_SCORE plat_score_rtx4090

#endif

static int platform_score(char *why, size_t why_size)
{
    struct plat_machine m;
    plat_probe("", &m);
    return PLAT_SCORE(&m, why, why_size);
}

static int platform_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    return plat_create(&trainbig_plugin, cfg, ctx, err);
}

static const struct tb_key platform_keys[] = {
    { "h2d_gbps", TB_KEY_FLOAT, PLAT_GBPS, PLAT_GBPS_RANGE,
      "host-to-device bandwidth of one GPU's link, one direction alone, GB/s (" PLAT_GBPS_NOTE ")" },
    { "d2h_gbps", TB_KEY_FLOAT, PLAT_GBPS, PLAT_GBPS_RANGE,
      "device-to-host bandwidth of one GPU's link, one direction alone, GB/s (" PLAT_GBPS_NOTE ")" },
    { "duplex_gbps", TB_KEY_FLOAT, PLAT_DUPLEX, PLAT_DUPLEX_RANGE,
      "bandwidth of each direction while both copy at once, GB/s, at most h2d_gbps and d2h_gbps; 0 = as alone" },
    { "latency_us", TB_KEY_FLOAT, PLAT_LATENCY, PLAT_LATENCY_RANGE, "fixed cost of one copy, microseconds" },
    { "accel_tflops", TB_KEY_FLOAT, PLAT_TFLOPS, PLAT_TFLOPS_RANGE,
      "fp32 TFLOP/s of the reference GPU (" PLAT_TFLOPS_NOTE ")" },
    { "accel_efficiency", TB_KEY_FLOAT, PLAT_EFFICIENCY, PLAT_EFFICIENCY_RANGE, PLAT_EFFICIENCY_HELP },
    { "accel_name", TB_KEY_STRING, PLAT_ACCEL_NAME, NULL, "the accelerator's name, for reports (" PLAT_ACCEL_NAME ")" },
    { "accel_memory", TB_KEY_SIZE, PLAT_ACCEL_MEMORY, PLAT_MEMORY_RANGE,
      "device memory one process may use on one GPU, after the CUDA context (" PLAT_ACCEL_NAME ": " PLAT_ACCEL_MEMORY
      ", estimated)" },
    { "accel_mem_gbps", TB_KEY_FLOAT, PLAT_ACCEL_MEM_GBPS, PLAT_MEM_GBPS_RANGE,
      "the GPU's device-memory bandwidth, GB/s (" PLAT_ACCEL_NAME ": " PLAT_ACCEL_MEM_GBPS ")" },
    { "accel_fp16_tflops", TB_KEY_FLOAT, PLAT_ACCEL_FP16, PLAT_16BIT_RANGE,
      "dense fp16 TFLOP/s of the GPU's tensor cores, fp32 accumulation; 0 = none (" PLAT_ACCEL_NAME ": " PLAT_ACCEL_FP16
      ")" },
    { "accel_bf16_tflops", TB_KEY_FLOAT, PLAT_ACCEL_BF16, PLAT_16BIT_RANGE,
      "dense bf16 TFLOP/s of the GPU's tensor cores; 0 = none (" PLAT_ACCEL_NAME ": " PLAT_ACCEL_BF16 ")" },
    { "gpus_per_node", TB_KEY_INT, PLAT_PER_NODE, PLAT_PER_NODE_RANGE,
      "GPUs in one node, for data parallelism: a ring over more crosses the network (" PLAT_PER_NODE ")" },
    { "peer_gbps", TB_KEY_FLOAT, PLAT_PEER_GBPS, PLAT_RING_GBPS_RANGE,
      "the slowest hop of a ring all-reduce over one node's GPUs, GB/s per direction (" PLAT_PEER_NOTE ")" },
    { "pair_gbps", TB_KEY_FLOAT, PLAT_PAIR_GBPS, PLAT_PAIR_GBPS_RANGE,
      "a ring over two GPUs of a node joined directly, faster than peer_gbps's hop, GB/s per direction; 0 = as "
      "peer_gbps (" PLAT_PAIR_GBPS ")" },
    { "peer_latency_us", TB_KEY_FLOAT, PLAT_PEER_LATENCY, PLAT_LATENCY_RANGE,
      "fixed cost of one ring step within a node, microseconds (NCCL's cost model)" },
    { "net_gbps", TB_KEY_FLOAT, PLAT_NET_GBPS, PLAT_RING_GBPS_RANGE,
      "one GPU's share of the network between nodes, GB/s per direction (" PLAT_NET_NOTE ")" },
    { "net_latency_us", TB_KEY_FLOAT, PLAT_NET_LATENCY, PLAT_LATENCY_RANGE,
      "fixed cost of one ring step between nodes, microseconds" },
    { "numa_node", TB_KEY_INT, "-1", PLAT_NUMA_RANGE,
      "NUMA node of the host memory nearest the GPU; -1 = the first GPU's node from sysfs, or unknown" },
    { "nccl_env", TB_KEY_LIST, PLAT_NCCL_ENV, NULL,
      "NCCL_NAME=VALUE defaults set where the environment does not set them; empty = none" },
    { "swap_defaults", TB_KEY_LIST, PLAT_SWAP_DEFAULTS, NULL,
      "[swap] key=value defaults for the policy where the [swap] section does not set them; empty = none" },
    TB_KEYS_END,
};

static const struct tb_platform_ops platform_ops = {
    .head = { .score = platform_score, .create = platform_create, .destroy = plat_destroy },
    .link = plat_link,
    .env_defaults = plat_env_defaults,
    .swap_defaults = plat_swap_defaults,
    .accel = plat_accel,
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_PLATFORM,
    .name = PLAT_NAME,
    .version = TB_VERSION,
    .description = PLAT_DESCRIPTION,
    .keys = platform_keys,
    .ops.platform = &platform_ops,
};
