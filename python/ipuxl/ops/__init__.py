"""Op builders, mirroring ``popxl.ops``.

Each module groups one family of ops: its builders check shapes and dtypes
and create ops whose type names a C++ kernel in ``cpp/kernels``.
"""
from . import collectives, var_updates
from .argminmax import *  # noqa: F401,F403
from .binary import *  # noqa: F401,F403
from .call import *  # noqa: F401,F403
from .cast import *  # noqa: F401,F403
from .code_load import *  # noqa: F401,F403
from .conditional import *  # noqa: F401,F403
from .cumsum import *  # noqa: F401,F403
from .gather import *  # noqa: F401,F403
from .host_io import *  # noqa: F401,F403
from .init import *  # noqa: F401,F403
from .logical import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .matmul import *  # noqa: F401,F403
from .misc import *  # noqa: F401,F403
from .print_tensor import *  # noqa: F401,F403
from .random import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .repeat import *  # noqa: F401,F403
from .scaled_add import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403
from .slicing import *  # noqa: F401,F403
from .softmax import *  # noqa: F401,F403
from .topk import *  # noqa: F401,F403
from .unary import *  # noqa: F401,F403
from .where import *  # noqa: F401,F403
from .call import CallSiteInfo  # noqa: F401


PadType = str  # Literal["not_set", "same_upper", "same_lower", "valid"]
