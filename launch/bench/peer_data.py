#!/usr/bin/python3
"""The torchvision peer of `ringtrain bench data --augment`: ImageFolder with
PIL decoding and the same transforms, through torch's DataLoader with the same
number of workers, images/s in total and per worker.

  /usr/bin/python3 launch/bench/peer_data.py --make DIR [--images 512]
      writes DIR/<class>/<n>.jpg: photographs cut from scikit-learn's two
      sample photos (Debian's python3-sklearn), 500x375 like an average
      ImageNet image, quality 90
  /usr/bin/python3 launch/bench/peer_data.py --folder DIR --workers N --preset imagenet|cifar
"""
import argparse
import os
import sys
import time


def make(folder, images):
    from PIL import Image
    src = "/usr/lib/python3/dist-packages/sklearn/datasets/images"
    photos = [Image.open(f"{src}/{n}.jpg").convert("RGB") for n in ("china", "flower")]
    for n in range(images):
        p = photos[n % 2]
        # A different window and scale for every image, a pure function of n.
        w, h = p.size
        cw, ch = 320 + (n * 37) % 300, 240 + (n * 53) % 180
        x, y = (n * 97) % (w - cw), (n * 61) % (h - ch)
        img = p.crop((x, y, x + cw, y + ch)).resize((500, 375), Image.BILINEAR)
        if n % 3 == 1:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        d = f"{folder}/class{n % 4}"
        os.makedirs(d, exist_ok=True)
        img.save(f"{d}/{n:05d}.jpg", quality=90)
    print(f"wrote {images} JPEGs of 500x375 under {folder}")


def bench(folder, workers, preset, batch, epochs):
    import torch
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    torch.set_num_threads(1)
    if preset == "imagenet":
        tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                        T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    else:
        tf = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor()])
    ds = ImageFolder(folder, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                         persistent_workers=True, drop_last=True)
    rates = []
    for epoch in range(epochs + 1):
        n, start = 0, None
        for x, _ in loader:
            if start is None:  # the first batch waits for worker start-up
                start = time.perf_counter()
                continue
            n += x.shape[0]
        if epoch > 0:  # epoch 0 warms the page cache
            rates.append(n / (time.perf_counter() - start))
    rates.sort()
    rate = rates[len(rates) // 2]
    import torchvision
    import PIL
    print(f"torchvision {torchvision.__version__} DataLoader, PIL {PIL.__version__} decode, preset {preset}, "
          f"{len(ds)} images, batch {batch}, {workers} worker(s), median of {epochs} epochs")
    print(f"images/s total {rate:.0f} per worker {rate / max(workers, 1):.0f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--make")
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--folder")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--preset", default="imagenet", choices=("imagenet", "cifar"))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3)
    a = ap.parse_args()
    if a.make:
        make(a.make, a.images)
    elif a.folder:
        bench(a.folder, a.workers, a.preset, a.batch, a.epochs)
    else:
        ap.error("give --make DIR or --folder DIR")


if __name__ == "__main__":
    sys.exit(main())
