"""Production peers of softmax and its backward, one module each (torch_native, liger, quack).

Not here, and why: FlashInfer's `flashinfer.sampling.softmax(logits, temperature=None, enable_pdl=None)` is a
sampling helper, not this op: it casts the logits to float32 first (a separate pass over a 16-bit input) and
returns float32 probabilities (twice the bytes written), and it has no backward. vLLM and SGLang call
torch.softmax (or FlashInfer's sampling kernels) rather than a softmax kernel of their own.
"""
