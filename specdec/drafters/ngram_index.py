"""NgramIndex: the prompt-lookup matcher, every n-gram of a growing token list -> where it recurs,
in memory linear in the tokens; and the caps on the lookup drafter's knobs.

The matcher answers, for the last ``n`` tokens (``min_n <= n <= max_n``, longest first), the
positions that followed an earlier occurrence of that n-gram, most recent first. Prompt lookup
(``specdec.drafters.lookup``) keeps only the first position per distinct next token (a later
candidate with an already drafted next token is skipped), so the index keeps, per n-gram, only the
latest position of each distinct next token; the drafts it yields are the same as those of a full
position list.

Structure: a trie over the n-grams read backwards from their end (a node at depth ``n`` is the
n-gram ``ids[j-n:j]``; its child along token ``t`` is the (n+1)-gram ``[t, *ids[j-n:j]]``). A
table that kept every n-gram as a tuple costs ``O(T * max_n^2)`` memory for ``T`` tokens (cubic
when ``max_n`` grows with ``T``); here each node is a few integers. The trie is built lazily, as a
suffix tree is: an n-gram seen once is a *leaf* holding its one end position, and its longer
n-grams (also seen once) stay implicit, read from the tokens when queried; a second occurrence
moves the leaf one level down. A text without long repeats so makes ``O(T)`` nodes whatever
``max_n``, and any text at most ``T * max_n``, which the cap ``MAX_NGRAM`` bounds.
"""

from __future__ import annotations

from collections.abc import Iterator

from specdec.errors import BadInput

#: the longest n-gram searched: prompt lookup uses 2-5, suffix-tree drafters ~64
MAX_NGRAM = 64
#: the most root children (matches) of one lookup draft
MAX_BRANCHES = 64
#: the most tokens the history of earlier generations keeps (the oldest leave first)
MAX_HISTORY_TOKENS = 1 << 16
#: a child's key is ``node * KEY + token + 1`` (token ids >= -1, the history's separator)
KEY = 1 << 32


def check_lookup(max_ngram: int, min_ngram: int, branches: int) -> None:
    """Refuse lookup knobs that are not integers in range, naming the key and the cap."""
    for key, value in (
        ("drafter.max_ngram", max_ngram),
        ("drafter.min_ngram", min_ngram),
        ("drafter.branches", branches),
    ):
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadInput(f"{key} must be an integer, got {value!r}")
    if not 1 <= min_ngram <= max_ngram:
        raise BadInput(
            f"need 1 <= drafter.min_ngram <= drafter.max_ngram, got {min_ngram} and {max_ngram}"
        )
    if max_ngram > MAX_NGRAM:
        raise BadInput(
            f"drafter.max_ngram={max_ngram} is over the cap of {MAX_NGRAM} (the "
            f"matcher's memory grows with it; prompt lookup uses 2-5): lower "
            f"drafter.max_ngram to <= {MAX_NGRAM}"
        )
    if branches < 1:
        raise BadInput(f"drafter.branches must be >= 1, got {branches}")


def check_branches(branches: int) -> None:
    """Refuse more root children than ``MAX_BRANCHES``."""
    if branches > MAX_BRANCHES:
        raise BadInput(
            f"drafter.branches={branches} is over the cap of {MAX_BRANCHES} matches "
            f"per draft: lower drafter.branches to <= {MAX_BRANCHES}"
        )


class NgramIndex:
    """Every n-gram (``min_n <= n <= max_n``) of a growing token list -> where its next token is.

    Args:
        min_n, max_n: the n-gram sizes searched (``1 <= min_n <= max_n``).
    """

    def __init__(self, min_n: int, max_n: int) -> None:
        self.min_n, self.max_n = min_n, max_n
        self.ids: list[int] = []
        self._child: dict[int, int] = {}  # node * KEY + token + 1 -> child node
        self._leaf: list[int] = [-1]  # node -> the one end position of a leaf, -1 if expanded
        # node -> the latest position that followed it, or {next token: latest position} in
        # order of recency once two next tokens were seen (node 0, the root: unused)
        self._next: list[int | dict[int, int]] = [-1]

    def __len__(self) -> int:
        return len(self.ids)

    def extend(self, tokens: list[int]) -> None:
        """Append ``tokens``; each appended position ``j`` indexes the n-grams ending at ``j-1``."""
        for tok in tokens:
            self.ids.append(int(tok))
            self._insert(len(self.ids) - 1)

    def _insert(self, j: int) -> None:
        """Record position ``j`` as the next position of ``ids[j-n:j]`` for every indexed n."""
        ids, node = self.ids, 0
        for n in range(1, min(self.max_n, j) + 1):
            # 1. The n-gram's node; a new n-gram is a leaf (its longer n-grams stay implicit).
            key = node * KEY + ids[j - n] + 1
            child = self._child.get(key)
            if child is None:
                self._add(key, leaf=j)
                return
            # 2. A leaf seen a second time: its one occurrence moves one level down.
            p = self._leaf[child]
            if p >= 0:
                self._leaf[child] = -1
                if n < self.max_n and p > n:
                    self._add(child * KEY + ids[p - n - 1] + 1, leaf=p)
            # 3. ``j`` is now the latest position after this n-gram for its next token.
            self._record(child, j)
            node = child

    def _add(self, key: int, *, leaf: int) -> None:
        self._child[key] = len(self._leaf)
        self._leaf.append(leaf)
        self._next.append(leaf)

    def _record(self, node: int, j: int) -> None:
        latest, tok = self._next[node], self.ids[j]
        if isinstance(latest, dict):
            latest.pop(tok, None)
            latest[tok] = j
        elif self.ids[latest] == tok:
            self._next[node] = j
        else:
            self._next[node] = {self.ids[latest]: latest, tok: j}

    def candidates(self, suffix: list[int]) -> Iterator[int]:
        """Positions that followed the n-grams ending ``suffix``: longest n first (at most
        ``len(suffix)``), most recent first within an n, the latest one per distinct next
        token."""
        ids, node, top = self.ids, 0, min(self.max_n, len(suffix))
        levels: list[int | dict[int, int]] = []  # levels[n - 1]: the n-gram's next positions
        # 1. Walk down the trie along the suffix read backwards.
        while len(levels) < top:
            child = self._child.get(node * KEY + suffix[-len(levels) - 1] + 1)
            if child is None:
                break
            p = self._leaf[child]
            if p >= 0:  # a leaf: one occurrence, ending at p; compare its longer n-grams
                levels.append(p)
                d = len(levels)
                while d < top and p > d and ids[p - d - 1] == suffix[-d - 1]:
                    levels.append(p)
                    d += 1
                break
            levels.append(self._next[child])
            node = child
        # 2. Longest n first.
        for n in range(len(levels), self.min_n - 1, -1):
            level = levels[n - 1]
            if isinstance(level, dict):
                yield from reversed(level.values())
            else:
                yield level

    def tail(self, keep: int, separator: int) -> NgramIndex:
        """A new index of at most the last ``keep`` tokens, starting after a ``separator`` where
        one lies in them (whole generations), else mid-sequence."""
        start = max(0, len(self.ids) - keep)
        rest = self.ids[start:]
        if start and separator in rest:
            rest = rest[rest.index(separator) + 1 :]
        out = NgramIndex(self.min_n, self.max_n)
        out.extend(rest)
        return out
