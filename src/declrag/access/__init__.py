"""Who is asking, and what they may read (docs/guides/access.md).

A caller is a `Principal`: a name and groups, from a keys file (`KeysFile`: keys kept as their SHA-256) or a bearer JWT
from an identity provider (`TokenVerifier`); `Callers` tells one from an ``Authorization`` header. What a caller may
read is the documents whose readers share a group with theirs, or are everyone's (`declrag.types.EVERYONE`), and,
under the ``everyone`` policy, the unlabelled ones: `Access.scope` makes that a part of every search's filter, so the
store returns the caller's best passages, never someone else's.
"""

from ._callers import Access, AccessSettings, Callers
from ._keys import KeysFile
from ._principals import Principal, Unlabelled
from ._tokens import Refused, TokenVerifier

__all__ = ["Access", "AccessSettings", "Callers", "KeysFile", "Principal", "Refused", "TokenVerifier", "Unlabelled"]
