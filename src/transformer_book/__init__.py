"""transformer_book: the code behind "Transformers, step by step".

One module per concept; each chapter of the book builds a concept in its notebook,
checks it against the module here, and later chapters import it.
"""

import os

# On Apple silicon, let operations that MPS lacks run on the CPU instead of raising.
# torch reads this once, when it is imported: it works when the package comes first.
os.environ.setdefault("PYTORCH_ENABLE_MPS_FALLBACK", "1")

__version__ = "0.1.0"
