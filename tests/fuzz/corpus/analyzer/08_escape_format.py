import operator
def f(): pass
print('{0.__globals__}'.format(f))
print(operator.attrgetter('__class__.__bases__')(()))
name = chr(95) * 2 + 'builtins' + chr(95) * 2
