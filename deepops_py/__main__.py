"""Allow ``python -m deepops_py``."""

from deepops_py.cli import main

if __name__ == "__main__":
    main()
