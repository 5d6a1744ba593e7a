"""bench/step_torch.py THREADS STEPS [--device cuda] [--tf32] [--format contiguous]
[--precision fp32|bf16|fp16]: the network of bench/step.c in PyTorch, timed the same way
(median ms of STEPS training steps after 2 warm-up steps), channels_last unless --format
says otherwise; at bf16 (fp16: a GPU only, with a GradScaler) its forward runs under
torch.autocast and the loss in fp32.

On --device cuda: cudnn.benchmark (cuDNN times its algorithms, as the cuda backend's
conv_algo = find does), TF32 off for matmul and cuDNN unless --tf32 (as the backend's
tf32 = no), and every timed step ends with torch.cuda.synchronize().
Prints 'torch-ms-per-step X' for bench/step to read."""
import argparse
import contextlib
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SIDE, CLASSES = 4, 224, 19


def conv_bn(cin, cout, k, stride, relu):
    layers = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, bias=False), nn.BatchNorm2d(cout)]
    if relu:
        layers.append(nn.ReLU(inplace=False))
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv_bn(cin, cout, 3, stride, True)
        self.conv2 = conv_bn(cout, cout, 3, 1, False)
        self.downsample = conv_bn(cin, cout, 1, stride, False) if stride != 1 or cin != cout else None

    def forward(self, x):
        shortcut = self.downsample(x) if self.downsample is not None else x
        return F.relu(self.conv2(self.conv1(x)) + shortcut)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = conv_bn(3, 64, 7, 2, True)
        blocks, cin = [], 64
        for s, width in enumerate((64, 128, 256, 512)):
            for b in range(2):
                blocks.append(BasicBlock(cin, width, 2 if s > 0 and b == 0 else 1))
                cin = width
        self.blocks = nn.Sequential(*blocks)
        self.classifier = nn.Conv2d(512, CLASSES, 1, bias=True)

    def forward(self, x):
        x = F.max_pool2d(self.stem(x), 3, 2, 1)
        x = self.classifier(self.blocks(x))
        return F.interpolate(x, size=(SIDE, SIDE), mode="bilinear", align_corners=False)


def setup_device(device, tf32):
    """The device's settings, described; exits (4) when torch has no CUDA device. Only the
    legacy TF32 flags are set: torch 2.9+ refuses to read them back once both they and the
    fp32_precision ones have been set."""
    if device == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device: not timed")
        sys.exit(4)
    torch.backends.cudnn.benchmark = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy flags' deprecation notice
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    return (f"{torch.cuda.get_device_name(device)}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
            f"TF32 {'on' if tf32 else 'off'}, cudnn.benchmark")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("threads", type=int)
    ap.add_argument("steps", type=int)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N)")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 in convolutions and matmuls (cuda)")
    ap.add_argument("--format", choices=("channels_last", "contiguous"), default="channels_last")
    ap.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32")
    a = ap.parse_args()
    if a.precision == "fp16" and not a.device.startswith("cuda"):
        ap.error("--precision fp16 needs --device cuda: PyTorch's CPU autocast runs bf16 only")
    half = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[a.precision]
    threads, steps = a.threads, a.steps
    fmt = torch.channels_last if a.format == "channels_last" else torch.contiguous_format
    torch.set_num_threads(threads)
    dev = torch.device(a.device)
    what = setup_device(a.device, a.tf32)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    # Made on the CPU, then moved: the same weights and inputs on either device.
    net = Net().to(dev, memory_format=fmt)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    image = (torch.rand(BATCH, 3, SIDE, SIDE) - 0.5).to(dev, memory_format=fmt)
    labels = torch.randint(0, CLASSES, (BATCH, SIDE, SIDE)).to(dev)
    scaler = torch.cuda.amp.GradScaler() if a.precision == "fp16" else None
    times = []
    for i in range(steps + 2):
        if cuda:
            torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=half) if half is not None else contextlib.nullcontext():
            logits = net(image)
        loss = F.cross_entropy(logits.float(), labels, ignore_index=255)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        if cuda:
            torch.cuda.synchronize(dev)
        dt = time.perf_counter() - t0
        if i >= 2:
            times.append(dt * 1e3)
    times.sort()
    if cuda:
        print(f"torch {torch.__version__}, {what}, {a.format}, {a.precision}, loss {loss.item():.4f}, "
              f"peak memory {torch.cuda.max_memory_allocated(dev) / 2**30:.2f} GiB")
    else:
        nchw = ", contiguous" if a.format == "contiguous" else ""
        amp = f", autocast {a.precision}" if half is not None else ""
        print(f"torch {torch.__version__}, {threads} threads{nchw}{amp}, loss {loss.item():.4f}")
    print(f"torch-ms-per-step {times[len(times) // 2]:.3f}")


if __name__ == "__main__":
    main()
