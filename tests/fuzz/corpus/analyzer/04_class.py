from typing import Optional


class Node:
    def __init__(self, value: int, next: Optional["Node"] = None) -> None:
        self.value = value
        self.next = next

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value})"


def walk(node):
    while node is not None:
        yield node.value
        node = node.next


print(list(walk(Node(1, Node(2, Node(3))))))
