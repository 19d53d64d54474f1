#!/usr/bin/python3
"""OCR text detection on an image file with kilnd's ocr_det model (PaddleOCR
PP-OCRv4 det), optionally followed by recognition with ocr_rec.

    python3 ocr_detect.py page.png                  # boxes of text regions
    python3 ocr_detect.py page.png --recognize      # + the text in each box
    python3 ocr_detect.py --make-demo-image demo.png   # a synthetic page to try

Preprocessing follows PaddleOCR: the longer side is scaled to at most
--max-side with both sides multiples of 32, ImageNet mean / std
normalization, NCHW float32. The probability map is thresholded and its
connected regions become boxes (in original image coordinates).
"""

import argparse
import collections
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from kiln_client import KilnClient  # noqa: E402

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def make_demo_image(path):
    lines = ["kiln serves models", "OCR DEMO 2026", "hello world 42"]
    try:
        font = ImageFont.load_default(size=36)
        img = Image.new("RGB", (640, 320), "white")
        draw = ImageDraw.Draw(img)
        for i, line in enumerate(lines):
            draw.text((40, 40 + 90 * i), line, fill="black", font=font)
    except TypeError:  # Pillow < 10: a fixed small bitmap font, drawn small and scaled up
        small = Image.new("RGB", (213, 107), "white")
        draw = ImageDraw.Draw(small)
        for i, line in enumerate(lines):
            draw.text((13, 13 + 30 * i), line, fill="black", font=ImageFont.load_default())
        img = small.resize((640, 320), Image.BICUBIC)
    img.save(path)
    print(f"wrote {path}")


def preprocess_det(img, max_side):
    w, h = img.size
    scale = min(1.0, max_side / max(w, h))
    nw = max(32, int(round(w * scale / 32)) * 32)
    nh = max(32, int(round(h * scale / 32)) * 32)
    x = np.asarray(img.convert("RGB").resize((nw, nh), Image.BILINEAR), dtype=np.float32) / 255.0
    x = (x - MEAN) / STD
    return x.transpose(2, 0, 1)[None].astype(np.float32), (w / nw, h / nh)


def components(mask, min_pixels):
    """Bounding boxes (x0, y0, x1, y1) of 4-connected regions of `mask`."""
    h, w = mask.shape
    seen = np.zeros_like(mask, dtype=bool)
    boxes = []
    for y, x in zip(*np.nonzero(mask)):
        if seen[y, x]:
            continue
        queue = collections.deque([(y, x)])
        seen[y, x] = True
        ys, xs = [], []
        while queue:
            cy, cx = queue.popleft()
            ys.append(cy)
            xs.append(cx)
            for ny, nx in ((cy - 1, cx), (cy + 1, cx), (cy, cx - 1), (cy, cx + 1)):
                if 0 <= ny < h and 0 <= nx < w and mask[ny, nx] and not seen[ny, nx]:
                    seen[ny, nx] = True
                    queue.append((ny, nx))
        if len(ys) >= min_pixels:
            boxes.append((min(xs), min(ys), max(xs) + 1, max(ys) + 1))
    return boxes


def detect(client, img, args):
    x, (sx, sy) = preprocess_det(img, args.max_side)
    out = client.infer(args.det_model, {"x": x})
    prob = next(iter(out.values()))[0, 0]  # [H, W]
    step = 2  # label on a half-resolution map: fast enough in pure Python
    mask = prob[::step, ::step] > args.threshold
    boxes = []
    for x0, y0, x1, y1 in components(mask, min_pixels=4):
        # The detector shrinks text regions; grow the box back a little.
        pad = 0.4 * (y1 - y0) * step
        boxes.append((max(0, int((x0 * step - pad) * sx)), max(0, int((y0 * step - pad) * sy)),
                      min(img.size[0], int((x1 * step + pad) * sx)),
                      min(img.size[1], int((y1 * step + pad) * sy))))
    return sorted(boxes, key=lambda b: (b[1], b[0])), float(prob.max())


def recognize(client, img, box, keys, model):
    crop = img.convert("RGB").crop(box)
    w, h = crop.size
    nw = max(16, min(1280, int(round(48 * w / max(1, h) / 8)) * 8))
    x = np.asarray(crop.resize((nw, 48), Image.BILINEAR), dtype=np.float32) / 255.0
    x = ((x - 0.5) / 0.5).transpose(2, 0, 1)[None].astype(np.float32)
    probs = next(iter(client.infer(model, {"x": x}).values()))[0]  # [T, classes]
    ids = probs.argmax(axis=1)
    text, prev = [], 0
    for i in ids:
        if i != prev and i != 0 and i - 1 < len(keys):
            text.append(keys[i - 1])
        prev = i
    return "".join(text)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("image", nargs="?")
    p.add_argument("--url", default="localhost:8001")
    p.add_argument("--token", default=os.environ.get("KILN_AUTH_TOKEN"))
    p.add_argument("--det-model", default="ocr_det")
    p.add_argument("--rec-model", default="ocr_rec")
    p.add_argument("--keys", default="models/ocr_rec/ppocr_keys_v1.txt")
    p.add_argument("--max-side", type=int, default=960)
    p.add_argument("--threshold", type=float, default=0.3)
    p.add_argument("--recognize", action="store_true")
    p.add_argument("--draw", help="write the image with the boxes drawn here")
    p.add_argument("--make-demo-image", metavar="PATH")
    args = p.parse_args()
    if args.make_demo_image:
        make_demo_image(args.make_demo_image)
        if not args.image:
            return 0
    if not args.image:
        p.error("an image file is needed")
    img = Image.open(args.image)
    client = KilnClient(args.url, token=args.token, timeout=300)
    boxes, peak = detect(client, img, args)
    keys = None
    if args.recognize:
        with open(args.keys, encoding="utf-8") as f:
            keys = [line.rstrip("\n") for line in f] + [" "]
    print(f"{args.image}: {img.size[0]}x{img.size[1]}, {len(boxes)} text regions "
          f"(peak probability {peak:.3f})")
    for box in boxes:
        line = f"  box x={box[0]}..{box[2]} y={box[1]}..{box[3]}"
        if keys:
            line += f"  text: {recognize(client, img, box, keys, args.rec_model)!r}"
        print(line)
    if args.draw:
        out = img.convert("RGB")
        draw = ImageDraw.Draw(out)
        for box in boxes:
            draw.rectangle(box, outline="red", width=2)
        out.save(args.draw)
        print(f"wrote {args.draw}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
