"""bench/gscnn_torch.py THREADS STEPS --params N [settings]: the `gscnn` model plugin's
network (plugins/models/gscnn/gscnn.c, wider_resnet.c) in PyTorch, layer for layer, with
its four losses, timed as bench/step times it (median ms of STEPS training steps after 2
warm-up steps), channels_last, SGD with momentum and weight decay.

--params is trainbig's count of trainable parameters for the same settings: a network
whose count differs is not the same network, and is not timed (exit status 3).
--inputs FILE trains on the batch bench/step wrote (image and canny f32, labels and edges
u8, NCHW, raw, in that order); without it, random inputs of the same shapes.
--device cuda runs it on the GPU as bench/step_torch.py does (cudnn.benchmark, TF32 off
unless --tf32, torch.cuda.synchronize() around each timed step); --format contiguous
runs it in NCHW instead of channels_last.
--precision bf16 (or fp16, on a GPU) runs the network's forward under torch.autocast in
that dtype, the losses in fp32 on its outputs, the weights and SGD in fp32; fp16 with a
GradScaler at its defaults (scale 2^16, x2 after 2000 steps without an overflow).
--dual-check FILE (with --dual-step, --dual-op, --dual-trainbig) first computes the
dual-task regulariser, from the reference's definition written here in PyTorch, on the
logits of trainbig's first step (FILE: N*K*H*W f32, NCHW) and the labels of --inputs, with
trainbig's Gumbel noise (its uniform numbers rebuilt from the step and the op id), and
prints it beside trainbig's value: the same term, the same inputs, the same noise.
--check-params FILE (with --check-dropout, --check-losses and the --dual-* keys) runs
trainbig's first step here from trainbig's parameters, dropout masks and Gumbel noise and
prints the four losses beside trainbig's; the timed steps then go on from those weights.
Prints 'torch-params X' and 'torch-ms-per-step X' for bench/step to read."""
import argparse
import contextlib
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from step_torch import setup_device  # bench/ is the script's directory, so on sys.path

IGNORE = 255
# [model] keys other than width, shape_width and blocks, at gscnn.c's defaults.
ASPP_RATES = (12, 24, 36)
DROPOUT_MOD6, DROPOUT_MOD7 = 0.3, 0.5
W_SEG, W_EDGE, W_ATT, W_DUAL = 1.0, 20.0, 1.0, 1.0
# The dual-task regulariser's temperature, as gscnn.c builds it (the reference's).
DUAL_TAU = 0.5
# Channels of mod2 .. mod7 at width 1 (wider_resnet.c).
MODULE_CHANNELS = ((128, 128), (256, 256), (512, 512), (512, 1024), (512, 1024, 2048), (1024, 2048, 4096))


def scale(channels, factor):
    """gscnn_scale: round(c * scale) half away from zero (C's lround), at least 1."""
    return max(1, int(math.floor(channels * factor + 0.5)))


