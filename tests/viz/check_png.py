#!/usr/bin/env python3
"""Reads a PNG that kiln drew back with Pillow and prints, as one JSON line,
what tests/test_viz_cli.cpp checks without a golden image:

  width, height
  maps: every map's frame found in the picture (a closed rectangle of the
        frame colour #808080, one pixel wide, at least 8 pixels each way),
        as [x, y, w, h] of its inside, in reading order
  with --cells N (square N x N maps, e.g. causal attention):
  upper_background: per map, whether the centre of every cell above the
        diagonal is the background (white)
  diagonal_ink: per map, how many diagonal cells are not white

Run with Debian's python3-pil: /usr/bin/python3 tests/viz/check_png.py PNG [--cells N]
"""
import argparse
import json

from PIL import Image

FRAME = (0x80, 0x80, 0x80)
WHITE = (255, 255, 255)


def find_frames(img):
    w, h = img.size
    px = img.load()
    is_frame = lambda x, y: 0 <= x < w and 0 <= y < h and px[x, y] == FRAME  # noqa: E731
    maps = []
    for y in range(h):
        for x in range(w):
            if not is_frame(x, y) or is_frame(x - 1, y) or is_frame(x, y - 1):
                continue
            right = x
            while is_frame(right + 1, y):
                right += 1
            bottom = y
            while is_frame(x, bottom + 1):
                bottom += 1
            if right - x < 8 or bottom - y < 8:
                continue
            closed = all(is_frame(i, bottom) for i in range(x, right + 1)) and \
                all(is_frame(right, j) for j in range(y, bottom + 1))
            if closed:
                maps.append([x + 1, y + 1, right - x - 1, bottom - y - 1])
    return maps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("png")
    ap.add_argument("--cells", type=int, default=0)
    args = ap.parse_args()
    img = Image.open(args.png).convert("RGB")
    px = img.load()
    maps = find_frames(img)
    out = {"width": img.size[0], "height": img.size[1], "maps": maps}
    if args.cells:
        n = args.cells
        upper, diagonal = [], []
        for x, y, w, h in maps:
            centre = lambda r, c: px[x + int((c + 0.5) * w / n), y + int((r + 0.5) * h / n)]  # noqa: E731
            upper.append(all(centre(r, c) == WHITE for r in range(n) for c in range(r + 1, n)))
            diagonal.append(sum(centre(i, i) != WHITE for i in range(n)))
        out["upper_background"] = upper
        out["diagonal_ink"] = diagonal
    print(json.dumps(out))


if __name__ == "__main__":
    main()
