/* platforms/link.c: the link parameters both shipped platforms read from their keys, and
 * a /proc/cpuinfo probe for their score(). Compiled into each platform plugin (not
 * exported: the plugins stay one-symbol objects). */
#include "link.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tb_platform_link_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    struct tb_link *l = malloc(sizeof *l);
    if (!l)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    l->h2d_bytes_per_s = tb_section_float(cfg, "h2d_gbps") * 1e9;
    l->d2h_bytes_per_s = tb_section_float(cfg, "d2h_gbps") * 1e9;
    l->accel_flops = tb_section_float(cfg, "accel_tflops") * 1e12;
    *ctx = l; /* owned by the caller until destroy */
    return TB_OK;
}

void tb_platform_link_destroy(void *ctx)
{
    free(ctx);
}

void tb_platform_link_get(void *ctx, struct tb_link *out)
{
    *out = *(const struct tb_link *)ctx;
}

int tb_platform_cpuinfo_has(const char *needle, char *cpu_model, size_t size)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (cpu_model && size)
        cpu_model[0] = '\0';
    if (!f)
        return 0;
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        bool is_model = strncmp(line, "model name", 10) == 0 || strncmp(line, "cpu\t", 4) == 0;
        if (is_model && cpu_model && size && !cpu_model[0]) {
            const char *colon = strchr(line, ':');
            snprintf(cpu_model, size, "%s", colon ? colon + 2 : line);
            cpu_model[strcspn(cpu_model, "\n")] = '\0';
        }
        if (strstr(line, needle))
            found = 1;
    }
    fclose(f);
    return found;
}
