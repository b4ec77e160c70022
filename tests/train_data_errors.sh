#!/usr/bin/env bash
# The trainer's data errors (examples/fmnist_data.c), each on a small
# made-up dataset: a missing directory names the Debian package, and a
# truncated file, a gzip stream cut short, a wrong magic number, mismatched
# counts, a header claiming 2^31 - 1 images, a FIFO in place of a file and
# a label out of range each get their own message and exit 1,
# before any device is touched (so this needs no OpenCL device).
#
# usage: train_data_errors.sh TRAINER
set -uo pipefail
trainer=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/kiln-train-data-XXXXXX")
trap 'rm -rf "$dir"' EXIT
failures=0

# make_set NAME [images_magic] [count_images] [count_labels] [label] [cut]
# writes NAME/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz with 3
# examples; the arguments spoil one thing each.
make_set() {
  python3 - "$dir/$1" "${2:-2051}" "${3:-3}" "${4:-3}" "${5:-1}" "${6:-}" <<'PY'
import gzip, os, struct, sys
out, magic, nimg, nlab, label, cut = sys.argv[1:]
os.makedirs(out)
for split in ("train", "t10k"):
    images = struct.pack(">IIII", int(magic), int(nimg), 28, 28) + bytes(784 * 3)
    labels = struct.pack(">II", 2049, int(nlab)) + bytes([0, int(label), 2])
    if cut == "data":      # a whole gzip stream, of too few bytes
        images = images[:-100]
    packed = gzip.compress(images)
    if cut == "stream":    # a gzip stream cut short
        packed = packed[:len(packed) // 2]
    open(os.path.join(out, split + "-images-idx3-ubyte.gz"), "wb").write(packed)
    open(os.path.join(out, split + "-labels-idx1-ubyte.gz"), "wb").write(gzip.compress(labels))
PY
}

# expect NAME PATTERN: the trainer on dataset NAME exits 1 and says PATTERN.
expect() {
  local out status
  out=$(timeout 60 "$trainer" --data "$dir/$1" --batch 2 2>&1)
  status=$?
  if [ "$status" -ne 1 ] || ! grep -q -e "$2" <<< "$out"; then
    echo "FAIL $1: status $status, wanted 1 and '$2'; output: $out"
    failures=$((failures + 1))
  else
    echo "ok $1: $out"
  fi
}

expect missing 'Debian package dataset-fashion-mnist'
make_set truncated 2051 3 3 1 data
expect truncated 'truncated file: it ends inside the images'
make_set cut_stream 2051 3 3 1 stream
expect cut_stream 'truncated file'
make_set magic 2050
expect magic 'wrong magic number 0x00000802, expected 0x00000803'
make_set counts 2051 3 4
expect counts 'holds 3 images but .* holds 4 labels'
# A header claiming 2^31 - 1 images is damaged, not a count mismatch.
make_set huge 2051 2147483647 3
expect huge 'its header says 2147483647 images; a Fashion-MNIST file holds 1 to'
# A FIFO where a file belongs: refused, not waited on (timeout: 124).
make_set fifo
rm "$dir/fifo/train-images-idx3-ubyte.gz"
mkfifo "$dir/fifo/train-images-idx3-ubyte.gz"
expect fifo 'train-images-idx3-ubyte.gz: not a regular file'
make_set label 2051 3 3 12
expect label 'label 1 is 12, outside 0..9'
exit $((failures > 0))
