"""Clean-room NumPy reference for the quantized MoE kernel family (Q8_0 weights, three numeric modes)."""
