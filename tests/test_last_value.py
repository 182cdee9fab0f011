"""LastValue: one entry per thread, for the same objects (identity, held weakly) and an equal key."""

import gc
import threading
import weakref

from ppsweep.last_value import LastValue


class Thing:
    """An object that can be held weakly, equal to every other Thing (identity must decide)."""

    def __eq__(self, other):
        return isinstance(other, Thing)

    __hash__ = object.__hash__


def test_the_same_objects_and_an_equal_key_give_the_value_back():
    memo, a, b = LastValue(), Thing(), Thing()
    assert memo.get((a,)) is None
    value = object()
    assert memo.put((a, b), ("ports", 64), value) is value
    assert memo.get((a, b), ("ports", 64)) is value
    assert memo.get((a, b), ("ports", 32)) is None  # another key
    assert memo.get((b, a), ("ports", 64)) is None  # the objects in another order
    assert memo.get((a, Thing()), ("ports", 64)) is None  # an equal object is not the same one
    assert memo.get((a,), ("ports", 64)) is None  # fewer objects
    memo.put((b,), (), 2)  # one entry: the last one put
    assert memo.get((a, b), ("ports", 64)) is None and memo.get((b,)) == 2


def test_objects_are_held_weakly():
    memo, a = LastValue(), Thing()
    memo.put((a,), (), "kept")
    gone = weakref.ref(a)
    del a
    gc.collect()
    assert gone() is None  # the memo does not keep it alive
    assert memo.get((Thing(),)) is None


def test_each_thread_has_its_own_entry():
    memo, a = LastValue(), Thing()
    memo.put((a,), (), "main")
    seen = []

    def other():
        seen.append(memo.get((a,)))
        memo.put((a,), (), "other")
        seen.append(memo.get((a,)))

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen == [None, "other"]
    assert memo.get((a,)) == "main"
