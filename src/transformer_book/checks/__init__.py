"""Self-checking exercises: ``checks.check_X(your_function)`` tests an answer against the
reference on random inputs, prints ``Correct: ...`` or raises :class:`ExerciseError`
explaining what is wrong. One submodule per concept module of the package."""

from ._core import ExerciseError as ExerciseError
from .attention import *  # noqa: F401,F403
from .bert import *  # noqa: F401,F403
from .blocks import *  # noqa: F401,F403
from .classifiers import *  # noqa: F401,F403
from .distill import *  # noqa: F401,F403
from .families import *  # noqa: F401,F403
from .fine_tuning import *  # noqa: F401,F403
from .gpt import *  # noqa: F401,F403
from .kv_cache import *  # noqa: F401,F403
from .masks import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .norms import *  # noqa: F401,F403
from .positions import *  # noqa: F401,F403
from .seq2seq import *  # noqa: F401,F403
