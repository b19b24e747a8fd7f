"""Build step: compiles the runner and its helper modules to the code objects a cold run loads
instead of compiling them.

    /usr/bin/python3 -I -S -B compile_runner.py airlock_runner.py OUT [helper.py ...]

OUT holds the interpreter's bytecode magic number (4 bytes), then marshal.dumps of a tuple of
(module name, code) pairs: the helpers in the order given, then ("airlock_runner", its code).
Each is compiled under the name it has in a sandbox (/sandbox/<file name>), so that its frames
and tracebacks read as before. A cold run's bootstrap (service.cc, kBoot) uses it only when the
magic matches the python3 that runs it, and compiles the runner's source otherwise (which then
compiles its helpers from theirs): compiling 2,000 lines is ~10 ms of CPU per cold run,
unmarshalling them ~0.1 ms.
"""
import marshal
import os
import sys
from _frozen_importlib_external import MAGIC_NUMBER


def _compiled(path):
    name = os.path.basename(path)
    with open(path, "rb") as f:
        return name[:-3], compile(f.read(), "/sandbox/" + name, "exec", dont_inherit=True, optimize=0)


def main(runner, out, helpers):
    modules = tuple(_compiled(h) for h in helpers) + (_compiled(runner),)
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(MAGIC_NUMBER + marshal.dumps(modules))
    os.replace(tmp, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
