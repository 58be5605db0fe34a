"""Stand-in for the pip bootstrap script ansible-test downloads (get-pip.py).

ansible-test sanity creates a virtual environment per test and bootstraps pip
in it with a script it fetches from a host that is not reachable here. This
does the same job: pip from the wheel bundled with Python (ensurepip), then
the pip version and packages ansible-test asked for, from the package index
pip is configured to use. get-pip's own ``--no-setuptools``/``--no-wheel``
are honoured by removing what ensurepip brought along.
"""

from __future__ import annotations

import subprocess
import sys

_OWN_OPTIONS = {"--no-setuptools": "setuptools", "--no-wheel": "wheel"}

if __name__ == "__main__":
    arguments = sys.argv[1:]
    unwanted = [_OWN_OPTIONS[argument] for argument in arguments if argument in _OWN_OPTIONS]
    # In a child: ensurepip blanks pip's configuration (index, certificates) in its own process.
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
    pip = [sys.executable, "-m", "pip"]
    subprocess.check_call([*pip, "install", *(argument for argument in arguments if argument not in _OWN_OPTIONS)])
    if unwanted:
        subprocess.check_call([*pip, "uninstall", "--yes", "--quiet", *unwanted])
