#!/usr/bin/env python3
"""Writes a GGUF file whose tensors are those of another, dequantized to F32,
with every metadata key copied: the same model, with no quantized product in
it. llama.cpp runs such a file without rounding activations to 8 bits, which
is what makes its results comparable to Gantry's at the level of the model
rather than of rounding (Gantry reads the quantized file the same way with
`DecoderModel::load_dequantized`). tests/data/gemma3_270m_f32_topk.json was
made by running tests/data/scripts/gemma3_topk_xllamacpp.py on this
script's output for gemma-3-270m-q4_k_m.gguf.

Needs the `gguf` package (numpy); run in a throwaway venv outside the repository:

    python3 -m venv /tmp/xl && /tmp/xl/bin/pip install xllamacpp gguf
    /tmp/xl/bin/python scripts/gguf_dequantize_f32.py IN.gguf OUT.gguf
"""
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import dequantize


def main(src: str, dst: str) -> None:
    reader = GGUFReader(src)
    writer = GGUFWriter(dst, reader.fields["general.architecture"].contents())
    for name, field in reader.fields.items():
        # The writer sets the header fields and the architecture itself.
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if field.types[0] == GGUFValueType.ARRAY:
            writer.add_key_value(name, field.contents(), field.types[0], sub_type=field.types[-1])
        else:
            writer.add_key_value(name, field.contents(), field.types[0])
    for t in reader.tensors:
        values = dequantize(t.data, t.tensor_type).astype(np.float32)
        # numpy order: the file's dimensions reversed.
        writer.add_tensor(t.name, values.reshape([int(n) for n in reversed(t.shape)]))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
