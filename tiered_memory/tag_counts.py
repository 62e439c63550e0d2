"""``tag_counts()`` of :class:`~tiered_memory.manager.AgentMemoryManager`: how many
memories carry each namespace tag, read from counts the store keeps in step with every
write (see :mod:`persistence.tag_counts`), so listing namespaces reads no memory."""

from __future__ import annotations

from tiered_memory.arguments import typed_arguments
from tiered_memory.memories import Memories


@typed_arguments
class TagCounts:
    """The manager's ``tag_counts()``; the manager provides its :class:`Memories`."""

    _memories: Memories

    def tag_counts(self, prefix: str = "") -> dict[str, int]:
        """Memories per namespace tag (a tag of the form ``family:ns:a.b``, such as the
        LangGraph store's ``langgraph:ns:users.alice``) that starts with ``prefix``; a
        tag no memory carries is absent. On an agent-scoped handle, that agent's
        memories only. Other tags are not counted (use :meth:`query` with ``tags``)."""
        return self._memories.tag_counts(prefix)
