"""transformer_book: the code behind "Transformers, step by step".

One module per concept; each chapter of the book builds a concept in its notebook,
checks it against the module here, and later chapters import it.
"""

__version__ = "0.1.0"
