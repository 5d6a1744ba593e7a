/* backends/cpu/cpu_host.c: "pinned" host memory, the home of swapped-out tensors and of
 * the loader's batches, placed on the platform's NUMA node when libnuma is built in.
 *
 * A GPU's host copies are fastest from memory on the node its link attaches to (an
 * AC922's NVLink CPU, a PCIe root complex's socket). The platform names that node
 * ([platform] numa_node, or found from the GPU's PCI device); set_platform hands it here.
 * Each block carries a header saying how it was made, so it is freed the same way. */
#include "config.h" /* HAVE_NUMA */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef HAVE_NUMA
#include <numa.h>
#endif

#include "cpu_shared.h"

#define HOST_HEADER 64 /* keeps the data 64-byte aligned */
#define HOST_MAGIC 0x74626873u

struct host_block {
    size_t total; /* bytes obtained, header included */
    uint32_t magic;
    int node; /* -1: aligned_alloc; otherwise numa_alloc_onnode on this node */
};

_Static_assert(sizeof(struct host_block) <= HOST_HEADER, "host block header must fit in HOST_HEADER bytes");

int tb_cpu_host_node(int node, char *why, size_t why_size)
{
    if (node < 0) {
        snprintf(why, why_size, "pinned host memory: no NUMA node named, left to the OS");
        return -1;
    }
#ifdef HAVE_NUMA
    if (numa_available() < 0) {
        snprintf(why, why_size,
                 "pinned host memory: NUMA node %d asked for, but this kernel has no NUMA support: "
                 "left to the OS",
                 node);
        return -1;
    }
    if (node > numa_max_node()) {
        snprintf(why, why_size,
                 "pinned host memory: NUMA node %d asked for, but this machine has nodes 0..%d: "
                 "left to the OS ([platform] numa_node)",
                 node, numa_max_node());
        return -1;
    }
    snprintf(why, why_size, "pinned host memory on NUMA node %d", node);
    return node;
#else
    snprintf(why, why_size,
             "pinned host memory: NUMA node %d asked for, but this build has no libnuma "
             "(apt-get install libnuma-dev, then configure again): left to the OS",
             node);
    return -1;
#endif
}

void *tb_cpu_host_alloc(int node, size_t bytes)
{
    if (bytes > SIZE_MAX - 2 * HOST_HEADER)
        return NULL;
    const size_t total = HOST_HEADER + (bytes + 63) / 64 * 64;
    struct host_block *b = NULL;
#ifdef HAVE_NUMA
    if (node >= 0)
        b = numa_alloc_onnode(total, node); /* pages land on the node at first touch */
#endif
    if (!b) {
        node = -1;
        b = aligned_alloc(HOST_HEADER, total);
    }
    if (!b)
        return NULL;
    b->total = total;
    b->magic = HOST_MAGIC;
    b->node = node;
    return (char *)b + HOST_HEADER;
}

void tb_cpu_host_free(void *ptr)
{
    if (!ptr)
        return;
    struct host_block *b = (struct host_block *)((char *)ptr - HOST_HEADER);
    if (b->magic != HOST_MAGIC)
        abort(); /* not ours: a bug in the caller, not a user error */
    b->magic = 0;
#ifdef HAVE_NUMA
    if (b->node >= 0) {
        numa_free(b, b->total);
        return;
    }
#endif
    free(b);
}
