total = 1 + \
    2 + \
    3
items = [
    "a",  # comment with code: eval('x')
    "b",
]
s = 'abc\
def'
print(total, items, s)