def conv(cin, cout, k, stride=1, dilation=1, bias=False):
    """tb_conv2d with padding dilation*(k-1)/2, Kaiming-normal weights, zero bias."""
    c = nn.Conv2d(cin, cout, k, stride, dilation * (k - 1) // 2, dilation, bias=bias)
    nn.init.kaiming_normal_(c.weight, nonlinearity="relu")
    if bias:
        nn.init.zeros_(c.bias)
    return c


def resize_to(x, h, w, align_corners):
    """gscnn.c's resize_to: x itself when it has that size already."""
    if x.shape[2] == h and x.shape[3] == w:
        return x
    return F.interpolate(x, size=(h, w), mode="bilinear", align_corners=align_corners)


# The first-step check's dropout: trainbig's masks for its dropout ops, in forward order
# (op id, p), drawn at DROP_STEP; empty: the module's own dropout.
DROP_OPS = []
DROP_STEP = 0


def drop(module, y):
    """Channel dropout: the module's, or while the first-step check runs trainbig's mask
    (its uniform numbers >= p per (image, channel)), scaled by 1 / (1 - p)."""
    if not DROP_OPS:
        return module(y)
    op, p = DROP_OPS.pop(0)
    n, c = y.shape[0], y.shape[1]
    keep = (splitmix_uniform(n * c, 0, DROP_STEP, op) >= p).to(y.dtype).to(y.device).view(n, c, 1, 1)
    return y * (keep * (1.0 / (1.0 - p)))


class Block(nn.Module):
    """wider_resnet.c's pre-activation block: 2 (3x3, 3x3) or 3 (1x1, 3x3, 1x1) convs."""

    def __init__(self, cin, ch, stride, dilation, dropout):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        cout = ch[-1]
        self.proj = conv(cin, cout, 1, stride) if stride != 1 or cin != cout else None
        if len(ch) == 2:
            self.conv1 = conv(cin, ch[0], 3, stride, dilation)
            self.bn2 = nn.BatchNorm2d(ch[0])
            self.conv2 = conv(ch[0], ch[1], 3, 1, dilation)
            self.bn3 = self.conv3 = None
        else:
            self.conv1 = conv(cin, ch[0], 1, stride)
            self.bn2 = nn.BatchNorm2d(ch[0])
            self.conv2 = conv(ch[0], ch[1], 3, 1, dilation)
            self.bn3 = nn.BatchNorm2d(ch[1])
            self.conv3 = conv(ch[1], ch[2], 1)
        self.drop = nn.Dropout2d(dropout) if dropout > 0 else None

    def forward(self, x):
        pre = F.relu(self.bn1(x))
        shortcut = self.proj(pre) if self.proj is not None else x
        y = F.relu(self.bn2(self.conv1(pre)))
        if self.conv3 is None:
            if self.drop is not None:
                y = drop(self.drop, y)
            y = self.conv2(y)
        else:
            y = F.relu(self.bn3(self.conv2(y)))
            if self.drop is not None:
                y = drop(self.drop, y)
            y = self.conv3(y)
        return y + shortcut


class WiderResNet38(nn.Module):
    """The dilated trunk: mod1 conv, then mod2..mod7 (max pools before mod2 and mod3,
    stride 2 in mod4's first block, dilation 2 in mod5 and 4 in mod6, mod7)."""

    def __init__(self, width, blocks):
        super().__init__()
        c = scale(64, width)
        self.mod1 = conv(3, c, 3)
        self.mods = nn.ModuleList()
        for m, chans in enumerate(MODULE_CHANNELS):
            mod = m + 2
            ch = [scale(x, width) for x in chans]
            dilation = 2 if mod == 5 else 4 if mod >= 6 else 1
            dropout = DROPOUT_MOD6 if mod == 6 else DROPOUT_MOD7 if mod == 7 else 0.0
            layers = []
            for b in range(blocks[m]):
                layers.append(Block(c, ch, 2 if mod == 4 and b == 0 else 1, dilation, dropout))
                c = ch[-1]
            self.mods.append(nn.Sequential(*layers))
        self.out_channels = c

    def forward(self, image):
        x = m1 = self.mod1(image)
        feats = {}
        for m, layers in enumerate(self.mods):
            mod = m + 2
            if mod in (2, 3):
                x = F.max_pool2d(x, 3, 2, 1)
            x = layers(x)
            feats[mod] = x
        return m1, feats[2], feats[3], feats[4], x


class BasicBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1, self.bn1 = conv(c, c, 3), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = conv(c, c, 3), nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


class GatedConv(nn.Module):
    """alpha = sigmoid(BN(conv1x1(ReLU(conv1x1(BN(cat[x, gate])))))); conv1x1(x * alpha + x)."""

    def __init__(self, c):
        super().__init__()
        self.bn_in = nn.BatchNorm2d(c + 1)
        self.conv_in = conv(c + 1, c + 1, 1, bias=True)
        self.conv_out = conv(c + 1, 1, 1, bias=True)
        self.bn_out = nn.BatchNorm2d(1)
        self.conv = conv(c, c, 1)

    def forward(self, x, gate):
        a = F.relu(self.conv_in(self.bn_in(torch.cat([x, gate], 1))))
        a = torch.sigmoid(self.bn_out(self.conv_out(a)))
        return self.conv(x * a + x)


class ShapeStream(nn.Module):
    def __init__(self, c_m1, c_m3, c_m4, c_m7, shape_width):
        super().__init__()
        c1, c2, c3 = scale(32, shape_width), scale(16, shape_width), scale(8, shape_width)
        self.side3 = conv(c_m3, 1, 1, bias=True)
        self.side4 = conv(c_m4, 1, 1, bias=True)
        self.side7 = conv(c_m7, 1, 1, bias=True)
        self.res1, self.reduce1, self.gate1 = BasicBlock(c_m1), conv(c_m1, c1, 1, bias=True), GatedConv(c1)
        self.res2, self.reduce2, self.gate2 = BasicBlock(c1), conv(c1, c2, 1, bias=True), GatedConv(c2)
        self.res3, self.reduce3, self.gate3 = BasicBlock(c2), conv(c2, c3, 1, bias=True), GatedConv(c3)
        self.fuse = conv(c3, 1, 1)

    def forward(self, m1, m3, m4, m7, h, w):
        s3 = resize_to(self.side3(m3), h, w, True)
        s4 = resize_to(self.side4(m4), h, w, True)
        s7 = resize_to(self.side7(m7), h, w, True)
        x = self.res1(resize_to(m1, h, w, True))
        x = self.res2(self.gate1(self.reduce1(x), s3))
        x = self.res3(self.gate2(self.reduce2(x), s4))
        x = self.gate3(self.reduce3(x), s7)
        return self.fuse(x)


def conv_bn_relu(cin, cout, k, dilation=1):
    return nn.Sequential(conv(cin, cout, k, 1, dilation), nn.BatchNorm2d(cout), nn.ReLU())


class ASPP(nn.Module):
    """Image pooling, the fused edge map, a 1x1 and three dilated 3x3 branches."""

    def __init__(self, cin, width):
        super().__init__()
        c = scale(256, width)
        self.pool = conv_bn_relu(cin, c, 1)
        self.edge = conv_bn_relu(1, c, 1)
        self.conv1x1 = conv_bn_relu(cin, c, 1)
        self.rates = nn.ModuleList(conv_bn_relu(cin, c, 3, r) for r in ASPP_RATES)
        self.out_channels = 6 * c

    def forward(self, x, edge):
        h, w = x.shape[2], x.shape[3]
        pool = F.interpolate(self.pool(F.adaptive_avg_pool2d(x, 1)), size=(h, w), mode="bilinear", align_corners=True)
        branches = [pool, self.edge(resize_to(edge, h, w, True)), self.conv1x1(x)]
        branches += [r(x) for r in self.rates]
        return torch.cat(branches, 1)


class Decoder(nn.Module):
    def __init__(self, c_aspp, c_m2, width, classes):
        super().__init__()
        c, fine = scale(256, width), scale(48, width)
        self.reduce_aspp = conv(c_aspp, c, 1)
        self.reduce_fine = conv(c_m2, fine, 1)
        self.conv1 = conv_bn_relu(fine + c, c, 3)
        self.conv2 = conv_bn_relu(c, c, 3)
        self.classifier = conv(c, classes, 1)

    def forward(self, a, m2, h, w):
        up = resize_to(self.reduce_aspp(a), m2.shape[2], m2.shape[3], True)
        x = torch.cat([self.reduce_fine(m2), up], 1)
        x = self.classifier(self.conv2(self.conv1(x)))
        return resize_to(x, h, w, False)


class GSCNN(nn.Module):
    def __init__(self, width, blocks, classes, shape_width=1.0):
        super().__init__()
        self.trunk = WiderResNet38(width, blocks)
        cm1, cm2, cm3, cm4 = scale(64, width), scale(MODULE_CHANNELS[0][-1], width), \
            scale(MODULE_CHANNELS[1][-1], width), scale(MODULE_CHANNELS[2][-1], width)
        cm7 = self.trunk.out_channels
        self.shape = ShapeStream(cm1, cm3, cm4, cm7, shape_width)
        self.canny_fuse = conv(2, 1, 1)
        self.aspp = ASPP(cm7, width)
        self.decoder = Decoder(self.aspp.out_channels, cm2, width, classes)

    def forward(self, image, canny):
        h, w = image.shape[2], image.shape[3]
        m1, m2, m3, m4, m7 = self.trunk(image)
        edge_logits = self.shape(m1, m3, m4, m7, h, w)
        edge = torch.sigmoid(edge_logits)
        fused = torch.sigmoid(self.canny_fuse(torch.cat([edge, canny], 1)))
        seg = self.decoder(self.aspp(m7, fused), m2, h, w)
        return seg, edge_logits, edge


def class_weights(labels, classes):
    """TB_OP_CLASS_WEIGHTS: (N,K), 1 + (1 - freq_c) for the classes present in each image
    (freq over its pixels that are not ignored), 1 for the others. No gradient."""
    n = labels.shape[0]
    flat = labels.reshape(n, -1)
    valid = flat != IGNORE
    index = (torch.arange(n, device=labels.device).unsqueeze(1) * classes + flat.clamp(max=classes - 1))[valid]
    counts = torch.bincount(index, minlength=n * classes).view(n, classes).float()
    total = counts.sum(1, keepdim=True).clamp(min=1)
    return torch.where(counts > 0, 2 - counts / total, torch.ones_like(counts))


def seg_loss(logits, labels, weights):
    """TB_OP_SOFTMAX_CE, weighted, per image: sum over images of sum(w * nll) / sum(w)."""
    valid = labels != IGNORE
    target = torch.where(valid, labels, torch.zeros_like(labels))
    nll = -F.log_softmax(logits, 1).gather(1, target.unsqueeze(1)).squeeze(1)
    w = weights.gather(1, target.view(target.shape[0], -1)).view_as(nll) * valid
    num, den = (w * nll).flatten(1).sum(1), w.flatten(1).sum(1)
    return torch.where(den > 0, num / den.clamp(min=1e-12), torch.zeros_like(num)).sum()


def edge_loss(logits, edges):
    """TB_OP_BCE_LOGITS: class-balanced over the batch; a positive weighs Q/(P+Q), a
    negative P/(P+Q), an ignored pixel 0; the mean over all pixels."""
    pos, neg = edges == 1, edges == 0
    p, q = pos.sum().float(), neg.sum().float()
    total = (p + q).clamp(min=1)
    weight = pos * (q / total) + neg * (p / total)
    return F.binary_cross_entropy_with_logits(logits, pos.float(), weight=weight)


def splitmix_uniform(count, seed, step, op):
    """The backends' uniform numbers (plugins/backends/cpu/cpu_shared.h tb_cpu_uniform): for
    element index i, splitmix64 of seed ^ step*golden ^ op<<40 ^ i*0xBF58476D1CE4E5B9, its top
    24 bits over 2^24. As float32, in NCHW order."""
    import numpy as np

    mask = (1 << 64) - 1
    golden = 0x9E3779B97F4A7C15
    base = np.uint64((seed ^ (step * golden) ^ (op << 40)) & mask)
    with np.errstate(over="ignore"):
        z = base ^ (np.arange(count, dtype=np.uint64) * np.uint64(0xBF58476D1CE4E5B9))
        z = z + np.uint64(golden)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return torch.from_numpy((z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0))


def conv_tri(e, r=4):
    """The reference's convTri(E, r): the triangle filter [1..r+1..1]/(r+1)^2 along W, then
    along H, each plane on its own; padded by one sample replicated, reflected by r, and of
    that the r samples next to the plane on each side."""
    c = e.shape[1]
    f = torch.tensor([list(range(1, r + 1)) + [r + 1] + list(range(r, 0, -1))], dtype=e.dtype, device=e.device)
    f = f / (r + 1) ** 2
    p = F.pad(F.pad(e, (1, 1, 0, 0), mode="replicate"), (r, r, 0, 0), mode="reflect")
    e = torch.cat([p[..., :r], e, p[..., -r:]], 3)
    p = F.pad(F.pad(e, (0, 0, 1, 1), mode="replicate"), (0, 0, r, r), mode="reflect")
    e = torch.cat([p[..., :r, :], e, p[..., -r:, :]], 2)
    e = F.conv2d(e, f.view(1, 1, 1, -1).repeat(c, 1, 1, 1), groups=c)
    return F.conv2d(e, f.view(1, 1, -1, 1).repeat(c, 1, 1, 1), groups=c)


def grad_mag(e):
    """The reference's compute_grad_mag: convTri(E, 4), central differences 0.5 * (x[i+1] -
    x[i-1]) with zeros beyond the border, sqrt(Ox^2 + Oy^2 + 1e-6), over its maximum."""
    c = e.shape[1]
    s = conv_tri(e, 4)
    k = torch.tensor([-0.5, 0.0, 0.5], dtype=e.dtype, device=e.device)
    ox = F.conv2d(F.pad(s, (1, 1, 0, 0)), k.view(1, 1, 1, 3).repeat(c, 1, 1, 1), groups=c)
    oy = F.conv2d(F.pad(s, (0, 0, 1, 1)), k.view(1, 1, 3, 1).repeat(c, 1, 1, 1), groups=c)
    mag = torch.sqrt(ox * ox + oy * oy + 1e-6)
    return mag / mag.max()


def dual_loss(logits, labels, u=None, tau=DUAL_TAU):
    """The reference's DualTaskLoss (my_functionals/DualTaskLoss.py) with its helpers as they
    are meant (their published versions return before smoothing and differencing; see
    gscnn.c): ignored pixels count as logits 0 and class 0; a Gumbel-softmax sample of the
    logits (noise -log(1e-10 - log(u + 1e-10)), u uniform: torch.rand, or the given u);
    the L1 between its boundary map and the one-hot labels', averaged over the elements
    where each map is at least 1e-8, the two halves averaged."""
    n, c, h, w = logits.shape
    ignore = labels == IGNORE
    logits = torch.where(ignore.unsqueeze(1), torch.zeros_like(logits), logits)
    gt = torch.where(ignore, torch.zeros_like(labels), labels)
    onehot = F.one_hot(gt, c).permute(0, 3, 1, 2).to(logits.dtype)
    if u is None:
        u = torch.rand(logits.shape, device=logits.device)
    u = u.to(device=logits.device, dtype=logits.dtype).view(n, c, h, w)
    g = F.softmax((logits - torch.log(1e-10 - torch.log(u + 1e-10))) / tau, 1)
    p, q = grad_mag(g), grad_mag(onehot)
    d = (p - q).abs()
    mp, mq = (p >= 1e-8).detach().to(d.dtype), (q >= 1e-8).detach().to(d.dtype)
    return 0.5 * (d * mp).sum() / (mp.sum() + 1e-10) + 0.5 * (d * mq).sum() / (mq.sum() + 1e-10)


def losses(seg, edge_logits, edge, labels, edges, classes, u=None):
    """gscnn.c's losses(): seg, edge, att (seg again on labels kept where edge > 0.8), dual
    (its Gumbel noise from u, else torch.rand)."""
    seg_l = seg_loss(seg, labels, class_weights(labels, classes))
    edge_l = edge_loss(edge_logits, edges)
    att_labels = torch.where(edge.detach().squeeze(1) > 0.8, labels, torch.full_like(labels, IGNORE))
    att_l = seg_loss(seg, att_labels, class_weights(att_labels, classes))
    dual_l = dual_loss(seg, labels, u)
    return seg_l, edge_l, att_l, dual_l


def first_step_check(net, a, image, canny, labels, edges, half):
    """trainbig's first step again here: its parameters (in its order, which is this
    network's, each checked by size), its dropout masks and Gumbel noise; the four losses
    printed beside trainbig's. At bf16 or fp16 the forward runs under torch.autocast as the
    timed steps do (the losses in float32), against trainbig at that precision."""
    global DROP_OPS, DROP_STEP
    theirs = [float(v) for v in a.check_losses.split(",")]
    with open(a.check_params, "rb") as f:
        raw = bytearray(f.read())
    params = list(net.parameters())
    total = sum(p.numel() for p in params)
    if len(raw) != 4 * total:
        print(f"first-step check: {a.check_params} holds {len(raw) // 4} values, the network {total}; not checked")
        return
    values = torch.frombuffer(raw, dtype=torch.float32)
    at = 0
    with torch.no_grad():
        for p in params:
            p.copy_(values[at:at + p.numel()].view(p.shape).to(p.device))
            at += p.numel()
    ops = [op.split(":") for op in a.check_dropout.split(",") if op]
    if any(p.endswith("e") for _, p in ops):
        print("first-step check: trainbig has elementwise dropout, this twin channel dropout; not checked")
        return
    DROP_OPS, DROP_STEP = [(int(op), float(p)) for op, p in ops], a.dual_step
    n, c, h, w = a.batch, a.classes, a.height, a.image_width
    u = splitmix_uniform(n * c * h * w, 0, a.dual_step, a.dual_op)
    with torch.no_grad():
        with torch.autocast(device_type=image.device.type, dtype=half) if half is not None else contextlib.nullcontext():
            seg, edge_logits, edge = net(image, canny)
        ours = losses(seg.float(), edge_logits.float(), edge.float(), labels, edges, a.classes, u)
    left, DROP_OPS = len(DROP_OPS), []
    if left:
        print(f"first-step check: {left} of trainbig's dropout ops were not met here; not checked")
        return
    names = ("seg", "edge", "att", "dual")
    parts = []
    worst = 0.0
    for name, t, o in zip(names, theirs, ours):
        o = o.item()
        rel = abs(t - o) / max(abs(o), 1e-12)
        worst = max(worst, rel)
        parts.append(f"{name} {t:.6g} / {o:.6g} ({rel:.1e})")
    # float32 through the whole network: 1e-3; 16-bit activations round each op's result
    # to 8 (bf16) or 11 (fp16) significant bits, in two libraries' own orders: 1e-2
    tol, why = (1e-3, "float32 through the whole network") if half is None else (1e-2, f"{a.precision} activations")
    print("first-step check, trainbig's parameters, dropout masks and Gumbel noise in both: losses trainbig / "
          f"pytorch (relative difference): {', '.join(parts)}; {'agree' if worst <= tol else 'DIFFER'} "
          f"(tolerance {tol:g}: {why})")


def dual_check(path, labels, n, classes, h, w, step, op, theirs):
    """Prints the dual term of trainbig's first step against this file's definition of it."""
    count = n * classes * h * w
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    if len(raw) != 4 * count:
        print(f"dual-check: {path}: {len(raw)} bytes, expected {4 * count}; not checked")
        return
    logits = torch.frombuffer(raw, dtype=torch.float32).view(n, classes, h, w).clone()
    u = splitmix_uniform(count, 0, step, op)
    ours32 = dual_loss(logits, labels, u).item()
    ours64 = dual_loss(logits.double(), labels, u.double()).item()
    rel = abs(theirs - ours64) / abs(ours64) if ours64 else float("inf")
    print(f"dual-check: the first step's dual-task loss on trainbig's logits and Gumbel noise: trainbig {theirs:.7g}, "
          f"pytorch {ours32:.7g} (float32), {ours64:.7g} (float64); trainbig against float64: relative difference "
          f"{rel:.2e} ({'agree' if rel <= 1e-4 else 'DIFFER'}, tolerance 1e-4)")


def read_inputs(path, n, h, w):
    """The batch bench/step wrote: image (N,3,H,W) and canny (N,1,H,W) f32, labels and
    edges (N,1,H,W) u8. Labels come back as int64 (N,H,W)."""
    pix = n * h * w
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    if len(raw) != pix * (4 * 4 + 2):
        sys.exit(f"{path}: {len(raw)} bytes, expected {pix * 18} for a batch of {n} images of {w}x{h}")
    floats = torch.frombuffer(raw, dtype=torch.float32, count=4 * pix)
    image, canny = floats[: 3 * pix].view(n, 3, h, w).clone(), floats[3 * pix:].view(n, 1, h, w).clone()
    bytes_ = torch.frombuffer(raw, dtype=torch.uint8, offset=16 * pix)
    labels = bytes_[:pix].view(n, h, w).long()
    edges = bytes_[pix:].view(n, 1, h, w).clone()
    return image, canny, labels, edges


def random_inputs(n, h, w, classes):
    """The same shapes: a normalised-looking image, Canny edges 0/255, random labels with
    some ignored, edge targets 0/1 (255 where the label is ignored)."""
    image = torch.randn(n, 3, h, w)
    canny = (torch.rand(n, 1, h, w) < 0.1).float() * 255
    labels = torch.randint(0, classes, (n, h, w))
    labels[torch.rand(n, h, w) < 0.05] = IGNORE
    edges = (torch.rand(n, 1, h, w) < 0.1).to(torch.uint8)
    edges[(labels == IGNORE).unsqueeze(1)] = IGNORE
    return image, canny, labels, edges


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("threads", type=int)
    ap.add_argument("steps", type=int)
    ap.add_argument("--params", type=int, required=True, help="trainbig's trainable parameter count")
    ap.add_argument("--width", type=float, default=0.125)
    ap.add_argument("--shape-width", type=float, default=1.0)
    ap.add_argument("--blocks", default="1,1,1,1,1,1")
    ap.add_argument("--classes", type=int, default=19)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--height", type=int, default=128)
    ap.add_argument("--image-width", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--inputs", help="the batch bench/step trains on (raw NCHW arrays)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N)")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 in convolutions and matmuls (cuda)")
    ap.add_argument("--format", choices=("channels_last", "contiguous"), default="channels_last")
    ap.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32")
    ap.add_argument("--dual-check", help="trainbig's first-step logits (raw NCHW f32), to check the dual term on")
    ap.add_argument("--dual-step", type=lambda v: int(v, 0), default=0, help="the step its noise was drawn at")
    ap.add_argument("--dual-op", type=int, default=0, help="the id of trainbig's dual_task op")
    ap.add_argument("--dual-trainbig", type=float, default=float("nan"), help="trainbig's dual loss at that step")
    ap.add_argument("--check-params", help="trainbig's first-step parameters (raw f32, its order)")
    ap.add_argument("--check-dropout", default="", help="trainbig's dropout ops in forward order, id:p,...")
    ap.add_argument("--check-losses", help="trainbig's first-step losses seg,edge,att,dual")
    a = ap.parse_args()
    blocks = [int(b) for b in a.blocks.split(",")]
    if len(blocks) != len(MODULE_CHANNELS):
        ap.error("--blocks takes 6 counts (mod2..mod7)")

    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    what = setup_device(a.device, a.tf32)
    cuda = dev.type == "cuda"
    if a.precision == "fp16" and not cuda:
        ap.error("--precision fp16 needs --device cuda: PyTorch's CPU autocast runs bf16 only")
    half = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[a.precision]
    scaler = torch.cuda.amp.GradScaler() if a.precision == "fp16" else None
    fmt = torch.channels_last if a.format == "channels_last" else torch.contiguous_format
    torch.manual_seed(0)
    # Made on the CPU, then moved: the same weights on either device.
    net = GSCNN(a.width, blocks, a.classes, a.shape_width).to(dev, memory_format=fmt)
    count = sum(p.numel() for p in net.parameters() if p.requires_grad)
    print(f"torch-params {count}")
    if count != a.params:
        print(f"parameter count {count} differs from trainbig's {a.params}: not the same network, not timed")
        return 3
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)

    n, h, w = a.batch, a.height, a.image_width
    if a.inputs:
        image, canny, labels, edges = read_inputs(a.inputs, n, h, w)
    else:
        image, canny, labels, edges = random_inputs(n, h, w, a.classes)
    if a.dual_check and a.inputs:
        dual_check(a.dual_check, labels, n, a.classes, h, w, a.dual_step, a.dual_op, a.dual_trainbig)
    image = image.to(dev).contiguous(memory_format=fmt)
    canny = canny.to(dev).contiguous(memory_format=fmt)
    labels, edges = labels.to(dev), edges.to(dev)
    if a.check_params and a.check_losses and a.inputs:
        first_step_check(net, a, image, canny, labels, edges, half)

    times, nonfinite = [], 0
    for i in range(a.steps + 2):
        if cuda:
            torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=half) if half is not None else contextlib.nullcontext():
            seg, edge_logits, edge = net(image, canny)
        seg, edge_logits, edge = seg.float(), edge_logits.float(), edge.float()
        seg_l, edge_l, att_l, dual_l = losses(seg, edge_logits, edge, labels, edges, a.classes)
        total = W_SEG * seg_l + W_EDGE * edge_l + W_ATT * att_l + W_DUAL * dual_l
        if scaler:
            scaler.scale(total).backward()
            scaler.step(opt)
            scaler.update()
        else:
            total.backward()
            opt.step()
        if cuda:
            torch.cuda.synchronize(dev)
        dt = time.perf_counter() - t0
        if i >= 2:
            times.append(dt * 1e3)
        if not nonfinite and not all(math.isfinite(x.item()) for x in (seg_l, edge_l, att_l, dual_l)):
            nonfinite = i + 1
    times.sort()
    nchw = ", contiguous" if a.format == "contiguous" else ""
    where = f"{what}, {a.format}" if cuda else f"{a.threads} threads{nchw}"
    if half is not None:
        where += f", autocast {a.precision}"
    print(f"torch {torch.__version__}, {where}, {'the same batch' if a.inputs else 'random inputs'}; "
          f"losses seg {seg_l.item():.4f} edge {edge_l.item():.4f} att {att_l.item():.4f} dual {dual_l.item():.4f}")
    if cuda:
        print(f"torch peak memory {torch.cuda.max_memory_allocated(dev) / 2**30:.2f} GiB")
    if nonfinite:
        print(f"note: the losses are not finite from step {nonfinite} of {a.steps + 2} on (training diverged; those "
              "steps are timed too)")
    print(f"torch-ms-per-step {times[len(times) // 2]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
