/* models/gscnn/wider_resnet.c: the WiderResNet38-A2 trunk of G-SCNN (Wu et al., "Wider or
 * Deeper", as the reference nv-tlabs/GSCNN builds it), dilated to output stride 8.
 *
 * mod1 is one 3x3 conv 3->64 at full resolution. mod2 .. mod7 are pre-activation residual
 * blocks: BN+ReLU of the input feeds the convolutions and, where the channels or the
 * stride change, a 1x1 projection shortcut (otherwise the shortcut is the input itself).
 * mod2 and mod3 each follow a 3x3 stride-2 max pool; the first block of mod4 has stride 2;
 * mod5 is dilated 2 and mod6, mod7 dilated 4 instead of striding further. mod2 .. mod5 use
 * two 3x3 convs, mod6 and mod7 bottlenecks (1x1, 3x3, 1x1) with channel dropout before
 * the last 1x1. No BN+ReLU follows mod7: the ASPP and a side output read its raw sum.
 *
 * Parameter names mirror the reference's module names under "trunk":
 * trunk.mod2.block1.bn1, .conv1, .bn2, .conv2, [.bn3, .conv3], .proj. */
#include "wider_resnet.h"

/* Channels of mod2 .. mod7 at width 1 (0 ends a list). */
static const int module_channels[GSCNN_MODULES][3] = {
    { 128, 128, 0 }, { 256, 256, 0 }, { 512, 512, 0 }, { 512, 1024, 0 }, { 512, 1024, 2048 }, { 1024, 2048, 4096 },
};

static struct tb_node *bn_relu(struct tb_graph *g, const char *name, struct tb_node *x)
{
    return tb_relu(g, tb_batchnorm(g, name, x));
}

/* One pre-activation block; ch[] are the scaled channels, nch 2 or 3. */
static struct tb_node *block(struct tb_graph *g, struct tb_node *x, const int *ch, int nch, int stride, int dilation,
                             float dropout)
{
    const int in_channels = tb_node_desc(x).shape.c, out_channels = ch[nch - 1];
    struct tb_node *pre = bn_relu(g, "bn1", x);
    struct tb_node *shortcut = x;
    if (stride != 1 || in_channels != out_channels)
        shortcut = tb_conv2d(g, "proj", pre, out_channels, 1, stride, 0, 1, false);
    struct tb_node *y;
    if (nch == 2) {
        y = tb_conv2d(g, "conv1", pre, ch[0], 3, stride, dilation, dilation, false);
        y = bn_relu(g, "bn2", y);
        if (dropout > 0)
            y = tb_dropout(g, y, dropout, true);
        y = tb_conv2d(g, "conv2", y, ch[1], 3, 1, dilation, dilation, false);
    } else {
        y = tb_conv2d(g, "conv1", pre, ch[0], 1, stride, 0, 1, false);
        y = bn_relu(g, "bn2", y);
        y = tb_conv2d(g, "conv2", y, ch[1], 3, 1, dilation, dilation, false);
        y = bn_relu(g, "bn3", y);
        if (dropout > 0)
            y = tb_dropout(g, y, dropout, true);
        y = tb_conv2d(g, "conv3", y, ch[2], 1, 1, 0, 1, false);
    }
    return tb_add(g, y, shortcut);
}

bool gscnn_wider_resnet38(struct tb_graph *g, const struct gscnn_cfg *cfg, struct tb_node *image,
                          struct gscnn_trunk *out)
{
    tb_graph_push_scope(g, "trunk");
    tb_graph_push_scope(g, "mod1");
    struct tb_node *x = tb_conv2d(g, "conv1", image, gscnn_scale(64, cfg->width), 3, 1, 1, 1, false);
    tb_graph_pop_scope(g);
    out->m1 = x;
    for (int m = 0; m < GSCNN_MODULES; m++) {
        const int mod = m + 2;
        if (mod == 2 || mod == 3)
            x = tb_maxpool(g, x, 3, 2, 1);
        int ch[3], nch = 0;
        for (; nch < 3 && module_channels[m][nch]; nch++)
            ch[nch] = gscnn_scale(module_channels[m][nch], cfg->width);
        const int dilation = mod == 5 ? 2 : mod >= 6 ? 4 : 1;
        const float dropout = mod == 6 ? cfg->dropout6 : mod == 7 ? cfg->dropout7 : 0.0f;
        tb_graph_push_scope(g, "mod%d", mod);
        for (int b = 0; b < cfg->blocks[m]; b++) {
            tb_graph_push_scope(g, "block%d", b + 1);
            x = block(g, x, ch, nch, mod == 4 && b == 0 ? 2 : 1, dilation, dropout);
            tb_graph_pop_scope(g);
        }
        tb_graph_pop_scope(g);
        if (mod == 2)
            out->m2 = x;
        else if (mod == 3)
            out->m3 = x;
        else if (mod == 4)
            out->m4 = x;
    }
    out->m7 = x;
    tb_graph_pop_scope(g);
    return tb_graph_error(g) == NULL;
}
