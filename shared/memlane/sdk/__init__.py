"""memlane's typed Python SDK (`pip install 'memlane[sdk]'`): see docs/sdk.md.

    from memlane.sdk import Memlane
    client = Memlane("http://127.0.0.1:8420")
    client.stores.create("demo")
"""

from __future__ import annotations

from . import errors
from .auth import SigV4Unavailable, region_of
from .client import DEFAULT_URL, AsyncMemlane, Memlane, Thread
from .errors import ApiError, ConnectionFailed, WaitTimeout
from .transport import Pager, Retry

__all__ = ["DEFAULT_URL", "ApiError", "AsyncMemlane", "ConnectionFailed", "Memlane", "Pager", "Retry",
           "SigV4Unavailable", "Thread", "WaitTimeout", "errors", "region_of"]
