#!/usr/bin/env python3
"""Reference dequantizations of the lookup-table weight types (IQ4_NL,
IQ4_XS, MXFP4) by the `gguf` Python package, an implementation independent
of Gantry's (and of ggml's C code).

Seeded random blocks: finite f16 scales of either sign over a wide range
(zero, a subnormal and large ones among them), random index nibbles and
scale bits, E8M0 exponents mostly in 100..140 plus the edges 0, 1, 2 and
254. For each type it writes, into tests/data/quant/:

  <type>_blocks.bin         the raw blocks (ggml's layout, little-endian)
  <type>_dequantized_f32.bin  gguf-py's dequantization (f32, little-endian)

Run from the repository root:  python3 tests/data/scripts/lookup_quant_gguf_py.py
(needs numpy and gguf; made with gguf 0.19.0, numpy 2.4.6). E8M0 254 makes
the largest codes overflow to infinity, in gguf-py as in ggml: kept, it is
part of what must match.
"""

import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

OUT = os.path.join("tests", "data", "quant")
SEED = 20260417


def f16_scales(rng, n):
    """Finite f16 scales: mostly 2^-14..2^-2 of either sign, plus edge values."""
    mag = np.exp2(rng.uniform(-14, -2, n)).astype(np.float16)
    sign = np.where(rng.integers(0, 2, n) == 1, -1, 1).astype(np.float16)
    d = mag * sign
    edges = np.array([0.0, 6.0e-8, -1.0, 1024.0], dtype=np.float16)  # zero, subnormal, large
    d[: len(edges)] = edges
    return d


def iq4_nl(rng, nb):
    d = f16_scales(rng, nb)
    qs = rng.integers(0, 256, (nb, 16), dtype=np.uint8)
    return np.concatenate([d.view(np.uint8).reshape(nb, 2), qs], axis=1)


def iq4_xs(rng, nb):
    d = f16_scales(rng, nb)
    scales_h = rng.integers(0, 1 << 16, nb, dtype=np.uint16).astype("<u2")
    scales_l = rng.integers(0, 256, (nb, 4), dtype=np.uint8)
    qs = rng.integers(0, 256, (nb, 128), dtype=np.uint8)
    return np.concatenate(
        [d.view(np.uint8).reshape(nb, 2), scales_h.view(np.uint8).reshape(nb, 2), scales_l, qs], axis=1
    )


def mxfp4(rng, nb):
    e = rng.integers(100, 141, nb, dtype=np.uint8)
    e[:4] = [0, 1, 2, 254]
    qs = rng.integers(0, 256, (nb, 16), dtype=np.uint8)
    return np.concatenate([e.reshape(nb, 1), qs], axis=1)


def main():
    rng = np.random.default_rng(SEED)
    for name, qtype, make, nb in [
        ("iq4_nl", T.IQ4_NL, iq4_nl, 24),
        ("iq4_xs", T.IQ4_XS, iq4_xs, 6),
        ("mxfp4", T.MXFP4, mxfp4, 24),
    ]:
        blocks = np.ascontiguousarray(make(rng, nb), dtype=np.uint8)
        values = dequantize(blocks.reshape(-1), qtype).astype("<f4")
        with open(os.path.join(OUT, f"{name}_blocks.bin"), "wb") as f:
            f.write(blocks.tobytes())
        with open(os.path.join(OUT, f"{name}_dequantized_f32.bin"), "wb") as f:
            f.write(values.tobytes())
        print(name, blocks.shape, values.shape)


if __name__ == "__main__":
    main()
