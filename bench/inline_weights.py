#!/usr/bin/python3
"""Rewrite an ONNX model whose weights are external data as one file with the
weights inline (raw_data), for the import benchmark.

    /usr/bin/python3 bench/inline_weights.py IN.onnx OUT.onnx

onnx.load reads the external data next to IN.onnx; save_model without
save_as_external_data writes every tensor's bytes into OUT.onnx.
"""

import sys

import onnx


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    model = onnx.load(src, load_external_data=True)
    onnx.save_model(model, dst, save_as_external_data=False)


if __name__ == "__main__":
    main()
