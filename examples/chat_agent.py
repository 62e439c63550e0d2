"""A chat agent's memory loop: recall before answering, remember after, across restarts.

What it shows: the loop most agents run around their model. Each user turn is recalled
against the memory (with the reason each memory came back), the hits go into the prompt,
the model answers, and the turn is kept: the transcript line, and the user's statements
as episodic memories. At the end of a conversation the session ends and memories the
agent relied on are reviewed (SM-2), then consolidated. A second conversation, in a new
process or after a restart, finds what the first one learned.

The "LLM" here is ``fake_llm``, a plain function (no network, no API key): swap in your
model client's call. Run it twice and watch the second run remember:

    python examples/chat_agent.py                 # writes chat-agent.db in this folder
    python examples/chat_agent.py other.db        # or any file
"""

from __future__ import annotations

import sys

from tiered_memory import AgentMemoryManager, RecallHit, Tier

CONVERSATION = [
    "Hi! I prefer short answers, and please call me Sam.",
    "My cat is called Miso and she hates the vacuum cleaner.",
    "What is my cat called?",
]
LATER = ["Do you remember my cat's name?", "How do I like my answers?"]


def fake_llm(prompt: str) -> str:
    """Stands in for a model call: answers from the first memory in the prompt."""
    remembered = [line[2:] for line in prompt.splitlines() if line.startswith("- ")]
    question = prompt.rsplit("User: ", 1)[-1]
    if question.rstrip().endswith("?") and remembered:
        return f"From what you told me: {remembered[0]}"
    return "Noted."


def prompt_for(message: str, hits: list[RecallHit]) -> str:
    """The prompt a model sees: what the memory recalled, then the user's turn."""
    context = "\n".join(f"- {hit.memory.content}" for hit in hits)
    return f"What you remember about the user:\n{context}\n\nUser: {message}"


def chat(memory: AgentMemoryManager, messages: list[str]) -> None:
    """One conversation: a session, a turn per message, reviews of what helped."""
    session = memory.start_session(metadata={"channel": "example"})
    used: set[str] = set()
    for message in messages:
        print(f"user: {message}")
        hits = memory.recall(message, k=3, min_score=0.05)
        for hit in hits:
            print(f"  recalled {hit.memory.content!r} -- {hit.explanation}")
        answer = fake_llm(prompt_for(message, hits))
        if answer.startswith("From what you told me"):
            used.add(hits[0].memory.id)
        print(f"agent: {answer}")
        memory.append_transcript(session.session_id, "user", message)
        memory.append_transcript(session.session_id, "assistant", answer)
        if not message.rstrip().endswith("?"):  # a statement: keep it as a memory
            memory.remember(message, tier=Tier.EPISODIC, session_id=session.session_id,
                            importance=0.7, speaker="user")  # fmt: skip
    memory.end_session(session.session_id)
    for memory_id in used:  # the answer leaned on it: a successful review
        memory.review(memory_id, quality=5)
    report = memory.consolidate()
    print(f"session ended: {len(used)} reviewed, {len(report.promoted_ids)} promoted")


def main(argv: list[str]) -> int:
    path = argv[1] if len(argv) > 1 else "chat-agent.db"
    with AgentMemoryManager.open(path) as memory:
        first_run = memory.statistics().storage.session_count == 0
        print("first conversation" if first_run else "a later conversation")
        chat(memory, CONVERSATION if first_run else LATER)
        counts = memory.statistics().storage
        print(f"memories: {counts.episodic_count} episodic, {counts.semantic_count} semantic; "
              f"sessions: {counts.session_count}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
