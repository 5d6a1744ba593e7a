#!/usr/bin/env python3
"""Writes the small hand-made seeds of tests/fuzz/corpus/ (the others come from the
test fixtures: tests/make_fixtures). Usage: make-seeds.py SMALL.jpg (a baseline JPEG
without EXIF, e.g. one tests/make_fixtures taco writes)."""
import os
import struct
import sys
import zlib

here = os.path.dirname(os.path.abspath(__file__))


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(w, h, depth, ctype, rows, extra=b"", interlace=0):
    raw = b"".join(b"\0" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace)) +
            extra + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def write(target, name, data):
    with open(os.path.join(here, "corpus", target, name), "wb") as f:
        f.write(data)


# Palette label maps (3 entries; one with an index past the palette), grey+alpha, grey,
# 16-bit RGB and a 1-bit palette.
plte = chunk(b"PLTE", bytes([0, 0, 0, 255, 0, 0, 0, 255, 0]))
write("png", "palette.png", png(4, 3, 8, 3, [bytes([0, 1, 2, 1])] * 3, plte))
write("png", "palette-bad-index.png", png(4, 2, 8, 3, [bytes([0, 1, 2, 3])] * 2, plte))
write("png", "grey-alpha.png", png(3, 2, 8, 4, [bytes(range(6))] * 2))
write("png", "rgb16.png", png(2, 2, 16, 2, [bytes(range(12))] * 2))
write("png", "grey.png", png(5, 5, 8, 0, [bytes(range(5))] * 5))
write("png", "palette-1bit.png", png(8, 1, 1, 3, [bytes([0x5A])], plte))


# EXIF orientations in both byte orders, inserted after the SOI of a real JPEG.
def exif(order, orientation):
    le = order == b"II"
    h, i = ("<H", "<I") if le else (">H", ">I")
    tiff = order + struct.pack(h, 42) + struct.pack(i, 8) + struct.pack(h, 1)
    tiff += struct.pack(h, 274) + struct.pack(h, 3) + struct.pack(i, 1) + struct.pack(h, orientation) + b"\0\0"
    tiff += struct.pack(i, 0)
    body = b"Exif\0\0" + tiff
    return b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body


if len(sys.argv) > 1:
    jpeg = open(sys.argv[1], "rb").read()
    write("jpeg", "plain.jpg", jpeg)
    for order, o in ((b"II", 6), (b"MM", 3), (b"MM", 8), (b"II", 5)):
        write("jpeg", "exif-%s-%d.jpg" % (order.decode(), o), jpeg[:2] + exif(order, o) + jpeg[2:])
