"""bench/step_torch.py THREADS STEPS: the network of bench/step.c in PyTorch, timed the
same way (median ms of STEPS training steps after 2 warm-up steps), channels_last.
Prints 'torch-ms-per-step X' for bench/step to read."""
import sys
import time

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


def main():
    threads, steps = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = Net().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    image = (torch.rand(BATCH, 3, SIDE, SIDE) - 0.5).to(memory_format=torch.channels_last)
    labels = torch.randint(0, CLASSES, (BATCH, SIDE, SIDE))
    times = []
    for i in range(steps + 2):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(image), labels, ignore_index=255)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if i >= 2:
            times.append(dt * 1e3)
    times.sort()
    print(f"torch {torch.__version__}, {threads} threads, loss {loss.item():.4f}")
    print(f"torch-ms-per-step {times[len(times) // 2]:.3f}")


if __name__ == "__main__":
    main()
