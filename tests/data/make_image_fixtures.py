#!/usr/bin/python3
"""Image fixtures for the convert-images tests, written with PIL (the reference
decoder and resizer). Usage: make_image_fixtures.py OUTDIR

  fashion/{train,test}/<label>/<index>.png  Fashion-MNIST (Debian's IDX files)
                                            written out as PNG: 300 + 100 images
  photos/<name>.jpg                         real photographs (scikit-learn's
                                            sample images) and PIL's reference
  photos/<name>.{rgb,l}.bin                 decodes, photos/<name>.resize-HxW.bin
                                            resizes (raw bytes, HWC)
  mixed/<class>/...                         the bad-file cases: truncated JPEG,
                                            text named .jpg, CMYK JPEG, gray
                                            and 16-bit PNGs, EXIF-rotated JPEG,
                                            a .txt beside them
  empty/{a,b}                               class b holds no image
  sizes/{a,b}                               images of two sizes
"""
import gzip
import io
import os
import shutil
import struct
import sys

from PIL import Image

out = sys.argv[1]
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


fm = "/usr/share/datasets/fashion-mnist"
for split, prefix, count in (("train", "train", 300), ("test", "t10k", 100)):
    (n, h, w), pixels = idx(f"{fm}/{prefix}-images-idx3-ubyte.gz")
    _, labels = idx(f"{fm}/{prefix}-labels-idx1-ubyte.gz")
    for i in range(count):
        d = f"{out}/fashion/{split}/{labels[i]}"
        os.makedirs(d, exist_ok=True)
        img = Image.frombytes("L", (w, h), pixels[i * h * w:(i + 1) * h * w])
        img.save(f"{d}/{i:05d}.png")

photos = "/usr/lib/python3/dist-packages/sklearn/datasets/images"
os.makedirs(f"{out}/photos")
for name in ("china", "flower"):
    shutil.copy(f"{photos}/{name}.jpg", f"{out}/photos/{name}.jpg")
    img = Image.open(f"{photos}/{name}.jpg")
    rgb = img.convert("RGB")
    open(f"{out}/photos/{name}.rgb.bin", "wb").write(rgb.tobytes())
    open(f"{out}/photos/{name}.l.bin", "wb").write(img.convert("L").tobytes())
    for h, w in ((224, 224), (97, 131), (480, 700)):
        r = rgb.resize((w, h), Image.BILINEAR)
        open(f"{out}/photos/{name}.resize-{h}x{w}.bin", "wb").write(r.tobytes())
    # torchvision's eval geometry on PIL: Resize(256) then CenterCrop(224)
    # (the same arithmetic as torchvision.transforms: short side 256, long
    # side truncated, crop offsets rounded half to even).
    W, H = rgb.size
    if W <= H:
        size = (256, int(256 * H / W))
    else:
        size = (int(256 * W / H), 256)
    r = rgb.resize(size, Image.BILINEAR)
    top, left = int(round((size[1] - 224) / 2.0)), int(round((size[0] - 224) / 2.0))
    r = r.crop((left, top, left + 224, top + 224))
    open(f"{out}/photos/{name}.eval224.bin", "wb").write(r.tobytes())
    # torchvision's resized_crop for given parameters (top 37, left 51, height
    # 200, width 300, to 224): a PIL crop, then a BILINEAR resize.
    r = rgb.crop((51, 37, 51 + 300, 37 + 200)).resize((224, 224), Image.BILINEAR)
    open(f"{out}/photos/{name}.rrc224.bin", "wb").write(r.tobytes())

# The mixed folder: every case the converter must name or handle.
china = Image.open(f"{photos}/china.jpg").convert("RGB").resize((64, 48), Image.BILINEAR)
m = f"{out}/mixed"
for c in ("a_photos", "b_pngs"):
    os.makedirs(f"{m}/{c}")
china.save(f"{m}/a_photos/good.jpg", quality=90)
china.convert("CMYK").save(f"{m}/a_photos/cmyk.jpg", quality=90)
buf = io.BytesIO()
china.save(buf, "JPEG", quality=90)
open(f"{m}/a_photos/truncated.jpg", "wb").write(buf.getvalue()[: len(buf.getvalue()) // 2])
open(f"{m}/a_photos/notes.jpg", "w").write("this is a text file named .jpg\n")
# EXIF orientation 6 (rotate 90 clockwise to display): stored 48x64, shown 64x48.
exif = Image.Exif()
exif[0x0112] = 6
china.transpose(Image.ROTATE_90).save(f"{m}/a_photos/rotated.jpg", quality=90, exif=exif)
china.convert("L").save(f"{m}/b_pngs/gray.png")
china.save(f"{m}/b_pngs/rgb.png")
china.convert("RGBA").save(f"{m}/b_pngs/rgba.png")
# 16-bit gray: value v*257, so the high byte is v.
g16 = Image.frombytes("I;16", (64, 48), bytes(
    b for v in china.convert("L").tobytes() for b in struct.pack("<H", v * 257)))
g16.save(f"{m}/b_pngs/gray16.png")
open(f"{m}/b_pngs/README.txt", "w").write("not an image\n")
# References: what each good file must decode to (RGB, HWC).
for name, img in (("good", Image.open(f"{m}/a_photos/good.jpg")),
                  ("cmyk", Image.open(f"{m}/a_photos/cmyk.jpg")),
                  ("rotated", Image.open(f"{m}/a_photos/rotated.jpg")),
                  ("gray", Image.open(f"{m}/b_pngs/gray.png"))):
    from PIL import ImageOps
    img = ImageOps.exif_transpose(img)
    open(f"{out}/mixed-{name}.rgb.bin", "wb").write(img.convert("RGB").tobytes())

os.makedirs(f"{out}/empty/a")
os.makedirs(f"{out}/empty/b")
china.save(f"{out}/empty/a/x.png")
os.makedirs(f"{out}/sizes/a")
os.makedirs(f"{out}/sizes/b")
china.save(f"{out}/sizes/a/x.png")
china.resize((32, 32)).save(f"{out}/sizes/b/y.png")
print("image fixtures in", out)
